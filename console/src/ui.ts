import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

/** What a page shows while it loads, when it failed, or once it has its data. */
export type Loaded<T> = { state: 'loading' } | { state: 'error'; message: string } | { state: 'done'; value: T };

/** Runs `load` when `deps` change (and every `refreshMs` if given); the page renders what it gives. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], refreshMs?: number): [Loaded<T>, () => void] {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (value) => live && setLoaded({ state: 'done', value }),
      (err: unknown) => live && setLoaded({ state: 'error', message: messageOf(err) }),
    );
    const timer = refreshMs === undefined ? undefined : setTimeout(() => setTick((n) => n + 1), refreshMs);
    return () => {
      live = false;
      if (timer !== undefined) clearTimeout(timer);
    };
  }, [...deps, tick]);
  return [loaded, () => setTick((n) => n + 1)];
}

export function messageOf(err: unknown): string {
  if (err instanceof ApiError) return `${err.status}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

export function ErrorBox({ message }: { message: string }) {
  return html`<p class="error" role="alert">${message}</p>`;
}

export function Show<T>({ loaded, children }: { loaded: Loaded<T>; children: (value: T) => unknown }) {
  if (loaded.state === 'loading') return html`<p class="loading" aria-busy="true">Loading…</p>`;
  if (loaded.state === 'error') return html`<${ErrorBox} message=${loaded.message} />`;
  return children(loaded.value);
}

/** A value of an introspection row as text (timestamps as they come, nulls as a dash). */
export function text(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v) ?? '';
}
