import { MessageType } from '../protocol/message-types.ts';
import { type Stmt } from '../storage/api.ts';
import { inboxInvocation, updateInvocation } from '../storage/pg/tables/invocations.ts';
import { takeLock } from '../storage/pg/tables/locks.ts';
import { deleteTimer, type TimerRow } from '../storage/pg/tables/timers.ts';
import * as codec from './codec.ts';
import { type PartitionProcessor, lockKey } from './processor.ts';

export async function fireTimer(p: PartitionProcessor, t: TimerRow): Promise<void> {
  if (p.stopped) return;
  try {
    const ctx = await p.load(t.invocationId);
    const remove = deleteTimer(t.id);
    if (ctx === undefined || ctx.status === 'completed') {
      await p.submitStmts(t.partitionId, [remove]);
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
        p.write(ctx, [remove, updateInvocation(ctx.id, { nextRetryAt: null }, new Date())]);
        void p.roles.startAttempt(ctx);
        return;
      case 'start': {
        if (ctx.status !== 'scheduled') {
          p.write(ctx, [remove]);
          return;
        }
        const stmts: Stmt[] = [remove];
        if (ctx.isExclusiveKeyed) {
          const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
          if (p.keys.locks.has(lk)) {
            ctx.status = 'inboxed';
            p.keys.queue(lk).push(ctx.id);
            stmts.push(inboxInvocation(ctx.id));
            p.write(ctx, stmts);
            return;
          }
          p.keys.locks.set(lk, ctx.id);
          stmts.push(takeLock(ctx.serviceName, ctx.serviceKey!, ctx.id));
        }
        ctx.status = 'invoked';
        stmts.push(updateInvocation(ctx.id, { status: 'invoked' }, new Date()));
        p.write(ctx, stmts);
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
