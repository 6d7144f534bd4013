import type { Cluster } from '../api/v1alpha1/index.ts';
import { childMeta } from './meta.ts';
import { clusterNames, selectorLabels } from './names.ts';
import type { PodDisruptionBudgetObject } from './objects.ts';
import { DEFAULT_MAX_UNAVAILABLE, replicasOf } from './settings.ts';

/**
 * Limits voluntary evictions (node drains) of runtime pods. `AlwaysAllow` lets a drain evict pods that are not ready
 * anyway, so a crash-looping runtime never blocks node maintenance.
 *
 * With two or more replicas at most `replicas - 1` may go at once, whatever spec.disruption says: an evicted pod hands
 * its partitions to the replicas left, and a drain that took them all would leave none to hand them to. With one
 * replica the budget of 1 lets a drain evict it (a budget of 0 would block the drain until someone scaled up); the
 * partitions then wait for the replacement pod. A user's 0 is kept: it blocks every voluntary eviction, on purpose.
 */
export function maxUnavailableOf(cluster: Cluster): number {
  const wanted = cluster.spec.disruption?.maxUnavailable ?? DEFAULT_MAX_UNAVAILABLE;
  return Math.min(wanted, Math.max(1, replicasOf(cluster) - 1));
}

export function buildPodDisruptionBudget(cluster: Cluster): PodDisruptionBudgetObject {
  const name = cluster.metadata.name;
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: childMeta(cluster, clusterNames.runtime(name)),
    spec: {
      maxUnavailable: maxUnavailableOf(cluster),
      selector: { matchLabels: selectorLabels(name) },
      unhealthyPodEvictionPolicy: 'AlwaysAllow',
    },
  };
}
