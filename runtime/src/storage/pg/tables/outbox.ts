import type pg from 'pg';
import type { Stmt } from '../sql.ts';
import type { OutboxRow, OutboxRequest } from '../../rows.ts';

export type { OutboxRow, OutboxRequest };

export const OUTBOX_COLUMNS = `seq::text, partition_id, target_invocation_id, entry_type, completion_id, signal_idx,
  signal_name, source_invocation_id, source_promise_service, source_promise_key, source_promise_name, raw, request`;

export function toOutboxRow(r: Record<string, unknown>): OutboxRow {
  return {
    seq: r.seq as string,
    partitionId: r.partition_id as number,
    targetInvocationId: r.target_invocation_id as string,
    entryType: r.entry_type as number,
    completionId: r.completion_id as number | null,
    signalIdx: r.signal_idx as number | null,
    signalName: r.signal_name as string | null,
    sourceInvocationId: r.source_invocation_id as string | null,
    sourcePromise:
      r.source_promise_service === null || r.source_promise_service === undefined
        ? undefined
        : {
            service: r.source_promise_service as string,
            key: r.source_promise_key as string,
            name: r.source_promise_name as string,
          },
    raw: r.raw as Buffer | null,
    request: (r.request ?? undefined) as OutboxRequest | undefined,
  };
}

/** A statement's `onResult` that hands each outbox row it returned (`RETURNING OUTBOX_COLUMNS`) to `onRow`. */
export function eachOutboxRow(onRow: (row: OutboxRow) => void): NonNullable<Stmt['onResult']> {
  return (rows) => rows.forEach((r) => onRow(toOutboxRow(r)));
}

const INSERT_OUTBOX = `INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id, signal_idx,
             signal_name, source_invocation_id, raw) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${OUTBOX_COLUMNS}`;
export function insertOutbox(row: Omit<OutboxRow, 'seq'>, onRow: (row: OutboxRow) => void): Stmt {
  return {
    name: 'outbox_insert',
    text: INSERT_OUTBOX,
    values: [
      row.partitionId,
      row.targetInvocationId,
      row.entryType,
      row.completionId,
      row.signalIdx,
      row.signalName,
      row.sourceInvocationId,
      row.raw,
    ],
    onResult: eachOutboxRow(onRow),
  };
}

/** Asks the owner of `partition` to carry out `request` for `targetInvocationId`. */
export function insertOutboxRequest(
  partition: number,
  targetInvocationId: string,
  request: OutboxRequest,
  onRow: (row: OutboxRow) => void,
): Stmt {
  return {
    name: 'outbox_insert_request',
    text: `INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, request)
           VALUES ($1, $2, 0, $3::jsonb) RETURNING ${OUTBOX_COLUMNS}`,
    values: [partition, targetInvocationId, JSON.stringify(request)],
    onResult: eachOutboxRow(onRow),
  };
}

export function deleteOutbox(seq: string): Stmt {
  return { name: 'outbox_delete', text: 'DELETE FROM ratchet.outbox WHERE seq = $1::bigint', values: [seq] };
}

export async function listOutbox(db: pg.Pool, partitions: number[]): Promise<OutboxRow[]> {
  const res = await db.query(
    `SELECT ${OUTBOX_COLUMNS} FROM ratchet.outbox WHERE partition_id = ANY($1::int[]) ORDER BY outbox.seq`,
    [partitions],
  );
  return (res.rows as Record<string, unknown>[]).map(toOutboxRow);
}

const AWAIT_RESULT = `WITH t AS (SELECT status FROM ratchet.invocation WHERE id = $1 FOR UPDATE),
           w AS (INSERT INTO ratchet.completion_waiter (invocation_id, caller_id, caller_completion_id, entry_type)
                 SELECT $1, $2, $3, $5 FROM t WHERE t.status <> 'completed' ON CONFLICT DO NOTHING)
           INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id, source_invocation_id)
           SELECT $4, $2, $5, $3, $1 WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.status <> 'completed')
           RETURNING ${OUTBOX_COLUMNS}`;

/**
 * Registers `caller` for the result of `invocationId`, or, when that invocation already completed (an idempotent
 * duplicate, an attach to a finished invocation) or does not exist, queues the answer for the caller at once. The
 * target's row is locked, so a completion committing concurrently either sees the waiter or is seen as completed.
 */
export function awaitResult(
  invocationId: string,
  callerId: string,
  callerPartition: number,
  callerCompletionId: number,
  entryType: number,
  onRow: (row: OutboxRow) => void,
): Stmt {
  return {
    name: 'await_result',
    text: AWAIT_RESULT,
    values: [invocationId, callerId, callerCompletionId, callerPartition, entryType],
    onResult: eachOutboxRow(onRow),
  };
}

const RESULT_TO_WAITERS = `WITH w AS (DELETE FROM ratchet.completion_waiter WHERE invocation_id = $1
                     RETURNING caller_id, caller_completion_id, entry_type)
           INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id, source_invocation_id)
           SELECT i.partition_id, w.caller_id, w.entry_type, w.caller_completion_id, $1
           FROM w JOIN ratchet.invocation i ON i.id = w.caller_id
           RETURNING ${OUTBOX_COLUMNS}`;
/** On completion: every waiter becomes an outbox row carrying this invocation's result, in the same transaction. */
export function resultToWaiters(invocationId: string, onRow: (row: OutboxRow) => void): Stmt {
  return {
    name: 'result_to_waiters',
    text: RESULT_TO_WAITERS,
    values: [invocationId],
    onResult: eachOutboxRow(onRow),
  };
}

/**
 * Queues requests for partitions' owners in one statement (its own commit, no lease): the rows get ascending `seq`s in
 * the order given, which is the order an owner carries them out.
 */
export async function enqueueOutboxRequests(
  db: pg.Pool,
  requests: { partition: number; targetInvocationId: string; request: OutboxRequest }[],
): Promise<OutboxRow[]> {
  if (requests.length === 0) return [];
  const res = await db.query<{ seq: string }>({
    name: 'outbox_enqueue',
    text: `INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, request)
           SELECT q.partition_id, q.target_invocation_id, 0, q.request
             FROM unnest($1::int[], $2::text[], $3::jsonb[]) WITH ORDINALITY
                  AS q(partition_id, target_invocation_id, request, n)
            ORDER BY q.n
           RETURNING seq::text`,
    values: [
      requests.map((r) => r.partition),
      requests.map((r) => r.targetInvocationId),
      requests.map((r) => JSON.stringify(r.request)),
    ],
  });
  // The seqs were drawn in the order of the requests: the rows are the requests with them (no need to read the
  // requests back from PostgreSQL).
  const seqs = res.rows.map((r) => r.seq).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  return requests.map((r, i) => ({
    seq: seqs[i]!,
    partitionId: r.partition,
    targetInvocationId: r.targetInvocationId,
    entryType: 0,
    completionId: null,
    signalIdx: null,
    signalName: null,
    sourceInvocationId: null,
    raw: null,
    request: r.request,
  }));
}
