import { LISTENERS } from '../api/v1alpha1/cluster.ts';
import type { Cluster } from '../api/v1alpha1/index.ts';
import { clusterNames } from './names.ts';
import { serviceAccountName, serviceEnabled } from './settings.ts';

/** A kind of child object, as the Kube port names it. */
export interface ChildKind {
  readonly apiVersion: string;
  readonly kind: string;
}

export const CHILD_KINDS = {
  configMap: { apiVersion: 'v1', kind: 'ConfigMap' },
  secret: { apiVersion: 'v1', kind: 'Secret' },
  serviceAccount: { apiVersion: 'v1', kind: 'ServiceAccount' },
  service: { apiVersion: 'v1', kind: 'Service' },
  deployment: { apiVersion: 'apps/v1', kind: 'Deployment' },
  statefulSet: { apiVersion: 'apps/v1', kind: 'StatefulSet' },
  podDisruptionBudget: { apiVersion: 'policy/v1', kind: 'PodDisruptionBudget' },
  networkPolicy: { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
} as const satisfies Record<string, ChildKind>;

/** Kinds whose objects a spec change can make unwanted (the others always exist under fixed names). */
export const PRUNABLE_KINDS: readonly ChildKind[] = [
  CHILD_KINDS.service,
  CHILD_KINDS.networkPolicy,
  CHILD_KINDS.statefulSet,
  CHILD_KINDS.serviceAccount,
  CHILD_KINDS.secret,
];

export function childKey(kind: ChildKind, name: string): string {
  return `${kind.apiVersion}/${kind.kind}/${name}`;
}

/**
 * Every child the Cluster should own now, as childKey()s. Owned objects outside this set are deleted. The operator's
 * signing key and token stay wanted even while auth is off or the user brings their own: deleting key material would
 * invalidate every token handed out, for good, should the spec be switched back.
 */
export function wantedChildren(cluster: Cluster): Set<string> {
  const name = cluster.metadata.name;
  const k = CHILD_KINDS;
  const wanted = new Set<string>([
    childKey(k.configMap, clusterNames.config(name)),
    childKey(k.deployment, clusterNames.runtime(name)),
    childKey(k.podDisruptionBudget, clusterNames.runtime(name)),
    childKey(k.service, clusterNames.metricsService(name)),
  ]);
  for (const listener of LISTENERS) {
    if (serviceEnabled(cluster, listener)) wanted.add(childKey(k.service, clusterNames.service(name, listener)));
  }
  wanted.add(childKey(k.secret, clusterNames.signingKey(name)));
  wanted.add(childKey(k.secret, clusterNames.token(name)));
  if (cluster.spec.serviceAccount?.create ?? true) {
    const sa = serviceAccountName(cluster);
    if (sa !== undefined) wanted.add(childKey(k.serviceAccount, sa));
  }
  if (cluster.spec.networkPolicy?.enabled ?? false) {
    wanted.add(childKey(k.networkPolicy, clusterNames.networkPolicy(name)));
  }
  if (cluster.spec.database.bundled !== undefined) {
    for (const kind of [k.statefulSet, k.service, k.secret]) wanted.add(childKey(kind, clusterNames.postgres(name)));
  }
  return wanted;
}
