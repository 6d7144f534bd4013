import { decideRetry, type RetryDecision } from '../../invoker/retry-policy.ts';
import { type InvocationCtx } from '../invocation.ts';
import { type PartitionProcessor, type EngineFailure } from '../processor.ts';
import { invocationWrite, timerWrite } from '../../storage/api.ts';
import type { InvocationUpdate } from '../../storage/rows.ts';

export function handleFailure(p: PartitionProcessor, ctx: InvocationCtx, failure: EngineFailure): void {
  if (ctx.poisoned || ctx.status !== 'invoked') return;
  ctx.retryCount += 1;
  ctx.retrySinceAppend += 1;
  p.deps.metrics.attemptFailures.inc({ code: failure.rtCode });
  const policy = p.settingsOf(ctx.serviceName, ctx.handlerName)?.retryPolicy ?? p.deps.registry.defaults.retryPolicy;
  // A next_retry_delay from the SDK is its own retry loop (ctx.run retry options, RetryableError): the SDK counts
  // those attempts and fails the run terminally when they are exhausted. restate-server takes that delay instead of
  // advancing the invocation retry policy, so such a failure neither spends one of its attempts nor can exhaust it.
  let decision: RetryDecision;
  if (failure.sdkRetryDelayMs !== undefined) {
    decision = { kind: 'retry', delayMs: Math.max(0, failure.sdkRetryDelayMs) };
  } else {
    ctx.policyAttempts += 1;
    decision = decideRetry(policy, ctx.policyAttempts, failure.retryAfterMs);
  }
  if (decision.kind === 'exhausted') {
    if (decision.onMaxAttempts === 'Kill') {
      // Like restate-server: the invocation fails with the error of its last attempt, which the row records too.
      const code = failure.code === 500 || failure.code < 400 ? 500 : failure.code;
      void p.roles.complete(
        ctx,
        { kind: 'failure', failure: { code, message: failure.message } },
        failureColumns(ctx, failure),
      );
    } else {
      p.roles.pauseOnFailure(ctx, failure);
    }
    return;
  }
  const now = new Date();
  const fireAt = new Date(now.getTime() + decision.delayMs);
  const t = {
    partitionId: ctx.partitionId,
    fireAt,
    invocationId: ctx.id,
    kind: 'retry' as const,
    completionId: null,
  };
  const timer = timerWrite.insert(t);
  ctx.mayHaveTimers = true;
  p.write(
    ctx,
    [invocationWrite.update(ctx.id, { ...failureColumns(ctx, failure), nextRetryAt: fireAt }, now), timer],
    () => {
      p.timers.schedule({ ...t, id: timer.id! }, fireAt.getTime());
      p.observe(ctx, {
        kind: 'retrying',
        code: failure.rtCode,
        message: failure.message,
        stacktrace: failure.stacktrace,
        delayMs: decision.delayMs,
      });
    },
  );
}

export function failureColumns(ctx: InvocationCtx, f: EngineFailure): InvocationUpdate {
  return {
    retryCount: ctx.retryCount,
    retryCountSinceAppend: ctx.retrySinceAppend,
    lastFailure: `[${f.rtCode}] ${f.message}`,
    lastFailureCode: f.rtCode,
    lastFailureRelatedCommandIndex: f.related?.index ?? null,
    lastFailureRelatedCommandName: f.related?.name ?? null,
    lastFailureRelatedCommandType: f.related?.type === undefined ? null : String(f.related.type),
  };
}
