import { onlyIfInserted, outboxWrite, unlessInserted, type InsertInvocation, type Write } from '../storage/api.ts';
import * as codec from './codec.ts';

/** The caller of a call: the invocation that waits, and the completion it waits under. */
export interface Caller {
  id: string;
  partition: number;
  completionId: number;
  entryType: number;
}

/**
 * The writes that get a call's result to its caller: a wait for the callee's result (answered at once when it has
 * completed already). A workflow's run executes once per key, so a call of one that was not created by this very
 * call fails with 409 instead, as it does at the ingress. `insert` is the callee's insert in the same batch, if the
 * call admits it. Every write returned may create outbox rows to deliver once the batch committed.
 */
export function answerCall(
  calleeId: string,
  caller: Caller,
  workflowRun: boolean,
  insert: InsertInvocation | undefined,
): Write[] {
  const wait = outboxWrite.awaitResult(calleeId, caller.id, caller.partition, caller.completionId, caller.entryType);
  if (!workflowRun) return [wait];
  const again = outboxWrite.insert({
    partitionId: caller.partition,
    targetInvocationId: caller.id,
    entryType: caller.entryType,
    completionId: caller.completionId,
    signalIdx: null,
    signalName: null,
    sourceInvocationId: null,
    raw: Buffer.from(
      codec.notification(
        { kind: 'completion', id: caller.completionId },
        { kind: 'failure', failure: { code: 409, message: 'the workflow method was already invoked' } },
      ),
    ),
  });
  if (insert === undefined) return [again];
  return [onlyIfInserted(wait, insert), unlessInserted(again, insert)];
}
