import { LOG_FIELDS } from '../../telemetry/logger.ts';
import { isExpired } from '../results.ts';
import { type InvocationId } from '../../ids/invocation-id.ts';
import {
  InvocationNotCompletedError,
  InvocationNotFoundError,
  PartitionUnavailableError,
} from '../management-errors.ts';
import { type PartitionProcessor, rerouteIfFenced } from '../processor.ts';
import { invocationWrite, journalWrite, type Write } from '../../storage/api.ts';
import type { InvocationRow } from '../../storage/rows.ts';
import { FencingError } from '../../storage/errors.ts';

/** Forgets a completed invocation: its result, its journal, and for a workflow run the key's state and promises. */
export async function purge(p: PartitionProcessor, id: InvocationId): Promise<void> {
  const row = await completedRow(p, id);
  p.requireServed(row.partitionId);
  await submitOrUnavailable(p, id, row.partitionId, [invocationWrite.purge(id)]);
}

/** Drops a completed invocation's journal and keeps its result. */
export async function purgeJournal(p: PartitionProcessor, id: InvocationId): Promise<void> {
  const row = await completedRow(p, id);
  p.requireServed(row.partitionId);
  await submitOrUnavailable(p, id, row.partitionId, [
    journalWrite.delete(id),
    invocationWrite.update(id, { journalExpiresAt: null }, new Date()),
  ]);
}

export async function completedRow(p: PartitionProcessor, id: InvocationId): Promise<InvocationRow> {
  const row = await p.deps.storage.invocations.get(id);
  if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
  if (row.status !== 'completed') throw new InvocationNotCompletedError(id);
  return row;
}

export async function submitOrUnavailable(
  p: PartitionProcessor,
  id: InvocationId,
  partition: number,
  writes: Write[],
): Promise<void> {
  try {
    await p.submitWrites(partition, writes);
  } catch (err) {
    if (err instanceof FencingError) throw rerouteIfFenced(err, partition);
    p.log.warn({ err, [LOG_FIELDS.invocationId]: id }, 'management write failed');
    throw new PartitionUnavailableError(id);
  }
}
