import { InvocationId } from '../ids/invocation-id.ts';
import { encodeFrame } from '../protocol/framing.ts';
import { MessageType } from '../protocol/message-types.ts';
import { canResume } from './awaiting.ts';
import * as codec from './codec.ts';
import { type InvocationCtx } from './invocation.ts';
import type { JournalEntry } from './types.ts';
import { type PartitionProcessor, ownWrite, rerouteIfFenced, CANCEL_SIGNAL } from './processor.ts';
import { invocationWrite, outboxWrite, outboxRowsOf, type Write } from '../storage/api.ts';
import { partitionFor } from '../ids/partition-key.ts';
import { rerun } from '../flow-control/rerun.ts';

/**
 * Delivers a signal to an invocation: an awakeable completion (`idx` ≥ 17), a named signal, or cancellation
 * (`idx` 1). Resolves once the signal is durable in the outbox; delivery follows. A signal for an invocation that is
 * unknown or already completed is dropped, as restate does.
 */
export async function signal(
  p: PartitionProcessor,
  targetId: InvocationId,
  signal: { idx: number } | { name: string },
  result: codec.EngineResult,
): Promise<void> {
  const partitionId = partitionFor(InvocationId.partitionKey(targetId), p.options.partitions);
  p.requireServed(partitionId);
  const insert = outboxWrite.insert({
    partitionId,
    targetInvocationId: targetId,
    entryType: MessageType.SignalNotification,
    completionId: null,
    signalIdx: 'idx' in signal ? signal.idx : null,
    signalName: 'name' in signal ? signal.name : null,
    sourceInvocationId: null,
    raw: Buffer.from(
      codec.notification(
        'idx' in signal ? { kind: 'signal', idx: signal.idx } : { kind: 'signalName', name: signal.name },
        result,
      ),
    ),
  });
  await p.submitWrites(partitionId, [insert]).catch((err: unknown) => {
    throw rerouteIfFenced(err, partitionId);
  });
  for (const row of outboxRowsOf(insert)) void p.roles.deliver(row);
}

/** Appends a runtime-authored notification; sends it to a live attempt or resumes a suspended invocation. */
export async function appendNotification(
  p: PartitionProcessor,
  ctx: InvocationCtx,
  entry: Omit<JournalEntry, 'index'>,
  extra: Write[],
): Promise<void> {
  // A dead object (its partition is being recovered or moved): the outbox row or timer stays for whoever recovers it.
  if (ctx.poisoned) return;
  if (ctx.status === 'completed') {
    if (extra.length > 0) await p.submitWrites(ctx.partitionId, extra);
    return;
  }
  await ctx.ensureJournal(() => p.loadEntries(ctx.id));
  if (ctx.poisoned) return;
  if ((ctx.status as string) === 'completed') {
    if (extra.length > 0) await p.submitWrites(ctx.partitionId, extra);
    return;
  }
  // `extra` removes the outbox row or timer row that this notification delivers: rows of this invocation.
  const op = ownWrite(ctx);
  const e = p.appendEntry(ctx, op, entry, new Date());
  op.writes.push(...extra);
  let resume = false;
  const cancel = e.type === MessageType.SignalNotification && e.signalIdx === CANCEL_SIGNAL;
  if (
    (ctx.status === 'suspended' && ctx.awaiting !== undefined && canResume(ctx.awaiting, ctx)) ||
    (ctx.status === 'paused' && cancel)
  ) {
    resume = true;
    ctx.toInvoked();
    op.writes.push(invocationWrite.update(ctx.id, { status: 'invoked', awaiting: null, ...rerun(ctx) }, new Date()));
  }
  await p.commit(ctx, op, () => {
    if (cancel) p.observe(ctx, { kind: 'cancelled' });
    if (resume) {
      p.observe(ctx, { kind: 'resumed', by: 'notification' });
      void p.roles.startAttempt(ctx);
    } else sendCommitted(p, ctx, e);
  });
}

export function sendCommitted(p: PartitionProcessor, ctx: InvocationCtx, e: JournalEntry): void {
  const running = ctx.running;
  const attempt = running?.attempt;
  if (
    attempt !== undefined &&
    attempt.canSend &&
    e.index >= running!.attemptSnapshot &&
    !running!.fromSdk.has(e.index)
  ) {
    attempt.send(encodeFrame(e.type, e.raw));
  }
}
