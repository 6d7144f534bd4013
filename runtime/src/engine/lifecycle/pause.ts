import { failureColumns } from './retry.ts';
import { type InvocationId } from '../../ids/invocation-id.ts';
import { InvocationNotRunningError } from '../management-errors.ts';
import { type InvocationCtx } from '../invocation.ts';
import { type PartitionProcessor, type EngineFailure } from '../processor.ts';
import { invocationWrite } from '../../storage/api.ts';

/** Stops a running or suspended invocation until it is resumed. */
export async function pause(p: PartitionProcessor, id: InvocationId): Promise<'paused' | 'already_paused'> {
  const ctx = await p.roles.managed(id);
  // The retry timer of an earlier failure is armed once its write commits.
  await p.settled(ctx);
  if (ctx.status === 'paused') return 'already_paused';
  if (ctx.status !== 'invoked' && ctx.status !== 'suspended') throw new InvocationNotRunningError(id);
  const attempt = ctx.attempt;
  const disarm = p.roles.disarmRetry(ctx);
  ctx.toPaused();
  attempt?.abort();
  p.write(ctx, [
    ...disarm,
    invocationWrite.update(ctx.id, { status: 'paused', awaiting: null, nextRetryAt: null }, new Date()),
  ]);
  await p.settled(ctx);
  if (ctx.poisoned) throw p.unavailable(id, ctx.partitionId);
  p.observe(ctx, { kind: 'paused', by: 'admin', code: undefined, message: undefined });
  return 'paused';
}

export function pauseOnFailure(p: PartitionProcessor, ctx: InvocationCtx, failure: EngineFailure): void {
  ctx.attempt?.abort();
  ctx.toPaused();
  p.write(
    ctx,
    [
      ...p.roles.disarmRetry(ctx),
      invocationWrite.update(
        ctx.id,
        { ...failureColumns(ctx, failure), status: 'paused', nextRetryAt: null },
        new Date(),
      ),
    ],
    () => p.observe(ctx, { kind: 'paused', by: 'failure', code: failure.rtCode, message: failure.message }),
  );
}
