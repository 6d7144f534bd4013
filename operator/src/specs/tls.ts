import { HTTPS_LISTENERS, type HttpsListenerName, type ListenerName } from '../api/v1alpha1/cluster.ts';
import type { Cluster } from '../api/v1alpha1/index.ts';
import type { EnvVar, Volume, VolumeMount } from './objects.ts';

/*
 * spec.tls in the runtime pods. Each referenced Secret is mounted as a whole directory, never through subPath: the
 * kubelet then swaps its files in place when cert-manager renews the certificate, and the runtime re-reads them. So
 * the Secrets' contents stay out of the pods' config hash (a renewal restarts nothing), while their names are in the
 * pod template's volumes (pointing the spec at another Secret rolls the pods).
 */

/** The keys of a kubernetes.io/tls Secret (cert-manager writes all three; ca.crt is optional). */
export const TLS_CERT_KEY = 'tls.crt';
export const TLS_KEY_KEY = 'tls.key';
export const CA_KEY = 'ca.crt';

/** Siblings of CONFIG_DIR, never inside it: a mount point inside a read-only ConfigMap volume cannot be created. */
export const TLS_DIR = '/etc/ratchet/tls';
export const SHARED_TLS_DIR = `${TLS_DIR}/shared`;
export const INTROSPECTION_TLS_DIR = `${TLS_DIR}/introspection`;
export const CLIENT_CA_DIR = `${TLS_DIR}/client-ca`;
/** The client CA's file name in CLIENT_CA_DIR, whatever its key in the Secret. */
export const CLIENT_CA_FILE = 'ca.crt';

export function listenerTlsDir(listener: HttpsListenerName): string {
  return `${TLS_DIR}/${listener}`;
}

/** Pod volumes spec.tls may add; users' extraVolumes of these names are dropped, set or not. */
export const TLS_VOLUMES = {
  shared: 'tls',
  ingress: 'ingress-tls',
  admin: 'admin-tls',
  observability: 'observability-tls',
  introspection: 'introspection-tls',
  clientCa: 'client-ca',
} as const;

/** Group-readable through fsGroup; the private keys are nobody else's business. */
const SECRET_MODE = 0o440;

/** Which Secret serves a listener, and the spec field that names it (for messages). */
export interface ListenerSecret {
  readonly name: string;
  readonly field: string;
}

/** The Secret whose key pair a listener serves with; undefined: plain HTTP (or SQL without TLS). */
export function listenerSecret(cluster: Cluster, listener: ListenerName): ListenerSecret | undefined {
  const tls = cluster.spec.tls;
  const own = tls?.[listener];
  if (own !== undefined) return { name: own.name, field: `spec.tls.${listener}` };
  if (tls?.secretRef !== undefined) return { name: tls.secretRef.name, field: 'spec.tls.secretRef' };
  return undefined;
}

export function listenerHasTls(cluster: Cluster, listener: ListenerName): boolean {
  return listenerSecret(cluster, listener) !== undefined;
}

/** `https` for an HTTP listener serving TLS, else `http`. */
export function httpScheme(cluster: Cluster, listener: HttpsListenerName): 'http' | 'https' {
  return listenerHasTls(cluster, listener) ? 'https' : 'http';
}

/**
 * The listeners that require client certificates: clientAuth's (default all three), those with TLS only (the CRD's
 * CEL rule rejects the others).
 */
export function clientAuthListeners(cluster: Cluster): HttpsListenerName[] {
  const auth = cluster.spec.tls?.clientAuth;
  if (auth === undefined) return [];
  const listed = new Set<string>(auth.listeners ?? HTTPS_LISTENERS);
  return HTTPS_LISTENERS.filter((l) => listed.has(l) && listenerHasTls(cluster, l));
}

/** Every Secret spec.tls names, for the watch that brings the Cluster back when one appears or changes. */
export function tlsSecretNames(cluster: Cluster): string[] {
  const tls = cluster.spec.tls;
  if (tls === undefined) return [];
  const refs = [tls.secretRef, tls.ingress, tls.admin, tls.observability, tls.introspection];
  const names = refs.filter((r) => r !== undefined).map((r) => r.name);
  if (tls.clientAuth !== undefined) {
    names.push(tls.clientAuth.caSecretRef.name);
    if (tls.clientAuth.operatorSecretRef !== undefined) names.push(tls.clientAuth.operatorSecretRef.name);
  }
  return [...new Set(names)];
}

/** One mounted Secret: `items` mounts one key under a fixed file name. */
interface TlsMount {
  readonly volume: string;
  readonly dir: string;
  readonly secretName: string;
  readonly items?: readonly { readonly key: string; readonly path: string }[];
}

function mounts(cluster: Cluster): TlsMount[] {
  const tls = cluster.spec.tls;
  if (tls === undefined) return [];
  const list: TlsMount[] = [];
  if (tls.secretRef !== undefined) {
    list.push({ volume: TLS_VOLUMES.shared, dir: SHARED_TLS_DIR, secretName: tls.secretRef.name });
  }
  for (const listener of HTTPS_LISTENERS) {
    const ref = tls[listener];
    if (ref !== undefined)
      list.push({ volume: TLS_VOLUMES[listener], dir: listenerTlsDir(listener), secretName: ref.name });
  }
  if (tls.introspection !== undefined) {
    list.push({ volume: TLS_VOLUMES.introspection, dir: INTROSPECTION_TLS_DIR, secretName: tls.introspection.name });
  }
  if (clientAuthListeners(cluster).length > 0 && tls.clientAuth !== undefined) {
    const ca = tls.clientAuth.caSecretRef;
    list.push({
      volume: TLS_VOLUMES.clientCa,
      dir: CLIENT_CA_DIR,
      secretName: ca.name,
      items: [{ key: ca.key ?? CA_KEY, path: CLIENT_CA_FILE }],
    });
  }
  return list;
}

export function tlsVolumes(cluster: Cluster): Volume[] {
  return mounts(cluster).map((m) => ({
    name: m.volume,
    secret: {
      secretName: m.secretName,
      defaultMode: SECRET_MODE,
      ...(m.items === undefined ? {} : { items: m.items.map((i) => ({ ...i })) }),
    },
  }));
}

export function tlsVolumeMounts(cluster: Cluster): VolumeMount[] {
  return mounts(cluster).map((m) => ({ name: m.volume, mountPath: m.dir, readOnly: true }));
}

function pair(prefix: string, dir: string): EnvVar[] {
  return [
    { name: `${prefix}_CERT`, value: `${dir}/${TLS_CERT_KEY}` },
    { name: `${prefix}_KEY`, value: `${dir}/${TLS_KEY_KEY}` },
  ];
}

/**
 * RATCHET_TLS_* for secretRef (every listener, introspection included unless it has its own), the per-listener
 * variables for the overrides, and the client CA: shared when it covers all three HTTPS listeners, else per listener.
 */
export function tlsEnv(cluster: Cluster): EnvVar[] {
  const tls = cluster.spec.tls;
  if (tls === undefined) return [];
  const env: EnvVar[] = [];
  if (tls.secretRef !== undefined) env.push(...pair('RATCHET_TLS', SHARED_TLS_DIR));
  for (const listener of HTTPS_LISTENERS) {
    if (tls[listener] !== undefined)
      env.push(...pair(`RATCHET_${listener.toUpperCase()}_TLS`, listenerTlsDir(listener)));
  }
  if (tls.introspection !== undefined) env.push(...pair('RATCHET_INTROSPECTION_TLS', INTROSPECTION_TLS_DIR));
  const verified = clientAuthListeners(cluster);
  const caFile = `${CLIENT_CA_DIR}/${CLIENT_CA_FILE}`;
  if (verified.length === HTTPS_LISTENERS.length) {
    env.push({ name: 'RATCHET_TLS_CLIENT_CA', value: caFile });
  } else {
    for (const listener of verified)
      env.push({ name: `RATCHET_${listener.toUpperCase()}_TLS_CLIENT_CA`, value: caFile });
  }
  return env;
}
