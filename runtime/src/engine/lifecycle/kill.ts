import { InvocationId } from '../../ids/invocation-id.ts';
import { MessageType } from '../../protocol/message-types.ts';
import { InvocationAlreadyCompletedError, PartitionUnavailableError } from '../management-errors.ts';
import * as codec from '../codec.ts';
import { type InvocationCtx } from '../invocation.ts';
import type { JournalEntry } from '../types.ts';
import { type PartitionProcessor, lockKey } from '../processor.ts';
import { outboxWrite, outboxRowsOf } from '../../storage/api.ts';

/** Terminates an invocation without running anything more: it fails with 409 "killed", and so do its callees. */
export async function kill(p: PartitionProcessor, id: InvocationId): Promise<void> {
  const ctx = await p.roles.managed(id);
  if (ctx.status === 'completed') throw new InvocationAlreadyCompletedError(id);
  await ctx.ensureJournal(() => p.loadEntries(ctx.id));
  const children: InvocationId[] = [];
  for (const child of pendingCallees(ctx.journal ?? [])) {
    const childId = InvocationId.tryParse(child);
    if (childId !== undefined) children.push(childId);
  }
  // Callees in partitions served elsewhere are killed by their owners: asked in the same write.
  const remote = children
    .filter((c) => !p.served.has(p.partitionOf(InvocationId.partitionKey(c))))
    .map((c) => outboxWrite.request(p.partitionOf(InvocationId.partitionKey(c)), c, { kind: 'kill' }));
  if (ctx.status === 'scheduled' || ctx.status === 'inboxed') forgetNotStarted(p, ctx);
  if (!(await p.roles.complete(ctx, { kind: 'failure', failure: { code: 409, message: 'killed' } }, {}, remote))) {
    throw new PartitionUnavailableError(id);
  }
  p.observe(ctx, { kind: 'killed' });
  for (const w of remote) for (const r of outboxRowsOf(w)) void p.roles.deliver(r);
  for (const childId of children) {
    if (p.served.has(p.partitionOf(InvocationId.partitionKey(childId)))) kill(p, childId).catch(() => undefined);
  }
}

/**
 * An invocation cancelled or killed before it started is completed for whoever waits on it, but not retained:
 * like restate, which forgets it, it is gone for readers at once (and removed by the cleaner).
 */
export function forgetNotStarted(p: PartitionProcessor, ctx: InvocationCtx): void {
  if (ctx.status === 'inboxed' && ctx.serviceKey !== null)
    p.keys.remove(lockKey(ctx.serviceName, ctx.serviceKey), ctx.id);
  ctx.completionRetentionMs = 0;
  ctx.journalRetentionMs = 0;
}

/** Callees of Call commands whose result has not arrived: a killed caller takes them down with it. */
function pendingCallees(journal: JournalEntry[]): string[] {
  const ids = new Map<number, string>();
  const waiting = new Set<number>();
  const done = new Set<number>();
  for (const e of journal) {
    if (e.type === MessageType.CallCommand) {
      const cmd = codec.command(e.type, e.raw);
      if (cmd.kind === 'call') waiting.add(cmd.resultCompletionId);
    } else if (e.type === MessageType.CallInvocationIdCompletionNotification && e.completionId !== undefined) {
      const n = codec.notificationResult(e.raw);
      if (n.kind === 'invocationId') ids.set(e.completionId, n.invocationId);
    } else if (e.type === MessageType.CallCompletionNotification && e.completionId !== undefined) {
      done.add(e.completionId);
    }
  }
  const callees: string[] = [];
  for (const e of journal) {
    if (e.type !== MessageType.CallCommand) continue;
    const cmd = codec.command(e.type, e.raw);
    if (cmd.kind !== 'call' || done.has(cmd.resultCompletionId)) continue;
    const callee = ids.get(cmd.invocationIdCompletionId);
    if (callee !== undefined) callees.push(callee);
  }
  return callees;
}
