import { isExpired } from '../results.ts';
import { type InvocationId } from '../../ids/invocation-id.ts';
import { type PartitionProcessor, CANCEL_SIGNAL } from '../processor.ts';

/**
 * Cancels an invocation: signal 1, which a running or suspended handler sees as a 409 "Cancelled" failure (and can
 * compensate); a paused one is resumed to see it; one that has not started yet is failed at once.
 */
export async function cancel(
  p: PartitionProcessor,
  id: InvocationId,
): Promise<'accepted' | 'done' | 'not_found' | 'completed'> {
  const row = await p.deps.storage.invocations.get(id);
  if (row === undefined || isExpired(row)) return 'not_found';
  if (row.status === 'completed') return 'completed';
  // Flow control: one still waiting for its first start has not started either.
  const ctx = p.active.get(id);
  const waiting =
    ctx !== undefined && ctx.status === 'invoked' && p.flow.isWaiting(ctx) && (ctx.journal?.length ?? 1) <= 1;
  await p.roles.signal(id, { idx: CANCEL_SIGNAL }, { kind: 'void' });
  // One that has not started is failed without running anything: done, not merely accepted.
  return row.status === 'scheduled' || row.status === 'inboxed' || waiting ? 'done' : 'accepted';
}
