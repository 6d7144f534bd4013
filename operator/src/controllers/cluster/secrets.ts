import type { Cluster } from '../../api/v1alpha1/index.ts';
import type { KubeObject } from '../../kube/types.ts';
import { namespaceOf } from '../../specs/meta.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';

/** A Cluster as the Kube port returns it (the API type has no index signature of its own). */
export type ClusterObject = Cluster & KubeObject;

/** A Secret as read through the Kube port: `data` holds base64 values. */
export interface SecretData extends KubeObject {
  data?: Record<string, string>;
}

/** Why the runtime pods cannot be built or the cluster cannot become ready, in a condition's words. */
export interface Blocker {
  /** CamelCase, stable: what alerts and scripts match on. */
  readonly reason: string;
  readonly message: string;
  /** Nothing will change until someone edits a spec or a Secret: kstatus' Stalled. */
  readonly stalled: boolean;
}

export function getSecret(ctx: ReconcileContext, cluster: Cluster, name: string): Promise<SecretData | undefined> {
  return ctx.kube.get<SecretData>({ apiVersion: 'v1', kind: 'Secret', namespace: namespaceOf(cluster), name });
}

/** The value of one key as stored (base64), or undefined when the key is absent. */
export function rawValue(secret: SecretData | undefined, key: string): string | undefined {
  const value = secret?.data?.[key];
  return typeof value === 'string' ? value : undefined;
}

/** The decoded text of one key, or undefined when the key is absent. */
export function textValue(secret: SecretData | undefined, key: string): string | undefined {
  const raw = rawValue(secret, key);
  return raw === undefined ? undefined : Buffer.from(raw, 'base64').toString('utf8');
}
