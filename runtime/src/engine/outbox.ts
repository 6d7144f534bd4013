import { answerCall } from './call-answer.ts';
import { completedFromRow } from './results.ts';
import { InvocationId } from '../ids/invocation-id.ts';
import { MessageType } from '../protocol/message-types.ts';
import { decodeNewInvocation } from './outbox-requests.ts';
import { InvocationAlreadyCompletedError, InvocationNotFoundError } from './management-errors.ts';
import * as codec from './codec.ts';
import { type InvocationCtx } from './invocation.ts';
import { type PartitionProcessor, orderKey, CANCEL_SIGNAL } from './processor.ts';
import { outboxWrite, newWriteBatch, outboxRowsOf, type Write, type InsertInvocation } from '../storage/api.ts';
import type { OutboxRow, OutboxRequest } from '../storage/rows.ts';

/**
 * Carries out an outbox row of a served partition (once: a row being delivered, or delivered since the last poll
 * began, is skipped). A row for a partition served elsewhere is its owner's: the owner is told to look.
 */
export async function deliver(p: PartitionProcessor, row: OutboxRow): Promise<void> {
  if (!p.served.has(row.partitionId)) {
    notifyOwner(p, row.partitionId);
    return;
  }
  if (p.outbox.seen.has(row.seq)) return;
  const seen = { partition: row.partitionId, round: Infinity };
  p.outbox.seen.set(row.seq, seen);
  try {
    await deliverOnce(p, row);
  } finally {
    seen.round = p.outbox.round;
  }
}

export async function deliverOnce(p: PartitionProcessor, row: OutboxRow): Promise<void> {
  if (row.request !== undefined) {
    await carryOut(p, row, row.request);
    return;
  }
  try {
    const target = await p.load(row.targetInvocationId);
    const remove = outboxWrite.delete(row.seq);
    if (target === undefined) {
      await p.submitWrites(row.partitionId, [remove]);
      return;
    }
    let raw = row.raw ?? undefined;
    let success = true;
    if (raw === undefined) {
      const result = await renderSource(p, row);
      success = result.kind !== 'failure';
      raw = Buffer.from(codec.notification({ kind: 'completion', id: row.completionId! }, result));
    } else {
      success = codec.notificationSucceeded(row.entryType, raw);
    }
    if (target.status === 'completed') {
      await p.submitWrites(row.partitionId, [remove]);
      return;
    }
    const cancel = row.entryType === MessageType.SignalNotification && row.signalIdx === CANCEL_SIGNAL;
    // A flow-controlled invocation still waiting for its first start has not run either.
    const waitingFirstStart =
      target.status === 'invoked' && p.flow.isWaiting(target) && (target.journal?.length ?? 1) <= 1;
    if (cancel && (target.status === 'scheduled' || target.status === 'inboxed' || waitingFirstStart)) {
      // Never started: nothing to run compensations, so it fails right away (restate's "canceled").
      p.roles.forgetNotStarted(target);
      void p.roles.complete(target, { kind: 'failure', failure: { code: 409, message: 'canceled' } }, {}, [remove]);
      return;
    }
    await p.roles.appendNotification(
      target,
      {
        type: row.entryType,
        raw,
        completionId: row.completionId ?? undefined,
        signalIdx: row.signalIdx ?? undefined,
        signalName: row.signalName ?? undefined,
        success,
      },
      [remove],
    );
  } catch (err) {
    p.log.warn({ err, seq: row.seq }, 'outbox delivery failed; it is retried on the next start');
  }
}

/** Work another node asked of this partition's owner: admit an invocation it created, or kill one. */
export async function carryOut(p: PartitionProcessor, row: OutboxRow, request: OutboxRequest): Promise<void> {
  const remove = outboxWrite.delete(row.seq);
  try {
    if (request.kind === 'kill') {
      const id = InvocationId.tryParse(row.targetInvocationId);
      if (id !== undefined) {
        await p.roles.kill(id).catch((err: unknown) => {
          // Gone or finished already: nothing left to kill. Anything else: the row stays and is tried again.
          if (!(err instanceof InvocationNotFoundError || err instanceof InvocationAlreadyCompletedError)) throw err;
        });
      }
      await p.submitWrites(row.partitionId, [remove]);
      return;
    }
    await admitRequested(p, row, request, remove);
  } catch (err) {
    p.log.warn({ err, seq: row.seq }, 'outbox request could not be carried out; it is tried again');
  }
}

/** A call or send from a partition served elsewhere: the callee is admitted here, as a local call admits it. */
export async function admitRequested(
  p: PartitionProcessor,
  row: OutboxRow,
  request: Extract<OutboxRequest, { kind: 'invoke' }>,
  remove: Write,
): Promise<void> {
  const child = decodeNewInvocation(request.invocation);
  const input = Buffer.from(request.input, 'base64');
  const now = new Date();
  const op = newWriteBatch(row.partitionId, [orderKey(child.partitionKey)]);
  op.writes.push(remove);
  let admitted: { writes: Write[]; ctx: InvocationCtx; insert: InsertInvocation } | undefined;
  let runnable = false;
  if (!p.active.has(child.id)) {
    admitted = p.roles.admit(child, input, now, request.deterministic);
    runnable = child.status === 'invoked';
    op.writes.push(...admitted.writes);
  }
  /** Writes whose outbox rows (the caller's answer) are delivered once committed. */
  const answers: Write[] = [];
  const caller = request.caller;
  if (caller !== undefined) {
    for (const w of answerCall(child.id, caller, request.workflowRun === true, admitted?.insert)) {
      answers.push(w);
      op.writes.push(w);
    }
  }
  try {
    await p.submit(op);
  } catch (err) {
    if (admitted !== undefined) p.roles.undoAdmit(admitted.ctx);
    throw err;
  }
  if (admitted !== undefined) {
    if (admitted.insert.inserted === true) {
      p.deps.metrics.invocationsAccepted.inc({ invoked_by: child.invokedBy });
      p.roles.afterAdmit(admitted.ctx, runnable);
    } else {
      p.roles.undoAdmit(admitted.ctx);
    }
  }
  for (const w of answers) for (const r of outboxRowsOf(w)) void deliver(p, r);
}

/** Tells the owner of a partition served elsewhere that its outbox has rows (coalesced; its poll is the fallback). */
export function notifyOwner(p: PartitionProcessor, partition: number): void {
  p.outbox.toNotify.add(partition);
  if (p.outbox.notifying) return;
  p.outbox.notifying = true;
  setImmediate(() => {
    const partitions = [...p.outbox.toNotify];
    p.outbox.toNotify.clear();
    p.deps.storage
      .notifyOutbox(partitions)
      .catch((err: unknown) => p.log.debug({ err }, 'could not notify partition owners; they poll'))
      .finally(() => {
        p.outbox.notifying = false;
        if (p.outbox.toNotify.size > 0) notifyOwner(p, [...p.outbox.toNotify][0]!);
      });
  });
}

/**
 * Reads the outbox of served partitions (all of them, or those named) and delivers what is not being delivered
 * yet: rows other nodes wrote for partitions served here. Called when told (LISTEN) and every few seconds.
 */
export async function pollOutbox(p: PartitionProcessor, partitions?: number[]): Promise<void> {
  const ids = (partitions ?? [...p.served]).filter((n) => p.served.has(n));
  if (ids.length === 0 || p.stopped) return;
  const round = ++p.outbox.round;
  const rows = await p.deps.storage.outbox.list(ids);
  for (const row of rows) void deliver(p, row);
  // A row whose delivery finished before this read began cannot have been read by it (its delete had committed):
  // forget it. Later ones are kept until the next read.
  for (const [seq, seen] of p.outbox.seen) if (seen.round < round) p.outbox.seen.delete(seq);
}

/**
 * The payload of an outbox row that names its source: a promise's state (void while not completed), or an
 * invocation's result (void while it runs — only get-output asks before completion; 404 when it does not exist).
 */
export async function renderSource(p: PartitionProcessor, row: OutboxRow): Promise<codec.EngineResult> {
  if (row.sourcePromise !== undefined) {
    const promise = await p.deps.storage.promises.get(row.sourcePromise);
    if (promise === undefined) return { kind: 'void' };
    return promise.resultKind === 'success'
      ? { kind: 'value', value: promise.value ?? Buffer.alloc(0) }
      : { kind: 'failure', failure: { code: promise.failureCode ?? 500, message: promise.failureMessage ?? '' } };
  }
  const source =
    row.sourceInvocationId === null ? undefined : await p.deps.storage.invocations.get(row.sourceInvocationId);
  // An expired result still reaches the callers it was owed to (a cancelled never-started callee, say).
  if (source === undefined) {
    return {
      kind: 'failure',
      failure: { code: 404, message: `invocation ${row.sourceInvocationId ?? ''} not found` },
    };
  }
  if (source.status !== 'completed') return { kind: 'void' };
  const outcome = completedFromRow(source).outcome;
  return outcome.kind === 'success'
    ? { kind: 'value', value: outcome.value }
    : { kind: 'failure', failure: outcome.failure };
}
