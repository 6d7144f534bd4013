import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminClientFactory } from '../../../../operator/src/admin-client/types.ts';
import { ClientNodeEventRecorder } from '../../../../operator/src/kube/client-node.ts';
import { LeaderElector, type Lease } from '../../../../operator/src/reconcile/leader.ts';
import { Manager } from '../../../../operator/src/reconcile/manager.ts';
import { keyString, type Controller } from '../../../../operator/src/reconcile/types.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { createOperatorMetrics } from '../../../../operator/src/telemetry/metrics.ts';
import { waitFor } from '../../../support/wait.ts';
import { startTestCluster, widget, WIDGET_API, type TestCluster, type Widget } from './support.ts';

const noAdmin: AdminClientFactory = () => {
  throw new Error('no admin API in these tests');
};

const LEASE = {
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  namespace: 'ops',
  name: 'ratchet-operator-leader',
};

interface Replica {
  readonly name: string;
  readonly manager: Manager;
  readonly elector: LeaderElector;
  /** Keys this replica reconciled. */
  readonly reconciled: string[];
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** One operator replica: its own client, informers, queue and elector, as a second pod would have. */
function replica(cluster: TestCluster, name: string): Replica {
  const kube = cluster.client();
  const reconciled: string[] = [];
  const controller: Controller = {
    name: 'widget',
    apiVersion: WIDGET_API,
    kind: 'Widget',
    watches: [],
    async reconcile(key, ctx) {
      reconciled.push(keyString(key));
      await ctx.kube.applyStatus(
        { apiVersion: WIDGET_API, kind: 'Widget', metadata: { ...key }, status: { seen: name } },
        { fieldManager: `widget-${name}` },
      );
      return {};
    },
  };
  const metrics = createOperatorMetrics();
  const manager = new Manager({
    controllers: [controller],
    kube,
    events: new ClientNodeEventRecorder(kube, { reportingInstance: name }),
    admin: noAdmin,
    operatorNamespace: 'ops',
    sources: (apiVersion, kind, namespace) => kube.listWatchSource(apiVersion, kind, namespace),
    log: silentLogger(),
    metrics,
  });
  const elector = new LeaderElector({
    client: kube,
    namespace: LEASE.namespace,
    name: LEASE.name,
    identity: name,
    leaseDurationMs: 1_500,
    renewDeadlineMs: 1_000,
    retryPeriodMs: 200,
    log: silentLogger(),
    onStartedLeading: () => manager.setLeading(true),
    onStoppedLeading: () => manager.setLeading(false),
  });
  return {
    name,
    manager,
    elector,
    reconciled,
    async start() {
      manager.start();
      await manager.synced();
      elector.start();
    },
    // main.ts's order: stop informers and drain, then release the Lease.
    async stop() {
      await manager.stop(2_000);
      await elector.stop();
    },
  };
}

describe('two operator replicas with leader election on a Lease in the fake API server', () => {
  let cluster: TestCluster;
  const replicas: Replica[] = [];

  beforeAll(async () => {
    cluster = await startTestCluster();
  });
  afterAll(async () => {
    for (const r of replicas) await r.stop();
    await cluster.close();
  });

  const seenBy = async (namespace: string, name: string): Promise<string | undefined> =>
    (await cluster.client().get<Widget>({ apiVersion: WIDGET_API, kind: 'Widget', namespace, name }))?.status?.seen;
  const lease = (): Lease | undefined => cluster.fake.get(LEASE) as Lease | undefined;

  it('only the leader reconciles; the standby takes over as soon as the leader stops', async () => {
    const a = replica(cluster, 'replica-a');
    const b = replica(cluster, 'replica-b');
    replicas.push(a, b);
    await a.start();
    await waitFor(() => expect(a.elector.isLeader()).toBe(true));
    await b.start();

    await cluster.client().apply(widget('a', 'one'), { fieldManager: 'user' });
    await waitFor(async () => expect(await seenBy('a', 'one')).toBe('replica-a'));
    expect(lease()?.spec).toMatchObject({ holderIdentity: 'replica-a', leaseDurationSeconds: 2, leaseTransitions: 0 });
    // The standby's caches are warm (it would be ready), but it reconciles nothing.
    expect(b.manager.hasSynced()).toBe(true);
    expect(b.manager.cache(WIDGET_API, 'Widget').get('a', 'one')).toBeDefined();
    expect(b.manager.isReconciling()).toBe(false);
    expect(b.reconciled).toEqual([]);

    await a.stop();
    expect(a.manager.isReconciling()).toBe(false);
    await waitFor(() => expect(b.elector.isLeader()).toBe(true));
    expect(lease()?.spec).toMatchObject({ holderIdentity: 'replica-b', leaseTransitions: 1 });
    // On taking over, the new leader passes over every object it knows.
    await waitFor(() => expect(b.reconciled).toContain('a/one'));
    await cluster.client().apply(widget('a', 'two'), { fieldManager: 'user' });
    await waitFor(async () => expect(await seenBy('a', 'two')).toBe('replica-b'));
    expect(a.reconciled).not.toContain('a/two');
  });

  it('a leader whose Lease is taken stops reconciling within the renew deadline', async () => {
    const leader = replicas.find((r) => r.elector.isLeader());
    expect(leader).toBeDefined();
    if (leader === undefined) return;
    const takenAt = Date.now();
    // Another holder writes the Lease (as after a partition healed on the other side); it keeps renewing it.
    const intruder = setInterval(() => {
      cluster.fake.update(LEASE, (l) => {
        l['spec'] = { ...(l['spec'] as object), holderIdentity: 'intruder', renewTime: new Date().toISOString() };
      });
    }, 100);
    try {
      await waitFor(() => expect(leader.manager.isReconciling()).toBe(false));
      expect(leader.elector.isLeader()).toBe(false);
      expect(Date.now() - takenAt).toBeLessThan(5_000);
    } finally {
      clearInterval(intruder);
    }
    // Once the intruder stops renewing, a replica takes the Lease back after a lease duration.
    await waitFor(() => expect(replicas.some((r) => r.elector.isLeader() && r.manager.isReconciling())).toBe(true));
  });
});
