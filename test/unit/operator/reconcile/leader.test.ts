import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KubeApiError } from '../../../../operator/src/kube/port.ts';
import type { KubeObject, ObjectRef } from '../../../../operator/src/kube/types.ts';
import { LeaderElector, type Lease, type LeaseClient } from '../../../../operator/src/reconcile/leader.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';

/** Leases in memory with the API server's optimistic concurrency: create fails if present, replace if stale. */
class MemoryLeases implements LeaseClient {
  readonly leases = new Map<string, Lease>();
  private rv = 0;

  get(ref: ObjectRef): Promise<KubeObject | undefined> {
    const lease = this.leases.get(`${ref.namespace}/${ref.name}`);
    return Promise.resolve(lease === undefined ? undefined : structuredClone(lease));
  }

  create(obj: KubeObject): Promise<KubeObject> {
    const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
    if (this.leases.has(key)) return Promise.reject(new KubeApiError(409, 'AlreadyExists', `${key} exists`));
    const stored = { ...structuredClone(obj), metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } };
    this.leases.set(key, stored);
    return Promise.resolve(structuredClone(stored));
  }

  replace(obj: KubeObject): Promise<KubeObject> {
    const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
    const current = this.leases.get(key);
    if (current === undefined) return Promise.reject(new KubeApiError(404, 'NotFound', `${key} not found`));
    if (current.metadata.resourceVersion !== obj.metadata.resourceVersion) {
      return Promise.reject(new KubeApiError(409, 'Conflict', 'the object has been modified'));
    }
    const stored = { ...structuredClone(obj), metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } };
    this.leases.set(key, stored);
    return Promise.resolve(structuredClone(stored));
  }

  spec(): NonNullable<Lease['spec']> | undefined {
    return this.leases.get('ops/leader')?.spec;
  }
}

/** A client that can be cut off from the API server (every call fails), as during a network partition. */
function partitionable(inner: LeaseClient): LeaseClient & { cut: boolean } {
  const wrapper = {
    cut: false,
    get: (ref: ObjectRef) => (wrapper.cut ? Promise.reject(new Error('unreachable')) : inner.get(ref)),
    create: (obj: KubeObject) => (wrapper.cut ? Promise.reject(new Error('unreachable')) : inner.create(obj)),
    replace: (obj: KubeObject) => (wrapper.cut ? Promise.reject(new Error('unreachable')) : inner.replace(obj)),
  };
  return wrapper;
}

describe('leader election', () => {
  let leaders: Set<string>;
  let maxLeaders: number;

  beforeEach(() => {
    vi.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') });
    leaders = new Set();
    maxLeaders = 0;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function candidate(client: LeaseClient, identity: string): LeaderElector {
    return new LeaderElector({
      client,
      namespace: 'ops',
      name: 'leader',
      identity,
      log: silentLogger(),
      onStartedLeading: () => {
        leaders.add(identity);
        maxLeaders = Math.max(maxLeaders, leaders.size);
      },
      onStoppedLeading: () => {
        leaders.delete(identity);
      },
    });
  }

  it('creates the Lease when missing and renews it every retry period', async () => {
    const store = new MemoryLeases();
    const a = candidate(store, 'pod-a');
    a.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.isLeader()).toBe(true);
    expect(store.spec()).toEqual({
      holderIdentity: 'pod-a',
      leaseDurationSeconds: 15,
      acquireTime: '2026-01-01T00:00:00.000000Z',
      renewTime: '2026-01-01T00:00:00.000000Z',
      leaseTransitions: 0,
    });
    await vi.advanceTimersByTimeAsync(2_000);
    expect(store.spec()?.renewTime).toBe('2026-01-01T00:00:02.000000Z');
    expect(store.spec()?.acquireTime).toBe('2026-01-01T00:00:00.000000Z');
    await a.stop();
  });

  it('keeps one leader of two; the standby takes over at once when the leader releases on stop', async () => {
    const store = new MemoryLeases();
    const a = candidate(store, 'pod-a');
    const b = candidate(store, 'pod-b');
    a.start();
    await vi.advanceTimersByTimeAsync(0);
    b.start();
    await vi.advanceTimersByTimeAsync(30_000);
    expect([a.isLeader(), b.isLeader()]).toEqual([true, false]);

    await a.stop();
    expect(a.isLeader()).toBe(false);
    expect(store.spec()?.holderIdentity).toBeNull();
    await vi.advanceTimersByTimeAsync(2_500);
    expect(b.isLeader()).toBe(true);
    expect(store.spec()).toMatchObject({ holderIdentity: 'pod-b', leaseTransitions: 1, leaseDurationSeconds: 15 });
    expect(maxLeaders).toBe(1);
    await b.stop();
  });

  it('a leader cut off steps down at the renew deadline; the standby waits out the lease duration', async () => {
    const store = new MemoryLeases();
    const aClient = partitionable(store);
    const a = candidate(aClient, 'pod-a');
    const b = candidate(store, 'pod-b');
    a.start();
    await vi.advanceTimersByTimeAsync(0);
    b.start();
    await vi.advanceTimersByTimeAsync(10_000);
    const lastRenew = Date.parse(store.spec()?.renewTime ?? '');

    aClient.cut = true;
    // Stepped down no later than the renew deadline after its last successful renewal …
    await vi.advanceTimersByTimeAsync(lastRenew + 10_000 - Date.now());
    expect(a.isLeader()).toBe(false);
    expect(b.isLeader()).toBe(false);
    // … and the standby takes over only after the Lease has been unchanged for a full lease duration.
    await vi.advanceTimersByTimeAsync(lastRenew + 14_000 - Date.now());
    expect(b.isLeader()).toBe(false);
    // It first saw that renewal at most one jittered retry period (2.4 s) after it happened, and looks again within one.
    await vi.advanceTimersByTimeAsync(lastRenew + 15_000 + 2 * 2_400 - Date.now());
    expect(b.isLeader()).toBe(true);
    expect(store.spec()).toMatchObject({ holderIdentity: 'pod-b', leaseTransitions: 1 });
    expect(maxLeaders).toBe(1);

    // Back online, the old leader sees another holder and stays a standby.
    aClient.cut = false;
    await vi.advanceTimersByTimeAsync(10_000);
    expect([a.isLeader(), b.isLeader()]).toEqual([false, true]);
    await a.stop();
    await b.stop();
  });

  it('a round that loses a write race (409) does not lead', async () => {
    const store = new MemoryLeases();
    const racing: LeaseClient = {
      get: (ref) => store.get(ref),
      // Someone else creates the Lease between our read and our write.
      create: async (obj) => {
        await store.create({ ...obj, spec: { holderIdentity: 'pod-x', leaseDurationSeconds: 15 } });
        return store.create(obj);
      },
      replace: (obj) => store.replace(obj),
    };
    const a = candidate(racing, 'pod-a');
    a.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.isLeader()).toBe(false);
    expect(store.spec()?.holderIdentity).toBe('pod-x');
    await a.stop();
  });

  it('refuses timings where the renew deadline does not fit in the lease', () => {
    expect(
      () =>
        new LeaderElector({
          client: new MemoryLeases(),
          namespace: 'ops',
          name: 'leader',
          identity: 'a',
          leaseDurationMs: 5_000,
          renewDeadlineMs: 10_000,
          log: silentLogger(),
          onStartedLeading: () => {},
          onStoppedLeading: () => {},
        }),
    ).toThrow(/leaseDuration > renewDeadline/);
  });
});
