import { MessageType } from '../protocol/message-types.ts';
import * as codec from './codec.ts';
import { type PartitionProcessor, lockKey } from './processor.ts';
import { invocationWrite, lockWrite, timerWrite, type Write } from '../storage/api.ts';
import type { TimerRow } from '../storage/rows.ts';
import type { InvocationCtx } from './invocation.ts';

/**
 * Disarms the retry timer of an invocation backing off (it is resumed, paused or ended another way) and returns the
 * writes deleting its rows, so that the backoff of its next failure is the only one armed.
 */
export function disarmRetry(p: PartitionProcessor, ctx: InvocationCtx): Write[] {
  return p.timers
    .removeWhere((t) => t.invocationId === ctx.id && t.kind === 'retry')
    .map((t) => timerWrite.delete(t.id));
}

export async function fireTimer(p: PartitionProcessor, t: TimerRow): Promise<void> {
  if (p.stopped) return;
  try {
    const ctx = await p.load(t.invocationId);
    const remove = timerWrite.delete(t.id);
    if (ctx === undefined || ctx.status === 'completed') {
      await p.submitWrites(t.partitionId, [remove]);
      return;
    }
    switch (t.kind) {
      case 'sleep':
        await p.roles.appendNotification(
          ctx,
          {
            type: MessageType.SleepCompletionNotification,
            raw: codec.notification({ kind: 'completion', id: t.completionId! }, { kind: 'void' }),
            completionId: t.completionId!,
            success: true,
          },
          [remove],
        );
        return;
      case 'retry':
        // A retry timer outlived by a resume, pause or new attempt (armed while its invocation was changing) only goes.
        if (ctx.status !== 'invoked' || ctx.starting || (ctx.attempt !== undefined && !ctx.attempt.isFinished)) {
          p.write(ctx, [remove]);
          return;
        }
        p.write(ctx, [remove, invocationWrite.update(ctx.id, { nextRetryAt: null }, new Date())]);
        void p.roles.startAttempt(ctx);
        return;
      case 'start': {
        if (ctx.status !== 'scheduled') {
          p.write(ctx, [remove]);
          return;
        }
        const writes: Write[] = [remove];
        if (ctx.isExclusiveKeyed) {
          const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
          if (p.keys.locks.has(lk)) {
            ctx.toInboxed();
            p.keys.queue(lk).push(ctx.id);
            writes.push(invocationWrite.inbox(ctx.id));
            p.write(ctx, writes);
            return;
          }
          p.keys.locks.set(lk, ctx.id);
          writes.push(lockWrite.take(ctx.serviceName, ctx.serviceKey!, ctx.id));
        }
        ctx.toInvoked();
        writes.push(invocationWrite.update(ctx.id, { status: 'invoked' }, new Date()));
        p.write(ctx, writes);
        void p.roles.startAttempt(ctx);
        return;
      }
    }
  } catch (err) {
    // Out of the in-memory schedule, still in the table: the partition is recovered, which re-arms it.
    p.log.warn({ err, timer: t.id }, 'timer could not fire; recovering its partition from PostgreSQL');
    p.deps.onSuspect?.([t.partitionId]);
  }
}
