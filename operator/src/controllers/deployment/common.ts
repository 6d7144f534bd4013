import { AdminApiError, type AdminClient } from '../../admin-client/types.ts';
import { API_VERSION, type DeploymentStatus } from '../../api/v1alpha1/index.ts';
import type { EventType } from '../../kube/port.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { setDeploymentsDraining } from '../../telemetry/metrics.ts';
import type { StatusDraft } from '../shared/status.ts';
import type { DrainProbe } from './drain.ts';
import type { DeregisterPlan } from './retirement.ts';
import type { DeploymentObject } from '../shared/objects.ts';

export const CONDITION = {
  ready: 'Ready',
  reconciling: 'Reconciling',
  stalled: 'Stalled',
  registered: 'Registered',
  draining: 'Draining',
} as const;

export const REQUEUE_MS = {
  /** A 409 on the finalizer: the watch event of the change that caused it arrives anyway. */
  conflict: 1_000,
  /** Waiting for the Cluster (its watch also wakes us). */
  dependency: 10_000,
  /** Drain polling (operator.md §2.5: 10–30 s). */
  draining: 15_000,
  /** A missing Secret (its watch also wakes us). */
  secret: 30_000,
  /** Another deployment is latest: nothing here changes that, but a newer registration elsewhere might. */
  notLatest: 60_000,
} as const;

export const DEFAULT_GRACE_PERIOD_MS = 5 * 60_000;
export const DEFAULT_DRAIN_TIMEOUT_MS = 60 * 60_000;

export interface DeploymentControllerOptions {
  /** Counts unfinished invocations of one version; default `sqlDrainProbe` (POST /query). */
  readonly drainProbe?: DrainProbe;
  /** Reports status.drainingCount (default: the `ratchet_operator_deployments_draining` gauge). */
  readonly reportDraining?: (namespace: string, name: string, count: number) => void;
}

export interface ResolvedOptions {
  readonly drainProbe: DrainProbe;
  readonly reportDraining: (namespace: string, name: string, count: number) => void;
}

export function resolveOptions(options: DeploymentControllerOptions, fallbackProbe: DrainProbe): ResolvedOptions {
  return {
    drainProbe: options.drainProbe ?? fallbackProbe,
    reportDraining: options.reportDraining ?? ((ns, name, count) => setDeploymentsDraining(ns, name, count)),
  };
}

export type Draft = StatusDraft<DeploymentStatus>;

export function record(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  type: EventType,
  reason: string,
  note: string,
  action?: string,
): Promise<void> {
  return ctx.events.record(dep, type, reason, note, action);
}

/**
 * DELETE /deployments/{id}: unforced first when the plan says so; restate and Ratchet refuse that form (501), and a
 * runtime may refuse it while work is pinned (409), after which force is used only if our own count found nothing.
 * A 404 counts as done. True when the deployment was there.
 */
export async function deregister(admin: AdminClient, plan: DeregisterPlan): Promise<boolean> {
  try {
    return await admin.deleteDeployment(plan.deploymentId, { force: plan.force });
  } catch (err) {
    const refused = err instanceof AdminApiError && (err.status === 501 || err.status === 409);
    if (!refused || plan.force || !plan.forceOnRefusal) throw err;
    return admin.deleteDeployment(plan.deploymentId, { force: true });
  }
}

/** Same runtime: the same Cluster, or the same external admin URL. */
function sameTarget(a: DeploymentObject, b: DeploymentObject): boolean {
  if (a.spec.clusterRef !== undefined) return a.spec.clusterRef.name === b.spec.clusterRef?.name;
  return a.spec.adminUrl !== undefined && a.spec.adminUrl === b.spec.adminUrl;
}

/**
 * Deployment ids other Deployment resources of the namespace have as their current registration on the same runtime
 * (two resources with the same endpoint share one id): those are never deregistered on this resource's behalf.
 */
export async function otherRegistrations(ctx: ReconcileContext, dep: DeploymentObject): Promise<Map<string, string>> {
  const namespace = dep.metadata.namespace ?? 'default';
  const all = await ctx.kube.list<DeploymentObject>(API_VERSION, 'Deployment', { namespace });
  const held = new Map<string, string>();
  for (const other of all) {
    if (other.metadata.name === dep.metadata.name || !sameTarget(dep, other)) continue;
    const id = other.status?.deploymentId;
    if (id !== undefined) held.set(id, `${namespace}/${other.metadata.name}`);
  }
  return held;
}

export function adminErrorMessage(err: AdminApiError): string {
  const status = err.status === 0 ? 'unreachable' : `HTTP ${err.status}`;
  return `admin API ${status}${err.code === undefined ? '' : ` ${err.code}`}: ${err.message}`;
}
