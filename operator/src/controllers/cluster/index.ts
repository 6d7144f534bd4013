import { LISTENER_PORTS } from '../../api/v1alpha1/cluster.ts';
import { API_VERSION, FIELD_MANAGER, type Cluster, type ClusterStatus } from '../../api/v1alpha1/index.ts';
import { AdminApiError, type AdminClient, type AdminTarget } from '../../admin-client/types.ts';
import type { KubeObject, ObjectRef } from '../../kube/types.ts';
import type { Controller, ObjectKey, ReconcileContext, ReconcileResult } from '../../reconcile/types.ts';
import { keyString } from '../../reconcile/types.ts';
import { CHILD_KINDS, childKey, wantedChildren } from '../../specs/children.ts';
import {
  buildConfigMap,
  ConfigRenderError,
  KAFKA_CLUSTERS_ANNOTATION,
  kafkaClustersOf,
  renderRuntimeConfig,
  type ConfigMapInputs,
} from '../../specs/config-map.ts';
import { canonicalJson, namespaceOf } from '../../specs/meta.ts';
import { clusterNames } from '../../specs/names.ts';
import { buildNetworkPolicy } from '../../specs/network-policy.ts';
import type { DeploymentStatus } from '../../specs/objects.ts';
import { buildPodDisruptionBudget } from '../../specs/pod-disruption-budget.ts';
import { buildPostgresService, buildPostgresStatefulSet } from '../../specs/postgres.ts';
import { buildRuntimeDeployment, configHash } from '../../specs/runtime-deployment.ts';
import { buildServiceAccount } from '../../specs/service-account.ts';
import { buildServices } from '../../specs/service.ts';
import { clusterEndpoints, replicasOf, serviceEnabled } from '../../specs/settings.ts';
import { httpScheme } from '../../specs/tls.ts';
import { applyAll, pruneUnwanted } from './apply.ts';
import { resolveAuth, type AuthResolution } from './auth.ts';
import { resolveDatabase } from './database.ts';
import { syncKafkaClusters } from './kafka.ts';
import type { Blocker, ClusterObject } from './secrets.ts';
import {
  firstSightStatus,
  nextStatus,
  observeRollout,
  pausedConditions,
  statusChanged,
  transitionEvents,
  type AdminObservation,
  type KafkaObservation,
} from './status.ts';
import { observabilityAnswers, publishedEndpoints } from './observability.ts';
import { resolveTls, type TlsResolution } from './tls.ts';
import { clusterWatches } from './watches.ts';
import { isPaused } from '../shared/paused.ts';

/*
 * Cluster → the runtime's Deployment, Services, ConfigMap, Secrets, PDB, NetworkPolicy (and the bundled PostgreSQL),
 * in a fixed order: get → guards → resolve references → observe owned objects → apply them → admin API → status.
 * Every pass is level-triggered and idempotent: a pass with nothing to change writes nothing.
 */

/** Polling of what no watch reports: pods becoming ready inside the runtime, the admin API, Kafka. */
export const REQUEUE_MS = {
  notReady: 5_000,
  /** Resync of a healthy cluster: the admin API and the Kafka clusters are external state. */
  ready: 5 * 60_000,
  /** Only a spec or Secret change helps, and both are watched; this is a safety net. */
  stalled: 60_000,
} as const;

function clusterRef(key: ObjectKey): ObjectRef {
  return { apiVersion: API_VERSION, kind: 'Cluster', namespace: key.namespace, name: key.name };
}

async function writeStatus(ctx: ReconcileContext, cluster: Cluster, status: ClusterStatus): Promise<void> {
  await ctx.kube.applyStatus(
    {
      apiVersion: API_VERSION,
      kind: 'Cluster',
      metadata: { name: cluster.metadata.name, namespace: namespaceOf(cluster) },
      status,
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}

function describeAdminError(err: unknown): string {
  if (err instanceof AdminApiError) return err.status === 0 ? err.message : `${err.message} (HTTP ${err.status})`;
  return err instanceof Error ? err.message : String(err);
}

async function observeAdmin(
  cluster: Cluster,
  ctx: ReconcileContext,
  auth: AuthResolution,
  tls: TlsResolution,
  readyPods: number,
): Promise<{ admin: AdminObservation; client: AdminClient | undefined }> {
  const name = cluster.metadata.name;
  if (!serviceEnabled(cluster, 'admin')) {
    return {
      admin: {
        ok: false,
        reason: 'AdminServiceDisabled',
        message:
          `spec.services.admin.enabled is false: the operator and Deployment resources reach the admin API through ` +
          `Service ${clusterNames.service(name, 'admin')}`,
      },
      client: undefined,
    };
  }
  if (auth.state === 'blocked') {
    return {
      admin: { ok: false, reason: 'NoToken', message: `no access token for the admin API: ${auth.blocker.message}` },
      client: undefined,
    };
  }
  if (!tls.ok) {
    return {
      admin: { ok: false, reason: 'NoTLSSecret', message: `no TLS material for the admin API: ${tls.blocker.message}` },
      client: undefined,
    };
  }
  if (readyPods < 1) {
    return {
      admin: { ok: false, reason: 'NoReadyPods', message: 'waiting for a ready runtime pod' },
      client: undefined,
    };
  }
  const url = ctx.serviceUrl(
    namespaceOf(cluster),
    clusterNames.service(name, 'admin'),
    LISTENER_PORTS.admin,
    httpScheme(cluster, 'admin'),
  );
  const target: AdminTarget = {
    url,
    ...(auth.state === 'ready' ? { token: auth.token } : {}),
    ...(tls.admin === undefined ? {} : { tls: tls.admin }),
  };
  const client = ctx.admin(target);
  try {
    return { admin: { ok: true, version: await client.version() }, client };
  } catch (err) {
    const unauthorized = err instanceof AdminApiError && (err.status === 401 || err.status === 403);
    return {
      admin: {
        ok: false,
        reason: unauthorized ? 'Unauthorized' : 'Unreachable',
        message: `admin API at ${url}: ${describeAdminError(err)}`,
      },
      client: undefined,
    };
  }
}

interface RuntimePlan {
  readonly configMapInputs: ConfigMapInputs;
  readonly configMap: KubeObject;
  readonly deployment: KubeObject;
  readonly hash: string;
}

/** The runtime ConfigMap and Deployment, once every input they need is resolved. */
function planRuntime(
  cluster: ClusterObject,
  inputs: ConfigMapInputs & { readonly secrets: Readonly<Record<string, string>> },
): RuntimePlan {
  const { secrets, ...configMapInputs } = inputs;
  const configMap = buildConfigMap(cluster, configMapInputs);
  const hash = configHash({ configMap: configMap.data, secrets });
  return { configMapInputs, configMap, deployment: buildRuntimeDeployment(cluster, { configHash: hash }), hash };
}

/** Every child to apply, in dependency order: the runtime Deployment last, after what its pods mount. */
function desiredChildren(cluster: ClusterObject, ctx: ReconcileContext, plan: RuntimePlan | undefined): KubeObject[] {
  const objects: KubeObject[] = [];
  const serviceAccount = buildServiceAccount(cluster);
  if (serviceAccount !== undefined) objects.push(serviceAccount);
  if (plan !== undefined) objects.push(plan.configMap);
  objects.push(...buildServices(cluster), buildPodDisruptionBudget(cluster));
  const networkPolicy = buildNetworkPolicy(cluster, ctx.operatorNamespace);
  if (networkPolicy !== undefined) objects.push(networkPolicy);
  const pgService = buildPostgresService(cluster);
  if (pgService !== undefined) objects.push(pgService);
  const pgStatefulSet = buildPostgresStatefulSet(cluster);
  if (pgStatefulSet !== undefined) objects.push(pgStatefulSet);
  if (plan !== undefined) objects.push(plan.deployment);
  return objects;
}

/**
 * Syncs spec.kafka.clusters when the admin API answers, and stores the new record on the runtime ConfigMap. Undefined
 * (no condition) when no Kafka cluster is configured or left to delete.
 */
async function observeKafka(
  cluster: ClusterObject,
  ctx: ReconcileContext,
  client: AdminClient | undefined,
  plan: RuntimePlan | undefined,
  record: Readonly<Record<string, string>>,
): Promise<KafkaObservation | undefined> {
  const listed = cluster.spec.kafka?.clusters.length ?? 0;
  if (listed === 0 && Object.keys(record).length === 0) return undefined;
  // The record lives on the runtime ConfigMap: without it applied this pass, syncing could forget what it created.
  if (client === undefined || plan === undefined) {
    return {
      synced: false,
      reason: 'WaitingForAdminAPI',
      message: 'Kafka clusters are synced once the runtime is up and its admin API reachable',
    };
  }
  const result = await syncKafkaClusters(cluster, client, record, ctx);
  if (canonicalJson(result.record) !== canonicalJson(record)) {
    await ctx.kube.apply(buildConfigMap(cluster, { ...plan.configMapInputs, kafkaClusters: result.record }), {
      fieldManager: FIELD_MANAGER,
      force: true,
    });
  }
  const nothingLeft = listed === 0 && Object.keys(result.record).length === 0;
  return result.synced && nothingLeft ? undefined : result;
}

async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
  const cluster = await ctx.kube.get<ClusterObject>(clusterRef(key));
  if (cluster === undefined) return {};
  // Every child carries an owner reference, so garbage collection removes them; nothing outside needs cleaning up.
  if (cluster.metadata.deletionTimestamp !== undefined) return {};
  const log = ctx.log.child({ cluster: keyString(key) });
  const generation = cluster.metadata.generation ?? 0;
  const now = ctx.now();
  const name = cluster.metadata.name;
  const namespace = namespaceOf(cluster);

  // Status writes always carry the whole status: under server-side apply, a field this manager wrote before and
  // leaves out now would be removed.
  if (isPaused(cluster)) {
    const status = cluster.status ?? {};
    const paused = { ...status, conditions: pausedConditions(status, generation, now) };
    if (statusChanged(status, paused)) await writeStatus(ctx, cluster, paused);
    return {};
  }

  let previous: ClusterStatus = cluster.status ?? {};
  if (previous.observedGeneration === undefined) {
    previous = { ...previous, ...firstSightStatus(previous, generation, now) };
    await writeStatus(ctx, cluster, previous);
  }

  // Resolve references. Each blocker keeps the runtime pods from being rebuilt; pods already running keep running.
  const blockers: Blocker[] = [];
  let toml: string | undefined;
  try {
    toml = renderRuntimeConfig(cluster.spec.config);
  } catch (err) {
    if (!(err instanceof ConfigRenderError)) throw err;
    blockers.push({ reason: 'InvalidConfig', message: err.message, stalled: true });
  }
  const auth = await resolveAuth(cluster, ctx);
  if (auth.state === 'blocked') blockers.push(auth.blocker);
  const database = await resolveDatabase(cluster, ctx);
  const tls = await resolveTls(cluster, ctx);
  if (!tls.ok) blockers.push(tls.blocker);

  // Observe what only owned objects remember.
  const observedConfigMap = await ctx.kube.get({
    ...CHILD_KINDS.configMap,
    namespace,
    name: clusterNames.config(name),
  });
  const kafkaRecord = kafkaClustersOf(observedConfigMap);
  const keepKafkaRecord =
    observedConfigMap?.metadata.annotations?.[KAFKA_CLUSTERS_ANNOTATION] !== undefined ||
    Object.keys(kafkaRecord).length > 0;

  const plan =
    toml !== undefined && auth.state !== 'blocked' && database.dsn !== undefined && tls.ok
      ? planRuntime(cluster, {
          toml,
          publicKeyPem: auth.state === 'ready' ? auth.publicKeyPem : undefined,
          kafkaClusters: keepKafkaRecord ? kafkaRecord : undefined,
          secrets: { [`${database.dsn.source.secretName}/${database.dsn.source.key}`]: database.dsn.value },
        })
      : undefined;
  const objects = desiredChildren(cluster, ctx, plan);
  const applied = await applyAll(ctx, objects);
  const deleted = await pruneUnwanted(cluster, ctx, wantedChildren(cluster));
  if (deleted.length > 0) log.info({ deleted }, 'deleted children the spec no longer wants');

  const runtimeRef = { ...CHILD_KINDS.deployment, namespace, name: clusterNames.runtime(name) };
  const deployment = (applied.get(childKey(CHILD_KINDS.deployment, runtimeRef.name)) ??
    (await ctx.kube.get(runtimeRef))) as (KubeObject & { status?: DeploymentStatus }) | undefined;
  const rollout = observeRollout(deployment, replicasOf(cluster));

  const { admin, client } = await observeAdmin(cluster, ctx, auth, tls, rollout.ready);
  if (!admin.ok) log.debug({ reason: admin.reason, message: admin.message }, 'admin API not ready');

  const kafka = await observeKafka(cluster, ctx, client, plan, kafkaRecord);
  const observability = await observabilityAnswers(cluster, ctx, auth, tls, rollout.ready);

  const next = nextStatus(
    previous,
    {
      generation,
      blockers,
      database,
      rollout,
      admin,
      kafka,
      endpoints: publishedEndpoints(clusterEndpoints(cluster), observability),
      configHash: plan?.hash,
      tokenSecret: auth.state === 'ready' ? auth.tokenSecret : undefined,
    },
    now,
  );
  if (statusChanged(previous, next)) await writeStatus(ctx, cluster, next);
  for (const event of transitionEvents(previous.conditions, next.conditions ?? [])) {
    await ctx.events.record(cluster, event.type, event.reason, event.note, 'Reconcile');
  }

  const ready = next.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  const stalled = next.conditions?.find((c) => c.type === 'Stalled')?.status === 'True';
  return { requeueAfterMs: ready ? REQUEUE_MS.ready : stalled ? REQUEUE_MS.stalled : REQUEUE_MS.notReady };
}

export const clusterController: Controller = {
  name: 'cluster',
  apiVersion: API_VERSION,
  kind: 'Cluster',
  watches: clusterWatches,
  reconcile,
};
