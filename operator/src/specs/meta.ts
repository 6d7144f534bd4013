import { createHash } from 'node:crypto';
import { API_VERSION, GROUP, type Cluster } from '../api/v1alpha1/index.ts';
import type { ObjectMeta, OwnerReference } from '../kube/types.ts';
import { clusterLabels } from './names.ts';

/** Pod template annotation whose change rolls the runtime pods: config and every Secret value the pods read. */
export const CONFIG_HASH_ANNOTATION = `${GROUP}/config-hash`;
/**
 * Pod template annotation: digest of the annotations of the ServiceAccount the operator creates. The admission
 * webhooks that give pods a cloud identity (IRSA's `eks.amazonaws.com/role-arn`) read them only when a pod is created,
 * so a change rolls the pods. Absent when that ServiceAccount has no annotations.
 */
export const SERVICE_ACCOUNT_HASH_ANNOTATION = `${GROUP}/service-account-hash`;
/** On every object of the bundled PostgreSQL, so nobody mistakes it for a production database. */
export const TEST_ONLY_ANNOTATION = `${GROUP}/test-only`;
/** Human-readable purpose of a child object, shown by `kubectl describe`. */
export const DESCRIPTION_ANNOTATION = `${GROUP}/description`;

/** The controlling owner reference every child carries, so garbage collection follows the Cluster. */
export function ownerReference(cluster: Cluster): OwnerReference {
  const uid = cluster.metadata.uid;
  if (uid === undefined || uid === '') {
    // Only objects read back from the API server have a uid; an owner reference without one is rejected.
    throw new Error(`Cluster ${cluster.metadata.name} has no metadata.uid`);
  }
  return {
    apiVersion: API_VERSION,
    kind: 'Cluster',
    name: cluster.metadata.name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function namespaceOf(cluster: Cluster): string {
  const namespace = cluster.metadata.namespace;
  if (namespace === undefined || namespace === '') {
    throw new Error(`Cluster ${cluster.metadata.name} has no namespace (the kind is namespaced)`);
  }
  return namespace;
}

export interface ChildMetaOptions {
  readonly component?: string;
  /** User labels; the operator's labels win on conflicts (selectors and pruning rely on them). */
  readonly labels?: Record<string, string> | undefined;
  readonly annotations?: Record<string, string> | undefined;
}

/** Metadata of a child: same namespace, the Cluster's labels, the controlling owner reference. */
export function childMeta(cluster: Cluster, name: string, options: ChildMetaOptions = {}): ObjectMeta {
  const meta: ObjectMeta = {
    name,
    namespace: namespaceOf(cluster),
    labels: { ...options.labels, ...clusterLabels(cluster.metadata.name, options.component) },
    ownerReferences: [ownerReference(cluster)],
  };
  if (options.annotations !== undefined && Object.keys(options.annotations).length > 0) {
    meta.annotations = { ...options.annotations };
  }
  return meta;
}

export function base64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

/** JSON with object keys sorted at every level: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/** A short, stable digest of a value (64 bits of SHA-256 over its canonical JSON). */
export function digest(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 16);
}
