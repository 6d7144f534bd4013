import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TokenBucket, WorkQueue, type ProcessResult } from '../../../../operator/src/reconcile/queue.ts';
import type { ObjectKey } from '../../../../operator/src/reconcile/types.ts';
import { createOperatorMetrics } from '../../../../operator/src/telemetry/metrics.ts';

const A: ObjectKey = { namespace: 'ns', name: 'a' };
const B: ObjectKey = { namespace: 'ns', name: 'b' };

interface Deferred {
  resolve(result?: ProcessResult): void;
  reject(err: Error): void;
}

/** A process function whose runs finish when the test says so. */
function controlled() {
  const runs: { key: string; at: number; done: Deferred }[] = [];
  const process = (key: ObjectKey): Promise<ProcessResult> =>
    new Promise<ProcessResult>((resolve, reject) => {
      runs.push({
        key: `${key.namespace}/${key.name}`,
        at: Date.now(),
        done: { resolve: (r) => resolve(r ?? {}), reject },
      });
    });
  return { runs, process };
}

describe('work queue', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs one key once at a time and once more after, however often it was added meanwhile', async () => {
    const { runs, process } = controlled();
    const queue = new WorkQueue({ name: 't', concurrency: 4, process });
    queue.add(A);
    queue.add(A);
    expect(runs).toHaveLength(1);
    queue.add(A);
    queue.add(A);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toHaveLength(1);
    runs[0]?.done.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toHaveLength(2);
    runs[1]?.done.resolve();
    await vi.advanceTimersByTimeAsync(1000);
    expect(runs.map((r) => r.key)).toEqual(['ns/a', 'ns/a']);
    expect(queue.inFlight).toBe(0);
  });

  it('keeps at most `concurrency` keys in flight', async () => {
    const { runs, process } = controlled();
    const queue = new WorkQueue({ name: 't', concurrency: 2, process });
    for (const name of ['a', 'b', 'c', 'd']) queue.add({ namespace: 'ns', name });
    expect(runs.map((r) => r.key)).toEqual(['ns/a', 'ns/b']);
    expect(queue.length).toBe(2);
    runs[1]?.done.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs.map((r) => r.key)).toEqual(['ns/a', 'ns/b', 'ns/c']);
    expect(queue.inFlight).toBe(2);
  });

  it('backs a failing key off exponentially from 5 ms and resets after a success', async () => {
    let fail = 3;
    const retries: number[] = [];
    const starts: number[] = [];
    const metrics = createOperatorMetrics();
    const queue = new WorkQueue({
      name: 't',
      concurrency: 1,
      metrics,
      process: () => {
        starts.push(Date.now());
        return fail-- > 0 ? Promise.reject(new Error('boom')) : Promise.resolve({});
      },
      onError: (_key, _err, retryInMs) => retries.push(retryInMs),
    });
    queue.add(A);
    await vi.advanceTimersByTimeAsync(100);
    expect(retries).toEqual([5, 10, 20]);
    expect(starts).toEqual([0, 5, 15, 35]);
    expect(queue.retries(A)).toBe(0);

    fail = 1;
    queue.add(A);
    await vi.advanceTimersByTimeAsync(100);
    expect(retries).toEqual([5, 10, 20, 5]);
    expect((await metrics.workqueueRetries.get()).values[0]?.value).toBe(4);
  });

  it('caps the backoff', async () => {
    const retries: number[] = [];
    const queue = new WorkQueue({
      name: 't',
      concurrency: 1,
      rateLimit: { baseDelayMs: 100, maxDelayMs: 250 },
      process: () => Promise.reject(new Error('boom')),
      onError: (_key, _err, retryInMs) => retries.push(retryInMs),
    });
    queue.add(A);
    await vi.advanceTimersByTimeAsync(1000);
    expect(retries.slice(0, 4)).toEqual([100, 200, 250, 250]);
    await queue.shutDown(0);
  });

  it('spaces retries of different keys by the global token bucket', async () => {
    const starts: Record<string, number[]> = {};
    const queue = new WorkQueue({
      name: 't',
      concurrency: 4,
      rateLimit: { qps: 1, burst: 1 },
      process: (key) => {
        (starts[key.name] ??= []).push(Date.now());
        return Promise.reject(new Error('boom'));
      },
    });
    queue.add(A);
    queue.add(B);
    await vi.advanceTimersByTimeAsync(1);
    // The first retry takes the only token (after 5 ms of backoff); the second waits a second for the next.
    expect(starts).toEqual({ a: [0], b: [0] });
    await vi.advanceTimersByTimeAsync(10);
    expect(starts['a']).toEqual([0, 5]);
    expect(starts['b']).toEqual([0]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(starts['b']).toEqual([0, 1000]);
    await queue.shutDown(0);
  });

  it('token bucket: a burst is free, then one token per 1/qps', () => {
    let now = 0;
    const bucket = new TokenBucket(10, 100, () => now);
    const delays = Array.from({ length: 102 }, () => bucket.reserve());
    expect(delays.slice(0, 100).every((d) => d === 0)).toBe(true);
    expect(delays.slice(100)).toEqual([100, 200]);
    now = 10_000;
    expect(bucket.reserve()).toBe(0);
  });

  it('requeueAfter: the earliest pending delay wins', async () => {
    const starts: number[] = [];
    const queue = new WorkQueue({
      name: 't',
      concurrency: 1,
      process: () => {
        starts.push(Date.now());
        return Promise.resolve({});
      },
    });
    queue.addAfter(A, 1000);
    queue.addAfter(A, 100);
    queue.addAfter(A, 500);
    await vi.advanceTimersByTimeAsync(2000);
    expect(starts).toEqual([100]);
  });

  it('requeueAfter from a result runs the key again after that long', async () => {
    const starts: number[] = [];
    const queue = new WorkQueue({
      name: 't',
      concurrency: 1,
      process: () => {
        starts.push(Date.now());
        return Promise.resolve(starts.length < 3 ? { requeueAfterMs: 300 } : {});
      },
    });
    queue.add(A);
    await vi.advanceTimersByTimeAsync(5000);
    expect(starts).toEqual([0, 300, 600]);
  });

  it('shutdown waits for runs in flight, up to the deadline, and takes no new work', async () => {
    const { runs, process } = controlled();
    const queue = new WorkQueue({ name: 't', concurrency: 2, process });
    queue.add(A);
    queue.add(B);
    queue.addAfter({ namespace: 'ns', name: 'later' }, 10);
    const shutdown = queue.shutDown(1000);
    runs[0]?.done.resolve();
    queue.add({ namespace: 'ns', name: 'new' });
    await vi.advanceTimersByTimeAsync(999);
    let settled = false;
    void shutdown.then(() => {
      settled = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await shutdown).toEqual({ drained: false, inFlight: ['ns/b'] });
    expect(runs.map((r) => r.key)).toEqual(['ns/a', 'ns/b']);

    const { runs: runs2, process: process2 } = controlled();
    const queue2 = new WorkQueue({ name: 't2', concurrency: 1, process: process2 });
    queue2.add(A);
    const drained = queue2.shutDown(1000);
    await vi.advanceTimersByTimeAsync(10);
    runs2[0]?.done.resolve();
    expect(await drained).toEqual({ drained: true, inFlight: [] });
  });

  it('reports depth, adds and durations', async () => {
    const metrics = createOperatorMetrics();
    const { runs, process } = controlled();
    const queue = new WorkQueue({ name: 'q', concurrency: 1, process, metrics });
    queue.add(A);
    queue.add(B);
    expect((await metrics.workqueueDepth.get()).values).toEqual([{ value: 1, labels: { name: 'q' } }]);
    await vi.advanceTimersByTimeAsync(50);
    runs[0]?.done.resolve();
    await vi.advanceTimersByTimeAsync(0);
    runs[1]?.done.resolve();
    await vi.advanceTimersByTimeAsync(0);
    const text = await metrics.registry.metrics();
    expect(text).toContain('ratchet_operator_workqueue_adds_total{name="q"} 2');
    expect(text).toContain('ratchet_operator_workqueue_depth{name="q"} 0');
    expect(text).toContain('ratchet_operator_workqueue_work_duration_seconds_count{name="q"} 2');
    expect(text).toContain('ratchet_operator_workqueue_queue_duration_seconds_sum{name="q"} 0.05');
  });
});
