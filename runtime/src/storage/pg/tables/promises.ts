import type pg from 'pg';
import type { Stmt } from '../sql.ts';
import { u64ToI64 } from '../pool.ts';
import { OUTBOX_COLUMNS, eachOutboxRow, type OutboxRow } from './outbox.ts';
import type { PromiseRef, PromiseRow } from '../../rows.ts';

export type { PromiseRef, PromiseRow };

/**
 * Durable promises of workflow keys. Every invocation of one workflow key lives in the same partition, so their
 * promise commands are serialized by that partition's single writer; the statements below still do each check and
 * its effect in one statement.
 */

/**
 * A command of a caller asking about a promise, answered through the outbox. The statement's parameters: $1-$3 the
 * promise, $4 the caller, $5 the completion id the answer carries, $6 the caller's partition, $7 the entry type of
 * the answer.
 */
type PromiseQuestion = (
  p: PromiseRef,
  callerId: string,
  callerPartition: number,
  completionId: number,
  entryType: number,
  onRow: (row: OutboxRow) => void,
) => Stmt;

function promiseQuestion(name: string, text: string): PromiseQuestion {
  return (p, callerId, callerPartition, completionId, entryType, onRow) => ({
    name,
    text,
    values: [p.service, p.key, p.name, callerId, completionId, callerPartition, entryType],
    onResult: eachOutboxRow(onRow),
  });
}

/**
 * GetPromise: a completed promise is answered at once through the outbox (rendered from the promise when
 * delivered); otherwise the caller waits for the completion.
 */
export const awaitPromise = promiseQuestion(
  'promise_await',
  `WITH p AS (SELECT 1 FROM ratchet.promise WHERE service_name = $1 AND service_key = $2 AND key = $3),
           w AS (INSERT INTO ratchet.promise_waiter (service_name, service_key, key, invocation_id, completion_id)
                 SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM p) ON CONFLICT DO NOTHING)
           INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id,
             source_promise_service, source_promise_key, source_promise_name)
           SELECT $6, $4, $7, $5, $1, $2, $3 WHERE EXISTS (SELECT 1 FROM p) RETURNING ${OUTBOX_COLUMNS}`,
);

/** PeekPromise: answered with the promise's state as of delivery (void while not completed). */
export const peekPromise = promiseQuestion(
  'promise_peek',
  `INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id,
             source_promise_service, source_promise_key, source_promise_name)
           VALUES ($6, $4, $7, $5, $1, $2, $3) RETURNING ${OUTBOX_COLUMNS}`,
);

/**
 * CompletePromise: the first completion wins. Its waiters get the result (through the outbox), and the completer gets
 * `ifCompleted` (void) or, when the promise was completed before, `ifAlreadyCompleted` (a 409 failure) — chosen in
 * the same statement that tried the insert.
 */
export function completePromise(
  p: PromiseRef,
  partitionKey: bigint,
  result: { kind: 'success'; value: Uint8Array } | { kind: 'failure'; code: number; message: string },
  completer: { id: string; partition: number; completionId: number; entryType: number },
  ifCompleted: Uint8Array,
  ifAlreadyCompleted: Uint8Array,
  waiterEntryType: number,
  onRow: (row: OutboxRow) => void,
): Stmt {
  return {
    name: 'promise_complete',
    text: `WITH ins AS (
             INSERT INTO ratchet.promise (service_name, service_key, key, partition_key, result_kind, value, failure_code,
               failure_message, completed_at)
             VALUES ($1, $2, $3, $4::bigint, $5, $6, $7, $8, now()) ON CONFLICT DO NOTHING RETURNING 1),
           w AS (DELETE FROM ratchet.promise_waiter WHERE service_name = $1 AND service_key = $2 AND key = $3
                 RETURNING invocation_id, completion_id),
           ow AS (INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id,
                    source_promise_service, source_promise_key, source_promise_name)
                  SELECT i.partition_id, w.invocation_id, $9, w.completion_id, $1, $2, $3
                  FROM w JOIN ratchet.invocation i ON i.id = w.invocation_id RETURNING ${OUTBOX_COLUMNS}),
           own AS (INSERT INTO ratchet.outbox (partition_id, target_invocation_id, entry_type, completion_id, raw)
                   SELECT $10, $11, $12, $13, CASE WHEN EXISTS (SELECT 1 FROM ins) THEN $14::bytea ELSE $15::bytea END
                   RETURNING ${OUTBOX_COLUMNS})
           SELECT * FROM ow UNION ALL SELECT * FROM own`,
    values: [
      p.service,
      p.key,
      p.name,
      u64ToI64(partitionKey),
      result.kind,
      result.kind === 'success' ? result.value : null,
      result.kind === 'failure' ? result.code : null,
      result.kind === 'failure' ? result.message : null,
      waiterEntryType,
      completer.partition,
      completer.id,
      completer.entryType,
      completer.completionId,
      ifCompleted,
      ifAlreadyCompleted,
    ],
    onResult: eachOutboxRow(onRow),
  };
}

export async function getPromise(db: pg.Pool, p: PromiseRef): Promise<PromiseRow | undefined> {
  const res = await db.query({
    name: 'promise_get',
    text: `SELECT result_kind, value, failure_code, failure_message FROM ratchet.promise
           WHERE service_name = $1 AND service_key = $2 AND key = $3`,
    values: [p.service, p.key, p.name],
  });
  const r = res.rows[0] as Record<string, unknown> | undefined;
  if (r === undefined) return undefined;
  return {
    resultKind: r.result_kind as 'success' | 'failure',
    value: r.value as Buffer | null,
    failureCode: r.failure_code as number | null,
    failureMessage: r.failure_message as string | null,
  };
}
