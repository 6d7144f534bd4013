import type { Cluster, ClusterSpec } from '../../../../operator/src/api/v1alpha1/index.ts';

export const NAMESPACE = 'apps';
export const OPERATOR_NAMESPACE = 'ratchet-system';
export const UID = '6c0f3c1e-0000-4000-8000-000000000001';

/** A Cluster as read back from the API server (uid, generation), with a DSN Secret as its database by default. */
export function cluster(spec: Partial<ClusterSpec> = {}, name = 'demo'): Cluster {
  return {
    apiVersion: 'ratchet.dev/v1alpha1',
    kind: 'Cluster',
    metadata: { name, namespace: NAMESPACE, uid: UID, generation: 1 },
    spec: { image: 'ghcr.io/example/ratchet:0.1.0', database: { secretRef: { name: 'pg-dsn' } }, ...spec },
  };
}

export function b64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

export function unb64(data: string | undefined): string {
  return Buffer.from(data ?? '', 'base64').toString('utf8');
}
