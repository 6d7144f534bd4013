import type { QueuedRequest, Storage, Write, WriteBatch } from '../api.ts';
import type { OutboxRow } from '../rows.ts';
import type { GroupCommitter } from './group-commit.ts';
import type { PartitionLeases } from './leases.ts';
import { u64ToI64, type Pool } from './pool.ts';
import type { Stmt, WriteOp } from './sql.ts';
import { isDatabaseUnavailable } from './unavailable.ts';
import {
  getInvocation,
  getInvocations,
  inboxInvocation,
  insertInvocation,
  listActiveInvocations,
  unfinishedInvocations,
  updateInvocation,
} from './tables/invocations.ts';
import { loadJournal } from './tables/journal.ts';
import { listLocks, releaseLock, takeLock, transferLock } from './tables/locks.ts';
import {
  awaitResult,
  deleteOutbox,
  enqueueOutboxRequests,
  insertOutbox,
  insertOutboxRequest,
  listOutbox,
  resultToWaiters,
} from './tables/outbox.ts';
import { awaitPromise, completePromise, getPromise, peekPromise } from './tables/promises.ts';
import { deleteJournal, purgeIfExpired, purgeInvocation } from './tables/retention.ts';
import {
  applyStateMutation,
  deleteStateMutation,
  insertStateMutation,
  listStateMutations,
} from './tables/state-mutations.ts';
import { clearAllState, clearState, getStateValue, loadState, setState } from './tables/state.ts';
import { deleteTimer, deleteTimersOf, insertTimer, listTimers } from './tables/timers.ts';

/** The channel a node NOTIFYs (payload: comma-separated partitions) when it wrote outbox rows for another's. */
export const OUTBOX_CHANNEL = 'ratchet_outbox';

/**
 * The engine's storage in PostgreSQL: reads on the pool, write batches translated into statements for the group
 * committer, which commits them fenced by the partition leases. Results of writes are set on the writes themselves
 * as their statements return, so the engine reads them once the batch committed.
 */
export class PgStorage implements Storage {
  constructor(
    private readonly pool: Pool,
    private readonly committer: GroupCommitter,
    private readonly leases: PartitionLeases,
  ) {}

  readonly invocations = {
    get: (id: string) => getInvocation(this.pool, id),
    getMany: (ids: string[]) => getInvocations(this.pool, ids),
    listActive: (partitions: number[]) => listActiveInvocations(this.pool, partitions),
    unfinished: (ids: string[]) => unfinishedInvocations(this.pool, ids),
  };
  readonly journal = { load: (id: string) => loadJournal(this.pool, id) };
  readonly state = {
    load: (service: string, key: string) => loadState(this.pool, service, key),
    get: (service: string, key: string, stateKey: Uint8Array) => getStateValue(this.pool, service, key, stateKey),
  };
  readonly locks = { list: (partitions: number[]) => listLocks(this.pool, partitions) };
  readonly timers = { list: (partitions: number[]) => listTimers(this.pool, partitions) };
  readonly outbox = {
    list: (partitions: number[]) => listOutbox(this.pool, partitions),
    enqueue: (requests: QueuedRequest[]) => enqueueOutboxRequests(this.pool, requests),
  };
  readonly stateMutations = { list: (partitions: number[]) => listStateMutations(this.pool, partitions) };
  readonly promises = { get: (ref: { service: string; key: string; name: string }) => getPromise(this.pool, ref) };
  readonly vqueues = {
    listPaused: async (partitions: number[]) => {
      const res = await this.pool.query<{ vqueue_id: string; partition_id: number }>(
        `SELECT vqueue_id, partition_id FROM ratchet.vqueue_pause WHERE partition_id = ANY($1::int[])`,
        [partitions],
      );
      return res.rows.map((r) => ({ vqueueId: r.vqueue_id, partitionId: r.partition_id }));
    },
    setPaused: async (partitionId: number, vqueueId: string, paused: boolean) => {
      if (paused) {
        await this.pool.query(
          `INSERT INTO ratchet.vqueue_pause (vqueue_id, partition_id, paused_at) VALUES ($1, $2, now())
           ON CONFLICT (vqueue_id) DO NOTHING`,
          [vqueueId, partitionId],
        );
      } else {
        await this.pool.query(`DELETE FROM ratchet.vqueue_pause WHERE vqueue_id = $1`, [vqueueId]);
      }
    },
  };

  submit(batch: WriteBatch): Promise<void> {
    const stmts: Stmt[] = new Array<Stmt>(batch.writes.length);
    for (let i = 0; i < batch.writes.length; i++) stmts[i] = toStmt(batch.writes[i]!);
    const op: WriteOp = { partitions: batch.partitions, stmts, journal: batch.journal };
    if (batch.keys !== undefined) op.keys = batch.keys;
    return this.committer.submit(op);
  }

  epochOf(partition: number): string | undefined {
    return this.leases.epochOf(partition);
  }

  async notifyOutbox(partitions: number[]): Promise<void> {
    await this.pool.query(`SELECT pg_notify($1, $2)`, [OUTBOX_CHANNEL, partitions.join(',')]);
  }

  isUnavailable(err: unknown): boolean {
    return isDatabaseUnavailable(err);
  }

  close(): Promise<void> {
    return this.committer.close();
  }
}

/** The statement of one write; conditions and results are wired to the write object (see `Write`). */
function toStmt(w: Write): Stmt {
  const stmt = statementOf(w);
  const onlyIf = w.onlyIf;
  const unless = w.unless;
  if (onlyIf !== undefined) stmt.when = () => onlyIf.inserted === true;
  else if (unless !== undefined) stmt.when = () => unless.inserted === false;
  return stmt;
}

function statementOf(w: Write): Stmt {
  switch (w.kind) {
    case 'invocation.insert':
      return insertInvocation(w.row, w.input, (ok) => (w.inserted = ok));
    case 'invocation.update':
      return updateInvocation(w.id, w.update, w.now);
    case 'invocation.inbox':
      return inboxInvocation(w.id);
    case 'invocation.purge':
      return purgeInvocation(w.id);
    case 'invocation.purgeIfExpired':
      return purgeIfExpired(w.id);
    case 'journal.delete':
      return deleteJournal(w.invocationId);
    case 'lock.take':
      return takeLock(w.service, w.key, w.invocationId);
    case 'lock.release':
      return releaseLock(w.service, w.key, w.invocationId);
    case 'lock.transfer':
      return transferLock(w.service, w.key, w.from, w.to);
    case 'timer.insert':
      return insertTimer(w.timer, (id) => (w.id = id));
    case 'timer.delete':
      return deleteTimer(w.id);
    case 'timer.deleteOf':
      return deleteTimersOf(w.invocationId);
    case 'outbox.insert':
      return insertOutbox(w.row, collect(w));
    case 'outbox.request':
      return insertOutboxRequest(w.partition, w.targetInvocationId, w.request, collect(w));
    case 'outbox.delete':
      return deleteOutbox(w.seq);
    case 'outbox.awaitResult':
      return awaitResult(w.invocationId, w.callerId, w.callerPartition, w.callerCompletionId, w.entryType, collect(w));
    case 'outbox.resultToWaiters':
      return resultToWaiters(w.invocationId, collect(w));
    case 'state.set':
      return setState(w.service, w.key, w.partitionKey, w.stateKey, w.value);
    case 'state.clear':
      return clearState(w.service, w.key, w.stateKey);
    case 'state.clearAll':
      return clearAllState(w.service, w.key);
    case 'stateMutation.insert':
      return insertStateMutation(w.mutation);
    case 'stateMutation.delete':
      return deleteStateMutation(w.id);
    case 'stateMutation.apply':
      return applyStateMutation(w.service, w.key, u64ToI64(w.partitionKey), w.version, w.entries, (ok) => {
        w.applied = ok;
      });
    case 'promise.await':
      return awaitPromise(w.promise, w.callerId, w.callerPartition, w.completionId, w.entryType, collect(w));
    case 'promise.peek':
      return peekPromise(w.promise, w.callerId, w.callerPartition, w.completionId, w.entryType, collect(w));
    case 'promise.complete':
      return completePromise(
        w.promise,
        w.partitionKey,
        w.result,
        w.completer,
        w.ifCompleted,
        w.ifAlreadyCompleted,
        w.waiterEntryType,
        collect(w),
      );
  }
}

/** Collects the outbox rows a statement returned into its write. */
function collect(w: { rows?: OutboxRow[] }): (row: OutboxRow) => void {
  return (row) => (w.rows ??= []).push(row);
}
