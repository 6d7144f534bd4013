import type { DeletionPolicy, SupersededDeployment } from '../../api/v1alpha1/deployment.ts';
import { totalPending, type DrainCounts } from './drain.ts';

/*
 * The retirement state machine of registered versions, as pure functions of what was observed, so that its safety
 * rules can be checked as properties:
 *
 * - a version with unfinished invocations that could run on it is never deregistered, unless the deletion policy is
 *   Force, or DrainThenForce after its drain timeout;
 * - once its invocations finish (and no service points at it), a superseded version always ends Deregistered;
 * - deleting a resource whose version is the latest of its services but has nothing unfinished never blocks
 *   (restate-operator #172/#173: "is latest" is not "is in use");
 * - Orphan never deregisters anything.
 *
 * Superseded versions: Draining → Drained (not latest for any service, nothing unfinished; removeAfter = drainedAt +
 * gracePeriod) → deregistered after removeAfter → Deregistered (recorded once, then dropped from status). A Drained
 * version that gets work again (a paused invocation resumed, a rollback) goes back to Draining.
 */

export const MAX_SUPERSEDED = 32;

/** What one reconcile saw of one registered version. */
export interface VersionObservation {
  /** Still registered in the runtime. */
  readonly exists: boolean;
  /** Services whose latest deployment it is. */
  readonly latestFor: readonly string[];
  readonly counts: DrainCounts;
}

/** One DELETE /deployments/{id}: `force` first, and whether a refusal of the unforced form (501/409) may be forced. */
export interface DeregisterPlan {
  readonly deploymentId: string;
  readonly force: boolean;
  /** Only when this controller's own count found nothing unfinished. */
  readonly forceOnRefusal: boolean;
}

export type SupersededTransition = 'Draining' | 'Drained' | 'Deregistered';

export interface SupersededStep {
  /** The entry to keep in status; undefined drops it (a Deregistered entry already recorded). */
  readonly entry: SupersededDeployment | undefined;
  readonly deregister?: DeregisterPlan;
  readonly transition?: SupersededTransition;
}

function drained(entry: SupersededDeployment, now: Date, gracePeriodMs: number): SupersededDeployment {
  return {
    ...entry,
    state: 'Drained',
    pendingInvocations: 0,
    drainedAt: now.toISOString(),
    removeAfter: new Date(now.getTime() + gracePeriodMs).toISOString(),
  };
}

function draining(entry: SupersededDeployment, pending: number): SupersededDeployment {
  const { drainedAt: _d, removeAfter: _r, ...rest } = entry;
  return { ...rest, state: 'Draining', pendingInvocations: pending };
}

/** The next state of one superseded version, given what was observed now. */
export function stepSuperseded(
  entry: SupersededDeployment,
  observed: VersionObservation,
  now: Date,
  gracePeriodMs: number,
): SupersededStep {
  if (entry.state === 'Deregistered') return { entry: undefined };
  if (!observed.exists) {
    return { entry: { ...entry, state: 'Deregistered', pendingInvocations: 0 }, transition: 'Deregistered' };
  }
  const pending = totalPending(observed.counts);
  const idle = pending === 0 && observed.latestFor.length === 0;
  if (!idle) {
    const next = draining(entry, pending);
    return entry.state === 'Drained' ? { entry: next, transition: 'Draining' } : { entry: next };
  }
  const next = entry.state === 'Drained' ? entry : drained(entry, now, gracePeriodMs);
  const transition: SupersededTransition | undefined = entry.state === 'Drained' ? undefined : 'Drained';
  const due = next.removeAfter === undefined || Date.parse(next.removeAfter) <= now.getTime();
  const deregister: DeregisterPlan | undefined = due
    ? { deploymentId: entry.deploymentId, force: false, forceOnRefusal: true }
    : undefined;
  return {
    entry: next,
    ...(transition === undefined ? {} : { transition }),
    ...(deregister === undefined ? {} : { deregister }),
  };
}

/** After a successful (or 404) DELETE. */
export function markDeregistered(entry: SupersededDeployment): SupersededDeployment {
  return { ...entry, state: 'Deregistered', pendingInvocations: 0 };
}

/** A new superseded version at the end; the list stays within `max`, giving up finished entries first. */
export function addSuperseded(
  list: readonly SupersededDeployment[],
  entry: SupersededDeployment,
  max: number = MAX_SUPERSEDED,
): { list: SupersededDeployment[]; dropped: SupersededDeployment[] } {
  const next = [...list.filter((e) => e.deploymentId !== entry.deploymentId), entry];
  const dropped: SupersededDeployment[] = [];
  for (const state of ['Deregistered', 'Drained', 'Draining'] as const) {
    while (next.length > max) {
      const i = next.findIndex((e) => e.state === state && e !== entry);
      if (i < 0) break;
      dropped.push(...next.splice(i, 1));
    }
  }
  return { list: next, dropped };
}

/** A version counts as "draining" for status.drainingCount and the Draining condition until it is deregistered. */
export function isDraining(entry: SupersededDeployment): boolean {
  return entry.state === 'Draining' || entry.state === 'Drained';
}

// --------------------------------------------------------------------------------------------------------------------
// Deletion of the resource

export interface DeletionVersion {
  readonly deploymentId: string;
  readonly exists: boolean;
  /** Unfinished invocations that could run on it; not needed (undefined) when the policy forces. */
  readonly counts: DrainCounts | undefined;
}

export interface DeletionInput {
  readonly policy: DeletionPolicy;
  readonly now: Date;
  readonly deletionStartedAt: Date;
  /** For DrainThenForce. */
  readonly drainTimeoutMs: number;
  readonly versions: readonly DeletionVersion[];
}

export interface BlockingVersion {
  readonly deploymentId: string;
  readonly counts: DrainCounts;
}

export interface DeletionPlan {
  readonly deregister: readonly DeregisterPlan[];
  /** Versions that must drain first; the finalizer stays while any is listed. */
  readonly blocked: readonly BlockingVersion[];
  /** Why versions are deregistered whatever runs on them. */
  readonly forced?: 'policy' | 'drainTimeout';
}

export function drainDeadline(input: Pick<DeletionInput, 'deletionStartedAt' | 'drainTimeoutMs'>): Date {
  return new Date(input.deletionStartedAt.getTime() + input.drainTimeoutMs);
}

/** Does the policy need invocation counts at this point (anything but an immediate force or orphan)? */
export function deletionNeedsCounts(input: Omit<DeletionInput, 'versions'>): boolean {
  switch (input.policy) {
    case 'Orphan':
    case 'Force':
      return false;
    case 'Drain':
      return true;
    case 'DrainThenForce':
      return input.now.getTime() < drainDeadline(input).getTime();
  }
}

export function planDeletion(input: DeletionInput): DeletionPlan {
  const existing = input.versions.filter((v) => v.exists);
  if (input.policy === 'Orphan') return { deregister: [], blocked: [] };
  if (!deletionNeedsCounts(input)) {
    return {
      deregister: existing.map((v) => ({ deploymentId: v.deploymentId, force: true, forceOnRefusal: true })),
      blocked: [],
      forced: input.policy === 'Force' ? 'policy' : 'drainTimeout',
    };
  }
  const deregister: DeregisterPlan[] = [];
  const blocked: BlockingVersion[] = [];
  for (const v of existing) {
    // Not measured is not idle: only a count of zero lets a version go.
    if (v.counts === undefined || totalPending(v.counts) > 0) {
      blocked.push({ deploymentId: v.deploymentId, counts: v.counts ?? { pinned: 0, unpinned: 0 } });
    } else {
      deregister.push({ deploymentId: v.deploymentId, force: false, forceOnRefusal: true });
    }
  }
  return { deregister, blocked };
}

/** "dp_a (2 pinned, 1 queued), dp_b (1 pinned)" */
export function describeBlocking(blocked: readonly BlockingVersion[]): string {
  return blocked
    .map((b) => {
      const parts: string[] = [];
      if (b.counts.pinned > 0) parts.push(`${b.counts.pinned} pinned`);
      if (b.counts.unpinned > 0) parts.push(`${b.counts.unpinned} not yet started or between attempts`);
      return `${b.deploymentId} (${parts.length === 0 ? 'not measured' : parts.join(', ')})`;
    })
    .join(', ');
}
