import { LOG_FIELDS } from '../../telemetry/logger.ts';
import { canResume } from '../awaiting.ts';
import type * as codec from '../codec.ts';
import { type InvocationCtx } from '../invocation.ts';
import { type PartitionProcessor } from '../processor.ts';
import { invocationWrite } from '../../storage/api.ts';
import { rerun } from '../../flow-control/rerun.ts';

export async function onSuspension(
  p: PartitionProcessor,
  ctx: InvocationCtx,
  awaiting: ReturnType<typeof codec.suspension>,
): Promise<void> {
  try {
    await ctx.lastWrite;
  } catch {
    return;
  }
  if (ctx.poisoned || ctx.status !== 'invoked' || ctx.attempt !== undefined) return;
  if (canResume(awaiting, ctx)) {
    // What it waits for is already here (a run proposal in the same response, or a completion that raced the close).
    void p.roles.startAttempt(ctx);
    return;
  }
  ctx.toSuspended(awaiting);
  p.write(
    ctx,
    [invocationWrite.update(ctx.id, { status: 'suspended', awaiting, journalLength: ctx.journal!.length }, new Date())],
    () => p.observe(ctx, { kind: 'suspended' }),
  );
}

export async function recheckSuspended(p: PartitionProcessor, ctx: InvocationCtx): Promise<void> {
  try {
    await ctx.ensureJournal(() => p.loadEntries(ctx.id));
  } catch (err) {
    p.log.warn({ err, [LOG_FIELDS.invocationId]: ctx.id }, 'could not read a suspended invocation');
    p.poison(ctx);
    return;
  }
  if (ctx.status === 'suspended' && ctx.awaiting !== undefined && canResume(ctx.awaiting, ctx)) resumeSuspended(p, ctx);
}

export function resumeSuspended(p: PartitionProcessor, ctx: InvocationCtx): void {
  ctx.toInvoked();
  p.write(ctx, [invocationWrite.update(ctx.id, { status: 'invoked', awaiting: null, ...rerun(ctx) }, new Date())], () =>
    p.observe(ctx, { kind: 'resumed', by: 'notification' }),
  );
  void p.roles.startAttempt(ctx);
}
