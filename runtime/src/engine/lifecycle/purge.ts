import { isExpired } from '../results.ts';
import { type InvocationId } from '../../ids/invocation-id.ts';
import { type Stmt } from '../../storage/api.ts';
import { FencingError } from '../../storage/pg/group-commit.ts';
import { getInvocation, updateInvocation, type InvocationRow } from '../../storage/pg/tables/invocations.ts';
import { deleteJournal, purgeInvocation } from '../../storage/pg/tables/retention.ts';
import {
  InvocationNotCompletedError,
  InvocationNotFoundError,
  PartitionUnavailableError,
} from '../management-errors.ts';
import { type PartitionProcessor, rerouteIfFenced } from '../processor.ts';

/** Forgets a completed invocation: its result, its journal, and for a workflow run the key's state and promises. */
export async function purge(p: PartitionProcessor, id: InvocationId): Promise<void> {
  const row = await completedRow(p, id);
  p.requireServed(row.partitionId);
  await submitOrUnavailable(p, id, row.partitionId, [purgeInvocation(id)]);
}

/** Drops a completed invocation's journal and keeps its result. */
export async function purgeJournal(p: PartitionProcessor, id: InvocationId): Promise<void> {
  const row = await completedRow(p, id);
  p.requireServed(row.partitionId);
  await submitOrUnavailable(p, id, row.partitionId, [
    deleteJournal(id),
    updateInvocation(id, { journalExpiresAt: null }, new Date()),
  ]);
}

export async function completedRow(p: PartitionProcessor, id: InvocationId): Promise<InvocationRow> {
  const row = await getInvocation(p.deps.pool, id);
  if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
  if (row.status !== 'completed') throw new InvocationNotCompletedError(id);
  return row;
}

export async function submitOrUnavailable(
  p: PartitionProcessor,
  id: InvocationId,
  partition: number,
  stmts: Stmt[],
): Promise<void> {
  try {
    await p.submitStmts(partition, stmts);
  } catch (err) {
    if (err instanceof FencingError) throw rerouteIfFenced(err, partition);
    p.log.warn({ err, 'service.invocation.id': id }, 'management write failed');
    throw new PartitionUnavailableError(id);
  }
}
