import type { Kube } from '../../kube/port.ts';
import type { KubeObject } from '../../kube/types.ts';

export interface Secret extends KubeObject {
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** One key of a Secret, decoded; undefined when the key is absent. */
export function decodedKey(secret: Secret, key: string): string | undefined {
  const encoded = secret.data?.[key];
  if (encoded !== undefined) return Buffer.from(encoded, 'base64').toString('utf8');
  // The API server folds stringData into data; in-memory stores may keep it as written.
  return secret.stringData?.[key];
}

export type SecretKeyValue =
  { readonly found: true; readonly value: string } | { readonly found: false; readonly message: string };

/** One key of a Secret in `namespace`, decoded; a missing Secret or key is an answer naming what is missing. */
export async function readSecretKey(kube: Kube, namespace: string, name: string, key: string): Promise<SecretKeyValue> {
  const secret = await kube.get<Secret>({ apiVersion: 'v1', kind: 'Secret', namespace, name });
  if (secret === undefined) return { found: false, message: `Secret ${namespace}/${name} not found` };
  const value = decodedKey(secret, key);
  if (value !== undefined) return { found: true, value };
  return { found: false, message: `Secret ${namespace}/${name} has no key "${key}"` };
}
