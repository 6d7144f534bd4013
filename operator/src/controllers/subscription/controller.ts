import {
  AdminApiError,
  isTransientAdminError,
  type AdminClient,
  type ServiceMetadata,
  type SubscriptionResponse,
  type SubscriptionStatusResponse,
} from '../../admin-client/types.ts';
import { API_VERSION, FINALIZERS, type SubscriptionStatus } from '../../api/v1alpha1/index.ts';
import { MAX_LAST_ERROR_LENGTH, MAX_REPORTED_PARTITIONS } from '../../api/v1alpha1/subscription.ts';
import type { KubeObject } from '../../kube/types.ts';
import type { ConditionInput } from '../../reconcile/conditions.ts';
import type { Controller, ObjectKey, ReconcileContext, ReconcileResult, Watch } from '../../reconcile/types.ts';
import { clusterTokenSecret, resolveAdminTarget } from '../shared/cluster-target.ts';
import { addFinalizer, removeFinalizer } from '../shared/finalizers.ts';
import type { ClusterObject, DeploymentObject, SubscriptionObject } from '../shared/objects.ts';
import { isPaused } from '../shared/paused.ts';
import { StatusDraft, writeFirstSight, writePaused } from '../shared/status.ts';
import { desiredSubscription, findAdoptable, type DesiredSubscription } from './desired.ts';

/*
 * The Subscription controller: one Kafka subscription of a Cluster's runtime per resource. Order: pause guard →
 * finalizer → first status → Cluster (AdminAPIReady) → Kafka cluster (in the Cluster spec, then known to the
 * runtime) → sink service registered → find (status id, else adopt a matching one) → create / recreate → consumer
 * status → status. The admin API has no update for subscriptions: changed options mean delete and create (a Recreated
 * event). Ready means more than created: a runtime node's consumer has joined the consumer group and has partitions
 * assigned (`GET /subscriptions/{id}/status`); until then Ready is False with the runtime's reason, polled again soon.
 */

const CONDITION = { ready: 'Ready', synced: 'Synced', reconciling: 'Reconciling', stalled: 'Stalled' } as const;

const REQUEUE_MS = {
  conflict: 1_000,
  /** Waiting for the Cluster, a Kafka cluster or a sink service to appear. */
  dependency: 15_000,
  /** A request the runtime refused (4xx): a spec change or a registration elsewhere may fix it. */
  rejected: 60_000,
  /** Created, but no consumer has joined the group with partitions yet (or it failed): the runtime reports every 2 s. */
  consumerNotReady: 5_000,
  /** Consuming: the lag and the assignment in status are refreshed, and a consumer that fails later shows. */
  consuming: 60_000,
} as const;

/** Deletion gives up on a runtime it cannot reach after this long (the finalizer must never block forever). */
export const SUBSCRIPTION_DELETE_TIMEOUT_MS = 60 * 60_000;

type Draft = StatusDraft<SubscriptionStatus>;

function keyOf(obj: KubeObject): ObjectKey {
  return { namespace: obj.metadata.namespace ?? 'default', name: obj.metadata.name };
}

function sameNamespace(a: KubeObject, b: KubeObject): boolean {
  return (a.metadata.namespace ?? 'default') === (b.metadata.namespace ?? 'default');
}

function adminErrorMessage(err: AdminApiError): string {
  const status = err.status === 0 ? 'unreachable' : `HTTP ${err.status}`;
  return `admin API ${status}${err.code === undefined ? '' : ` ${err.code}`}: ${err.message}`;
}

function waiting(draft: Draft, reason: string, message: string): void {
  draft.conditions(
    { type: CONDITION.ready, status: 'False', reason, message },
    { type: CONDITION.synced, status: 'False', reason, message },
    { type: CONDITION.reconciling, status: 'True', reason, message },
    { type: CONDITION.stalled, status: 'False', reason: 'NotStalled', message: '' },
  );
}

async function adminFailure(draft: Draft, err: AdminApiError, what: string): Promise<ReconcileResult> {
  const message = `${what}: ${adminErrorMessage(err)}`;
  waiting(draft, 'AdminAPIError', message);
  await draft.flush();
  if (isTransientAdminError(err)) throw err;
  return { requeueAfterMs: REQUEUE_MS.rejected };
}

/** Subscription ids other Subscription resources of the namespace hold: never adopted or deleted on our behalf. */
async function claimedElsewhere(ctx: ReconcileContext, sub: SubscriptionObject): Promise<Set<string>> {
  const all = await ctx.kube.list<SubscriptionObject>(API_VERSION, 'Subscription', {
    namespace: sub.metadata.namespace ?? 'default',
  });
  const ids = new Set<string>();
  for (const other of all) {
    if (other.metadata.name === sub.metadata.name) continue;
    if (other.spec.clusterRef.name !== sub.spec.clusterRef.name) continue;
    const id = other.status?.subscriptionId;
    if (id !== undefined) ids.add(id);
  }
  return ids;
}

function handlerNames(service: ServiceMetadata): string[] | undefined {
  const handlers = service['handlers'];
  if (!Array.isArray(handlers)) return undefined;
  return handlers.flatMap((h: unknown) =>
    typeof h === 'object' && h !== null && typeof (h as { name?: unknown }).name === 'string'
      ? [(h as { name: string }).name]
      : [],
  );
}

async function createVerified(admin: AdminClient, desired: DesiredSubscription): Promise<SubscriptionResponse> {
  const created = await admin.createSubscription({
    source: desired.source,
    sink: desired.sink,
    options: desired.options,
  });
  const verified = await admin.getSubscription(created.id);
  if (verified === undefined) {
    throw new AdminApiError(500, `subscription ${created.id} was created but GET /subscriptions/${created.id} is 404`);
  }
  return verified;
}

async function reconcileLive(ctx: ReconcileContext, found: SubscriptionObject): Promise<ReconcileResult> {
  const namespace = found.metadata.namespace ?? 'default';
  if (isPaused(found)) {
    await writePaused(ctx, found);
    return {};
  }

  // Before anything is created, so that nothing created can outlive the resource.
  const sub = await addFinalizer(ctx, found, FINALIZERS.subscription);
  if (sub === undefined) return { requeueAfterMs: REQUEUE_MS.conflict };

  const draft = new StatusDraft(ctx, sub);
  await writeFirstSight(draft);

  const target = await resolveAdminTarget(ctx, namespace, { clusterRef: sub.spec.clusterRef });
  if (!target.ok) {
    waiting(draft, target.reason === 'ClusterNotFound' ? 'ClusterNotReady' : target.reason, target.message);
    await draft.flush();
    return { requeueAfterMs: REQUEUE_MS.dependency };
  }
  const kafkaName = sub.spec.source.kafka.cluster;
  const declared = target.cluster?.spec.kafka?.clusters ?? [];
  if (!declared.some((k) => k.name === kafkaName)) {
    const names = declared.map((k) => k.name).join(', ');
    waiting(
      draft,
      'KafkaClusterNotFound',
      `Cluster ${namespace}/${sub.spec.clusterRef.name} has no Kafka cluster named ${kafkaName} in spec.kafka.clusters` +
        ` (${names === '' ? 'none' : names})`,
    );
    await draft.flush();
    return { requeueAfterMs: REQUEUE_MS.dependency };
  }

  const admin = ctx.admin(target.target);
  let services: ServiceMetadata[];
  let existing: SubscriptionResponse[];
  try {
    const [s, k, e] = await Promise.all([admin.listServices(), admin.listKafkaClusters(), admin.listSubscriptions()]);
    services = s;
    existing = e;
    if (!k.some((c) => c.name === kafkaName)) {
      waiting(
        draft,
        'KafkaClusterNotFound',
        `Kafka cluster ${kafkaName} is in the Cluster spec but not yet known to the runtime`,
      );
      await draft.flush();
      return { requeueAfterMs: REQUEUE_MS.dependency };
    }
  } catch (err) {
    if (err instanceof AdminApiError) return adminFailure(draft, err, 'reading services and subscriptions');
    throw err;
  }

  const sink = sub.spec.sink.service;
  const service = services.find((s) => s.name === sink.name);
  const handlers = service === undefined ? undefined : handlerNames(service);
  if (service === undefined || (handlers !== undefined && !handlers.includes(sink.handler))) {
    waiting(
      draft,
      'SinkServiceNotRegistered',
      service === undefined
        ? `service ${sink.name} is not registered with the runtime`
        : `service ${sink.name} has no handler ${sink.handler} (handlers: ${(handlers ?? []).join(', ')})`,
    );
    await draft.flush();
    return { requeueAfterMs: REQUEUE_MS.dependency };
  }

  const desired = desiredSubscription(sub.spec);
  const id = draft.status.subscriptionId;
  const current = id === undefined ? undefined : existing.find((s) => s.id === id);
  let synced: SubscriptionResponse;
  let syncReason = 'Synced';
  let changed = false;
  try {
    if (current !== undefined && draft.status.optionsHash === desired.optionsHash) {
      synced = current;
    } else if (current !== undefined) {
      // No PATCH in the admin API: new options mean a new subscription (a new consumer group unless group.id is set).
      await admin.deleteSubscription(current.id);
      synced = await createVerified(admin, desired);
      syncReason = 'Recreated';
      changed = true;
      await ctx.events.record(
        sub,
        'Normal',
        'Recreated',
        `options changed: ${current.id} deleted and ${synced.id} created (the admin API cannot update a subscription)`,
        'Recreate',
      );
    } else if (id !== undefined) {
      synced = await createVerified(admin, desired);
      syncReason = 'Recreated';
      changed = true;
      await ctx.events.record(
        sub,
        'Warning',
        'Recreated',
        `${id} is gone from the runtime; created ${synced.id}`,
        'Recreate',
      );
    } else {
      const adoptable = findAdoptable(desired, existing, await claimedElsewhere(ctx, sub));
      changed = true;
      if (adoptable !== undefined) {
        synced = adoptable;
        await ctx.events.record(
          sub,
          'Normal',
          'Adopted',
          `adopted existing subscription ${adoptable.id} (${desired.source} → ${desired.sink})`,
          'Adopt',
        );
      } else {
        synced = await createVerified(admin, desired);
        await ctx.events.record(
          sub,
          'Normal',
          'Created',
          `created subscription ${synced.id} (${desired.source} → ${desired.sink})`,
          'Create',
        );
      }
    }
  } catch (err) {
    if (err instanceof AdminApiError) return adminFailure(draft, err, `syncing ${desired.source} → ${desired.sink}`);
    throw err;
  }

  const s = draft.status;
  s.subscriptionId = synced.id;
  s.source = desired.source;
  s.sink = desired.sink;
  s.optionsHash = desired.optionsHash;
  const wasSynced = draft.condition(CONDITION.synced)?.status === 'True';
  if (changed || !wasSynced || s.lastSyncTime === undefined) s.lastSyncTime = ctx.now().toISOString();
  const message = `${synced.id}: ${desired.source} → ${desired.sink}`;
  const syncedCondition: ConditionInput = {
    type: CONDITION.synced,
    status: 'True',
    // Keep Recreated until the next change, so `kubectl get` shows why the id changed.
    reason: changed ? syncReason : (draft.condition(CONDITION.synced)?.reason ?? syncReason),
    message,
  };

  let consumer: SubscriptionStatusResponse | undefined;
  try {
    consumer = await admin.subscriptionStatus(synced.id);
  } catch (err) {
    if (!(err instanceof AdminApiError)) throw err;
    // The last consumer fields stay: they are what was last known.
    const failure = `reading the consumer status of ${synced.id}: ${adminErrorMessage(err)}`;
    notConsuming(draft, syncedCondition, 'AdminAPIError', failure);
    await draft.flush();
    if (isTransientAdminError(err)) throw err;
    return { requeueAfterMs: REQUEUE_MS.rejected };
  }
  writeConsumerFields(s, consumer);

  if (consumer === undefined) {
    // Deleted since it was listed (the next pass creates it again), or a runtime without the status route.
    notConsuming(
      draft,
      syncedCondition,
      'ConsumerStatusUnknown',
      `${synced.id}: GET /subscriptions/${synced.id}/status answered 404`,
    );
    await draft.flush();
    return { requeueAfterMs: REQUEUE_MS.consumerNotReady };
  }
  if (!consumer.ready) {
    const reason = consumer.error === null ? 'ConsumerNotAssigned' : 'ConsumerFailed';
    const why =
      consumer.reason !== null && consumer.reason !== ''
        ? consumer.reason
        : consumer.error === null
          ? 'no consumer has partitions assigned yet'
          : `the consumer failed: ${consumer.error.message}`;
    notConsuming(draft, syncedCondition, reason, `${synced.id}: ${why}`);
    await draft.flush();
    return { requeueAfterMs: REQUEUE_MS.consumerNotReady };
  }

  const partitions = consumer.assigned_partitions.length;
  draft.conditions(
    {
      type: CONDITION.ready,
      status: 'True',
      reason: 'Ready',
      message:
        `${message}, consumer group ${consumer.group_id} with ${partitions} ` +
        `partition${partitions === 1 ? '' : 's'} assigned`,
    },
    syncedCondition,
    { type: CONDITION.reconciling, status: 'False', reason: 'Reconciled', message: `generation ${draft.generation}` },
    { type: CONDITION.stalled, status: 'False', reason: 'NotStalled', message: '' },
  );
  await draft.flush();
  return { requeueAfterMs: REQUEUE_MS.consuming };
}

/** Synced, but not consuming (yet): Ready=False with why, and the operator keeps polling. */
function notConsuming(draft: Draft, synced: ConditionInput, reason: string, message: string): void {
  draft.conditions(
    { type: CONDITION.ready, status: 'False', reason, message },
    synced,
    { type: CONDITION.reconciling, status: 'True', reason, message },
    { type: CONDITION.stalled, status: 'False', reason: 'NotStalled', message: '' },
  );
}

type ConsumerFields = Pick<
  SubscriptionStatus,
  'consumerGroup' | 'assignedPartitions' | 'lag' | 'consumers' | 'lastError'
>;

/**
 * The consumer group, assignment, lag and last error the runtime reports; removed when it reports nothing. Fields are
 * set in place (never deleted and added again), so an unchanged status serializes the same and is not written.
 */
function writeConsumerFields(s: SubscriptionStatus, consumer: SubscriptionStatusResponse | undefined): void {
  const fields: { [K in keyof ConsumerFields]-?: ConsumerFields[K] | undefined } = {
    consumerGroup: consumer?.group_id,
    assignedPartitions: consumer?.assigned_partitions.slice(0, MAX_REPORTED_PARTITIONS),
    lag: consumer?.lag ?? undefined,
    consumers: consumer?.consumers.length,
    lastError: consumer?.error?.message.slice(0, MAX_LAST_ERROR_LENGTH),
  };
  for (const key of Object.keys(fields) as (keyof ConsumerFields)[]) {
    const value = fields[key];
    if (value === undefined) delete s[key];
    else (s as Record<string, unknown>)[key] = value;
  }
}

async function release(ctx: ReconcileContext, sub: SubscriptionObject): Promise<ReconcileResult> {
  return (await removeFinalizer(ctx, sub, FINALIZERS.subscription)) ? {} : { requeueAfterMs: REQUEUE_MS.conflict };
}

async function reconcileDeletion(ctx: ReconcileContext, sub: SubscriptionObject): Promise<ReconcileResult> {
  if (!(sub.metadata.finalizers ?? []).includes(FINALIZERS.subscription)) return {};
  const namespace = sub.metadata.namespace ?? 'default';
  const policy = sub.spec.deletionPolicy ?? 'Delete';
  const id = sub.status?.subscriptionId;
  if (policy === 'Retain') {
    if (id !== undefined) {
      await ctx.events.record(sub, 'Normal', 'Retained', `deletion policy Retain: ${id} stays`, 'Delete');
    }
    return release(ctx, sub);
  }

  const startedAt = Date.parse(sub.metadata.deletionTimestamp ?? ctx.now().toISOString());
  const deadline = startedAt + SUBSCRIPTION_DELETE_TIMEOUT_MS;
  const giveUpOr = async (message: string, err: unknown): Promise<ReconcileResult> => {
    if (ctx.now().getTime() >= deadline) {
      await ctx.events.record(
        sub,
        'Warning',
        'AdminAPIUnreachable',
        `${message} for over ${SUBSCRIPTION_DELETE_TIMEOUT_MS / 60_000} min: removing the finalizer, ` +
          `${id ?? 'the subscription'} may stay in the runtime`,
        'Delete',
      );
      return release(ctx, sub);
    }
    const draft = new StatusDraft(ctx, sub);
    waiting(draft, 'AdminAPIError', message);
    await draft.flush();
    throw err instanceof Error ? err : new Error(message);
  };

  const target = await resolveAdminTarget(ctx, namespace, { clusterRef: sub.spec.clusterRef }, { requireReady: false });
  if (!target.ok) {
    if (target.clusterGone) {
      await ctx.events.record(
        sub,
        'Warning',
        'ClusterGone',
        `${target.message}: removing the finalizer; the subscription goes with the Cluster's runtime`,
        'Delete',
      );
      return release(ctx, sub);
    }
    return giveUpOr(target.message, undefined);
  }
  const admin = ctx.admin(target.target);
  try {
    let toDelete = id;
    if (toDelete === undefined) {
      // Status lost (or never written after a create): find what this resource would have adopted.
      const existing = await admin.listSubscriptions();
      toDelete = findAdoptable(desiredSubscription(sub.spec), existing, await claimedElsewhere(ctx, sub))?.id;
    }
    if (toDelete !== undefined && (await admin.deleteSubscription(toDelete))) {
      await ctx.events.record(sub, 'Normal', 'Deleted', `subscription ${toDelete} deleted`, 'Delete');
    }
  } catch (err) {
    if (err instanceof AdminApiError) return giveUpOr(adminErrorMessage(err), err);
    throw err;
  }
  return release(ctx, sub);
}

const clusterWatch: Watch = {
  apiVersion: API_VERSION,
  kind: 'Cluster',
  map: (cluster, primaries) =>
    (primaries() as SubscriptionObject[])
      .filter((s) => sameNamespace(s, cluster) && s.spec.clusterRef.name === cluster.metadata.name)
      .map(keyOf),
};

/** A Deployment resource's status change may register a sink service that subscriptions of its Cluster wait for. */
const deploymentWatch: Watch = {
  apiVersion: API_VERSION,
  kind: 'Deployment',
  map: (obj, primaries) => {
    const dep = obj as DeploymentObject;
    const cluster = dep.spec.clusterRef?.name;
    if (cluster === undefined) return [];
    return (primaries() as SubscriptionObject[])
      .filter(
        (s) =>
          sameNamespace(s, dep) &&
          s.spec.clusterRef.name === cluster &&
          s.status?.conditions?.some((c) => c.type === CONDITION.ready && c.status !== 'True') === true,
      )
      .map(keyOf);
  },
};

/** A replaced token Secret of a Cluster wakes the subscriptions that could not reach its admin API with the old one. */
const tokenSecretWatch: Watch = {
  apiVersion: 'v1',
  kind: 'Secret',
  map: (secret, primaries, cached) => {
    const clusters = ((cached?.(API_VERSION, 'Cluster') ?? []) as ClusterObject[]).filter(
      (c) => sameNamespace(c, secret) && clusterTokenSecret(c)?.name === secret.metadata.name,
    );
    const names = new Set(clusters.map((c) => c.metadata.name));
    return (primaries() as SubscriptionObject[])
      .filter((s) => sameNamespace(s, secret) && names.has(s.spec.clusterRef.name))
      .map(keyOf);
  },
};

export function createSubscriptionController(): Controller {
  return {
    name: 'subscription',
    apiVersion: API_VERSION,
    kind: 'Subscription',
    watches: [clusterWatch, deploymentWatch, tokenSecretWatch],
    async reconcile(key, ctx) {
      const sub = await ctx.kube.get<SubscriptionObject>({
        apiVersion: API_VERSION,
        kind: 'Subscription',
        namespace: key.namespace,
        name: key.name,
      });
      if (sub === undefined) return {};
      return sub.metadata.deletionTimestamp !== undefined ? reconcileDeletion(ctx, sub) : reconcileLive(ctx, sub);
    },
  };
}

export const subscriptionController: Controller = createSubscriptionController();
