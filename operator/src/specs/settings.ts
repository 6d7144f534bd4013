import { LISTENERS, LISTENER_PORTS, type ListenerName } from '../api/v1alpha1/cluster.ts';
import type { Cluster } from '../api/v1alpha1/index.ts';
import { namespaceOf } from './meta.ts';
import { clusterNames } from './names.ts';
import { httpScheme, tlsSecretNames } from './tls.ts';

/*
 * A Cluster's spec with its schema defaults resolved. The API server applies `default:` on read, but objects in
 * tests and from older CRD versions may lack them, so every reader goes through these instead of `?? ` at each use.
 */

/** Key of the DSN in the database Secret when the spec names none (CloudNativePG's key too). */
export const DSN_KEY = 'uri';
export const DEFAULT_POOL_SIZE = 20;
export const DEFAULT_POSTGRES_IMAGE = 'postgres:17-alpine';
export const DEFAULT_POSTGRES_STORAGE = '1Gi';
export const DEFAULT_SHUTDOWN_DELAY_SECONDS = 5;
export const DEFAULT_MAX_UNAVAILABLE = 1;

export function replicasOf(cluster: Cluster): number {
  return cluster.spec.replicas ?? 1;
}

/** What the pods are asked for; runtime-deployment.ts's shutdownTiming shortens it to fit the grace period. */
export function shutdownDelayOf(cluster: Cluster): number {
  return cluster.spec.pod?.shutdownDelaySeconds ?? DEFAULT_SHUTDOWN_DELAY_SECONDS;
}

export function authEnabled(cluster: Cluster): boolean {
  return cluster.spec.auth?.enabled ?? true;
}

export function serviceEnabled(cluster: Cluster, listener: ListenerName): boolean {
  return cluster.spec.services?.[listener]?.enabled ?? true;
}

export function enabledListeners(cluster: Cluster): ListenerName[] {
  return LISTENERS.filter((l) => serviceEnabled(cluster, l));
}

/** The ServiceAccount the runtime pods run as; undefined = the namespace's `default`. */
export function serviceAccountName(cluster: Cluster): string | undefined {
  const sa = cluster.spec.serviceAccount;
  if (sa?.create ?? true) return sa?.name ?? clusterNames.runtime(cluster.metadata.name);
  return sa?.name;
}

export type DatabaseKind = 'secretRef' | 'cnpg' | 'bundled';

export interface DatabaseSecret {
  readonly kind: DatabaseKind;
  /** The Secret holding the DSN the runtime gets as RATCHET_DATABASE_URL. */
  readonly secretName: string;
  readonly key: string;
}

/** Where the DSN comes from. The CRD's CEL rule guarantees exactly one source; `secretRef` is the fallback shape. */
export function databaseSecret(cluster: Cluster): DatabaseSecret {
  const db = cluster.spec.database;
  if (db.cnpg !== undefined) {
    return { kind: 'cnpg', secretName: db.cnpg.secretName ?? `${db.cnpg.clusterName}-app`, key: DSN_KEY };
  }
  if (db.bundled !== undefined) {
    return { kind: 'bundled', secretName: clusterNames.postgres(cluster.metadata.name), key: DSN_KEY };
  }
  if (db.secretRef !== undefined) {
    return { kind: 'secretRef', secretName: db.secretRef.name, key: db.secretRef.key ?? DSN_KEY };
  }
  throw new Error('spec.database names no source (exactly one of secretRef, cnpg, bundled)');
}

export interface AuthSecrets {
  readonly signingKey: string;
  readonly token: string;
  /** True when the operator creates (and owns) the Secret; false when the user brought it. */
  readonly keyIsOwn: boolean;
  readonly tokenIsOwn: boolean;
}

/** The Secrets holding the signing key and the access token: the user's own, or the operator's. */
export function authSecrets(cluster: Cluster): AuthSecrets {
  const name = cluster.metadata.name;
  const auth = cluster.spec.auth;
  return {
    signingKey: auth?.signingKeySecret ?? clusterNames.signingKey(name),
    token: auth?.tokenSecret ?? clusterNames.token(name),
    keyIsOwn: auth?.signingKeySecret === undefined,
    tokenIsOwn: auth?.tokenSecret === undefined,
  };
}

/** Every Secret of the namespace a Cluster reads; a change of any of them must reconcile the Cluster. */
export function referencedSecrets(cluster: Cluster): string[] {
  const names = new Set<string>();
  try {
    names.add(databaseSecret(cluster).secretName);
  } catch {
    // A spec without a database source references no DSN Secret; the reconcile reports the problem.
  }
  for (const tls of tlsSecretNames(cluster)) names.add(tls);
  for (const k of cluster.spec.kafka?.clusters ?? []) {
    if (k.propertiesFrom !== undefined) names.add(k.propertiesFrom.name);
  }
  if (authEnabled(cluster)) {
    const auth = authSecrets(cluster);
    names.add(auth.signingKey);
    names.add(auth.token);
  }
  return [...names].sort();
}

export type Endpoints = Partial<Record<ListenerName, string>>;

/**
 * In-cluster URLs of the enabled listener Services (what the Deployment and Subscription controllers call): `https`
 * for an HTTP listener serving TLS.
 */
export function clusterEndpoints(cluster: Cluster): Endpoints {
  const name = cluster.metadata.name;
  const namespace = namespaceOf(cluster);
  const endpoints: Endpoints = {};
  for (const listener of enabledListeners(cluster)) {
    const scheme = listener === 'introspection' ? 'postgres' : httpScheme(cluster, listener);
    const host = `${clusterNames.service(name, listener)}.${namespace}.svc`;
    endpoints[listener] = `${scheme}://${host}:${LISTENER_PORTS[listener]}`;
  }
  return endpoints;
}
