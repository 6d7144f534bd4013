import type { Cluster } from '../api/v1alpha1/index.ts';
import { childMeta } from './meta.ts';
import type { ServiceAccountObject } from './objects.ts';
import { serviceAccountName } from './settings.ts';

/**
 * The runtime pods' ServiceAccount, when `serviceAccount.create` (default true). Its annotations are how a pod gets a
 * cloud identity (IRSA's `eks.amazonaws.com/role-arn`, GKE workload identity) for the Lambda invoker. The runtime
 * never calls the Kubernetes API, so no token is mounted.
 */
export function buildServiceAccount(cluster: Cluster): ServiceAccountObject | undefined {
  if (!(cluster.spec.serviceAccount?.create ?? true)) return undefined;
  const name = serviceAccountName(cluster);
  if (name === undefined) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: childMeta(cluster, name, { annotations: cluster.spec.serviceAccount?.annotations }),
    automountServiceAccountToken: false,
  };
}
