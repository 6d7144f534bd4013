import type { Logger } from 'pino';
import type { ListResult, ListWatchSource, WatchHandle } from '../kube/port.ts';
import type { KubeObject } from '../kube/types.ts';

/*
 * A list+watch cache of one kind (optionally one namespace). What it adds to a bare watch, because each is a way a
 * controller silently stops seeing changes:
 * - restart after any watch or list failure, with capped exponential backoff (client-node's own informer stops for
 *   good on any error but 410);
 * - a re-list when the watch's resourceVersion expired (410 Gone, as an HTTP status or as an ERROR event);
 * - a periodic full re-list that reports every object to `resync` handlers, so a missed event is repaired within one
 *   period (restate-operator #114);
 * - every transition opens a new session, and callbacks of older sessions (late events, the AbortError an aborted
 *   watch reports) are ignored.
 */

export interface InformerHandler {
  add?(obj: KubeObject): void;
  update?(oldObj: KubeObject, newObj: KubeObject): void;
  delete?(obj: KubeObject): void;
  /** Each object present after a periodic re-list, changed or not. */
  resync?(obj: KubeObject): void;
}

export interface InformerOptions {
  /** Full re-list period; 0 disables it. */
  readonly resyncPeriodMs: number;
  readonly log: Logger;
  /** Delay before restarting after a failure: doubles from `initialMs` up to `maxMs`. */
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
}

const DEFAULT_BACKOFF = { initialMs: 1_000, maxMs: 30_000 };
/** A watch that ends normally sooner than this after it connected counts as a failure, so a flapping server is not hammered. */
const MIN_WATCH_MS = 1_000;

export class Informer {
  readonly synced: Promise<void>;
  private markSynced: () => void = () => {};
  private isSynced = false;
  private readonly cache = new Map<string, KubeObject>();
  private readonly handlers = new Set<InformerHandler>();
  private resourceVersion = '';
  /** Bumped by every transition; callbacks carrying an older value are stale. */
  private session = 0;
  private started = false;
  private stopped = false;
  private failures = 0;
  private watchHandle: WatchHandle | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private readonly backoff: { readonly initialMs: number; readonly maxMs: number };

  constructor(
    private readonly source: ListWatchSource,
    private readonly options: InformerOptions,
  ) {
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.synced = new Promise((resolve) => {
      this.markSynced = resolve;
    });
  }

  get description(): string {
    return this.source.description;
  }

  /** Registers a handler; objects already cached are reported to its `add`. Returns the unsubscribe function. */
  subscribe(handler: InformerHandler): () => void {
    this.handlers.add(handler);
    for (const obj of this.cache.values()) this.call('add', () => handler.add?.(obj));
    return () => this.handlers.delete(handler);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.relist('start');
  }

  stop(): void {
    this.stopped = true;
    this.session++;
    this.abortWatch();
    clearTimeout(this.retryTimer);
    clearTimeout(this.resyncTimer);
  }

  hasSynced(): boolean {
    return this.isSynced;
  }

  /** Re-lists now and reports every object to `resync` handlers (the periodic resync, on demand). */
  resync(): void {
    if (this.started && !this.stopped) this.relist('resync');
  }

  /** The cached object; callers must not mutate it. */
  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.cache.get(cacheKey(namespace, name));
  }

  list(namespace?: string): KubeObject[] {
    const all = [...this.cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  private relist(reason: 'start' | 'resync' | 'expired' | 'retry'): void {
    const session = ++this.session;
    this.abortWatch();
    clearTimeout(this.retryTimer);
    clearTimeout(this.resyncTimer);
    void this.listThenWatch(session, reason === 'resync');
  }

  private async listThenWatch(session: number, reportAll: boolean): Promise<void> {
    let result: ListResult;
    try {
      result = await this.source.list();
    } catch (err) {
      this.fail(session, err, 'list');
      return;
    }
    if (session !== this.session) return;
    this.replace(result.items, reportAll);
    this.resourceVersion = result.resourceVersion;
    this.failures = 0;
    if (!this.isSynced) {
      this.isSynced = true;
      this.markSynced();
    }
    if (this.options.resyncPeriodMs > 0) {
      this.resyncTimer = setTimeout(() => this.relist('resync'), this.options.resyncPeriodMs);
    }
    await this.watch(session);
  }

  private async watch(session: number): Promise<void> {
    const connectedAt = Date.now();
    let handle: WatchHandle;
    try {
      handle = await this.source.watch(
        this.resourceVersion,
        (type, object) => this.onEvent(session, type, object),
        (err) => this.onWatchDone(session, err, connectedAt),
      );
    } catch (err) {
      this.fail(session, err, 'watch');
      return;
    }
    // The watch may have ended (or this session been replaced) before it even connected.
    if (session !== this.session) handle.abort();
    else this.watchHandle = handle;
  }

  private onEvent(session: number, type: string, object: Record<string, unknown>): void {
    if (session !== this.session) return;
    switch (type) {
      case 'ADDED':
      case 'MODIFIED': {
        const obj = object as unknown as KubeObject;
        this.upsert(obj);
        this.resourceVersion = obj.metadata.resourceVersion ?? this.resourceVersion;
        return;
      }
      case 'DELETED': {
        const obj = object as unknown as KubeObject;
        const key = cacheKey(obj.metadata.namespace, obj.metadata.name);
        const old = this.cache.get(key);
        this.cache.delete(key);
        this.emit('delete', (h) => h.delete?.(old ?? obj));
        this.resourceVersion = obj.metadata.resourceVersion ?? this.resourceVersion;
        return;
      }
      case 'BOOKMARK': {
        const rv = (object as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
        if (rv !== undefined && rv !== '') this.resourceVersion = rv;
        return;
      }
      case 'ERROR': {
        // A Status object: 410 means our resourceVersion is too old to resume from.
        if (object['code'] === 410) {
          this.options.log.debug({ source: this.description }, 'watch resourceVersion expired, re-listing');
          this.relist('expired');
        } else {
          const message = typeof object['message'] === 'string' ? object['message'] : JSON.stringify(object);
          this.fail(session, new Error(`watch error event: ${message}`), 'watch');
        }
        return;
      }
      default:
        this.options.log.debug({ source: this.description, type }, 'ignoring unknown watch event type');
    }
  }

  private onWatchDone(session: number, err: unknown, connectedAt: number): void {
    if (session !== this.session) return;
    this.watchHandle = undefined;
    if (isGone(err)) {
      this.relist('expired');
    } else if (err !== null && err !== undefined) {
      this.fail(session, err, 'watch');
    } else if (Date.now() - connectedAt < MIN_WATCH_MS) {
      this.fail(session, new Error('watch closed right after it opened'), 'watch');
    } else {
      // A normal close (the server's watch timeout): resume from where we are.
      const next = ++this.session;
      void this.watch(next);
    }
  }

  private fail(session: number, err: unknown, during: 'list' | 'watch'): void {
    if (session !== this.session) return;
    const next = ++this.session;
    this.abortWatch();
    const delay = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** this.failures);
    this.failures++;
    this.options.log.warn(
      { source: this.description, err, retryInMs: delay, failures: this.failures },
      `${during} failed, restarting`,
    );
    this.retryTimer = setTimeout(() => {
      if (next === this.session) this.relist('retry');
    }, delay);
  }

  /** Replaces the cache with a fresh list, reporting the differences (and, for a resync, every object). */
  private replace(items: readonly KubeObject[], reportAll: boolean): void {
    const seen = new Set<string>();
    for (const obj of items) {
      seen.add(cacheKey(obj.metadata.namespace, obj.metadata.name));
      this.upsert(obj);
    }
    for (const [key, old] of [...this.cache]) {
      if (seen.has(key)) continue;
      this.cache.delete(key);
      this.emit('delete', (h) => h.delete?.(old));
    }
    if (reportAll) for (const obj of items) this.emit('resync', (h) => h.resync?.(obj));
  }

  private upsert(obj: KubeObject): void {
    const key = cacheKey(obj.metadata.namespace, obj.metadata.name);
    const old = this.cache.get(key);
    this.cache.set(key, obj);
    if (old === undefined) this.emit('add', (h) => h.add?.(obj));
    else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion)
      this.emit('update', (h) => h.update?.(old, obj));
  }

  private emit(what: string, fn: (h: InformerHandler) => void): void {
    for (const h of this.handlers) this.call(what, () => fn(h));
  }

  private call(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      // A faulty handler must not stop the cache or the other handlers.
      this.options.log.error({ source: this.description, err, event: what }, 'informer handler threw');
    }
  }

  private abortWatch(): void {
    const handle = this.watchHandle;
    this.watchHandle = undefined;
    handle?.abort();
  }
}

function cacheKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

function isGone(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { statusCode?: unknown; code?: unknown };
  return e.statusCode === 410 || e.code === 410;
}
