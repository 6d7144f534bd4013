import { outputFromJournal } from './lifecycle/complete.ts';
import type { ErrorCode } from '../errors/codes.ts';
import type { AttemptHandle } from '../invoker/invoker.ts';
import type { Effect } from '../invoker/effects.ts';
import { treeDepth } from './awaiting.ts';
import * as codec from './codec.ts';
import { type InvocationCtx } from './invocation.ts';
import { type PartitionProcessor, type EngineFailure } from './processor.ts';

/**
 * Reads an attempt's effects until it ends, each acted on in stream order while the attempt is still the invocation's
 * current one (an attempt given up by the engine — paused, completed, dropped — has nothing more to say).
 */
export async function runEffects(p: PartitionProcessor, ctx: InvocationCtx, attempt: AttemptHandle): Promise<void> {
  for await (const effect of attempt.effects) {
    if (ctx.attempt !== attempt || ctx.poisoned) return;
    onEffect(p, ctx, attempt, effect);
  }
}

function onEffect(p: PartitionProcessor, ctx: InvocationCtx, attempt: AttemptHandle, effect: Effect): void {
  if (effect.kind === 'failed') {
    ctx.attemptEnded();
    p.roles.handleFailure(ctx, effect.error);
    return;
  }
  if (effect.kind === 'end') {
    ctx.attemptEnded();
    onEnd(p, ctx);
    return;
  }
  const frame = effect.frame;
  try {
    switch (effect.kind) {
      case 'command':
        p.roles.onCommand(ctx, attempt, frame);
        return;
      case 'proposeRun':
        p.roles.onRunProposal(ctx, attempt, frame);
        return;
      case 'awaitingOn': {
        const tree = codec.awaitingOn(frame.payload);
        if (treeDepth(tree) > p.options.maxAwaitedFutureDepth) {
          attempt.markTerminal();
          ctx.attemptEnded();
          p.roles.pauseOnFailure(ctx, {
            code: 500,
            rtCode: 'RT0025',
            message: `awaited future depth exceeds ${p.options.maxAwaitedFutureDepth}`,
          });
        }
        return;
      }
      case 'suspended':
        ctx.attemptEnded();
        void p.roles.onSuspension(ctx, codec.suspension(frame.payload));
        return;
      case 'error':
        ctx.attemptEnded();
        onSdkError(p, ctx, codec.error(frame.payload));
        return;
    }
  } catch (err) {
    protocolViolation(p, ctx, attempt, `bad message 0x${frame.type.toString(16)}: ${(err as Error).message}`);
  }
}

export function protocolViolation(
  p: PartitionProcessor,
  ctx: InvocationCtx,
  attempt: AttemptHandle,
  message: string,
): void {
  attempt.abort();
  if (ctx.attempt === attempt) ctx.attemptEnded();
  p.roles.handleFailure(ctx, { code: 571, rtCode: 'RT0012', message });
}

export function onSdkError(p: PartitionProcessor, ctx: InvocationCtx, e: ReturnType<typeof codec.error>): void {
  const rtCode: ErrorCode =
    e.code === 570 ? 'RT0016' : e.code === 571 ? 'RT0012' : e.code === 573 ? 'RT0012' : 'RT0007';
  const failure: EngineFailure = {
    code: e.code,
    message: e.message,
    rtCode,
    ...(e.nextRetryDelayMs === undefined ? {} : { sdkRetryDelayMs: e.nextRetryDelayMs }),
    ...(e.stacktrace === '' ? {} : { stacktrace: e.stacktrace }),
    related: e.related,
  };
  if (e.behavior === 'pause') {
    p.roles.pauseOnFailure(ctx, failure);
  } else if (e.behavior === 'fail') {
    void p.roles.complete(ctx, { kind: 'failure', failure: { code: e.code, message: e.message } });
  } else {
    p.roles.handleFailure(ctx, failure);
  }
}

export function onEnd(p: PartitionProcessor, ctx: InvocationCtx): void {
  // The Output may come from an earlier attempt: the SDK replays a journaled Output and sends only End. `ctx.output`
  // is lost when the invocation was reloaded from storage meanwhile, so fall back to the journal, which is the truth.
  const outcome = ctx.output ?? outputFromJournal(ctx.journal);
  if (outcome === undefined) {
    p.roles.handleFailure(ctx, {
      code: 571,
      rtCode: 'RT0012',
      message: 'the deployment sent End without an Output command',
    });
    return;
  }
  void p.roles.complete(ctx, outcome);
}
