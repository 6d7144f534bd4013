import type { V1DeploymentStrategy } from '@kubernetes/client-node';

/*
 * The apps/v1 Deployment controller's decisions, at the level of pods rather than ReplicaSets (the fake kubelet has
 * no ReplicaSet objects: the pods of one template hash are one ReplicaSet, and a ReplicaSet is always at its size).
 * Follows pkg/controller/deployment (rolling.go, recreate.go, util/deployment_util.go) and the ReplicaSet
 * controller's choice of which pods to delete (controller_utils.go, ActivePodsWithRanks):
 * - maxSurge (rounded up) and maxUnavailable (rounded down) resolve against the desired replicas, default 25% each,
 *   and both zero means maxUnavailable 1;
 * - a sync that scales the new pods up does nothing else; otherwise old pods that are not available go first, then
 *   old pods down to `available - (desired - maxUnavailable)`;
 * - terminating pods count for nothing: a pod being deleted is already out of its ReplicaSet's replicas, so the next
 *   new pod may start while an old one is still shutting down;
 * - Recreate deletes every old pod and starts new ones only once the old ones have exited.
 */

export interface PodView {
  readonly templateHash: string;
  /** Deleted (SIGTERM sent), still running. */
  readonly terminating: boolean;
  readonly ready: boolean;
  /** Ready for at least minReadySeconds. */
  readonly available: boolean;
  /** When it last became ready (ms), if ready. */
  readonly readySince: number | undefined;
  readonly restarts: number;
  readonly createdAt: number;
}

export interface RolloutPlan<P extends PodView> {
  /** New pods (current template) to create. */
  readonly create: number;
  /** Pods to delete (graceful termination). */
  readonly terminate: readonly P[];
}

export interface RolloutInput<P extends PodView> {
  readonly desired: number;
  readonly templateHash: string;
  readonly strategy: V1DeploymentStrategy | undefined;
  readonly pods: readonly P[];
}

/** An IntOrString of a rolling update against `total`: `2`, `"2"` or `"25%"`. */
function scaled(value: number | string | undefined, fallback: string, total: number, roundUp: boolean): number {
  const v = value ?? fallback;
  if (typeof v === 'number') return v;
  const percent = /^(\d+)%$/.exec(v);
  if (percent === null) return Number(v);
  const exact = (Number(percent[1]) * total) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

/** maxSurge and maxUnavailable as the controller resolves them (ResolveFenceposts). */
export function resolveFenceposts(
  strategy: V1DeploymentStrategy | undefined,
  desired: number,
): { maxSurge: number; maxUnavailable: number } {
  const ru = strategy?.rollingUpdate;
  const maxSurge = scaled(ru?.maxSurge, '25%', desired, true);
  const maxUnavailable = scaled(ru?.maxUnavailable, '25%', desired, false);
  if (maxSurge === 0 && maxUnavailable === 0) return { maxSurge, maxUnavailable: 1 };
  return { maxSurge, maxUnavailable };
}

/** The ReplicaSet controller's deletion order: not ready first, then ready for less time, more restarts, newer. */
export function deletionOrder<P extends PodView>(pods: readonly P[]): P[] {
  return [...pods].sort(
    (a, b) =>
      Number(a.ready) - Number(b.ready) ||
      (b.readySince ?? 0) - (a.readySince ?? 0) ||
      b.restarts - a.restarts ||
      b.createdAt - a.createdAt,
  );
}

export function planRollout<P extends PodView>(input: RolloutInput<P>): RolloutPlan<P> {
  const { desired, templateHash } = input;
  const active = input.pods.filter((p) => !p.terminating);
  const fresh = active.filter((p) => p.templateHash === templateHash);
  const old = active.filter((p) => p.templateHash !== templateHash);

  if (input.strategy?.type === 'Recreate') {
    if (old.length > 0) return { create: 0, terminate: old };
    // The new pods start only once no old pod is running any more.
    if (input.pods.some((p) => p.terminating && p.templateHash !== templateHash)) return { create: 0, terminate: [] };
    return scale(fresh, desired);
  }

  if (old.length === 0) return scale(fresh, desired);

  const { maxSurge, maxUnavailable } = resolveFenceposts(input.strategy, desired);
  // reconcileNewReplicaSet: a sync that scales up returns at once.
  if (fresh.length > desired) return scale(fresh, desired);
  if (fresh.length < desired) {
    const create = Math.min(desired + maxSurge - active.length, desired - fresh.length);
    if (create > 0) return { create, terminate: [] };
  }

  // reconcileOldReplicaSets
  const minAvailable = desired - maxUnavailable;
  const freshUnavailable = fresh.filter((p) => !p.available).length;
  const maxCleanup = active.length - minAvailable - freshUnavailable;
  if (maxCleanup <= 0) return { create: 0, terminate: [] };
  const terminate = deletionOrder(old.filter((p) => !p.available)).slice(0, maxCleanup);
  const remainingOld = old.filter((p) => !terminate.includes(p));
  const available = active.filter((p) => p.available && !terminate.includes(p)).length;
  const scaleDown = Math.min(available - minAvailable, remainingOld.length);
  if (scaleDown > 0) terminate.push(...deletionOrder(remainingOld).slice(0, scaleDown));
  return { create: 0, terminate };
}

function scale<P extends PodView>(fresh: readonly P[], desired: number): RolloutPlan<P> {
  if (fresh.length < desired) return { create: desired - fresh.length, terminate: [] };
  return { create: 0, terminate: deletionOrder(fresh).slice(0, fresh.length - desired) };
}
