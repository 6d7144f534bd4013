import { beforeEach, describe, expect, it } from 'vitest';
import { AdminApiError } from '../../../../operator/src/admin-client/types.ts';
import { FINALIZERS } from '../../../../operator/src/api/v1alpha1/index.ts';
import type { SubscriptionObject } from '../../../../operator/src/controllers/shared/objects.ts';
import { optionsMatch } from '../../../../operator/src/controllers/subscription/desired.ts';
import { createSubscriptionController } from '../../../../operator/src/controllers/subscription/controller.ts';
import { FakeAdmin } from '../../../support/operator/fake-admin.ts';
import { CLUSTER, Harness, NS, ref } from '../deployment/harness.ts';

/*
 * The Subscription reconciler against an in-memory cluster and a fake runtime: dependencies (Cluster, Kafka cluster,
 * sink service), create + verify, Ready only once the runtime's consumer joined with partitions assigned (consumer
 * group, partitions, lag and last error in status), adoption after status loss, recreate on options change or loss,
 * deletion policies and escape hatches.
 */

const SOURCE = 'kafka://events/orders';
const SINK = 'service://Orders/process';

let h: Harness;

beforeEach(() => {
  h = new Harness(createSubscriptionController());
  h.cluster({ kafka: ['events'] });
  h.admin.addKafkaCluster('events');
  h.admin.serve('http://orders:9080/', { Orders: ['process'] });
  h.admin.registerDirectly({ uri: 'http://orders:9080/', force: false });
});

const sub = (name = 'orders'): SubscriptionObject => h.get<SubscriptionObject>('Subscription', name)!;
const cond = (type: string, name = 'orders') => h.condition('Subscription', name, type);

describe('create', () => {
  it('creates the subscription, verifies it, and reports Ready and Synced', async () => {
    h.subscription('orders', { options: { 'auto.offset.reset': 'earliest' } });
    // Consuming: polled again every minute for the lag and a consumer that fails later.
    expect(await h.settle('orders', 'Subscription')).toEqual({ requeueAfterMs: 60_000 });
    expect(sub().metadata.finalizers).toEqual([FINALIZERS.subscription]);
    expect(h.admin.calls('createSubscription').map((c) => c.args[0])).toEqual([
      { source: SOURCE, sink: SINK, options: { 'auto.offset.reset': 'earliest' } },
    ]);
    const [created] = h.admin.subscriptionList();
    expect(h.admin.calls('getSubscription').map((c) => c.args[0])).toEqual([created?.id]);
    expect(sub().status).toMatchObject({
      observedGeneration: 1,
      subscriptionId: created?.id,
      source: SOURCE,
      sink: SINK,
      lastSyncTime: h.clock.now().toISOString(),
    });
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(cond('Synced')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(h.events.reasons()).toEqual(['Created']);

    // Steady state: nothing created, no status write.
    const writes = h.kube.calls.filter((c) => c.verb === 'applyStatus').length;
    h.clock.advance(60_000);
    await h.reconcile('orders');
    expect(h.admin.calls('createSubscription')).toHaveLength(1);
    expect(h.kube.calls.filter((c) => c.verb === 'applyStatus')).toHaveLength(writes);
  });

  it('waits for the Cluster, its Kafka cluster (spec, then runtime) and the sink service, with a reason for each', async () => {
    h.subscription('orders', { clusterRef: { name: 'later' } });
    expect(await h.settle('orders', 'Subscription')).toEqual({ requeueAfterMs: 15_000 });
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'ClusterNotReady' });
    expect(cond('Synced')).toMatchObject({ status: 'False', reason: 'ClusterNotReady' });

    h.cluster({ name: 'later', ready: false, kafka: ['other'] });
    await h.settle('orders', 'Subscription');
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'ClusterNotReady' });

    h.setClusterReady(true, 'later');
    await h.settle('orders', 'Subscription');
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'KafkaClusterNotFound' });
    expect(cond('Ready')?.message).toContain('no Kafka cluster named events in spec.kafka.clusters (other)');

    h.subscription('orders-2', { sink: { service: { name: 'Billing', handler: 'charge' } } });
    await h.admin.deleteKafkaCluster('events');
    await h.settle('orders-2', 'Subscription');
    expect(cond('Ready', 'orders-2')).toMatchObject({ status: 'False', reason: 'KafkaClusterNotFound' });
    expect(cond('Ready', 'orders-2')?.message).toContain('not yet known to the runtime');

    h.admin.addKafkaCluster('events');
    await h.settle('orders-2', 'Subscription');
    expect(cond('Ready', 'orders-2')).toMatchObject({ status: 'False', reason: 'SinkServiceNotRegistered' });
    expect(h.admin.calls('createSubscription')).toHaveLength(0);

    h.admin.serve('http://billing:9080/', { Billing: ['refund'] });
    h.admin.registerDirectly({ uri: 'http://billing:9080/', force: false });
    await h.settle('orders-2', 'Subscription');
    expect(cond('Ready', 'orders-2')?.message).toBe('service Billing has no handler charge (handlers: refund)');

    h.admin.serve('http://billing:9080/v2', { Billing: ['refund', 'charge'] });
    h.admin.registerDirectly({ uri: 'http://billing:9080/v2', force: false });
    await h.settle('orders-2', 'Subscription');
    expect(cond('Ready', 'orders-2')?.status).toBe('True');
  });
});

describe('consumer status', () => {
  const NOT_JOINED = 'the consumer is joining consumer group';

  it("stays Ready=False with the runtime's reason until the consumer has partitions, polling every 5 s", async () => {
    h.admin.setSubscriptionStatus(
      '*',
      FakeAdmin.notReady('no runtime node reports a consumer of this subscription yet'),
    );
    h.subscription('orders');
    expect(await h.settle('orders', 'Subscription')).toEqual({ requeueAfterMs: 5_000 });
    const id = sub().status!.subscriptionId!;
    expect(h.admin.calls('subscriptionStatus').at(-1)?.args).toEqual([id]);
    expect(cond('Ready')).toMatchObject({
      status: 'False',
      reason: 'ConsumerNotAssigned',
      message: `${id}: no runtime node reports a consumer of this subscription yet`,
    });
    // Created and synced all the same: nothing is created again while waiting.
    expect(cond('Synced')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(cond('Reconciling')).toMatchObject({ status: 'True', reason: 'ConsumerNotAssigned' });
    expect(cond('Stalled')).toMatchObject({ status: 'False' });
    expect(sub().status).toMatchObject({ consumerGroup: id, assignedPartitions: [], consumers: 1 });
    expect(sub().status?.lag).toBeUndefined();
    expect(sub().status?.lastError).toBeUndefined();

    h.admin.setSubscriptionStatus(id, FakeAdmin.notReady(`${NOT_JOINED} ${id}`));
    h.clock.advance(5_000);
    expect(await h.reconcile('orders')).toEqual({ requeueAfterMs: 5_000 });
    expect(cond('Ready')).toMatchObject({ status: 'False', message: `${id}: ${NOT_JOINED} ${id}` });
    expect(h.admin.calls('createSubscription')).toHaveLength(1);

    h.admin.setSubscriptionStatus('*', undefined);
    h.admin.setSubscriptionStatus(id, { assigned_partitions: [0, 2], lag: 42 });
    h.clock.advance(5_000);
    expect(await h.reconcile('orders')).toEqual({ requeueAfterMs: 60_000 });
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(cond('Ready')?.message).toBe(`${id}: ${SOURCE} → ${SINK}, consumer group ${id} with 2 partitions assigned`);
    expect(cond('Reconciling')).toMatchObject({ status: 'False', reason: 'Reconciled' });
    expect(sub().status).toMatchObject({ consumerGroup: id, assignedPartitions: [0, 2], lag: 42, consumers: 1 });
    expect(h.admin.calls('createSubscription')).toHaveLength(1);
  });

  it('fills consumerGroup, assignedPartitions, lag and consumers, and refreshes them without needless writes', async () => {
    h.subscription('orders', { options: { 'group.id': 'orders-group' } });
    await h.settle('orders', 'Subscription');
    const id = sub().status!.subscriptionId!;
    expect(sub().status).toMatchObject({
      consumerGroup: 'orders-group',
      assignedPartitions: [0, 1, 2, 3],
      lag: 0,
      consumers: 1,
    });
    expect(sub().status?.lastError).toBeUndefined();

    h.admin.setSubscriptionStatus(id, { lag: 1_234 });
    await h.reconcile('orders');
    expect(sub().status?.lag).toBe(1_234);
    const writes = h.kube.calls.filter((c) => c.verb === 'applyStatus').length;
    await h.reconcile('orders');
    expect(h.kube.calls.filter((c) => c.verb === 'applyStatus')).toHaveLength(writes);

    // Lag unknown until every assigned partition read a batch: the field goes away instead of showing a stale one.
    h.admin.setSubscriptionStatus(id, { lag: null });
    await h.reconcile('orders');
    expect(sub().status?.lag).toBeUndefined();
    expect(cond('Ready')?.status).toBe('True');
  });

  it("a failed consumer: Ready=False, ConsumerFailed, with the runtime's reason and lastError", async () => {
    const error = 'KafkaJSNonRetriableError: This server does not host this topic-partition';
    h.admin.setSubscriptionStatus('*', FakeAdmin.notReady(`the consumer failed: ${error}`, error));
    h.subscription('orders');
    expect(await h.settle('orders', 'Subscription')).toEqual({ requeueAfterMs: 5_000 });
    const id = sub().status!.subscriptionId!;
    expect(cond('Ready')).toMatchObject({
      status: 'False',
      reason: 'ConsumerFailed',
      message: `${id}: the consumer failed: ${error}`,
    });
    expect(cond('Reconciling')).toMatchObject({ status: 'True', reason: 'ConsumerFailed' });
    expect(sub().status).toMatchObject({ consumerGroup: id, assignedPartitions: [], lastError: error });

    // Without a reason from the runtime, the error itself says why.
    h.admin.setSubscriptionStatus('*', { ...FakeAdmin.notReady('', error), reason: null });
    await h.reconcile('orders');
    expect(cond('Ready')?.message).toBe(`${id}: the consumer failed: ${error}`);

    // Recovered: Ready, and an error the runtime no longer reports leaves status.
    h.admin.setSubscriptionStatus('*', undefined);
    await h.reconcile('orders');
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(sub().status?.lastError).toBeUndefined();
  });

  it('reading the status fails: Ready=False (AdminAPIError), the last known fields kept', async () => {
    h.subscription('orders');
    await h.settle('orders', 'Subscription');
    const id = sub().status!.subscriptionId!;

    h.admin.failNext('subscriptionStatus', () => new AdminApiError(503, 'unavailable'));
    await expect(h.reconcile('orders')).rejects.toMatchObject({ status: 503 });
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'AdminAPIError' });
    expect(cond('Ready')?.message).toContain(`reading the consumer status of ${id}: admin API HTTP 503`);
    expect(cond('Synced')?.status).toBe('True');
    expect(sub().status).toMatchObject({ consumerGroup: id, assignedPartitions: [0, 1, 2, 3] });

    // A refusal is retried later rather than with backoff.
    h.admin.failNext('subscriptionStatus', () => new AdminApiError(403, 'forbidden'));
    expect(await h.reconcile('orders')).toEqual({ requeueAfterMs: 60_000 });
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'AdminAPIError' });

    expect(await h.reconcile('orders')).toEqual({ requeueAfterMs: 60_000 });
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(h.admin.calls('createSubscription')).toHaveLength(1);
  });
});

describe('adoption and recreation', () => {
  it('status lost: adopts the matching subscription instead of creating a duplicate', async () => {
    h.subscription('orders', { options: { 'auto.offset.reset': 'earliest' } });
    await h.settle('orders', 'Subscription');
    const id = sub().status?.subscriptionId;
    h.wipeStatus('Subscription', 'orders');
    await h.settle('orders', 'Subscription');
    expect(h.admin.calls('createSubscription')).toHaveLength(1);
    expect(h.admin.subscriptionList().map((s) => s.id)).toEqual([id]);
    expect(sub().status?.subscriptionId).toBe(id);
    expect(cond('Ready')?.status).toBe('True');
    expect(h.events.reasons()).toEqual(['Created', 'Adopted']);
  });

  it('does not adopt a subscription another resource holds, nor one with other options', async () => {
    h.subscription('a');
    await h.settle('a', 'Subscription');
    h.subscription('b');
    await h.settle('b', 'Subscription');
    expect(h.admin.subscriptionList()).toHaveLength(2);
    expect(sub('a').status?.subscriptionId).not.toBe(sub('b').status?.subscriptionId);

    expect(optionsMatch({}, { 'client.id': 'restate', 'group.id': 'sub_1' })).toBe(true);
    expect(optionsMatch({ 'group.id': 'mine' }, { 'client.id': 'restate', 'group.id': 'sub_1' })).toBe(false);
    expect(optionsMatch({}, { 'auto.offset.reset': 'earliest', 'group.id': 'sub_1' })).toBe(false);
  });

  it('changed options: deletes and creates again (no update in the admin API), with a Recreated event', async () => {
    h.subscription('orders', { options: { 'auto.offset.reset': 'latest' } });
    await h.settle('orders', 'Subscription');
    const before = sub().status!;
    h.clock.advance(60_000);
    h.editSpec<SubscriptionObject>('Subscription', 'orders', (s) => (s.options = { 'auto.offset.reset': 'earliest' }));
    await h.settle('orders', 'Subscription');
    const after = sub().status!;
    expect(after.subscriptionId).not.toBe(before.subscriptionId);
    expect(after.optionsHash).not.toBe(before.optionsHash);
    expect(after.lastSyncTime).toBe(h.clock.now().toISOString());
    expect(h.admin.calls('deleteSubscription').map((c) => c.args[0])).toEqual([before.subscriptionId]);
    expect(h.admin.subscriptionList().map((s) => s.options['auto.offset.reset'])).toEqual(['earliest']);
    expect(cond('Synced')).toMatchObject({ status: 'True', reason: 'Recreated', observedGeneration: 2 });
    expect(h.events.events.at(-1)).toMatchObject({ type: 'Normal', reason: 'Recreated' });
  });

  it('a subscription gone from the runtime is created again', async () => {
    h.subscription('orders');
    await h.settle('orders', 'Subscription');
    const id = sub().status!.subscriptionId!;
    h.admin.deleteSubscriptionDirectly(id);
    await h.settle('orders', 'Subscription');
    expect(sub().status?.subscriptionId).not.toBe(id);
    expect(h.admin.subscriptionList()).toHaveLength(1);
    expect(h.events.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'Recreated' });
  });

  it('admin API failures: 5xx and unreachable are thrown (backoff), 4xx is reported and retried later', async () => {
    h.subscription('orders');
    h.admin.failNext('listSubscriptions', () => new AdminApiError(503, 'unavailable'));
    await expect(h.settle('orders', 'Subscription')).rejects.toMatchObject({ status: 503 });
    expect(cond('Synced')).toMatchObject({ status: 'False', reason: 'AdminAPIError' });

    h.admin.failNext('createSubscription', () => new AdminApiError(400, '[META0009] nope', 'META0009'));
    expect(await h.reconcile('orders')).toEqual({ requeueAfterMs: 60_000 });
    expect(cond('Synced')?.message).toContain('META0009');

    h.admin.unreachable = true;
    await expect(h.reconcile('orders')).rejects.toMatchObject({ status: 0 });
    h.admin.unreachable = false;
    await h.settle('orders', 'Subscription');
    expect(cond('Ready')?.status).toBe('True');
  });

  it('pause: nothing happens while paused; deletion still proceeds', async () => {
    h.subscription('orders');
    h.pause('Subscription', 'orders');
    await h.reconcile('orders');
    expect(h.admin.requests.filter((r) => r.op !== 'registerDeployment')).toHaveLength(0);
    expect(cond('Reconciling')).toMatchObject({ status: 'False', reason: 'ReconciliationPaused' });
    h.pause('Subscription', 'orders', false);
    await h.settle('orders', 'Subscription');
    h.pause('Subscription', 'orders');
    h.deleteAsUser('Subscription', 'orders');
    await h.reconcile('orders');
    expect(h.get('Subscription', 'orders')).toBeUndefined();
    expect(h.admin.subscriptionList()).toEqual([]);
  });
});

describe('deletion', () => {
  it('Delete removes the subscription from the runtime; 404 counts as done', async () => {
    h.subscription('orders');
    await h.settle('orders', 'Subscription');
    const id = sub().status!.subscriptionId!;
    h.deleteAsUser('Subscription', 'orders');
    await h.reconcile('orders');
    expect(h.get('Subscription', 'orders')).toBeUndefined();
    expect(h.admin.subscriptionList()).toEqual([]);
    expect(h.events.events.at(-1)).toMatchObject({ reason: 'Deleted', note: `subscription ${id} deleted` });

    h.subscription('again');
    await h.settle('again', 'Subscription');
    h.admin.deleteSubscriptionDirectly(sub('again').status!.subscriptionId!);
    h.deleteAsUser('Subscription', 'again');
    await h.reconcile('again');
    expect(h.get('Subscription', 'again')).toBeUndefined();
  });

  it('Delete without an id in status deletes what it would have adopted', async () => {
    h.subscription('orders');
    await h.settle('orders', 'Subscription');
    h.wipeStatus('Subscription', 'orders');
    h.deleteAsUser('Subscription', 'orders');
    await h.reconcile('orders');
    expect(h.admin.subscriptionList()).toEqual([]);
  });

  it('Retain leaves the subscription in the runtime', async () => {
    h.subscription('orders', { deletionPolicy: 'Retain' });
    await h.settle('orders', 'Subscription');
    h.deleteAsUser('Subscription', 'orders');
    await h.reconcile('orders');
    expect(h.get('Subscription', 'orders')).toBeUndefined();
    expect(h.admin.subscriptionList()).toHaveLength(1);
    expect(h.admin.calls('deleteSubscription')).toHaveLength(0);
  });

  it('a Cluster that is gone releases the finalizer with a Warning', async () => {
    h.subscription('orders');
    await h.settle('orders', 'Subscription');
    h.kube.deleteAsUser(ref('Cluster', CLUSTER));
    h.deleteAsUser('Subscription', 'orders');
    await h.reconcile('orders');
    expect(h.get('Subscription', 'orders')).toBeUndefined();
    expect(h.events.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'ClusterGone' });
  });

  it('an unreachable runtime blocks deletion for at most an hour', async () => {
    h.subscription('orders');
    await h.settle('orders', 'Subscription');
    h.admin.unreachable = true;
    h.deleteAsUser('Subscription', 'orders');
    await expect(h.reconcile('orders')).rejects.toMatchObject({ status: 0 });
    expect(h.get('Subscription', 'orders')).toBeDefined();
    h.clock.advance(60 * 60_000);
    await h.reconcile('orders');
    expect(h.get('Subscription', 'orders')).toBeUndefined();
    expect(h.events.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'AdminAPIUnreachable' });
  });
});

describe('watches', () => {
  it('a Cluster change wakes its Subscriptions; a Deployment change wakes the ones still waiting', () => {
    const controller = createSubscriptionController();
    h.subscription('ready');
    h.subscription('waiting');
    h.kube.setStatus(ref('Subscription', 'ready'), {
      conditions: [{ type: 'Ready', status: 'True', reason: 'Ready', message: '', lastTransitionTime: '' }],
    });
    h.kube.setStatus(ref('Subscription', 'waiting'), {
      conditions: [
        { type: 'Ready', status: 'False', reason: 'SinkServiceNotRegistered', message: '', lastTransitionTime: '' },
      ],
    });
    const primaries = () => h.kube.all('Subscription');
    const [clusterWatch, deploymentWatch] = controller.watches;
    expect(clusterWatch?.map(h.get('Cluster', CLUSTER)!, primaries)).toEqual([
      { namespace: NS, name: 'ready' },
      { namespace: NS, name: 'waiting' },
    ]);
    const dep = h.deployment('orders-dep', { endpoint: { http: { uri: 'http://orders:9080/' } } });
    expect(deploymentWatch?.map(dep, primaries)).toEqual([{ namespace: NS, name: 'waiting' }]);
  });

  it("a Cluster's token Secret wakes its Subscriptions (the default name or the Cluster's own)", () => {
    const [, , secretWatch] = createSubscriptionController().watches;
    h.subscription('orders');
    const primaries = () => h.kube.all('Subscription');
    const cluster = h.get('Cluster', CLUSTER)!;
    const secret = (name: string) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NS } });
    const cached = (custom?: string) => () =>
      custom === undefined
        ? [cluster]
        : [{ ...cluster, spec: { ...(cluster['spec'] as object), auth: { tokenSecret: custom } }, status: {} }];
    expect(secretWatch?.map(secret(`${CLUSTER}-token`), primaries, cached())).toEqual([
      { namespace: NS, name: 'orders' },
    ]);
    expect(secretWatch?.map(secret('unrelated'), primaries, cached())).toEqual([]);
    expect(secretWatch?.map(secret('my-token'), primaries, cached('my-token'))).toEqual([
      { namespace: NS, name: 'orders' },
    ]);
    // Without the Cluster cached nothing can be mapped, and nothing is woken by mistake.
    expect(secretWatch?.map(secret(`${CLUSTER}-token`), primaries, () => [])).toEqual([]);
  });
});
