import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ListResult, ListWatchSource, WatchHandle } from '../../../../operator/src/kube/port.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import { Informer } from '../../../../operator/src/reconcile/informer.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';

/** A collection with a resourceVersion counter; at most one watch open, which the test can feed or break. */
class FakeSource implements ListWatchSource {
  readonly description = 'test';
  readonly objects = new Map<string, KubeObject>();
  rv = 0;
  lists = 0;
  watches: string[] = [];
  failLists = 0;
  private current: { onEvent: (t: string, o: Record<string, unknown>) => void; done: (e: unknown) => void } | undefined;
  aborted = 0;

  put(name: string, data: string): KubeObject {
    const obj: KubeObject = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { namespace: 'ns', name, resourceVersion: String(++this.rv) },
      data: { v: data },
    };
    this.objects.set(name, obj);
    return obj;
  }

  /** Changes the collection and tells the open watch (unless `silently`: a missed event). */
  change(name: string, data: string | undefined, silently = false): void {
    if (data === undefined) {
      const old = this.objects.get(name);
      this.objects.delete(name);
      ++this.rv;
      if (!silently && old !== undefined)
        this.current?.onEvent('DELETED', { ...old, metadata: { ...old.metadata, resourceVersion: String(this.rv) } });
      return;
    }
    const existed = this.objects.has(name);
    const obj = this.put(name, data);
    if (!silently) this.current?.onEvent(existed ? 'MODIFIED' : 'ADDED', obj);
  }

  event(type: string, object: Record<string, unknown>): void {
    this.current?.onEvent(type, object);
  }

  endWatch(err: unknown): void {
    const current = this.current;
    this.current = undefined;
    current?.done(err);
  }

  list(): Promise<ListResult> {
    this.lists++;
    if (this.failLists > 0) {
      this.failLists--;
      return Promise.reject(new Error('list failed'));
    }
    return Promise.resolve({
      items: [...this.objects.values()].map((o) => structuredClone(o)),
      resourceVersion: String(this.rv),
    });
  }

  watch(
    resourceVersion: string,
    onEvent: (type: string, object: Record<string, unknown>) => void,
    done: (err: unknown) => void,
  ): Promise<WatchHandle> {
    this.watches.push(resourceVersion);
    const session = { onEvent, done };
    this.current = session;
    return Promise.resolve({
      abort: () => {
        this.aborted++;
        // client-node reports an abort as an error to `done`; the informer must ignore it.
        if (this.current === session) this.current = undefined;
        const err = new Error('The operation was aborted');
        err.name = 'AbortError';
        done(err);
      },
    });
  }
}

function recorder(informer: Informer) {
  const log: string[] = [];
  informer.subscribe({
    add: (o) => log.push(`add ${o.metadata.name}`),
    update: (a, b) =>
      log.push(
        `update ${a.metadata.name} ${String((a['data'] as { v: string }).v)}→${String((b['data'] as { v: string }).v)}`,
      ),
    delete: (o) => log.push(`delete ${o.metadata.name}`),
    resync: (o) => log.push(`resync ${o.metadata.name}`),
  });
  return log;
}

describe('informer', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('lists, reports synced, then follows the watch with old and new objects on update', async () => {
    const source = new FakeSource();
    source.put('a', '1');
    const informer = new Informer(source, { resyncPeriodMs: 0, log: silentLogger() });
    const log = recorder(informer);
    informer.start();
    await informer.synced;
    await vi.advanceTimersByTimeAsync(0);
    expect(informer.hasSynced()).toBe(true);
    expect(source.watches).toEqual(['1']);
    source.change('a', '2');
    source.change('b', '1');
    source.change('a', undefined);
    expect(log).toEqual(['add a', 'update a 1→2', 'add b', 'delete a']);
    expect(informer.list().map((o) => o.metadata.name)).toEqual(['b']);
    expect(informer.get('ns', 'b')?.metadata.resourceVersion).toBe('3');
    informer.stop();
  });

  it('restarts with backoff after a watch failure and reconciles what it missed by re-listing', async () => {
    const source = new FakeSource();
    source.put('a', '1');
    source.put('b', '1');
    const informer = new Informer(source, {
      resyncPeriodMs: 0,
      log: silentLogger(),
      backoff: { initialMs: 100, maxMs: 1000 },
    });
    const log = recorder(informer);
    informer.start();
    await vi.advanceTimersByTimeAsync(0);
    log.length = 0;

    source.endWatch(Object.assign(new Error('connection reset'), { statusCode: 500 }));
    source.change('a', '2', true);
    source.change('b', undefined, true);
    source.change('c', '1', true);
    source.failLists = 1;
    await vi.advanceTimersByTimeAsync(99);
    expect(source.lists).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    // The first re-list failed too: the next try waits twice as long.
    expect(source.lists).toBe(2);
    await vi.advanceTimersByTimeAsync(199);
    expect(source.lists).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(source.lists).toBe(3);
    expect(log.sort()).toEqual(['add c', 'delete b', 'update a 1→2']);
    expect(source.watches.at(-1)).toBe(String(source.rv));

    // After a success the backoff starts again from the beginning.
    source.endWatch(new Error('again'));
    await vi.advanceTimersByTimeAsync(100);
    expect(source.lists).toBe(4);
    informer.stop();
  });

  it('re-lists at once when the watch reports 410 Gone, as a status or as an ERROR event', async () => {
    const source = new FakeSource();
    source.put('a', '1');
    const informer = new Informer(source, { resyncPeriodMs: 0, log: silentLogger() });
    informer.start();
    await vi.advanceTimersByTimeAsync(0);
    source.endWatch(Object.assign(new Error('Gone'), { statusCode: 410 }));
    await vi.advanceTimersByTimeAsync(0);
    expect(source.lists).toBe(2);
    source.event('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await vi.advanceTimersByTimeAsync(0);
    expect(source.lists).toBe(3);
    informer.stop();
  });

  it('resumes the watch from its resourceVersion after a normal close, without re-listing', async () => {
    const source = new FakeSource();
    const informer = new Informer(source, { resyncPeriodMs: 0, log: silentLogger() });
    informer.start();
    await vi.advanceTimersByTimeAsync(5_000);
    source.change('a', '1');
    source.event('BOOKMARK', { kind: 'ConfigMap', metadata: { resourceVersion: '7' } });
    source.endWatch(null);
    await vi.advanceTimersByTimeAsync(0);
    expect(source.lists).toBe(1);
    expect(source.watches).toEqual(['0', '7']);
    informer.stop();
  });

  it('re-lists every resync period and reports every object, which repairs a missed event', async () => {
    const source = new FakeSource();
    source.put('a', '1');
    source.put('b', '1');
    const informer = new Informer(source, { resyncPeriodMs: 60_000, log: silentLogger() });
    const log = recorder(informer);
    informer.start();
    await vi.advanceTimersByTimeAsync(0);
    log.length = 0;
    source.change('a', '2', true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(source.lists).toBe(2);
    expect(log).toEqual(['update a 1→2', 'resync a', 'resync b']);
    // The aborted watch's AbortError did not count as a failure: no further re-list.
    expect(source.aborted).toBe(1);
    await vi.advanceTimersByTimeAsync(59_000);
    expect(source.lists).toBe(2);
    informer.stop();
  });

  it('a throwing handler does not stop the others', async () => {
    const source = new FakeSource();
    source.put('a', '1');
    const informer = new Informer(source, { resyncPeriodMs: 0, log: silentLogger() });
    informer.subscribe({
      add: () => {
        throw new Error('bad handler');
      },
    });
    const log = recorder(informer);
    informer.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(['add a']);
    informer.stop();
  });
});
