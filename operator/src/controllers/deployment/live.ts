import {
  AdminApiError,
  isTransientAdminError,
  type AdminClient,
  type DeploymentResponse,
  type RegisterDeploymentResponse,
  type ServiceMetadata,
} from '../../admin-client/types.ts';
import type { SupersededDeployment } from '../../api/v1alpha1/index.ts';
import { FINALIZERS } from '../../api/v1alpha1/index.ts';
import type { ReconcileContext, ReconcileResult } from '../../reconcile/types.ts';
import { resolveAdminTarget } from '../shared/cluster-target.ts';
import { durationMs } from '../shared/duration.ts';
import { addFinalizer } from '../shared/finalizers.ts';
import { isPaused } from '../shared/paused.ts';
import { StatusDraft, writeFirstSight, writePaused } from '../shared/status.ts';
import {
  CONDITION,
  DEFAULT_GRACE_PERIOD_MS,
  REQUEUE_MS,
  adminErrorMessage,
  deregister,
  otherRegistrations,
  record,
  type Draft,
  type ResolvedOptions,
} from './common.ts';
import { resolveEndpoint, type ResolvedEndpoint } from './endpoint.ts';
import { addSuperseded, isDraining, markDeregistered, stepSuperseded } from './retirement.ts';
import type { DeploymentObject } from '../shared/objects.ts';

/*
 * Reconcile of a live (not deleted) Deployment resource, in a fixed order: pause guard → finalizer → first status →
 * target runtime → endpoint and headers → observe the runtime (deployments, services) → register / update in place →
 * retire superseded versions → Ready (registered AND latest for every service it serves, restate-operator #178).
 */

interface Observed {
  deployments: DeploymentResponse[];
  services: ServiceMetadata[];
}

async function observe(admin: AdminClient): Promise<Observed> {
  const [deployments, services] = await Promise.all([admin.listDeployments(), admin.listServices()]);
  return { deployments, services };
}

const NOT_STALLED = { type: CONDITION.stalled, status: 'False', reason: 'NotStalled', message: '' } as const;

/** Writes what went wrong talking to the runtime, then rethrows so the work queue backs off. */
async function failTransient(draft: Draft, err: AdminApiError, what: string): Promise<never> {
  const message = `${what}: ${adminErrorMessage(err)}`;
  draft.conditions(
    { type: CONDITION.ready, status: 'False', reason: 'AdminAPIError', message },
    { type: CONDITION.reconciling, status: 'True', reason: 'AdminAPIError', message },
    NOT_STALLED,
  );
  await draft.flush();
  throw err;
}

function servicesOf(d: { services: { name: string; revision: number }[] }): { name: string; revision: number }[] {
  return d.services.map((s) => ({ name: s.name, revision: s.revision })).sort((a, b) => a.name.localeCompare(b.name));
}

function recordRegistration(
  draft: Draft,
  ep: ResolvedEndpoint,
  res: RegisterDeploymentResponse,
  now: Date,
  idChanged: boolean,
): void {
  const s = draft.status;
  s.deploymentId = res.id;
  s.endpoint = ep.endpoint;
  s.services = servicesOf(res);
  if (res.sdk_version !== undefined && res.sdk_version !== null) s.sdkVersion = res.sdk_version;
  if (res.min_protocol_version !== undefined && res.max_protocol_version !== undefined) {
    s.protocol = { min: res.min_protocol_version, max: res.max_protocol_version };
  }
  if (idChanged || s.registeredAt === undefined) s.registeredAt = now.toISOString();
  s.headersHash = ep.headersHash;
}

type RegistrationOutcome =
  | { kind: 'ok' }
  /** The runtime refused the registration for a reason only a spec change can fix. */
  | { kind: 'stalled' };

/** Services `id` serves that point at another deployment. */
function notLatestFor(id: string, served: readonly { name: string }[], services: readonly ServiceMetadata[]): string[] {
  const latest = new Map(services.map((s) => [s.name, s.deployment_id]));
  return served.filter((s) => latest.get(s.name) !== id).map((s) => s.name);
}

/**
 * Why the runtime refused a registration, for the Stalled condition: a 4xx other than 408/429, or 501 (the runtime
 * does not implement that kind of endpoint). Only a change of the spec, or of the runtime, makes it answer otherwise,
 * so it is not retried with backoff; a change of the resource or its Cluster (an upgraded runtime) and the periodic
 * resync try again.
 */
function refusal(err: AdminApiError): { reason: string; hint: string } {
  if (err.status === 409 && err.code === 'META0004') {
    return {
      reason: 'EndpointConflict',
      hint:
        ' — the endpoint is already registered with a different manifest; set spec.registration.force: true to ' +
        'overwrite it in place, or serve the new version under a new URI',
    };
  }
  if (err.status === 501) {
    return {
      reason: 'NotImplemented',
      hint:
        ' — this runtime does not implement it; registration is tried again when the Deployment or its Cluster ' +
        'changes (an upgraded runtime image)',
    };
  }
  return { reason: 'RegistrationRejected', hint: '' };
}

async function register(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  draft: Draft,
  admin: AdminClient,
  ep: ResolvedEndpoint,
  observed: Observed,
): Promise<RegistrationOutcome> {
  const now = ctx.now();
  const status = draft.status;
  const previousId = status.deploymentId;
  const previousEndpoint = status.endpoint;
  const previousExists = previousId !== undefined && observed.deployments.some((d) => d.id === previousId);
  const superseded = status.superseded ?? [];
  const registered = new Set(observed.deployments.map((d) => d.id));
  // Back to an endpoint that an earlier version of this resource registered: it is still there, so a plain
  // registration would answer "unchanged" and leave the newer version latest (restate #174/#178).
  const rollback = superseded.find(
    (e) => e.endpoint === ep.endpoint && e.state !== 'Deregistered' && registered.has(e.deploymentId),
  );
  const userForce = dep.spec.registration?.force ?? false;
  let force = userForce || rollback !== undefined;

  let result: { created: boolean; deployment: RegisterDeploymentResponse };
  try {
    result = await admin.registerDeployment({ ...ep.request, force });
    if (!result.created && !force) {
      // 200 "already registered": an existing deployment with this endpoint. If it is not the latest of its
      // services (this resource was rolled back to it, or its status was lost while another version took over),
      // only a forced registration makes it latest again.
      const services = await admin.listServices();
      if (notLatestFor(result.deployment.id, result.deployment.services, services).length > 0) {
        force = true;
        result = await admin.registerDeployment({ ...ep.request, force });
      }
    }
  } catch (err) {
    if (!(err instanceof AdminApiError)) throw err;
    if (isTransientAdminError(err)) return failTransient(draft, err, `registering ${ep.endpoint}`);
    const { reason, hint } = refusal(err);
    const message = `registering ${ep.endpoint}: ${adminErrorMessage(err)}${hint}`;
    const before = draft.condition(CONDITION.stalled);
    draft.conditions(
      { type: CONDITION.registered, status: 'False', reason, message },
      { type: CONDITION.ready, status: 'False', reason, message },
      { type: CONDITION.stalled, status: 'True', reason, message },
      { type: CONDITION.reconciling, status: 'False', reason, message },
    );
    if (before?.status !== 'True' || before.message !== message) {
      await record(ctx, dep, 'Warning', reason, message, 'Register');
    }
    return { kind: 'stalled' };
  }

  const id = result.deployment.id;
  const idChanged = id !== previousId;
  if (idChanged && previousId !== undefined && previousExists && previousEndpoint !== undefined) {
    const { list, dropped } = addSuperseded(superseded, {
      deploymentId: previousId,
      endpoint: previousEndpoint,
      supersededAt: now.toISOString(),
      state: 'Draining',
      pendingInvocations: 0,
    });
    status.superseded = list;
    await record(
      ctx,
      dep,
      'Normal',
      'Superseded',
      `${previousId} (${previousEndpoint}) superseded by ${id}`,
      'Register',
    );
    for (const d of dropped) {
      await record(
        ctx,
        dep,
        'Warning',
        'SupersededDropped',
        `${d.deploymentId} (${d.state}) is no longer tracked: more than ${list.length} superseded versions`,
        'Register',
      );
    }
  }
  if (status.superseded?.some((e) => e.deploymentId === id) === true) {
    status.superseded = status.superseded.filter((e) => e.deploymentId !== id);
  }
  recordRegistration(draft, ep, result.deployment, now, idChanged);
  if (rollback !== undefined || (force && !userForce)) {
    await record(
      ctx,
      dep,
      'Normal',
      'Rollback',
      `re-registered ${ep.endpoint} as ${id} with force so that it is the latest version again`,
      'Register',
    );
  }
  await record(
    ctx,
    dep,
    'Normal',
    'Registered',
    `${ep.endpoint} registered as ${id}${result.created ? '' : ' (already known to the runtime)'}`,
    'Register',
  );
  return { kind: 'ok' };
}

async function updateInPlace(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  draft: Draft,
  admin: AdminClient,
  ep: ResolvedEndpoint,
  id: string,
): Promise<RegistrationOutcome> {
  try {
    await admin.updateDeployment(id, {
      additional_headers: ep.headers,
      ...(ep.assumeRoleArn === undefined ? {} : { assume_role_arn: ep.assumeRoleArn }),
      ...(ep.useHttp11 === undefined ? {} : { use_http_11: ep.useHttp11 }),
    });
  } catch (err) {
    if (!(err instanceof AdminApiError)) throw err;
    // 404: the deployment went between observing and updating; the next pass registers it again.
    if (isTransientAdminError(err) || err.status === 404) return failTransient(draft, err, `updating ${id}`);
    const message = `updating ${id} in place: ${adminErrorMessage(err)}`;
    const before = draft.condition(CONDITION.stalled);
    draft.conditions(
      { type: CONDITION.ready, status: 'False', reason: 'UpdateRejected', message },
      { type: CONDITION.stalled, status: 'True', reason: 'UpdateRejected', message },
      { type: CONDITION.reconciling, status: 'False', reason: 'UpdateRejected', message },
    );
    if (before?.status !== 'True' || before.message !== message) {
      await record(ctx, dep, 'Warning', 'UpdateRejected', message, 'Update');
    }
    return { kind: 'stalled' };
  }
  draft.status.headersHash = ep.headersHash;
  await record(
    ctx,
    dep,
    'Normal',
    'Updated',
    `headers and connection settings of ${id} updated in place (same deployment id)`,
    'Update',
  );
  return { kind: 'ok' };
}

/** Steps every superseded version once: drain accounting, deregistration when due. */
async function retireSuperseded(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  draft: Draft,
  admin: AdminClient,
  observed: Observed,
  options: ResolvedOptions,
): Promise<void> {
  const entries = draft.status.superseded ?? [];
  if (entries.length === 0) return;
  const now = ctx.now();
  const grace = durationMs(dep.spec.retirement?.gracePeriod, DEFAULT_GRACE_PERIOD_MS);
  const byId = new Map(observed.deployments.map((d) => [d.id, d]));
  let held: Map<string, string> | undefined;
  const next: SupersededDeployment[] = [];
  for (const entry of entries) {
    if (entry.state !== 'Deregistered') {
      held ??= await otherRegistrations(ctx, dep);
      const holder = held.get(entry.deploymentId);
      if (holder !== undefined) {
        // Another resource registered the same endpoint and owns this id now; retiring it is not ours to do.
        await record(ctx, dep, 'Normal', 'HandedOver', `${entry.deploymentId} is the registration of ${holder}`);
        continue;
      }
    }
    const exists = byId.has(entry.deploymentId);
    const latestFor = observed.services.filter((s) => s.deployment_id === entry.deploymentId).map((s) => s.name);
    const counts =
      exists && entry.state !== 'Deregistered'
        ? await options.drainProbe(admin, { deploymentId: entry.deploymentId, latestForServices: latestFor })
        : { pinned: 0, unpinned: 0 };
    const step = stepSuperseded(entry, { exists, latestFor, counts }, now, grace);
    let kept = step.entry;
    if (kept === undefined) continue;
    switch (step.transition) {
      case 'Drained':
        await record(
          ctx,
          dep,
          'Normal',
          'Drained',
          `${entry.deploymentId} serves no service as latest and has no unfinished invocation; deregistering after ` +
            `${kept.removeAfter ?? now.toISOString()}`,
          'Drain',
        );
        break;
      case 'Draining':
        await record(
          ctx,
          dep,
          'Normal',
          'Draining',
          `${entry.deploymentId} has work again (${kept.pendingInvocations} unfinished invocation(s)` +
            `${latestFor.length > 0 ? `, latest for ${latestFor.join(', ')}` : ''})`,
          'Drain',
        );
        break;
      case 'Deregistered':
        await record(ctx, dep, 'Normal', 'Deregistered', `${entry.deploymentId} is no longer registered`, 'Drain');
        break;
      case undefined:
        break;
    }
    if (step.deregister !== undefined) {
      try {
        await deregister(admin, step.deregister);
      } catch (err) {
        if (err instanceof AdminApiError) return failTransient(draft, err, `deregistering ${entry.deploymentId}`);
        throw err;
      }
      kept = markDeregistered(kept);
      await record(
        ctx,
        dep,
        'Normal',
        'Deregistered',
        `${entry.deploymentId} (${entry.endpoint}) deregistered after draining`,
        'Deregister',
      );
    }
    next.push(kept);
  }
  draft.status.superseded = next;
}

function drainingConditions(draft: Draft): void {
  const entries = draft.status.superseded ?? [];
  const active = entries.filter(isDraining);
  draft.status.drainingCount = active.length;
  if (active.length === 0) {
    draft.conditions({
      type: CONDITION.draining,
      status: 'False',
      reason: 'NothingToDrain',
      message: 'no superseded version is waiting to be removed',
    });
    return;
  }
  const message = active
    .map((e) =>
      e.state === 'Drained'
        ? `${e.deploymentId} drained, removed after ${e.removeAfter ?? 'now'}`
        : `${e.deploymentId} draining (${e.pendingInvocations} unfinished invocation(s))`,
    )
    .join('; ');
  const anyDraining = active.some((e) => e.state === 'Draining');
  draft.conditions({
    type: CONDITION.draining,
    status: 'True',
    reason: anyDraining ? 'Draining' : 'Drained',
    message,
  });
}

async function readiness(
  ctx: ReconcileContext,
  dep: DeploymentObject,
  draft: Draft,
  observed: Observed,
): Promise<{ latest: boolean }> {
  const id = draft.status.deploymentId;
  if (id === undefined) return { latest: false };
  const served = draft.status.services ?? [];
  const missing = notLatestFor(id, served, observed.services);
  if (missing.length === 0) {
    const names = served.map((s) => s.name).join(', ');
    draft.conditions({
      type: CONDITION.ready,
      status: 'True',
      reason: 'Ready',
      message: `${id} is registered${names === '' ? '' : ` and the latest deployment of ${names}`}`,
    });
    return { latest: true };
  }
  const holders = await otherRegistrations(ctx, dep);
  const byService = new Map(observed.services.map((s) => [s.name, s.deployment_id]));
  const detail = missing
    .map((name) => {
      const other = byService.get(name);
      if (other === undefined) return `${name} (not registered)`;
      const holder = holders.get(other);
      return `${name} (served by ${other}${holder === undefined ? '' : `, Deployment ${holder}`})`;
    })
    .join(', ');
  draft.conditions({
    type: CONDITION.ready,
    status: 'False',
    reason: 'NotLatest',
    message: `${id} is registered but not the latest deployment of: ${detail}`,
  });
  return { latest: false };
}

function requeueAfter(draft: Draft, now: Date, notLatest: boolean): ReconcileResult {
  const entries = draft.status.superseded ?? [];
  let ms: number | undefined;
  if (entries.length > 0) {
    ms = REQUEUE_MS.draining;
    for (const e of entries) {
      if (e.state !== 'Drained' || e.removeAfter === undefined) continue;
      ms = Math.min(ms, Math.max(1_000, Date.parse(e.removeAfter) - now.getTime()));
    }
  }
  if (notLatest) ms = Math.min(ms ?? REQUEUE_MS.notLatest, REQUEUE_MS.notLatest);
  return ms === undefined ? {} : { requeueAfterMs: ms };
}

export async function reconcileLive(
  ctx: ReconcileContext,
  found: DeploymentObject,
  options: ResolvedOptions,
): Promise<ReconcileResult> {
  const namespace = found.metadata.namespace ?? 'default';
  if (isPaused(found)) {
    await writePaused(ctx, found);
    return {};
  }

  // The finalizer comes before anything is registered, so nothing registered can be left behind by a deletion.
  const dep = await addFinalizer(ctx, found, FINALIZERS.deployment);
  if (dep === undefined) return { requeueAfterMs: REQUEUE_MS.conflict };

  const draft = new StatusDraft(ctx, dep);
  await writeFirstSight(draft);

  const target = await resolveAdminTarget(ctx, namespace, dep.spec);
  if (!target.ok) {
    draft.conditions(
      { type: CONDITION.ready, status: 'False', reason: target.reason, message: target.message },
      { type: CONDITION.reconciling, status: 'True', reason: target.reason, message: target.message },
      NOT_STALLED,
    );
    await draft.flush();
    return { requeueAfterMs: target.reason === 'SecretNotFound' ? REQUEUE_MS.secret : REQUEUE_MS.dependency };
  }
  const admin = ctx.admin(target.target);

  const ep = await resolveEndpoint(ctx, dep);
  if (!ep.ok) {
    const stalled = ep.reason === 'InvalidSpec';
    draft.conditions(
      { type: CONDITION.registered, status: 'False', reason: ep.reason, message: ep.message },
      { type: CONDITION.ready, status: 'False', reason: ep.reason, message: ep.message },
      { type: CONDITION.reconciling, status: stalled ? 'False' : 'True', reason: ep.reason, message: ep.message },
      stalled ? { type: CONDITION.stalled, status: 'True', reason: ep.reason, message: ep.message } : NOT_STALLED,
    );
    await draft.flush();
    return stalled ? {} : { requeueAfterMs: REQUEUE_MS.secret };
  }

  let observed: Observed;
  try {
    observed = await observe(admin);
  } catch (err) {
    if (err instanceof AdminApiError) return failTransient(draft, err, 'reading deployments and services');
    throw err;
  }

  const id = draft.status.deploymentId;
  const current = id === undefined ? undefined : observed.deployments.find((d) => d.id === id);
  let outcome: RegistrationOutcome;
  let changed = false;
  if (id === undefined || current === undefined || draft.status.endpoint !== ep.value.endpoint) {
    if (id !== undefined && current === undefined && draft.status.endpoint === ep.value.endpoint) {
      await record(ctx, dep, 'Warning', 'Recreated', `${id} is gone from the runtime; registering again`, 'Register');
    }
    outcome = await register(ctx, dep, draft, admin, ep.value, observed);
    changed = outcome.kind === 'ok';
  } else if (draft.status.headersHash !== ep.value.headersHash) {
    outcome = await updateInPlace(ctx, dep, draft, admin, ep.value, id);
    changed = outcome.kind === 'ok';
    draft.status.services = servicesOf(current);
  } else {
    outcome = { kind: 'ok' };
    draft.status.services = servicesOf(current);
  }
  if (changed) {
    try {
      observed = await observe(admin);
    } catch (err) {
      if (err instanceof AdminApiError) return failTransient(draft, err, 'reading deployments and services');
      throw err;
    }
  }

  await retireSuperseded(ctx, dep, draft, admin, observed, options);
  drainingConditions(draft);
  options.reportDraining(namespace, dep.metadata.name, draft.status.drainingCount ?? 0);

  let notLatest = false;
  if (outcome.kind === 'ok') {
    draft.conditions(
      {
        type: CONDITION.registered,
        status: 'True',
        reason: 'Registered',
        message: `${draft.status.endpoint ?? ep.value.endpoint} is registered as ${draft.status.deploymentId ?? '?'}`,
      },
      NOT_STALLED,
    );
    const { latest } = await readiness(ctx, dep, draft, observed);
    notLatest = !latest;
    draft.conditions({
      type: CONDITION.reconciling,
      status: 'False',
      reason: 'Reconciled',
      message: `generation ${draft.generation} reconciled`,
    });
  }
  await draft.flush();
  return requeueAfter(draft, ctx.now(), notLatest);
}
