import { LISTENER_PORTS, LISTENERS, type ListenerName } from '../api/v1alpha1/cluster.ts';
import type { Cluster } from '../api/v1alpha1/index.ts';
import { AUTH_KEYS_FILE_KEY, CONFIG_FILE_KEY } from './config-map.ts';
import { CONFIG_HASH_ANNOTATION, SERVICE_ACCOUNT_HASH_ANNOTATION, childMeta, digest } from './meta.ts';
import { clusterLabels, clusterNames, selectorLabels } from './names.ts';
import type {
  Container,
  ContainerPort,
  DeploymentObject,
  EnvVar,
  Json,
  PodSpec,
  Probe,
  Volume,
  VolumeMount,
} from './objects.ts';
import {
  authEnabled,
  DEFAULT_POOL_SIZE,
  databaseSecret,
  replicasOf,
  serviceAccountName,
  shutdownDelayOf,
} from './settings.ts';
import { TLS_VOLUMES, tlsEnv, tlsVolumeMounts, tlsVolumes } from './tls.ts';

/*
 * The runtime pods: a plain apps/v1 Deployment, since every process is stateless (all state is in PostgreSQL). The
 * pods run the image non-root on a read-only root file system; everything they write goes to two emptyDirs.
 */

export const RUNTIME_CONTAINER = 'ratchet';
/** The ConfigMap (ratchet.toml, auth-keys.pem) as a directory: the kubelet swaps its files atomically on change. */
export const CONFIG_DIR = '/etc/ratchet/config';
export const DATA_DIR = '/var/lib/ratchet';
/** The distroless `nonroot` user; any non-zero uid works since the pods write only to emptyDirs. */
export const RUNTIME_UID = 65532;

const VOLUMES = { config: 'config', tmp: 'tmp', data: 'data' } as const;
const OWNED_VOLUMES: ReadonlySet<string> = new Set([...Object.values(VOLUMES), ...Object.values(TLS_VOLUMES)]);

/**
 * Rolling updates add a pod before removing one: capacity never drops below `replicas`, and the cluster is never
 * without owners. A new pod is ready only once it has joined the membership; the old pod it replaces then gets
 * SIGTERM and hands its partition leases to the live replicas (the new one among them) at once, instead of leaving
 * them to expire. No `minReadySeconds`: readiness already means joined, and a handover needs no new pod to own
 * anything yet, so waiting longer would only slow every step.
 */
const STRATEGY = { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } } as const;
/** Old ReplicaSets kept for `kubectl rollout undo`; unbounded history piled up pods in restate-operator #78. */
export const REVISION_HISTORY_LIMIT = 3;

/** Values of the pods' inputs that are not in the pod template itself, digested into CONFIG_HASH_ANNOTATION. */
export interface ConfigHashInputs {
  /** The runtime ConfigMap's data. */
  readonly configMap: Readonly<Record<string, string>>;
  /**
   * The Secret values the pods read once, at start (the DSN), keyed `<secret>/<key>`; values as stored (base64). Not
   * the TLS files, which the runtime re-reads when the kubelet updates them.
   */
  readonly secrets: Readonly<Record<string, string>>;
}

/** Changes when, and only when, some input changes; independent of key order. */
export function configHash(inputs: ConfigHashInputs): string {
  return digest({ configMap: inputs.configMap, secrets: inputs.secrets });
}

function bind(listener: ListenerName | 'metrics'): string {
  return `0.0.0.0:${LISTENER_PORTS[listener]}`;
}

/** The downward API: a field of the pod itself, resolved by the kubelet when the container starts. */
function podField(name: string, fieldPath: string): EnvVar {
  return { name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath } } };
}

/*
 * Shutdown. On SIGTERM the runtime reports not ready and hands its partitions over at once, keeps its listeners open
 * for the shutdown delay (forwarding to the new owners) while the endpoints controller and every kube-proxy drop the
 * pod, then drains in-flight requests for up to RUNTIME_DRAIN_SECONDS and exits. The delay is the runtime's own
 * rather than a preStop sleep: a preStop hook would hold back SIGTERM, and with it the handover, for its whole length
 * (and the distroless image has no `sleep` to run).
 */

/** The runtime's cap on the drain after the delay (DRAIN_TIMEOUT_MS in runtime/src/main.ts). */
export const RUNTIME_DRAIN_SECONDS = 30;
/** Beyond the drain: closing the pool and flushing logs, and slack for a slow node. */
export const EXIT_MARGIN_SECONDS = 10;
/** A grace period too short for delay + drain shortens the delay first, so that the drain keeps at least this. */
export const MIN_DRAIN_SECONDS = 10;

export interface ShutdownTiming {
  /** terminationGracePeriodSeconds of the pods. */
  readonly graceSeconds: number;
  /** RATCHET_SHUTDOWN_DELAY, in seconds. */
  readonly delaySeconds: number;
}

/**
 * The grace period is the user's (pod.terminationGracePeriodSeconds, else drainTimeout) or, by default, delay +
 * drain + exit margin. A user's grace period is kept even when shorter than that; the delay is then cut to
 * `grace - MIN_DRAIN_SECONDS` (never below 0) so that SIGKILL does not land in the delay, before the drain began.
 */
export function shutdownTiming(cluster: Cluster): ShutdownTiming {
  const delay = shutdownDelayOf(cluster);
  const drainTimeout = cluster.spec.drainTimeout;
  const given =
    cluster.spec.pod?.terminationGracePeriodSeconds ??
    (drainTimeout === undefined ? undefined : durationSeconds(drainTimeout));
  if (given === undefined) {
    return { graceSeconds: delay + RUNTIME_DRAIN_SECONDS + EXIT_MARGIN_SECONDS, delaySeconds: delay };
  }
  return { graceSeconds: given, delaySeconds: Math.min(delay, Math.max(0, given - MIN_DRAIN_SECONDS)) };
}

/** The environment the operator owns; user variables of the same names are dropped. */
export function operatorEnv(cluster: Cluster): EnvVar[] {
  const db = databaseSecret(cluster);
  const env: EnvVar[] = [
    { name: 'RATCHET_CLUSTER_NAME', value: cluster.metadata.name },
    // The member and lease-holder name: unique among live pods and the same for a pod's whole life, so a restarted
    // container takes its own leases back at once.
    podField('RATCHET_NODE_NAME', 'metadata.name'),
    // Where peers forward requests for partitions this pod owns: the pod itself, never a Service in front of several.
    podField('RATCHET_ADVERTISED_ADDRESS', 'status.podIP'),
    { name: 'RATCHET_SHUTDOWN_DELAY', value: `${shutdownTiming(cluster).delaySeconds}s` },
    { name: 'RATCHET_DATABASE_URL', valueFrom: { secretKeyRef: { name: db.secretName, key: db.key } } },
    {
      name: 'RATCHET_DATABASE_POOL_SIZE',
      value: String(cluster.spec.database.maxConnections ?? DEFAULT_POOL_SIZE),
    },
    { name: 'RATCHET_INGRESS_BIND', value: bind('ingress') },
    { name: 'RATCHET_ADMIN_BIND', value: bind('admin') },
    { name: 'RATCHET_INTROSPECTION_BIND', value: bind('introspection') },
    { name: 'RATCHET_OBSERVABILITY_BIND', value: bind('observability') },
    { name: 'RATCHET_METRICS_BIND', value: bind('metrics') },
    { name: 'RATCHET_DATA_DIR', value: DATA_DIR },
    { name: 'RATCHET_CONFIG', value: `${CONFIG_DIR}/${CONFIG_FILE_KEY}` },
  ];
  const obs = cluster.spec.observability;
  if (obs?.store !== undefined) env.push({ name: 'RATCHET_OBSERVABILITY_STORE', value: obs.store ? 'on' : 'off' });
  if (obs?.retention !== undefined) env.push({ name: 'RATCHET_OBSERVABILITY_RETENTION', value: obs.retention });
  if (obs?.maxSize !== undefined) env.push({ name: 'RATCHET_OBSERVABILITY_MAX_SIZE', value: obs.maxSize });
  if (obs?.logLevel !== undefined) env.push({ name: 'RATCHET_OBSERVABILITY_LOG_LEVEL', value: obs.logLevel });
  if (authEnabled(cluster)) env.push({ name: 'RATCHET_AUTH_KEYS_FILE', value: `${CONFIG_DIR}/${AUTH_KEYS_FILE_KEY}` });
  env.push(...tlsEnv(cluster));
  return env;
}

/** Operator variables first (user values may refer to them as `$(RATCHET_…)`), then the user's other ones. */
function mergeEnv(cluster: Cluster): EnvVar[] {
  const own = operatorEnv(cluster);
  const owned = new Set(own.map((e) => e.name));
  const user = (cluster.spec.pod?.env ?? []) as EnvVar[];
  return [...own, ...user.filter((e) => !owned.has(e.name)).map((e) => ({ ...e }))];
}

/** User entries of a list keyed by name, minus names the operator uses (the operator's win). */
function userNamed<T extends { name: string }>(items: readonly Json[] | undefined, reserved: ReadonlySet<string>): T[] {
  return (items ?? []).filter((i) => !reserved.has(String(i['name']))).map((i) => ({ ...i }) as unknown as T);
}

const CONTAINER_PORTS: ContainerPort[] = [...LISTENERS, 'metrics' as const].map((l) => ({
  name: l,
  containerPort: LISTENER_PORTS[l],
  protocol: 'TCP',
}));

function httpProbe(path: string, periodSeconds: number, failureThreshold: number): Probe {
  return { httpGet: { path, port: LISTENER_PORTS.metrics }, periodSeconds, timeoutSeconds: 2, failureThreshold };
}

/**
 * Probes on the metrics listener, which opens only once the runtime has migrated the database and started.
 *
 * Readiness every 2 s: a new pod is seen ready within 2 s of joining the cluster, and that is what paces each step of
 * a rolling update. A pod leaves the Services only after three misses (at least 4 s of failing): /ready also fails
 * on every pod at once while a crashed pod's partitions wait for their leases to run out and a new owner to take
 * them, and pulling all pods from the Services then would turn the runtime's wait for the owner into refused
 * connections. A terminating pod does not wait for its probe: the endpoints controller drops it on deletion.
 */
export const PROBES = {
  readiness: httpProbe('/ready', 2, 3),
  // A minute of failures before a restart: /health only catches a wedged process, and a restart costs a handover.
  liveness: httpProbe('/health', 10, 6),
  // Up to five minutes for the first start (schema migrations of a large database) before liveness takes over.
  startup: httpProbe('/health', 2, 150),
} as const;

export const DEFAULT_POD_SECURITY_CONTEXT: Json = {
  runAsNonRoot: true,
  runAsUser: RUNTIME_UID,
  runAsGroup: RUNTIME_UID,
  fsGroup: RUNTIME_UID,
  seccompProfile: { type: 'RuntimeDefault' },
};

export const DEFAULT_CONTAINER_SECURITY_CONTEXT: Json = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
};

function volumes(cluster: Cluster): Volume[] {
  const list: Volume[] = [
    { name: VOLUMES.config, configMap: { name: clusterNames.config(cluster.metadata.name) } },
    { name: VOLUMES.tmp, emptyDir: {} },
    { name: VOLUMES.data, emptyDir: {} },
  ];
  return [...list, ...tlsVolumes(cluster), ...userNamed<Volume>(cluster.spec.pod?.extraVolumes, OWNED_VOLUMES)];
}

function volumeMounts(cluster: Cluster): VolumeMount[] {
  const mounts: VolumeMount[] = [
    { name: VOLUMES.config, mountPath: CONFIG_DIR, readOnly: true },
    { name: VOLUMES.tmp, mountPath: '/tmp' },
    { name: VOLUMES.data, mountPath: DATA_DIR },
  ];
  return [
    ...mounts,
    ...tlsVolumeMounts(cluster),
    ...userNamed<VolumeMount>(cluster.spec.pod?.extraVolumeMounts, OWNED_VOLUMES),
  ];
}

function runtimeContainer(cluster: Cluster): Container {
  const pod = cluster.spec.pod;
  const container: Container = { name: RUNTIME_CONTAINER, image: cluster.spec.image };
  if (cluster.spec.imagePullPolicy !== undefined) container.imagePullPolicy = cluster.spec.imagePullPolicy;
  container.ports = CONTAINER_PORTS.map((p) => ({ ...p }));
  container.env = mergeEnv(cluster);
  if (pod?.envFrom !== undefined && pod.envFrom.length > 0) container.envFrom = pod.envFrom.map((e) => ({ ...e }));
  if (pod?.resources !== undefined) container.resources = { ...pod.resources };
  container.volumeMounts = volumeMounts(cluster);
  container.readinessProbe = { ...PROBES.readiness };
  container.livenessProbe = { ...PROBES.liveness };
  container.startupProbe = { ...PROBES.startup };
  container.securityContext = { ...DEFAULT_CONTAINER_SECURITY_CONTEXT, ...pod?.securityContext };
  return container;
}

/** Whole seconds of a `30s` / `5m` / `1h30m` / `500ms` duration, rounded up. */
export function durationSeconds(text: string): number {
  const units: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };
  let total = 0;
  for (const match of text.matchAll(/([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g)) {
    total += Number(match[1]) * (units[match[2]!] ?? 0);
  }
  return Math.ceil(total);
}

function podSpec(cluster: Cluster): PodSpec {
  const pod = cluster.spec.pod;
  const spec: PodSpec = {
    containers: [runtimeContainer(cluster), ...userNamed<Container>(pod?.sidecars, new Set([RUNTIME_CONTAINER]))],
    volumes: volumes(cluster),
    securityContext: { ...DEFAULT_POD_SECURITY_CONTEXT, ...pod?.podSecurityContext },
    // The runtime never calls the Kubernetes API; cloud identities (IRSA) use their own projected token.
    automountServiceAccountToken: false,
    // A namespace with many Services would otherwise inject hundreds of variables, some named like RATCHET_*.
    enableServiceLinks: false,
  };
  const sa = serviceAccountName(cluster);
  if (sa !== undefined) spec.serviceAccountName = sa;
  if (cluster.spec.imagePullSecrets !== undefined && cluster.spec.imagePullSecrets.length > 0) {
    spec.imagePullSecrets = cluster.spec.imagePullSecrets.map((s) => ({ ...s }));
  }
  if (pod?.nodeSelector !== undefined) spec.nodeSelector = { ...pod.nodeSelector };
  if (pod?.tolerations !== undefined) spec.tolerations = pod.tolerations.map((t) => ({ ...t }));
  if (pod?.affinity !== undefined) spec.affinity = { ...pod.affinity };
  if (pod?.topologySpreadConstraints !== undefined) {
    spec.topologySpreadConstraints = pod.topologySpreadConstraints.map((t) => ({ ...t }));
  }
  if (pod?.priorityClassName !== undefined) spec.priorityClassName = pod.priorityClassName;
  spec.terminationGracePeriodSeconds = shutdownTiming(cluster).graceSeconds;
  return spec;
}

/** SERVICE_ACCOUNT_HASH_ANNOTATION's value: undefined unless the operator creates the ServiceAccount, with annotations. */
export function serviceAccountHash(cluster: Cluster): string | undefined {
  const sa = cluster.spec.serviceAccount;
  if (!(sa?.create ?? true)) return undefined;
  const annotations = sa?.annotations ?? {};
  return Object.keys(annotations).length === 0 ? undefined : digest(annotations);
}

export interface RuntimeDeploymentInputs {
  /** configHash(…) of the ConfigMap data and Secret values the pods read. */
  readonly configHash: string;
}

export function buildRuntimeDeployment(cluster: Cluster, inputs: RuntimeDeploymentInputs): DeploymentObject {
  const name = cluster.metadata.name;
  const pod = cluster.spec.pod;
  const saHash = serviceAccountHash(cluster);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: childMeta(cluster, clusterNames.runtime(name)),
    spec: {
      replicas: replicasOf(cluster),
      revisionHistoryLimit: REVISION_HISTORY_LIMIT,
      selector: { matchLabels: selectorLabels(name) },
      strategy: { type: STRATEGY.type, rollingUpdate: { ...STRATEGY.rollingUpdate } },
      template: {
        metadata: {
          labels: { ...pod?.labels, ...clusterLabels(name) },
          annotations: {
            ...pod?.annotations,
            [CONFIG_HASH_ANNOTATION]: inputs.configHash,
            ...(saHash === undefined ? {} : { [SERVICE_ACCOUNT_HASH_ANNOTATION]: saHash }),
          },
        },
        spec: podSpec(cluster),
      },
    },
  };
}
