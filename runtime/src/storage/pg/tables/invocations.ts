import type pg from 'pg';
import type { Stmt } from '../sql.ts';
import { MessageType } from '../../../protocol/message-types.ts';
import { i64ToU64, u64ToI64 } from '../pool.ts';
import type { InvocationStatus, InvocationRow, NewInvocation, InvocationUpdate } from '../../rows.ts';

export type { InvocationRow, NewInvocation, InvocationUpdate };

const INPUT_COMMAND = MessageType.InputCommand;

const COLUMNS = `id, partition_key::text, partition_id, service_name, service_key, handler_name, service_ty, handler_ty, status,
  deployment_id, protocol_version, idempotency_key, invoked_by, invoked_by_id, invoked_by_target, random_seed::text,
  journal_length, retry_count, retry_count_since_append, last_append_at, awaiting, inbox_seq::text, created_at, scheduled_start_at,
  completed_at, completion_retention_ms::text, journal_retention_ms::text, result_kind, output, failure_code,
  failure_message, failure_metadata, expires_at, trace_context, scope, limit_key, vqueue_id, last_start_at`;

function toRow(r: Record<string, unknown>): InvocationRow {
  return {
    id: r.id as string,
    partitionKey: i64ToU64(r.partition_key as string),
    partitionId: r.partition_id as number,
    serviceName: r.service_name as string,
    serviceKey: r.service_key as string | null,
    handlerName: r.handler_name as string,
    serviceTy: r.service_ty as string,
    handlerTy: r.handler_ty as string | null,
    status: r.status as InvocationStatus,
    deploymentId: r.deployment_id as string | null,
    protocolVersion: r.protocol_version as number | null,
    idempotencyKey: r.idempotency_key as string | null,
    invokedBy: r.invoked_by as string,
    invokedById: r.invoked_by_id as string | null,
    invokedByTarget: r.invoked_by_target as string | null,
    randomSeed: i64ToU64(r.random_seed as string),
    journalLength: r.journal_length as number,
    retryCount: r.retry_count as number,
    retryCountSinceAppend: r.retry_count_since_append as number,
    lastAppendAt: r.last_append_at as Date | null,
    awaiting: r.awaiting,
    inboxSeq: r.inbox_seq === null ? null : BigInt(r.inbox_seq as string),
    createdAt: r.created_at as Date,
    scheduledStartAt: r.scheduled_start_at as Date | null,
    completedAt: r.completed_at as Date | null,
    completionRetentionMs: r.completion_retention_ms === null ? null : Number(r.completion_retention_ms),
    journalRetentionMs: r.journal_retention_ms === null ? null : Number(r.journal_retention_ms),
    resultKind: r.result_kind as 'success' | 'failure' | null,
    output: r.output as Buffer | null,
    failureCode: r.failure_code as number | null,
    failureMessage: r.failure_message as string | null,
    failureMetadata: r.failure_metadata as Record<string, string> | null,
    expiresAt: r.expires_at as Date | null,
    traceContext: r.trace_context as string | null,
    scope: r.scope as string | null,
    limitKey: r.limit_key as string | null,
    vqueueId: r.vqueue_id as string | null,
    lastStartAt: r.last_start_at as Date | null,
  };
}

export async function getInvocation(db: pg.Pool | pg.ClientBase, id: string): Promise<InvocationRow | undefined> {
  const res = await db.query({
    name: 'invocation_get',
    text: `SELECT ${COLUMNS} FROM ratchet.invocation WHERE id = $1`,
    values: [id],
  });
  const r = res.rows[0] as Record<string, unknown> | undefined;
  return r === undefined ? undefined : toRow(r);
}

/** Several invocations at once (those that exist). */
export async function getInvocations(db: pg.Pool, ids: string[]): Promise<InvocationRow[]> {
  const res = await db.query({
    name: 'invocation_get_many',
    text: `SELECT ${COLUMNS} FROM ratchet.invocation WHERE id = ANY($1::text[])`,
    values: [ids],
  });
  return (res.rows as Record<string, unknown>[]).map(toRow);
}

/** Of `ids`, those stored and not completed, or waiting in the outbox to be admitted (see `InvocationTable`). */
export async function unfinishedInvocations(db: pg.Pool, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const res = await db.query<{ id: string }>({
    name: 'invocation_unfinished',
    text: `SELECT t.id FROM unnest($1::text[]) AS t(id)
            WHERE EXISTS (SELECT 1 FROM ratchet.invocation i WHERE i.id = t.id AND i.status <> 'completed')
               OR (NOT EXISTS (SELECT 1 FROM ratchet.invocation i WHERE i.id = t.id)
                   AND EXISTS (SELECT 1 FROM ratchet.outbox o
                                WHERE o.target_invocation_id = t.id AND o.request IS NOT NULL))`,
    values: [ids],
  });
  return res.rows.map((r) => r.id);
}

/** Everything a restarted owner must pick up again: not completed, in the partitions it now owns. */
export async function listActiveInvocations(db: pg.Pool, partitions: number[]): Promise<InvocationRow[]> {
  const res = await db.query(
    `SELECT ${COLUMNS} FROM ratchet.invocation WHERE status <> 'completed' AND partition_id = ANY($1::int[])`,
    [partitions],
  );
  return (res.rows as Record<string, unknown>[]).map(toRow);
}

const INSERT_INVOCATION = `WITH ins AS (
             INSERT INTO ratchet.invocation (id, partition_key, partition_id, service_name, service_key, handler_name,
               service_ty, handler_ty, status, idempotency_key, invoked_by, invoked_by_id, invoked_by_target, random_seed,
               journal_length, inbox_seq, created_at, modified_at, scheduled_start_at, completion_retention_ms,
               journal_retention_ms, last_append_at, restarted_from, deployment_id, protocol_version,
               last_attempt_deployment_id, last_start_at, running_at, trace_context, scope, limit_key, vqueue_id)
             VALUES ($1, $2::bigint, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::bigint, $15,
               CASE WHEN $16::boolean THEN nextval('ratchet.inbox_seq') END, $17, $17, $18, $19, $20, $17, $22, $23, $24,
               CASE WHEN $25::timestamptz IS NOT NULL THEN $23 END, $25, $25, $26, $27, $28, $29)
             ON CONFLICT (id) DO NOTHING RETURNING id)
           INSERT INTO ratchet.journal (invocation_id, index, entry_type, raw, appended_at)
           SELECT id, 0, ${INPUT_COMMAND}, $21, $17 FROM ins RETURNING 1 AS inserted`;
/**
 * Inserts a new invocation together with its Input entry (journal index 0); `onInserted(false)` means one with that
 * id already existed (idempotent duplicate, workflow key), in which case nothing is written.
 */
export function insertInvocation(
  inv: NewInvocation,
  inputRaw: Uint8Array,
  onInserted?: (inserted: boolean) => void,
): Stmt {
  return {
    name: 'invocation_insert',
    text: INSERT_INVOCATION,
    values: [
      inv.id,
      u64ToI64(inv.partitionKey),
      inv.partitionId,
      inv.serviceName,
      inv.serviceKey,
      inv.handlerName,
      inv.serviceTy,
      inv.handlerTy,
      inv.status,
      inv.idempotencyKey,
      inv.invokedBy,
      inv.invokedById,
      inv.invokedByTarget,
      u64ToI64(inv.randomSeed),
      inv.journalLength,
      inv.inboxSeq,
      inv.createdAt,
      inv.scheduledStartAt,
      inv.completionRetentionMs,
      inv.journalRetentionMs,
      inputRaw,
      inv.restartedFrom ?? null,
      inv.deploymentId ?? null,
      inv.protocolVersion ?? null,
      inv.attemptStartAt ?? null,
      inv.traceContext ?? null,
      inv.scope ?? null,
      inv.limitKey ?? null,
      inv.vqueueId ?? null,
    ],
    ...(onInserted === undefined ? {} : { onResult: (rows) => onInserted(rows.length > 0) }),
  };
}

const UPDATE_COLUMNS: Record<keyof InvocationUpdate, string> = {
  status: 'status',
  deploymentId: 'deployment_id',
  protocolVersion: 'protocol_version',
  journalLength: 'journal_length',
  retryCount: 'retry_count',
  retryCountSinceAppend: 'retry_count_since_append',
  lastAppendAt: 'last_append_at',
  nextRetryAt: 'next_retry_at',
  lastFailure: 'last_failure',
  lastFailureCode: 'last_failure_code',
  lastFailureRelatedCommandIndex: 'last_failure_related_command_index',
  lastFailureRelatedCommandName: 'last_failure_related_command_name',
  lastFailureRelatedCommandType: 'last_failure_related_command_type',
  lastAttemptDeploymentId: 'last_attempt_deployment_id',
  lastStartAt: 'last_start_at',
  awaiting: 'awaiting',
  inboxSeq: 'inbox_seq',
  runningAt: 'running_at',
  completedAt: 'completed_at',
  resultKind: 'result_kind',
  output: 'output',
  failureCode: 'failure_code',
  failureMessage: 'failure_message',
  failureMetadata: 'failure_metadata',
  expiresAt: 'expires_at',
  journalExpiresAt: 'journal_expires_at',
};

/** PostgreSQL truncates statement names at 63 bytes, so each column set gets a short numbered name. */
const statements = new Map<string, { name: string; text: string }>();

const UPDATE_KEYS = (Object.keys(UPDATE_COLUMNS) as (keyof InvocationUpdate)[]).sort();

/** A delayed invocation whose start came while its key was locked: it joins the key's inbox, at the end. */
export function inboxInvocation(id: string): Stmt {
  return {
    name: 'invocation_inbox',
    text: `UPDATE ratchet.invocation SET status = 'inboxed', inbox_seq = nextval('ratchet.inbox_seq'), modified_at = now()
           WHERE id = $1`,
    values: [id],
  };
}

/**
 * One UPDATE per change. Statement names are derived from the column set, so each shape is prepared once per
 * connection and reused; its text is built once per process.
 */
export function updateInvocation(id: string, update: InvocationUpdate, now: Date): Stmt {
  // The set columns in a fixed order (so each set maps to one statement), without sorting per call.
  const values: unknown[] = [id, now];
  let columns = '';
  for (const k of UPDATE_KEYS) {
    const v = update[k];
    if (v === undefined) continue;
    columns = columns === '' ? k : `${columns},${k}`;
    values.push(k === 'awaiting' || k === 'failureMetadata' ? (v === null ? null : JSON.stringify(v)) : v);
  }
  const { name, text } = statementFor(columns);
  return { name, text, values };
}

function statementFor(columns: string): { name: string; text: string } {
  let stmt = statements.get(columns);
  if (stmt === undefined) {
    const keys = columns === '' ? [] : (columns.split(',') as (keyof InvocationUpdate)[]);
    const sets = keys.map((k, i) => {
      const col = UPDATE_COLUMNS[k];
      if (k === 'awaiting' || k === 'failureMetadata') return `${col} = $${i + 3}::jsonb`;
      return `${col} = $${i + 3}`;
    });
    stmt = {
      name: `invocation_update_${statements.size}`,
      text: `UPDATE ratchet.invocation SET modified_at = $2${sets.length > 0 ? ', ' + sets.join(', ') : ''} WHERE id = $1`,
    };
    statements.set(columns, stmt);
  }
  return stmt;
}
