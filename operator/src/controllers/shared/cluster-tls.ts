import type { ClientTls } from '../../admin-client/types.ts';
import { LISTENERS, type HttpsListenerName } from '../../api/v1alpha1/cluster.ts';
import type { Cluster } from '../../api/v1alpha1/index.ts';
import { CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY, clientAuthListeners, listenerSecret } from '../../specs/tls.ts';
import { decodedKey, type Secret } from './secrets.ts';

/*
 * The Secrets of a Cluster's spec.tls, as the operator needs them: present with every key before the pods are built
 * (cert-manager creates a Certificate's Secret some time after the Certificate, so a missing one is waited for, not
 * Stalled), and as the TLS options of its own calls to the admin and observability listeners.
 */

/** Reads a Secret of the Cluster's namespace; undefined when it does not exist. */
export type SecretReader = (name: string) => Promise<Secret | undefined>;

export interface TlsProblem {
  readonly reason: 'TLSSecretNotFound' | 'TLSSecretIncomplete';
  readonly message: string;
}

interface Requirement {
  readonly name: string;
  readonly field: string;
  readonly keys: readonly string[];
}

const PAIR = [TLS_CERT_KEY, TLS_KEY_KEY] as const;

function and(keys: readonly string[]): string {
  return keys.length <= 1 ? (keys[0] ?? '') : `${keys.slice(0, -1).join(', ')} and ${keys.at(-1)}`;
}

type Keys = { ok: true; values: Record<string, string> } | { ok: false; problem: TlsProblem };

/** The keys, decoded and non-empty, or the problem naming the first that is missing. */
function keysOf(secret: Secret | undefined, req: Requirement): Keys {
  if (secret === undefined) {
    return {
      ok: false,
      problem: {
        reason: 'TLSSecretNotFound',
        message: `waiting for Secret ${req.name} (${req.field}) with ${and(req.keys)}`,
      },
    };
  }
  const values: Record<string, string> = {};
  for (const key of req.keys) {
    const value = decodedKey(secret, key);
    if (value === undefined || value.trim() === '') {
      return {
        ok: false,
        problem: { reason: 'TLSSecretIncomplete', message: `Secret ${req.name} (${req.field}) has no ${key}` },
      };
    }
    values[key] = value;
  }
  return { ok: true, values };
}

/** The Secret the operator presents as its client certificate to a listener that verifies them. */
function operatorClientSecret(cluster: Cluster, listener: HttpsListenerName): Requirement | undefined {
  if (!clientAuthListeners(cluster).includes(listener)) return undefined;
  const own = cluster.spec.tls?.clientAuth?.operatorSecretRef;
  if (own !== undefined) return { name: own.name, field: 'spec.tls.clientAuth.operatorSecretRef', keys: PAIR };
  const served = listenerSecret(cluster, listener);
  return served === undefined ? undefined : { name: served.name, field: served.field, keys: PAIR };
}

/** Every Secret and key the pods and the operator read, one requirement per Secret, in spec order. */
function requirements(cluster: Cluster): Requirement[] {
  const byName = new Map<string, { field: string; keys: Set<string> }>();
  const add = (req: Requirement | undefined): void => {
    if (req === undefined) return;
    const found = byName.get(req.name);
    if (found === undefined) byName.set(req.name, { field: req.field, keys: new Set(req.keys) });
    else for (const key of req.keys) found.keys.add(key);
  };
  for (const listener of LISTENERS) {
    const served = listenerSecret(cluster, listener);
    if (served !== undefined) add({ ...served, keys: PAIR });
  }
  const clientAuth = cluster.spec.tls?.clientAuth;
  if (clientAuth !== undefined && clientAuthListeners(cluster).length > 0) {
    const ca = clientAuth.caSecretRef;
    add({ name: ca.name, field: 'spec.tls.clientAuth.caSecretRef', keys: [ca.key ?? CA_KEY] });
    add(operatorClientSecret(cluster, 'admin'));
    add(operatorClientSecret(cluster, 'observability'));
  }
  return [...byName].map(([name, { field, keys }]) => ({ name, field, keys: [...keys] }));
}

/** The first missing Secret or key of spec.tls, or undefined when everything is there. */
export async function tlsProblem(cluster: Cluster, read: SecretReader): Promise<TlsProblem | undefined> {
  for (const req of requirements(cluster)) {
    const result = keysOf(await read(req.name), req);
    if (!result.ok) return result.problem;
  }
  return undefined;
}

export type ClientTlsResolution =
  { readonly ok: true; readonly tls: ClientTls | undefined } | { readonly ok: false; readonly problem: TlsProblem };

/**
 * How the operator calls a listener of the Cluster: undefined for plain HTTP; else trusting the `ca.crt` of the
 * listener's Secret (the issuing CA, as cert-manager writes it) or, without one, its certificate itself, and presenting
 * a client certificate where clientAuth covers the listener.
 */
export async function clusterClientTls(
  cluster: Cluster,
  listener: HttpsListenerName,
  read: SecretReader,
): Promise<ClientTlsResolution> {
  const served = listenerSecret(cluster, listener);
  if (served === undefined) return { ok: true, tls: undefined };
  const secret = await read(served.name);
  const server = keysOf(secret, { ...served, keys: [TLS_CERT_KEY] });
  if (!server.ok) return server;
  const ca = secret === undefined ? undefined : decodedKey(secret, CA_KEY);
  const anchor = ca === undefined || ca.trim() === '' ? server.values[TLS_CERT_KEY]! : ca;
  const client = operatorClientSecret(cluster, listener);
  if (client === undefined) return { ok: true, tls: { ca: anchor } };
  const pair = keysOf(await read(client.name), client);
  if (!pair.ok) return pair;
  return { ok: true, tls: { ca: anchor, cert: pair.values[TLS_CERT_KEY]!, key: pair.values[TLS_KEY_KEY]! } };
}

/** A reader that fetches each Secret once: a pass reads the same Secret for several listeners. */
export function memoizedReader(read: SecretReader): SecretReader {
  const seen = new Map<string, Promise<Secret | undefined>>();
  return (name) => {
    let found = seen.get(name);
    if (found === undefined) {
      found = read(name);
      seen.set(name, found);
    }
    return found;
  };
}
