import { MessageType } from '../../protocol/message-types.ts';
import * as codec from '../codec.ts';
import { type InvocationCtx } from '../invocation.ts';
import type { CompletedInvocation, JournalEntry, Outcome } from '../types.ts';
import { type PartitionProcessor, ownWrite, lockKey } from '../processor.ts';
import {
  invocationWrite,
  timerWrite,
  outboxWrite,
  newWriteBatch,
  outboxRowsOf,
  type Write,
} from '../../storage/api.ts';
import type { InvocationUpdate } from '../../storage/rows.ts';

export function complete(
  p: PartitionProcessor,
  ctx: InvocationCtx,
  outcome: Outcome,
  failed: InvocationUpdate = {},
  extra: Write[] = [],
): Promise<boolean> {
  ctx.attempt?.abort();
  ctx.toCompleted();
  const now = new Date();
  // Its own rows, its waiters and its key's lock and inbox (the next holder has the same key): ordered by its
  // partition key. Extra statements may touch anything, so a completion with them is a barrier.
  const op = extra.length === 0 ? ownWrite(ctx) : newWriteBatch(ctx.partitionId);
  const waiters = outboxWrite.resultToWaiters(ctx.id);
  op.writes.push(
    invocationWrite.update(
      ctx.id,
      {
        ...failed,
        status: 'completed',
        completedAt: now,
        ...retentionColumns(ctx, now),
        journalLength: ctx.journal?.length ?? 0,
        nextRetryAt: null,
        awaiting: null,
        ...(outcome.kind === 'success'
          ? { resultKind: 'success' as const, output: outcome.value }
          : {
              resultKind: 'failure' as const,
              failureCode: outcome.failure.code,
              failureMessage: outcome.failure.message,
              failureMetadata: outcome.failure.metadata ?? null,
            }),
      },
      now,
    ),
    // Most invocations never armed a timer: no statement for them.
    ...(ctx.mayHaveTimers ? [timerWrite.deleteOf(ctx.id)] : []),
    waiters,
    ...extra,
  );
  let next: InvocationCtx | undefined;
  if (ctx.isExclusiveKeyed) {
    const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
    if (p.keys.locks.get(lk) === ctx.id) {
      p.keys.locks.delete(lk);
      next = p.roles.handOver(lk, op, now, ctx);
    }
  }
  const done: CompletedInvocation = {
    id: ctx.id,
    outcome,
    completedAt: now,
    completionRetentionMs: ctx.completionRetentionMs,
  };
  return p.commit(ctx, op, () => {
    p.deps.metrics.invocationsCompleted.inc({ result: outcome.kind });
    p.observe(
      ctx,
      outcome.kind === 'success'
        ? { kind: 'completed', outcome: 'success', code: undefined, message: undefined }
        : { kind: 'completed', outcome: 'failure', code: outcome.failure.code, message: outcome.failure.message },
    );
    // (A scan of every scheduled timer: skipped when this invocation never had one.)
    if (ctx.mayHaveTimers) p.timers.removeWhere((t) => t.invocationId === ctx.id);
    if (p.active.get(ctx.id) === ctx) p.active.delete(ctx.id);
    const set = p.waiters.get(ctx.id);
    // (Resolving runs no continuation synchronously: the set cannot change while it is iterated.)
    if (set !== undefined) for (const w of set) w(done);
    for (const row of outboxRowsOf(waiters)) void p.roles.deliver(row);
    if (next !== undefined) void p.roles.startAttempt(next);
  });
}

/**
 * When the completed invocation's result and journal go away: the result after its completion retention (idempotency
 * or workflow), the journal after its journal retention, never later than the result (restate caps it the same way).
 */
function retentionColumns(ctx: InvocationCtx, now: Date): InvocationUpdate {
  const keep = Math.max(0, ctx.completionRetentionMs ?? 0);
  const keepJournal = Math.min(keep, Math.max(0, ctx.journalRetentionMs ?? 0));
  return {
    expiresAt: new Date(now.getTime() + keep),
    journalExpiresAt: new Date(now.getTime() + keepJournal),
  };
}

export function outputFromJournal(journal: JournalEntry[] | undefined): Outcome | undefined {
  const entry = journal?.findLast((e) => e.type === MessageType.OutputCommand);
  if (entry === undefined) return undefined;
  const cmd = codec.command(entry.type, entry.raw);
  return cmd.kind === 'output' ? cmd.outcome : undefined;
}
