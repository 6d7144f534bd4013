import type { ClusterStatus } from '../../api/v1alpha1/index.ts';
import type { VersionInformation } from '../../admin-client/types.ts';
import type { EventType } from '../../kube/port.ts';
import type { Condition, KubeObject } from '../../kube/types.ts';
import { findCondition, setConditions, type ConditionInput } from '../../reconcile/conditions.ts';
import { canonicalJson } from '../../specs/meta.ts';
import type { DeploymentStatus } from '../../specs/objects.ts';
import type { Endpoints } from '../../specs/settings.ts';
import type { DatabaseResolution } from './database.ts';
import type { Blocker } from './secrets.ts';
import { PAUSED_MESSAGE, RECONCILIATION_PAUSED } from '../shared/paused.ts';

export const CONDITION = {
  ready: 'Ready',
  reconciling: 'Reconciling',
  stalled: 'Stalled',
  database: 'DatabaseReady',
  admin: 'AdminAPIReady',
  kafka: 'KafkaClustersSynced',
} as const;

export interface Rollout {
  /** The runtime Deployment exists. */
  readonly exists: boolean;
  readonly desired: number;
  readonly replicas: number;
  readonly ready: number;
  readonly updated: number;
  /** Kubernetes has seen the latest template and every pod runs it and is ready. */
  readonly complete: boolean;
}

export function observeRollout(
  deployment: (KubeObject & { status?: DeploymentStatus }) | undefined,
  desired: number,
): Rollout {
  const status = deployment?.status ?? {};
  const replicas = status.replicas ?? 0;
  const ready = status.readyReplicas ?? 0;
  const updated = status.updatedReplicas ?? 0;
  const observed = (status.observedGeneration ?? 0) >= (deployment?.metadata.generation ?? 1);
  return {
    exists: deployment !== undefined,
    desired,
    replicas,
    ready,
    updated,
    complete: deployment !== undefined && observed && updated === desired && ready === desired && replicas === desired,
  };
}

export type AdminObservation =
  | { readonly ok: true; readonly version: VersionInformation }
  | { readonly ok: false; readonly reason: string; readonly message: string };

export interface KafkaObservation {
  readonly synced: boolean;
  readonly reason: string;
  readonly message: string;
}

export interface Observations {
  readonly generation: number;
  /** Why the runtime pods cannot be (re)built now: stalled ones first. */
  readonly blockers: readonly Blocker[];
  readonly database: DatabaseResolution;
  readonly rollout: Rollout;
  readonly admin: AdminObservation;
  /** Undefined when no Kafka cluster is configured or pending deletion: the condition is then left out. */
  readonly kafka: KafkaObservation | undefined;
  readonly endpoints: Endpoints;
  /** Undefined while the pods cannot be built: the last hash stays. */
  readonly configHash: string | undefined;
  readonly tokenSecret: string | undefined;
}

function rolloutMessage(r: Rollout): string {
  if (!r.exists) return 'waiting for the runtime Deployment to be created';
  return `${r.updated} of ${r.desired} runtime pods updated, ${r.ready} ready`;
}

/** Ready and the conditions that explain it, most fundamental cause first. */
function readiness(obs: Observations): { ready: ConditionInput; stalled: Blocker | undefined } {
  const stalled = obs.blockers.find((b) => b.stalled);
  const ready = (reason: string, message: string): ConditionInput => ({
    type: CONDITION.ready,
    status: 'False',
    reason,
    message,
  });
  if (stalled !== undefined) return { ready: ready(stalled.reason, stalled.message), stalled };
  if (!obs.database.ready) return { ready: ready('DatabaseNotReady', obs.database.message), stalled };
  const waiting = obs.blockers[0];
  if (waiting !== undefined) return { ready: ready(waiting.reason, waiting.message), stalled };
  if (!obs.rollout.complete) return { ready: ready('RolloutInProgress', rolloutMessage(obs.rollout)), stalled };
  if (!obs.admin.ok) return { ready: ready('AdminAPINotReady', obs.admin.message), stalled };
  if (obs.kafka !== undefined && !obs.kafka.synced) {
    return { ready: ready('KafkaClustersNotSynced', obs.kafka.message), stalled };
  }
  return {
    ready: {
      type: CONDITION.ready,
      status: 'True',
      reason: 'ClusterReady',
      message: `${obs.rollout.ready} of ${obs.rollout.desired} runtime pods ready, version ${obs.admin.version.version}`,
    },
    stalled,
  };
}

export function nextStatus(previous: ClusterStatus, obs: Observations, now: Date): ClusterStatus {
  const { ready, stalled } = readiness(obs);
  const updates: ConditionInput[] = [
    ready,
    stalled === undefined
      ? { type: CONDITION.stalled, status: 'False', reason: 'NotStalled', message: '' }
      : { type: CONDITION.stalled, status: 'True', reason: stalled.reason, message: stalled.message },
    ready.status === 'True'
      ? {
          type: CONDITION.reconciling,
          status: 'False',
          reason: 'ReconciliationSucceeded',
          message: 'the cluster matches its spec',
        }
      : stalled === undefined
        ? { type: CONDITION.reconciling, status: 'True', reason: ready.reason, message: ready.message }
        : { type: CONDITION.reconciling, status: 'False', reason: 'Stalled', message: stalled.message },
    {
      type: CONDITION.database,
      status: obs.database.ready ? 'True' : 'False',
      reason: obs.database.reason,
      message: obs.database.message,
    },
    obs.admin.ok
      ? {
          type: CONDITION.admin,
          status: 'True',
          reason: 'Reachable',
          message:
            `runtime ${obs.admin.version.version}, admin API versions ` +
            `${obs.admin.version.min_admin_api_version}-${obs.admin.version.max_admin_api_version}`,
        }
      : { type: CONDITION.admin, status: 'False', reason: obs.admin.reason, message: obs.admin.message },
  ];
  if (obs.kafka !== undefined) {
    updates.push({
      type: CONDITION.kafka,
      status: obs.kafka.synced ? 'True' : 'False',
      reason: obs.kafka.reason,
      message: obs.kafka.message,
    });
  }
  let conditions = setConditions(previous.conditions, updates, obs.generation, now);
  if (obs.kafka === undefined) conditions = conditions.filter((c) => c.type !== CONDITION.kafka);

  const status: ClusterStatus = {
    observedGeneration: obs.generation,
    conditions: orderConditions(conditions),
    replicas: obs.rollout.replicas,
    readyReplicas: obs.rollout.ready,
    updatedReplicas: obs.rollout.updated,
    endpoints: obs.endpoints,
  };
  // The last version seen stays while the admin API is unreachable: it is what most likely still runs.
  if (obs.admin.ok) {
    status.version = obs.admin.version.version;
    status.adminApiVersions = {
      min: obs.admin.version.min_admin_api_version,
      max: obs.admin.version.max_admin_api_version,
    };
  } else {
    if (previous.version !== undefined) status.version = previous.version;
    if (previous.adminApiVersions !== undefined) status.adminApiVersions = previous.adminApiVersions;
  }
  const configHash = obs.configHash ?? previous.configHash;
  if (configHash !== undefined) status.configHash = configHash;
  if (obs.tokenSecret !== undefined) status.tokenSecret = obs.tokenSecret;
  return status;
}

const ORDER: readonly string[] = Object.values(CONDITION);

/** A fixed order, so a condition re-added later does not read as a change of the list. */
function orderConditions(conditions: Condition[]): Condition[] {
  const rank = (c: Condition) => {
    const i = ORDER.indexOf(c.type);
    return i < 0 ? ORDER.length : i;
  };
  return [...conditions].sort((a, b) => rank(a) - rank(b) || a.type.localeCompare(b.type));
}

/** The status on first sight: Ready=Unknown so kstatus, Argo CD and Flux do not read a missing Ready as healthy. */
export function firstSightStatus(previous: ClusterStatus, generation: number, now: Date): ClusterStatus {
  return {
    observedGeneration: generation,
    conditions: orderConditions(
      setConditions(
        previous.conditions,
        [
          { type: CONDITION.ready, status: 'Unknown', reason: 'Reconciling', message: 'first reconcile in progress' },
          {
            type: CONDITION.reconciling,
            status: 'True',
            reason: 'Reconciling',
            message: 'first reconcile in progress',
          },
        ],
        generation,
        now,
      ),
    ),
  };
}

export function pausedConditions(previous: ClusterStatus, generation: number, now: Date): Condition[] {
  return orderConditions(
    setConditions(
      previous.conditions,
      [
        {
          type: CONDITION.reconciling,
          status: 'False',
          reason: RECONCILIATION_PAUSED,
          message: PAUSED_MESSAGE,
        },
      ],
      generation,
      now,
    ),
  );
}

/** Whether writing `next` would change the stored status (only the fields the operator writes are compared). */
export function statusChanged(previous: ClusterStatus | undefined, next: ClusterStatus): boolean {
  const before: Record<string, unknown> = {};
  const prev = (previous ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(next)) if (prev[key] !== undefined) before[key] = prev[key];
  return canonicalJson(before) !== canonicalJson(next);
}

export interface ClusterEvent {
  readonly type: EventType;
  readonly reason: string;
  readonly note: string;
}

/** Events for condition transitions only, so a cluster that stays unready does not log an event per loop. */
export function transitionEvents(
  previous: readonly Condition[] | undefined,
  next: readonly Condition[],
): ClusterEvent[] {
  const was = (type: string) => findCondition(previous, type);
  const is = (type: string) => findCondition(next, type);
  const events: ClusterEvent[] = [];
  const readyBefore = was(CONDITION.ready)?.status;
  const readyNow = is(CONDITION.ready);
  if (readyNow?.status === 'True' && readyBefore !== 'True') {
    events.push({ type: 'Normal', reason: 'Ready', note: readyNow.message });
  } else if (readyNow?.status === 'False' && readyBefore === 'True') {
    // A rollout of a new spec is the normal way out of Ready, not something to warn about.
    events.push(
      readyNow.reason === 'RolloutInProgress'
        ? { type: 'Normal', reason: 'RolloutStarted', note: readyNow.message }
        : { type: 'Warning', reason: 'NotReady', note: `${readyNow.reason}: ${readyNow.message}` },
    );
  }
  const db = is(CONDITION.database);
  if (db?.status === 'False' && was(CONDITION.database)?.status === 'True') {
    events.push({ type: 'Warning', reason: 'DatabaseNotReady', note: `${db.reason}: ${db.message}` });
  }
  const stalled = is(CONDITION.stalled);
  if (
    stalled?.status === 'True' &&
    (was(CONDITION.stalled)?.status !== 'True' || was(CONDITION.stalled)?.reason !== stalled.reason)
  ) {
    events.push({ type: 'Warning', reason: 'Stalled', note: `${stalled.reason}: ${stalled.message}` });
  }
  const kafka = is(CONDITION.kafka);
  // Waiting for the admin API is already told by Ready; only a failed sync is news.
  if (
    kafka?.status === 'False' &&
    kafka.reason !== 'WaitingForAdminAPI' &&
    was(CONDITION.kafka)?.reason !== kafka.reason
  ) {
    events.push({ type: 'Warning', reason: 'KafkaClusterSyncFailed', note: kafka.message });
  }
  return events;
}
