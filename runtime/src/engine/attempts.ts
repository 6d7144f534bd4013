import { LOG_FIELDS } from '../telemetry/logger.ts';
import { InvocationId } from '../ids/invocation-id.ts';
import { runEffects } from './effects.ts';
import { deprecatedProtocolMessage, MIN_PROTOCOL_VERSION, negotiateProtocolVersion } from '../protocol/version.ts';
import type { PinChoice } from './types.ts';
import { type StateEntry } from './state-cache.ts';
import { type InvocationCtx } from './invocation.ts';
import { type PartitionProcessor, lockKey } from './processor.ts';
import { invocationWrite } from '../storage/api.ts';

export async function startAttempt(p: PartitionProcessor, ctx: InvocationCtx): Promise<void> {
  if (p.stopped || ctx.starting || (ctx.attempt !== undefined && !ctx.attempt.isFinished)) return;
  if (ctx.status !== 'invoked') return;
  // Flow control: a paused queue or a full limit holds it back; the gate starts it when that changes.
  if (ctx.vqueueId !== null && !p.flow.mayStart(ctx)) return;
  ctx.starting = true;
  // Only the first start after the insert may skip its start update; any other path through here writes one.
  const recorded = ctx.startRecorded;
  ctx.startRecorded = false;
  try {
    await ctx.ensureJournal(() => p.loadEntries(ctx.id));
    // Never hand the deployment an entry that is not durable yet (a run ack before its commit, for example).
    await p.settled(ctx);
    if (p.stopped || ctx.status !== 'invoked' || p.active.get(ctx.id) !== ctx) return;

    const pinned = pinDeployment(p, ctx);
    if ('failure' in pinned) {
      p.roles.handleFailure(ctx, pinned.failure);
      return;
    }
    const { deployment, protocolVersion } = pinned;
    const settings = p.settingsOf(ctx.serviceName, ctx.handlerName);
    const lazy = settings?.enableLazyState ?? false;
    let stateMap: StateEntry[] = [];
    let partialState = true;
    if (ctx.serviceKey !== null && !lazy) {
      stateMap = await eagerState(p, ctx);
      partialState = false;
      // Notifications may have been appended in memory while the state was read: they too must be durable before
      // they are part of Start (otherwise the SDK could act on an entry that a failed commit never stored).
      await p.settled(ctx);
    }
    if (p.stopped || ctx.status !== 'invoked' || p.active.get(ctx.id) !== ctx) return;

    // Nothing awaits from here to the invoker's start: the journal it replays is exactly what is durable.
    const journal = ctx.journal!;
    const attempt = p.deps.invoker.start({
      invocationId: ctx.id,
      rawInvocationId: InvocationId.toRaw(ctx.id as InvocationId),
      serviceName: ctx.serviceName,
      handlerName: ctx.handlerName,
      serviceKey: ctx.serviceKey,
      deployment,
      protocolVersion,
      journal,
      stateMap,
      partialState,
      retryCountSinceLastStoredEntry: ctx.retrySinceAppend,
      durationSinceLastStoredEntryMs: Date.now() - ctx.lastAppendAt,
      randomSeed: ctx.randomSeed,
      inactivityTimeoutMs: settings?.inactivityTimeoutMs,
      abortTimeoutMs: settings?.abortTimeoutMs,
      traceContext: ctx.traceContext,
      scope: ctx.scope,
      limitKey: ctx.limitKey,
    });
    ctx.attemptStarted(attempt, journal.length);
    p.observe(ctx, { kind: 'started', protocolVersion });
    if (journal.length > 1) p.observe(ctx, { kind: 'replayed', entries: journal.length });
    const now = new Date();
    const pinUpdate = ctx.pinUnsaved;
    ctx.pinUnsaved = false;
    if (!recorded || pinUpdate)
      p.write(ctx, [
        invocationWrite.update(
          ctx.id,
          {
            lastStartAt: now,
            lastAttemptDeploymentId: deployment.id,
            runningAt: now,
            ...(pinUpdate ? { deploymentId: deployment.id, protocolVersion } : {}),
          },
          now,
        ),
      ]);
    void runEffects(p, ctx, attempt);
  } catch (err) {
    if (p.deps.storage.isUnavailable(err))
      p.log.warn({ err, [LOG_FIELDS.invocationId]: ctx.id }, 'could not start an attempt');
    else p.log.error({ err, [LOG_FIELDS.invocationId]: ctx.id }, 'could not start an attempt');
    p.poison(ctx);
  } finally {
    ctx.starting = false;
  }
}

/** A keyed invocation's whole state for its Start message: a virtual object's from the cache when it is there. */
export async function eagerState(p: PartitionProcessor, ctx: InvocationCtx): Promise<StateEntry[]> {
  if (ctx.serviceTy !== 'VirtualObject') return p.deps.storage.state.load(ctx.serviceName, ctx.serviceKey!);
  const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
  const cached = p.stateCache.get(lk);
  if (cached !== undefined) {
    p.deps.metrics.stateCacheReads.inc({ result: 'hit' });
    return cached;
  }
  p.deps.metrics.stateCacheReads.inc({ result: 'miss' });
  const read = p.stateCache.beginRead(lk);
  try {
    const state = await p.deps.storage.state.load(ctx.serviceName, ctx.serviceKey!);
    p.stateCache.fill(read, state);
    return state;
  } catch (err) {
    p.stateCache.abandon(read);
    throw err;
  }
}

export function pinDeployment(p: PartitionProcessor, ctx: InvocationCtx): PinChoice {
  const registry = p.deps.registry;
  if (ctx.deploymentId !== null && ctx.protocolVersion !== null) {
    const d = registry.deployment(ctx.deploymentId);
    if (d === undefined) {
      return {
        failure: {
          code: 500,
          rtCode: 'RT0011',
          message: `the deployment ${ctx.deploymentId} pinned by this invocation is gone`,
        },
      };
    }
    if (ctx.protocolVersion < d.minProtocolVersion || ctx.protocolVersion > d.maxProtocolVersion) {
      // The deployment was overwritten in place (force) by an endpoint that no longer speaks the version this
      // invocation started with; an invocation cannot move to another protocol version.
      return {
        failure: {
          code: 500,
          rtCode: 'RT0014',
          message:
            `this invocation started with service protocol V${ctx.protocolVersion}, and its deployment ${d.id} now ` +
            `supports V${d.minProtocolVersion} to V${d.maxProtocolVersion} (it was overwritten): an in-flight ` +
            'invocation cannot be resumed with another protocol version. Serve the old SDK version again under ' +
            'that deployment, or kill the invocation and restart it as new on the current deployment',
        },
      };
    }
    return { deployment: d, protocolVersion: ctx.protocolVersion };
  }
  const pin = choosePin(p, ctx.serviceName);
  if ('failure' in pin) return pin;
  // Persisted with the attempt-start update in startAttempt: one UPDATE per attempt, not two.
  ctx.deploymentId = pin.deployment.id;
  ctx.protocolVersion = pin.protocolVersion;
  ctx.pinUnsaved = true;
  return pin;
}

/** The deployment and protocol version a new attempt of the service pins: its latest deployment's. */
export function choosePin(p: PartitionProcessor, serviceName: string): PinChoice {
  const registry = p.deps.registry;
  const service = registry.service(serviceName);
  const d = service === undefined ? undefined : registry.deployment(service.deploymentId);
  if (d === undefined) {
    return {
      failure: { code: 500, rtCode: 'RT0011', message: `no deployment found for service ${serviceName}` },
    };
  }
  const deprecated = deprecatedProtocolMessage(serviceName, d, p.options.minProtocolVersion ?? MIN_PROTOCOL_VERSION);
  if (deprecated !== undefined) return { failure: { code: 500, rtCode: 'RT0020', message: deprecated } };
  const v = negotiateProtocolVersion(d.minProtocolVersion, d.maxProtocolVersion, p.options.maxProtocolVersion);
  if (v === undefined) {
    return {
      failure: {
        code: 500,
        rtCode: 'RT0013',
        message: `deployment ${d.id} supports none of the service protocol versions 5 to ${p.options.maxProtocolVersion}`,
      },
    };
  }
  return { deployment: d, protocolVersion: v };
}
