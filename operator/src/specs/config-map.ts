import { stringify } from 'smol-toml';
import { GROUP, type Cluster } from '../api/v1alpha1/index.ts';
import { canonicalJson, childMeta } from './meta.ts';
import { clusterNames } from './names.ts';
import type { ConfigMapObject } from './objects.ts';
import { authEnabled } from './settings.ts';

/** Keys of the runtime ConfigMap, mounted as files under CONFIG_DIR. */
export const CONFIG_FILE_KEY = 'ratchet.toml';
export const AUTH_KEYS_FILE_KEY = 'auth-keys.pem';

/**
 * Which Kafka clusters this operator created through the admin API, with a digest of the properties it last sent.
 * The admin API redacts credentials when listing, so the digest is how a changed Secret is noticed; the names are how
 * clusters dropped from the spec are told apart from clusters someone else created.
 */
export const KAFKA_CLUSTERS_ANNOTATION = `${GROUP}/kafka-clusters`;

/**
 * Config file keys the operator sets through the environment (which wins over the file anyway). They are removed from
 * the rendered file so it never disagrees with what the pods run with; `node-name` and the advertised address because
 * every pod must have its own (its pod name and IP) or the pods would fight over partition leases and forward to the
 * wrong peer.
 */
export const OPERATOR_OWNED_CONFIG_KEYS: ReadonlySet<string> = new Set([
  'cluster-name',
  'node-name',
  'cluster.advertised-address',
  'cluster.shutdown-delay',
  'data-dir',
  'database.url',
  'database.pool-size',
  'ingress.bind',
  'admin.bind',
  'introspection.bind',
  'observability.bind',
  'metrics.bind',
  // TLS files come from spec.tls only: the Secrets it names are what the operator mounts and waits for.
  'tls.cert',
  'tls.key',
  'tls.client-ca',
  'ingress.tls-cert',
  'ingress.tls-key',
  'ingress.tls-client-ca',
  'admin.tls-cert',
  'admin.tls-key',
  'admin.tls-client-ca',
  'observability.tls-cert',
  'observability.tls-key',
  'observability.tls-client-ca',
  'introspection.tls-cert',
  'introspection.tls-key',
  'auth.keys-file',
]);

/** spec.config cannot be written as TOML (a null in an array, mixed nesting TOML has no form for, …). */
export class ConfigRenderError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'ConfigRenderError';
  }
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Sorted keys (stable output whatever order the API server returned), owned and null keys dropped, empty tables too. */
function normalize(table: Record<string, unknown>, prefix: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(table).sort()) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    const value = table[key];
    if (value === null || value === undefined || OPERATOR_OWNED_CONFIG_KEYS.has(path)) continue;
    if (isTable(value)) {
      const inner = normalize(value, path);
      if (Object.keys(inner).length > 0) out[key] = inner;
    } else {
      out[key] = value;
    }
  }
  return out;
}

const HEADER =
  "# Written by ratchet-operator from the Cluster's spec.config. Listener binds, cluster and node name, advertised\n" +
  '# address, shutdown delay, database, data directory, TLS files and the auth keys file are set through RATCHET_*\n' +
  '# environment variables instead.\n';

/** The runtime's TOML config file from spec.config. Throws ConfigRenderError with the reason. */
export function renderRuntimeConfig(config: Record<string, unknown> | undefined): string {
  const table = normalize(config ?? {}, '');
  try {
    const body = stringify(table).trim();
    return body === '' ? HEADER : `${HEADER}\n${body}\n`;
  } catch (err) {
    throw new ConfigRenderError(`spec.config cannot be written as TOML: ${(err as Error).message}`, { cause: err });
  }
}

export interface ConfigMapInputs {
  /** renderRuntimeConfig(spec.config). */
  readonly toml: string;
  /** SPKI PEM of the public key(s) tokens are verified with; required when auth is enabled. */
  readonly publicKeyPem?: string | undefined;
  /** Digest per Kafka cluster this operator manages; the annotation is written when defined. */
  readonly kafkaClusters?: Readonly<Record<string, string>> | undefined;
}

export function buildConfigMap(cluster: Cluster, inputs: ConfigMapInputs): ConfigMapObject {
  const data: Record<string, string> = { [CONFIG_FILE_KEY]: inputs.toml };
  if (authEnabled(cluster)) {
    if (inputs.publicKeyPem === undefined) {
      throw new Error('auth is enabled but no public key was given for the runtime ConfigMap');
    }
    data[AUTH_KEYS_FILE_KEY] = inputs.publicKeyPem;
  }
  const annotations =
    inputs.kafkaClusters === undefined
      ? undefined
      : { [KAFKA_CLUSTERS_ANNOTATION]: canonicalJson(inputs.kafkaClusters) };
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: childMeta(cluster, clusterNames.config(cluster.metadata.name), { annotations }),
    data,
  };
}

/** The Kafka record of an observed ConfigMap; an absent or unreadable annotation is an empty record. */
export function kafkaClustersOf(
  configMap: { metadata: { annotations?: Record<string, string> } } | undefined,
): Record<string, string> {
  const text = configMap?.metadata.annotations?.[KAFKA_CLUSTERS_ANNOTATION];
  if (text === undefined) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (!isTable(parsed)) return {};
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(parsed)) if (typeof value === 'string') out[name] = value;
    return out;
  } catch {
    // Someone edited the annotation: forgetting the record costs one PATCH per cluster, never a wrong delete.
    return {};
  }
}
