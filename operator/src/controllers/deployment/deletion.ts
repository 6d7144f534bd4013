import { AdminApiError, type AdminClient } from '../../admin-client/types.ts';
import { FINALIZERS } from '../../api/v1alpha1/index.ts';
import type { ReconcileContext, ReconcileResult } from '../../reconcile/types.ts';
import { resolveAdminTarget } from '../shared/cluster-target.ts';
import { durationMs } from '../shared/duration.ts';
import { removeFinalizer } from '../shared/finalizers.ts';
import { StatusDraft } from '../shared/status.ts';
import {
  CONDITION,
  DEFAULT_DRAIN_TIMEOUT_MS,
  REQUEUE_MS,
  adminErrorMessage,
  deregister,
  otherRegistrations,
  record,
  type Draft,
  type ResolvedOptions,
} from './common.ts';
import { type DrainCounts } from './drain.ts';
import {
  deletionNeedsCounts,
  describeBlocking,
  drainDeadline,
  markDeregistered,
  planDeletion,
  type DeletionVersion,
} from './retirement.ts';
import type { DeploymentObject } from '../shared/objects.ts';

/*
 * Deletion of a Deployment resource under its deletion policy, behind the `ratchet.dev/deregister` finalizer. It runs
 * whether or not reconciliation is paused (pausing must not block deletion), and it can never block forever:
 *
 * - Orphan releases at once and leaves everything registered;
 * - a referenced Cluster that is gone (or being deleted) takes its runtime with it: release with a Warning;
 * - an admin API that cannot be used (unreachable, 5xx, 404, 401…) for longer than the drain timeout since the
 *   deletion started: release with a Warning;
 * - Drain waits for unfinished invocations only — being the latest deployment of a service is not "in use"
 *   (restate-operator #172/#173) — and says which versions block and with how many invocations;
 * - DrainThenForce forces once the drain timeout is over; Force forces at once;
 * - DELETE answering 404 is done.
 */

async function release(ctx: ReconcileContext, dep: DeploymentObject): Promise<ReconcileResult> {
  const done = await removeFinalizer(ctx, dep, FINALIZERS.deployment);
  return done ? {} : { requeueAfterMs: REQUEUE_MS.conflict };
}

/** The admin API cannot be used: wait (with backoff) until the drain timeout, then let go. */
async function cannotReachRuntime(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  draft: Draft,
  startedAt: Date,
  drainTimeoutMs: number,
  message: string,
  err: unknown,
): Promise<ReconcileResult> {
  const deadline = drainDeadline({ deletionStartedAt: startedAt, drainTimeoutMs });
  if (ctx.now().getTime() >= deadline.getTime()) {
    await record(
      ctx,
      dep,
      'Warning',
      'AdminAPIUnreachable',
      `${message} since before ${deadline.toISOString()} (drain timeout); removing the finalizer without ` +
        `deregistering ${registeredIds(dep).join(', ') || 'anything'}`,
      'Delete',
    );
    return release(ctx, dep);
  }
  draft.conditions(
    { type: CONDITION.ready, status: 'False', reason: 'AdminAPIError', message },
    {
      type: CONDITION.reconciling,
      status: 'True',
      reason: 'Deleting',
      message: `${message}; the finalizer is released at ${deadline.toISOString()} if this persists`,
    },
  );
  await draft.flush();
  throw err instanceof Error ? err : new Error(message);
}

function registeredIds(dep: DeploymentObject): string[] {
  const ids: string[] = [];
  const current = dep.status?.deploymentId;
  if (current !== undefined) ids.push(current);
  for (const e of dep.status?.superseded ?? []) {
    if (e.state !== 'Deregistered' && !ids.includes(e.deploymentId)) ids.push(e.deploymentId);
  }
  return ids;
}

export async function reconcileDeletion(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  options: ResolvedOptions,
): Promise<ReconcileResult> {
  if (!(dep.metadata.finalizers ?? []).includes(FINALIZERS.deployment)) return {};
  const namespace = dep.metadata.namespace ?? 'default';
  options.reportDraining(namespace, dep.metadata.name, 0);
  const policy = dep.spec.retirement?.deletionPolicy ?? 'Drain';
  const draft = new StatusDraft(ctx, dep);
  const startedAtText = draft.status.deletionStartedAt ?? dep.metadata.deletionTimestamp ?? ctx.now().toISOString();
  draft.status.deletionStartedAt = startedAtText;
  const startedAt = new Date(startedAtText);
  const drainTimeoutMs = durationMs(dep.spec.retirement?.drainTimeout, DEFAULT_DRAIN_TIMEOUT_MS);

  const ids = registeredIds(dep);
  if (policy === 'Orphan' || ids.length === 0) {
    if (policy === 'Orphan' && ids.length > 0) {
      await record(
        ctx,
        dep,
        'Normal',
        'Orphaned',
        `deletion policy Orphan: ${ids.join(', ')} stay registered`,
        'Delete',
      );
    }
    return release(ctx, dep);
  }

  const target = await resolveAdminTarget(ctx, namespace, dep.spec, { requireReady: false });
  if (!target.ok) {
    if (target.clusterGone) {
      await record(
        ctx,
        dep,
        'Warning',
        'ClusterGone',
        `${target.message}: removing the finalizer without deregistering ${ids.join(', ')}`,
        'Delete',
      );
      return release(ctx, dep);
    }
    return cannotReachRuntime(ctx, dep, draft, startedAt, drainTimeoutMs, target.message, undefined);
  }
  const admin = ctx.admin(target.target);

  // Another resource registered the same endpoint: its registration is not ours to remove.
  const held = await otherRegistrations(ctx, dep);
  const mine = ids.filter((id) => !held.has(id));

  const base = { policy, now: ctx.now(), deletionStartedAt: startedAt, drainTimeoutMs };
  let versions: DeletionVersion[];
  try {
    versions = await observeVersions(admin, mine, deletionNeedsCounts(base), options);
  } catch (err) {
    if (!(err instanceof AdminApiError)) throw err;
    return cannotReachRuntime(ctx, dep, draft, startedAt, drainTimeoutMs, adminErrorMessage(err), err);
  }
  const plan = planDeletion({ ...base, versions });

  if (plan.forced === 'drainTimeout') {
    await record(
      ctx,
      dep,
      'Warning',
      'DrainTimeout',
      `not drained by ${drainDeadline(base).toISOString()}: deregistering ${plan.deregister.map((p) => p.deploymentId).join(', ')} with force`,
      'Delete',
    );
  }
  for (const p of plan.deregister) {
    let existed: boolean;
    try {
      existed = await deregister(admin, p);
    } catch (err) {
      if (!(err instanceof AdminApiError)) throw err;
      return cannotReachRuntime(ctx, dep, draft, startedAt, drainTimeoutMs, adminErrorMessage(err), err);
    }
    if (draft.status.superseded !== undefined) {
      draft.status.superseded = draft.status.superseded.map((e) =>
        e.deploymentId === p.deploymentId ? markDeregistered(e) : e,
      );
    }
    if (p.deploymentId === draft.status.deploymentId) {
      draft.conditions({
        type: CONDITION.registered,
        status: 'False',
        reason: 'Deregistered',
        message: `${p.deploymentId} deregistered`,
      });
    }
    if (existed) {
      await record(
        ctx,
        dep,
        'Normal',
        'Deregistered',
        `${p.deploymentId} deregistered${p.force ? ' with force' : ''} (deletion policy ${policy})`,
        'Delete',
      );
    }
  }

  if (plan.blocked.length === 0) return release(ctx, dep);

  const deadlineNote =
    policy === 'DrainThenForce' ? `; forced at ${drainDeadline(base).toISOString()}` : '; no timeout (policy Drain)';
  const message =
    `deletion waits until no unfinished invocation can run on ${describeBlocking(plan.blocked)}` + deadlineNote;
  const before = draft.condition(CONDITION.draining);
  draft.conditions(
    { type: CONDITION.ready, status: 'False', reason: 'DeletionBlocked', message },
    { type: CONDITION.draining, status: 'True', reason: 'DeletionBlocked', message },
    { type: CONDITION.reconciling, status: 'True', reason: 'Deleting', message },
  );
  if (before?.reason !== 'DeletionBlocked' || before.message !== message) {
    await record(ctx, dep, 'Warning', 'DeletionBlocked', message, 'Delete');
  }
  await draft.flush();
  const untilDeadline = drainDeadline(base).getTime() - base.now.getTime();
  const wait =
    policy === 'DrainThenForce' ? Math.max(1_000, Math.min(REQUEUE_MS.draining, untilDeadline)) : REQUEUE_MS.draining;
  return { requeueAfterMs: wait };
}

async function observeVersions(
  admin: AdminClient,
  ids: readonly string[],
  needsCounts: boolean,
  options: ResolvedOptions,
): Promise<DeletionVersion[]> {
  if (ids.length === 0) return [];
  const [deployments, services] = await Promise.all([admin.listDeployments(), admin.listServices()]);
  const registered = new Set(deployments.map((d) => d.id));
  const versions: DeletionVersion[] = [];
  for (const deploymentId of ids) {
    const exists = registered.has(deploymentId);
    let counts: DrainCounts | undefined;
    if (exists && needsCounts) {
      const latestForServices = services.filter((s) => s.deployment_id === deploymentId).map((s) => s.name);
      counts = await options.drainProbe(admin, { deploymentId, latestForServices });
    }
    versions.push({ deploymentId, exists, counts });
  }
  return versions;
}
