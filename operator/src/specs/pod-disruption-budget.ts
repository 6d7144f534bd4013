import type { Cluster } from '../api/v1alpha1/index.ts';
import { childMeta } from './meta.ts';
import { clusterNames, selectorLabels } from './names.ts';
import type { PodDisruptionBudgetObject } from './objects.ts';

/**
 * Limits voluntary evictions (node drains) of runtime pods. `AlwaysAllow` lets a drain evict pods that are not ready
 * anyway, so a crash-looping runtime never blocks node maintenance.
 */
export function buildPodDisruptionBudget(cluster: Cluster): PodDisruptionBudgetObject {
  const name = cluster.metadata.name;
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: childMeta(cluster, clusterNames.runtime(name)),
    spec: {
      maxUnavailable: cluster.spec.disruption?.maxUnavailable ?? 1,
      selector: { matchLabels: selectorLabels(name) },
      unhealthyPodEvictionPolicy: 'AlwaysAllow',
    },
  };
}
