import type pg from 'pg';
import type { Stmt } from '../sql.ts';

/**
 * Removing what retention no longer covers. A completed invocation keeps its result until `expires_at` (idempotency
 * or workflow completion retention) and its journal until `journal_expires_at`. Purging a workflow's `run` also
 * removes the workflow key's state and promises, as restate does when the workflow's retention ends.
 */

/** The purge of the invocations selected by the CTE `d` (id, service_name, service_key, service_ty, handler_ty). */
const PURGE_TAIL = `
  j AS (DELETE FROM ratchet.journal WHERE invocation_id IN (SELECT id FROM d)),
  wf AS (SELECT service_name, service_key FROM d WHERE service_ty = 'Workflow' AND handler_ty = 'Workflow'),
  s AS (DELETE FROM ratchet.state st USING wf WHERE st.service_name = wf.service_name AND st.service_key = wf.service_key),
  p AS (DELETE FROM ratchet.promise pr USING wf WHERE pr.service_name = wf.service_name AND pr.service_key = wf.service_key),
  pw AS (DELETE FROM ratchet.promise_waiter pw USING wf
         WHERE pw.service_name = wf.service_name AND pw.service_key = wf.service_key)
  SELECT id FROM d`;

const PURGE_IF_EXPIRED = `WITH d AS (DELETE FROM ratchet.invocation WHERE id = $1 AND expires_at <= now()
                     RETURNING id, service_name, service_key, service_ty, handler_ty),${PURGE_TAIL}`;
/**
 * Runs before the insert of an invocation with a deterministic id (idempotency key, workflow key): a completed one
 * whose retention ended is gone for good, so the new request starts a new invocation instead of replaying it.
 */
export function purgeIfExpired(id: string): Stmt {
  return {
    name: 'invocation_purge_if_expired',
    text: PURGE_IF_EXPIRED,
    values: [id],
  };
}

/** Forgets one completed invocation now (admin purge). */
export function purgeInvocation(id: string): Stmt {
  return {
    name: 'invocation_purge',
    text: `WITH d AS (DELETE FROM ratchet.invocation WHERE id = $1 AND status = 'completed'
                     RETURNING id, service_name, service_key, service_ty, handler_ty),${PURGE_TAIL}`,
    values: [id],
  };
}

/** Deletes one invocation's journal right away (admin purge-journal). */
export function deleteJournal(id: string): Stmt {
  return { name: 'journal_delete', text: 'DELETE FROM ratchet.journal WHERE invocation_id = $1', values: [id] };
}

/** One batch of expired invocations in the given partitions; returns how many were purged. */
export async function purgeExpired(db: pg.ClientBase, partitions: number[], limit: number): Promise<number> {
  const res = await db.query({
    name: 'invocation_purge_expired',
    text: `WITH d AS (
             DELETE FROM ratchet.invocation WHERE id IN (
               SELECT id FROM ratchet.invocation
               WHERE partition_id = ANY($1::int[]) AND expires_at <= now()
               ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING id, service_name, service_key, service_ty, handler_ty),${PURGE_TAIL}`,
    values: [partitions, limit],
  });
  return res.rowCount ?? 0;
}

/** One batch of journals whose retention ended (the invocations and their results stay); returns how many. */
export async function dropExpiredJournals(db: pg.ClientBase, partitions: number[], limit: number): Promise<number> {
  const res = await db.query({
    name: 'journal_drop_expired',
    text: `WITH ids AS (
             SELECT id FROM ratchet.invocation
             WHERE partition_id = ANY($1::int[]) AND journal_expires_at <= now()
             ORDER BY journal_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED),
           j AS (DELETE FROM ratchet.journal WHERE invocation_id IN (SELECT id FROM ids))
           UPDATE ratchet.invocation SET journal_expires_at = NULL WHERE id IN (SELECT id FROM ids) RETURNING id`,
    values: [partitions, limit],
  });
  return res.rowCount ?? 0;
}
