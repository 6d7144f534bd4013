import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ErrorCode } from '../errors/codes.ts';
import { InvocationId } from '../ids/invocation-id.ts';
import { partitionKeyForKey, randomPartitionKey } from '../ids/partition-key.ts';
import { parseAwakeableId } from '../ids/awakeable-id.ts';
import { newUlidString, randomU64 } from '../ids/ulid.ts';
import { Attempt } from '../invoker/attempt.ts';
import { decideRetry, effectiveRetryPolicy, type RetryDecision, type RetryPolicy } from '../invoker/retry-policy.ts';
import { REQUESTED_ACK_FLAG, encodeFrame, type Frame } from '../protocol/framing.ts';
import { MessageType, isCommand } from '../protocol/message-types.ts';
import { invocationContentType, negotiateProtocolVersion } from '../protocol/version.ts';
import type { SchemaRegistry } from '../schema/registry.ts';
import type { HandlerSchema } from '../schema/types.ts';
import type { Http1Client, Http2Client } from '../service-client/transport.ts';
import { newWriteOp, type Stmt, type WriteOp } from '../storage/api.ts';
import { FencingError, type GroupCommitter } from '../storage/pg/group-commit.ts';
import { partitionFor, type PartitionLeases } from '../storage/pg/leases.ts';
import { u64ToI64, type Pool } from '../storage/pg/pool.ts';
import { isDatabaseUnavailable } from '../storage/pg/unavailable.ts';
import {
  getInvocation,
  getInvocations,
  insertInvocation,
  listActiveInvocations,
  updateInvocation,
  type InvocationRow,
  type InvocationUpdate,
  type NewInvocation,
} from '../storage/pg/tables/invocations.ts';
import { loadJournal } from '../storage/pg/tables/journal.ts';
import { listLocks, releaseLock, takeLock, transferLock } from '../storage/pg/tables/locks.ts';
import { StateCache, type StateChange, type StateEntry } from './state-cache.ts';
import {
  awaitResult,
  deleteOutbox,
  insertOutbox,
  insertOutboxRequest,
  listOutbox,
  resultToWaiters,
  type OutboxRequest,
  type OutboxRow,
} from '../storage/pg/tables/outbox.ts';
import { decodeNewInvocation, encodeNewInvocation } from './outbox-requests.ts';
import { awaitPromise, completePromise, getPromise, peekPromise } from '../storage/pg/tables/promises.ts';
import {
  applyStateMutation,
  deleteStateMutation,
  insertStateMutation,
  listStateMutations,
  type StateMutationRow,
} from '../storage/pg/tables/state-mutations.ts';
import { deleteJournal, purgeIfExpired, purgeInvocation } from '../storage/pg/tables/retention.ts';
import { clearAllState, clearState, getStateValue, loadState, setState } from '../storage/pg/tables/state.ts';
import { deleteTimer, deleteTimersOf, insertTimer, listTimers, type TimerRow } from '../storage/pg/tables/timers.ts';
import { canResume, treeDepth } from './awaiting.ts';
import {
  BadManagementRequestError,
  DeploymentCannotChangeError,
  DeploymentNotFoundError,
  IncompatibleDeploymentError,
  InputUnavailableError,
  InvocationAlreadyCompletedError,
  InvocationCompletedCannotResumeError,
  InvocationNotCompletedError,
  InvocationNotFoundError,
  InvocationNotRunningError,
  InvocationNotStartedError,
  InvocationStillRunningError,
  PartitionNotServedError,
  PartitionUnavailableError,
  RestartUnsupportedError,
} from './management-errors.ts';
import * as codec from './codec.ts';
import { InvocationCtx } from './invocation.ts';
import { TimerQueue } from './timer-queue.ts';
import type { InvocationTarget } from '../protocol/messages.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type {
  AcceptRequest,
  AcceptResult,
  CompletedInvocation,
  DeploymentChoice,
  JournalEntry,
  Outcome,
} from './types.ts';

export interface EngineOptions {
  node: string;
  partitions: number;
  clusterName: string;
  defaultRetryPolicy: RetryPolicy;
  inactivityTimeoutMs: number;
  abortTimeoutMs: number;
  messageSizeLimit: number;
  maxAwaitedFutureDepth: number;
  maxProtocolVersion: number;
  defaultIdempotencyRetentionMs: number;
  defaultJournalRetentionMs: number;
  defaultWorkflowCompletionRetentionMs: number;
}

export interface EngineDeps {
  pool: Pool;
  committer: GroupCommitter;
  leases: PartitionLeases;
  registry: SchemaRegistry;
  http2: Http2Client;
  http1: Http1Client;
  logger: Logger;
  metrics: Metrics;
  /**
   * What this process holds in memory of these partitions may be wrong (a read or write failed midway): they are to be
   * dropped and recovered from PostgreSQL (the cluster coordinator does it). Without it nothing is recovered.
   */
  onSuspect?: (partitions: number[]) => void;
}

/** Resolved with the completed invocation, or with undefined when it turned out to be gone (purged, expired). */
type Waiter = (done: CompletedInvocation | undefined) => void;

/**
 * The only writer of invocation state. Every change is a WriteOp committed through the group committer; effects that
 * others can observe (frames sent to the deployment, results handed to callers) happen only after that commit.
 */
export class Engine {
  private readonly active = new Map<string, InvocationCtx>();
  private readonly loading = new Map<string, Promise<InvocationCtx | undefined>>();
  /** Exclusive lock holder per `service/key` and the FIFO inbox behind it. */
  private readonly locks = new Map<string, string>();
  private readonly inboxes = new Map<string, string[]>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  /** Queued state replacements by their in-memory inbox entry (`mutation:<n>`). */
  private readonly mutations = new Map<string, StateMutationRow>();
  private mutationSeq = 0;
  private readonly timers: TimerQueue<TimerRow>;
  private attemptSeq = 0;
  /** Committed state of virtual-object keys, so that an attempt starts without reading it (see StateCache). */
  private readonly stateCache = new StateCache(STATE_CACHE_KEYS);
  private stopped = false;
  /** Partitions served: their invocations, locks, inboxes, timers and outbox live in this object's memory. */
  private readonly served = new Set<number>();
  /** Bumped whenever partitions are dropped: a read started before a drop must not install what it read. */
  private generation = 0;
  /** Polls PostgreSQL for the results awaited here of invocations whose partition this process does not serve. */
  private remotePoll: NodeJS.Timeout | undefined;
  /** Outbox rows being delivered (round Infinity) or delivered during outbox read `round` (see pollOutbox). */
  private readonly outboxSeen = new Map<string, { partition: number; round: number }>();
  private outboxRound = 0;
  private readonly toNotify = new Set<number>();
  private notifying = false;
  private readonly log: Logger;

  constructor(
    private readonly options: EngineOptions,
    private readonly deps: EngineDeps,
  ) {
    this.log = deps.logger.child({ component: 'engine' });
    this.timers = new TimerQueue((t) => this.fireTimer(t));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // lifecycle

  /** Whether this process serves `partition` now (requests for others go to their owner). */
  serves(partition: number): boolean {
    return this.served.has(partition);
  }

  servedPartitions(): number[] {
    return [...this.served].sort((a, b) => a - b);
  }

  /** The partition of an invocation id, a virtual-object / workflow key, or a partition key. */
  partitionOf(partitionKey: bigint): number {
    return partitionFor(partitionKey, this.options.partitions);
  }

  partitionOfKey(key: string): number {
    return partitionFor(partitionKeyForKey(key), this.options.partitions);
  }

  /**
   * Picks up partitions this process has just taken (or taken back after a failure): everything in flight in them,
   * exactly as after a restart: running attempts restart from their journal, timers, inboxes, key locks, queued
   * state replacements and the outbox are re-armed. Reads everything before changing memory, so a failed read leaves
   * the partitions unserved (the caller retries). The caller holds the leases and never recovers a served partition.
   */
  async recover(partitions: number[]): Promise<{ invocations: number; timers: number }> {
    const wanted = partitions.filter((p) => !this.served.has(p));
    if (wanted.length === 0 || this.stopped) return { invocations: 0, timers: 0 };
    // Held at these epochs now; a partition given up or re-taken while it is read is not installed from this read.
    const epochs = wanted.map((p) => this.deps.leases.epochOf(p));
    const pool = this.deps.pool;
    const ids = wanted;
    const locks = await listLocks(pool, ids);
    const rows = await listActiveInvocations(pool, ids);
    const timers = await listTimers(pool, ids);
    const mutations = await listStateMutations(pool, ids);
    const outbox = await listOutbox(pool, ids);
    if (this.stopped) return { invocations: 0, timers: 0 };
    if (ids.some((p, i) => epochs[i] === undefined || this.deps.leases.epochOf(p) !== epochs[i])) {
      throw new Error(`partitions ${ids.join(', ')} were given up or re-taken while they were being recovered`);
    }
    for (const p of ids) this.served.add(p);
    for (const l of locks) this.locks.set(lockKey(l.service, l.key), l.invocationId);
    const timed = new Set(timers.filter((t) => t.kind !== 'sleep').map((t) => t.invocationId));
    const inboxed: InvocationCtx[] = [];
    const recovered: InvocationCtx[] = [];
    for (const row of rows) {
      // Admitted meanwhile by a call from a partition served here (it is newer than what was read): keep it.
      if (this.active.has(row.id)) continue;
      const ctx = new InvocationCtx(row);
      this.active.set(ctx.id, ctx);
      recovered.push(ctx);
      if (ctx.status === 'inboxed') inboxed.push(ctx);
    }
    // Inboxed invocations and queued state replacements share the inbox sequence: rebuild each key's queue in it.
    const queued: { seq: bigint; lk: string; entry: string }[] = inboxed.map((ctx) => ({
      seq: ctx.inboxSeq!,
      lk: lockKey(ctx.serviceName, ctx.serviceKey!),
      entry: ctx.id,
    }));
    for (const m of mutations) {
      const memId = `mutation:${++this.mutationSeq}`;
      this.mutations.set(memId, m);
      queued.push({ seq: m.inboxSeq, lk: lockKey(m.service, m.key), entry: memId });
    }
    queued.sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
    const touched = new Set<string>();
    for (const q of queued) {
      this.inbox(q.lk).push(q.entry);
      touched.add(q.lk);
    }
    // A key whose waiters have no lock holder (nothing would hand it over): the oldest takes it now.
    for (const lk of touched) this.resumeInbox(lk);
    for (const t of timers) this.timers.schedule(t, t.fireAt.getTime());
    for (const ctx of recovered) {
      if (ctx.status === 'invoked' && !timed.has(ctx.id)) void this.startAttempt(ctx);
      else if (ctx.status === 'suspended') void this.recheckSuspended(ctx);
    }
    for (const row of outbox) void this.deliver(row);
    return { invocations: rows.length, timers: timers.length };
  }

  /**
   * Forgets everything in memory about `partitions` (given up, lost, or suspect after a failed write): attempts are
   * aborted, timers disarmed, locks and inboxes forgotten. Their rows are the truth and whoever serves the partitions
   * next recovers them. Requests waiting here for results of these partitions keep waiting, through PostgreSQL.
   */
  drop(partitions: Iterable<number>): void {
    const set = new Set<number>();
    for (const p of partitions) if (this.served.delete(p)) set.add(p);
    if (set.size === 0) return;
    this.generation += 1;
    for (const [id, ctx] of this.active) {
      if (!set.has(ctx.partitionId)) continue;
      // Dead for every callback still holding it: commits' follow-ups check `poisoned`.
      ctx.poisoned = true;
      ctx.attempt?.abort();
      ctx.attempt = undefined;
      this.active.delete(id);
    }
    this.timers.removeWhere((t) => set.has(t.partitionId));
    for (const lk of this.locks.keys()) if (set.has(this.lockPartition(lk))) this.locks.delete(lk);
    for (const lk of this.inboxes.keys()) if (set.has(this.lockPartition(lk))) this.inboxes.delete(lk);
    for (const [memId, m] of this.mutations) if (set.has(m.partitionId)) this.mutations.delete(memId);
    for (const [seq, seen] of this.outboxSeen) if (set.has(seen.partition)) this.outboxSeen.delete(seq);
    this.stateCache.clear();
    this.pollRemoteResults();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timers.clear();
    if (this.remotePoll !== undefined) clearTimeout(this.remotePoll);
    for (const ctx of this.active.values()) ctx.attempt?.abort();
    await this.deps.committer.close();
  }

  /** A keyless call with a generated idempotency key whose draw fell on a partition served elsewhere. */
  private shouldRedraw(req: AcceptRequest, partition: number): boolean {
    return (
      req.idempotencyKeyGenerated === true &&
      req.key === undefined &&
      this.served.size > 0 &&
      !this.served.has(partition)
    );
  }

  /** Refuses a request for a partition this process does not serve, before anything is written. */
  private requireServed(partition: number): void {
    if (!this.served.has(partition)) throw new PartitionNotServedError(partition);
  }

  /** The partition of a lock key (`service\0key`). */
  private lockPartition(lk: string): number {
    return this.partitionOfKey(lk.slice(lk.indexOf('\u0000') + 1));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // accept

  /** Stores a new invocation (input as journal entry 0) and starts it once committed. */
  async accept(req: AcceptRequest): Promise<AcceptResult> {
    const now = new Date();
    let invocation = this.newInvocation(req, now, undefined);
    // A generated idempotency key of a keyless call is random: one whose invocation lands in a partition served here
    // is as good as any, and saves sending the request to another node (which would draw a partition of its own).
    for (let i = 0; i < PLACEMENT_DRAWS && this.shouldRedraw(req, invocation.ctxRow.partitionId); i++) {
      req.idempotencyKey = newUlidString();
      invocation = this.newInvocation(req, now, undefined);
    }
    const { ctxRow, inputRaw, executionTime } = invocation;
    this.requireServed(ctxRow.partitionId);
    if (this.active.has(ctxRow.id)) return { id: ctxRow.id, created: false, executionTime };
    const op = newWriteOp(ctxRow.partitionId, [orderKey(ctxRow.partitionKey)]);
    let created = true;
    const deterministic = ctxRow.idempotencyKey !== null && req.idempotencyKeyGenerated !== true;
    const { stmts, ctx } = this.admit(ctxRow, inputRaw, op, now, deterministic, (inserted) => (created = inserted));
    const runnable = ctxRow.status === 'invoked';
    op.stmts.push(...stmts);
    try {
      await this.deps.committer.submit(op);
    } catch (err) {
      // Not stored (or not known to be): forget it here; a retry of the request finds the row if it exists.
      this.undoAdmit(ctx);
      throw rerouteIfFenced(err, ctxRow.partitionId);
    }
    if (!created) {
      this.undoAdmit(ctx);
      return { id: ctxRow.id, created: false, executionTime };
    }
    this.deps.metrics.invocationsAccepted.inc({ invoked_by: req.invokedBy });
    this.afterAdmit(ctx, runnable);
    return { id: ctxRow.id, created: true, executionTime };
  }

  private newInvocation(
    req: AcceptRequest,
    now: Date,
    caller: { id: string; target: string } | undefined,
  ): { ctxRow: NewInvocation; inputRaw: Uint8Array; executionTime: Date | undefined } {
    const key = req.key ?? null;
    const workflowRun = req.service.ty === 'Workflow' && req.handler.ty === 'Workflow';
    let id: string;
    if (workflowRun) {
      id = InvocationId.forWorkflow(req.service.name, key!);
    } else if (req.idempotencyKey !== undefined) {
      id = InvocationId.forIdempotent(req.service.name, key ?? undefined, req.handler.name, req.idempotencyKey);
    } else {
      id = InvocationId.generate(key === null ? randomPartitionKey(req.service.name) : partitionKeyForKey(key));
    }
    const pk = InvocationId.partitionKey(id as InvocationId);
    const executionTime =
      req.delayMs !== undefined && req.delayMs > 0 ? new Date(now.getTime() + req.delayMs) : undefined;
    const service = this.deps.registry.service(req.service.name);
    const retention = workflowRun
      ? (req.handler.workflowCompletionRetentionMs ??
        service?.overrides.workflowCompletionRetentionMs ??
        service?.schema.workflowCompletionRetentionMs ??
        this.options.defaultWorkflowCompletionRetentionMs)
      : (req.handler.idempotencyRetentionMs ??
        service?.overrides.idempotencyRetentionMs ??
        service?.schema.idempotencyRetentionMs ??
        this.options.defaultIdempotencyRetentionMs);
    const journalRetention =
      req.handler.journalRetentionMs ??
      service?.overrides.journalRetentionMs ??
      service?.schema.journalRetentionMs ??
      this.options.defaultJournalRetentionMs;
    return {
      ctxRow: {
        id,
        partitionKey: pk,
        partitionId: partitionFor(pk, this.options.partitions),
        serviceName: req.service.name,
        serviceKey: key,
        handlerName: req.handler.name,
        serviceTy: req.service.ty,
        handlerTy: req.handler.ty ?? null,
        status: executionTime === undefined ? 'invoked' : 'scheduled',
        idempotencyKey: req.idempotencyKey ?? null,
        invokedBy: req.invokedBy,
        invokedById: caller?.id ?? null,
        invokedByTarget: caller?.target ?? null,
        randomSeed: randomU64(),
        journalLength: 1,
        inboxSeq: false,
        createdAt: now,
        scheduledStartAt: executionTime ?? null,
        completionRetentionMs: retention,
        journalRetentionMs: journalRetention,
      },
      inputRaw: codec.inputCommand(req.headers, req.body),
      executionTime,
    };
  }

  /**
   * Builds the statements that create an invocation: row, Input entry, and either a start timer (delayed), a place
   * in the key's inbox (exclusive handler of a busy key) or the key's lock. Memory is updated at once; `undoAdmit`
   * reverts it when the row turned out to exist already.
   */
  private admit(
    row: NewInvocation,
    inputRaw: Uint8Array,
    op: WriteOp,
    now: Date,
    deterministic: boolean,
    onInserted: (inserted: boolean) => void,
  ): { stmts: Stmt[]; ctx: InvocationCtx } {
    const stmts: Stmt[] = [];
    // A deterministic id (idempotency or workflow key) may name a completed invocation whose retention ended but which
    // the cleaner has not removed yet: it is gone for good, so this request starts afresh.
    if (deterministic) stmts.push(purgeIfExpired(row.id));
    let inserted = false;
    const onlyIfInserted = (stmt: Stmt): Stmt => ({ ...stmt, when: () => inserted });
    const exclusive = row.serviceKey !== null && (row.handlerTy === 'Exclusive' || row.handlerTy === 'Workflow');
    const lk = exclusive ? lockKey(row.serviceName, row.serviceKey!) : undefined;
    // Busy: the lock is held, or others wait already (the lock can be free for a moment while the oldest waiter's
    // own insert is still pending; see handOver).
    if (row.status === 'invoked' && lk !== undefined && (this.locks.has(lk) || this.inboxes.has(lk))) {
      row.status = 'inboxed';
      row.inboxSeq = true;
    }
    if (row.status === 'invoked') {
      // It starts as soon as this write commits: its pin and first attempt start go into the insert, which saves
      // the attempt-start transaction (startAttempt writes nothing for this attempt). Without a usable deployment,
      // startAttempt pins (and fails) as usual.
      if (row.deploymentId == null) {
        const pin = this.choosePin(row.serviceName);
        if (!('failure' in pin)) {
          row.deploymentId = pin.deployment.id;
          row.protocolVersion = pin.protocolVersion;
        }
      }
      if (row.deploymentId != null && row.protocolVersion != null) row.attemptStartAt = now;
    }
    stmts.push(
      insertInvocation(row, inputRaw, (ok) => {
        inserted = ok;
        onInserted(ok);
      }),
    );
    // Every field spelled out (no spread of `row`): this runs for every new invocation, and a spread into a literal
    // of this size is several times slower.
    const ctx = new InvocationCtx({
      id: row.id,
      partitionKey: row.partitionKey,
      partitionId: row.partitionId,
      serviceName: row.serviceName,
      serviceKey: row.serviceKey,
      handlerName: row.handlerName,
      serviceTy: row.serviceTy,
      handlerTy: row.handlerTy,
      status: row.status,
      deploymentId: row.deploymentId ?? null,
      protocolVersion: row.protocolVersion ?? null,
      idempotencyKey: row.idempotencyKey,
      invokedBy: row.invokedBy,
      invokedById: row.invokedById,
      invokedByTarget: row.invokedByTarget,
      randomSeed: row.randomSeed,
      journalLength: row.journalLength,
      retryCount: 0,
      retryCountSinceAppend: 0,
      lastAppendAt: now,
      awaiting: null,
      inboxSeq: null,
      createdAt: row.createdAt,
      scheduledStartAt: row.scheduledStartAt,
      completedAt: null,
      completionRetentionMs: row.completionRetentionMs,
      journalRetentionMs: row.journalRetentionMs,
      resultKind: null,
      output: null,
      failureCode: null,
      failureMessage: null,
      failureMetadata: null,
      expiresAt: null,
    });
    ctx.journal = [{ index: 0, type: MessageType.InputCommand, raw: inputRaw }];
    ctx.mayHaveTimers = row.status === 'scheduled';
    ctx.startRecorded = row.attemptStartAt != null;
    // A random id (no idempotency key of the caller's, not a workflow run) cannot exist yet, so its insert always
    // inserts; any other may turn out to be a duplicate.
    const random = !deterministic && row.handlerTy !== 'Workflow' && row.restartedFrom == null;
    ctx.insertPending = !random;
    if (row.status === 'scheduled') {
      stmts.push(
        onlyIfInserted(
          insertTimer(
            {
              partitionId: row.partitionId,
              fireAt: row.scheduledStartAt!,
              invocationId: row.id,
              kind: 'start',
              completionId: null,
            },
            (id) =>
              (ctx.pendingTimer = {
                id,
                partitionId: row.partitionId,
                fireAt: row.scheduledStartAt!,
                invocationId: row.id,
                kind: 'start',
                completionId: null,
              }),
          ),
        ),
      );
    } else if (row.status === 'inboxed') {
      this.inbox(lk!).push(row.id);
    } else if (lk !== undefined) {
      this.locks.set(lk, row.id);
      // A random id's insert always inserts: no need to wait for its result, which would split the transaction's
      // pipeline into two round trips.
      const take = takeLock(row.serviceName, row.serviceKey!, row.id);
      stmts.push(random ? take : onlyIfInserted(take));
    }
    this.active.set(row.id, ctx);
    return { stmts, ctx };
  }

  /** The row existed already (a completed duplicate): forget what `admit` put in memory. */
  private undoAdmit(ctx: InvocationCtx): void {
    ctx.insertPending = false;
    if (this.active.get(ctx.id) === ctx) this.active.delete(ctx.id);
    if (ctx.serviceKey === null) return;
    const lk = lockKey(ctx.serviceName, ctx.serviceKey);
    const q = this.inboxes.get(lk);
    if (q !== undefined) {
      const i = q.indexOf(ctx.id);
      if (i >= 0) q.splice(i, 1);
      if (q.length === 0) this.inboxes.delete(lk);
    }
    // Others may have queued behind the lock it seemed to take meanwhile, or behind it while it waited.
    if (this.locks.get(lk) === ctx.id) this.locks.delete(lk);
    this.resumeInbox(lk);
  }

  /** The insert of an invocation admitted with a possibly existing id inserted: an inboxed one may now get the lock. */
  private admitConfirmed(ctx: InvocationCtx): void {
    if (!ctx.insertPending) return;
    ctx.insertPending = false;
    if (ctx.status === 'inboxed') this.resumeInbox(lockKey(ctx.serviceName, ctx.serviceKey!));
  }

  /** The key's lock is free but invocations wait for it (a pending head held it back): the oldest takes it now. */
  private resumeInbox(lk: string): void {
    if (this.locks.has(lk) || !this.inboxes.has(lk)) return;
    const op = newWriteOp();
    const next = this.handOver(lk, op, new Date());
    if (next !== undefined) {
      op.partitions.push(next.partitionId);
      void this.commit(next, op, () => void this.startAttempt(next));
    } else if (op.stmts.length > 0) {
      // Only queued state replacements were applied.
      void this.deps.committer.submit(op).catch((err: unknown) => {
        this.log.error({ err }, 'queued state replacement could not be applied');
      });
    }
  }

  /**
   * The key's lock is free: the oldest inboxed invocation takes it (statements into `op`). Returns it, to be started
   * once `op` committed. `from` is the holder that released it in `op` (its lock row is handed over, or deleted
   * when nobody waits); without it the lock row does not exist yet.
   */
  private handOver(lk: string, op: WriteOp, now: Date, from?: InvocationCtx): InvocationCtx | undefined {
    const queue = this.inboxes.get(lk);
    let next: InvocationCtx | undefined;
    while (next === undefined && queue !== undefined && queue.length > 0) {
      // The oldest waiter may be a duplicate of an invocation that exists already (its insert's outcome is not known
      // yet): handing it the lock could mark a completed invocation running again. The lock stays free until its
      // insert settles (admitConfirmed / undoAdmit hand it over then); later arrivals queue behind it.
      if (this.active.get(queue[0]!)?.insertPending === true) break;
      const nextId = queue.shift()!;
      const mutation = this.mutations.get(nextId);
      if (mutation !== undefined) {
        // A state replacement whose turn came: applied in the same write, after the previous holder's changes.
        this.mutations.delete(nextId);
        op.stmts.push(this.applyMutation(mutation), deleteStateMutation(mutation.id));
        this.dropCachedStateWith(op, lk);
        continue;
      }
      next = this.active.get(nextId);
    }
    if (queue !== undefined && queue.length === 0) this.inboxes.delete(lk);
    if (next === undefined) {
      if (from !== undefined) op.stmts.push(releaseLock(from.serviceName, from.serviceKey!, from.id));
      return undefined;
    }
    this.locks.set(lk, next.id);
    next.status = 'invoked';
    // It starts as soon as `op` commits: its pin and attempt start go into this update, as for an invocation
    // admitted runnable (startAttempt then writes no start update for this attempt).
    const started: InvocationUpdate = {};
    if (next.deploymentId === null) {
      const pin = this.choosePin(next.serviceName);
      if (!('failure' in pin)) {
        next.deploymentId = pin.deployment.id;
        next.protocolVersion = pin.protocolVersion;
        started.deploymentId = pin.deployment.id;
        started.protocolVersion = pin.protocolVersion;
      }
    }
    if (next.deploymentId !== null && next.protocolVersion !== null) {
      started.lastStartAt = now;
      started.runningAt = now;
      started.lastAttemptDeploymentId = next.deploymentId;
      next.startRecorded = true;
    }
    op.stmts.push(
      from === undefined
        ? takeLock(next.serviceName, next.serviceKey!, next.id)
        : transferLock(next.serviceName, next.serviceKey!, from.id, next.id),
      updateInvocation(next.id, { status: 'invoked', inboxSeq: null, ...started }, now),
    );
    return next;
  }

  /** `op` replaces a key's state wholesale: the cached copy is dropped now and again once `op` settles. */
  private dropCachedStateWith(op: WriteOp, lk: string): void {
    this.stateCache.invalidate(lk);
    const before = op.onCommitted;
    op.onCommitted = () => {
      before?.();
      this.stateCache.invalidate(lk);
    };
    const beforeFailed = op.onFailed;
    op.onFailed = () => {
      beforeFailed?.();
      this.stateCache.invalidate(lk);
    };
  }

  private applyMutation(m: StateMutationRow): Stmt {
    return applyStateMutation(m.service, m.key, u64ToI64(partitionKeyForKey(m.key)), m.version, m.entries, (ok) => {
      if (!ok) {
        this.log.warn(
          { service: m.service, key: m.key, version: m.version },
          'state replacement not applied: the state changed since the version it was based on',
        );
      }
    });
  }

  /**
   * Replaces the whole state of a virtual object or workflow key (`POST /services/{s}/state`). It runs in the key's
   * order: at once when the key is idle, otherwise after the exclusive invocations queued before it. With `version`,
   * it applies only if the state it finds still has that version. Resolves once it is durable (queued or applied).
   */
  async modifyState(
    service: string,
    key: string,
    version: string | undefined,
    entries: { key: Buffer; value: Buffer }[],
  ): Promise<void> {
    const partitionId = partitionFor(partitionKeyForKey(key), this.options.partitions);
    this.requireServed(partitionId);
    const lk = lockKey(service, key);
    const m: StateMutationRow = {
      id: randomUUID(),
      partitionId,
      service,
      key,
      version: version ?? null,
      entries,
      inboxSeq: 0n,
    };
    if (!this.locks.has(lk) && (this.inboxes.get(lk)?.length ?? 0) === 0) {
      const op: WriteOp = { partitions: [partitionId], stmts: [this.applyMutation(m)], journal: [] };
      this.dropCachedStateWith(op, lk);
      await this.deps.committer.submit(op).catch((err: unknown) => {
        throw rerouteIfFenced(err, partitionId);
      });
      return;
    }
    // Queued now, in memory, so that whatever is admitted after this call comes after it.
    const memId = `mutation:${++this.mutationSeq}`;
    this.mutations.set(memId, m);
    this.inbox(lk).push(memId);
    try {
      await this.submitStmts(partitionId, [insertStateMutation(m)]);
    } catch (err) {
      this.mutations.delete(memId);
      const q = this.inboxes.get(lk);
      const i = q?.indexOf(memId) ?? -1;
      if (i >= 0) q!.splice(i, 1);
      throw rerouteIfFenced(err, partitionId);
    }
  }

  /**
   * Once the admitting write committed and inserted it: confirm the insert (an inboxed one may now be handed its key's
   * lock), arm its start timer, or start it if it was admitted runnable. One admitted
   * into a key's inbox is never started here, even if it took the key's lock meanwhile: the holder's completion
   * (and its state writes) may not be durable yet, and that completion starts it once it is.
   */
  private afterAdmit(ctx: InvocationCtx, admittedRunnable: boolean): void {
    this.admitConfirmed(ctx);
    if (ctx.pendingTimer !== undefined) {
      this.timers.schedule(ctx.pendingTimer, ctx.pendingTimer.fireAt.getTime());
      ctx.pendingTimer = undefined;
    }
    if (admittedRunnable && ctx.status === 'invoked') void this.startAttempt(ctx);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // results

  /** Resolves when the invocation completes (at once if it already has). */
  async awaitCompletion(id: string): Promise<CompletedInvocation | undefined> {
    let resolve!: Waiter;
    const done = new Promise<CompletedInvocation | undefined>((r) => (resolve = r));
    let set = this.waiters.get(id);
    if (set === undefined) this.waiters.set(id, (set = new Set()));
    set.add(resolve);
    try {
      if (!this.active.has(id)) {
        const row = await getInvocation(this.deps.pool, id);
        if (row === undefined || isExpired(row)) return undefined;
        if (row.status === 'completed') return completedFromRow(row);
        // Not served here: its owner completes it elsewhere, and the result is read from PostgreSQL.
        if (!this.served.has(row.partitionId)) this.pollRemoteResults();
      }
      return await done;
    } finally {
      set.delete(resolve);
      if (set.size === 0 && this.waiters.get(id) === set) this.waiters.delete(id);
    }
  }

  /** How many requests are waiting in `awaitCompletion` for `id` on this replica. */
  completionWaiters(id: string): number {
    return this.waiters.get(id)?.size ?? 0;
  }

  /**
   * Results awaited here of invocations whose partition this process does not serve (another node completes them, or
   * the partition moved away while the request waited) are read from PostgreSQL, every 200 ms while there are any.
   */
  private pollRemoteResults(): void {
    if (this.remotePoll !== undefined || this.stopped) return;
    const remote = (): string[] => {
      const ids: string[] = [];
      for (const id of this.waiters.keys()) {
        const parsed = InvocationId.tryParse(id);
        if (parsed !== undefined && !this.served.has(this.partitionOf(InvocationId.partitionKey(parsed)))) ids.push(id);
      }
      return ids;
    };
    const tick = async (): Promise<void> => {
      const ids = remote();
      if (ids.length === 0) {
        this.remotePoll = undefined;
        return;
      }
      try {
        const found = new Map<string, InvocationRow>();
        for (const row of await getInvocations(this.deps.pool, ids)) found.set(row.id, row);
        for (const id of ids) {
          const row = found.get(id);
          const done = row === undefined || isExpired(row) ? undefined : row.status === 'completed' ? row : null;
          if (done === null) continue;
          const set = this.waiters.get(id);
          if (set !== undefined) for (const w of set) w(done === undefined ? undefined : completedFromRow(done));
        }
      } catch (err) {
        this.log.debug({ err }, 'could not read awaited results; trying again');
      }
      if (this.stopped) return;
      this.remotePoll = setTimeout(() => void tick(), REMOTE_POLL_MS);
    };
    this.remotePoll = setTimeout(() => void tick(), REMOTE_POLL_MS);
  }

  async getCompleted(id: string): Promise<{ row: InvocationRow; done?: CompletedInvocation } | undefined> {
    const row = await getInvocation(this.deps.pool, id);
    if (row === undefined || isExpired(row)) return undefined;
    return row.status === 'completed' ? { row, done: completedFromRow(row) } : { row };
  }

  // ---------------------------------------------------------------------------------------------------------------
  // signals from outside (ingress awakeables, cancellation)

  /**
   * Delivers a signal to an invocation: an awakeable completion (`idx` ≥ 17), a named signal, or cancellation
   * (`idx` 1). Resolves once the signal is durable in the outbox; delivery follows. A signal for an invocation that is
   * unknown or already completed is dropped, as restate does.
   */
  async signal(
    targetId: InvocationId,
    signal: { idx: number } | { name: string },
    result: codec.EngineResult,
  ): Promise<void> {
    const partitionId = partitionFor(InvocationId.partitionKey(targetId), this.options.partitions);
    this.requireServed(partitionId);
    let row: OutboxRow | undefined;
    const stored = this.submitStmts(partitionId, [
      insertOutbox(
        {
          partitionId,
          targetInvocationId: targetId,
          entryType: MessageType.SignalNotification,
          completionId: null,
          signalIdx: 'idx' in signal ? signal.idx : null,
          signalName: 'name' in signal ? signal.name : null,
          sourceInvocationId: null,
          raw: Buffer.from(
            codec.notification(
              'idx' in signal ? { kind: 'signal', idx: signal.idx } : { kind: 'signalName', name: signal.name },
              result,
            ),
          ),
        },
        (r) => (row = r),
      ),
    ]);
    await stored.catch((err: unknown) => {
      throw rerouteIfFenced(err, partitionId);
    });
    if (row !== undefined) void this.deliver(row);
  }

  /**
   * Cancels an invocation: signal 1, which a running or suspended handler sees as a 409 "Cancelled" failure (and can
   * compensate); a paused one is resumed to see it; one that has not started yet is failed at once.
   */
  async cancel(id: InvocationId): Promise<'accepted' | 'done' | 'not_found' | 'completed'> {
    const row = await getInvocation(this.deps.pool, id);
    if (row === undefined || isExpired(row)) return 'not_found';
    if (row.status === 'completed') return 'completed';
    await this.signal(id, { idx: CANCEL_SIGNAL }, { kind: 'void' });
    // One that has not started is failed without running anything: done, not merely accepted.
    return row.status === 'scheduled' || row.status === 'inboxed' ? 'done' : 'accepted';
  }

  // ---------------------------------------------------------------------------------------------------------------
  // management (admin API): kill, pause, resume, purge, purge-journal, restart-as-new

  /** Terminates an invocation without running anything more: it fails with 409 "killed", and so do its callees. */
  async kill(id: InvocationId): Promise<void> {
    const ctx = await this.managed(id);
    if (ctx.status === 'completed') throw new InvocationAlreadyCompletedError(id);
    await ctx.ensureJournal(() => this.loadEntries(ctx.id));
    const children: InvocationId[] = [];
    for (const child of pendingCallees(ctx.journal ?? [])) {
      const childId = InvocationId.tryParse(child);
      if (childId !== undefined) children.push(childId);
    }
    // Callees in partitions served elsewhere are killed by their owners: asked in the same write.
    const requested: OutboxRow[] = [];
    const remote = children
      .filter((c) => !this.served.has(this.partitionOf(InvocationId.partitionKey(c))))
      .map((c) =>
        insertOutboxRequest(this.partitionOf(InvocationId.partitionKey(c)), c, { kind: 'kill' }, (r) =>
          requested.push(r),
        ),
      );
    if (ctx.status === 'scheduled' || ctx.status === 'inboxed') this.forgetNotStarted(ctx);
    if (!(await this.complete(ctx, { kind: 'failure', failure: { code: 409, message: 'killed' } }, {}, remote))) {
      throw new PartitionUnavailableError(id);
    }
    for (const r of requested) void this.deliver(r);
    for (const childId of children) {
      if (this.served.has(this.partitionOf(InvocationId.partitionKey(childId))))
        this.kill(childId).catch(() => undefined);
    }
  }

  /** Stops a running or suspended invocation until it is resumed. */
  async pause(id: InvocationId): Promise<'paused' | 'already_paused'> {
    const ctx = await this.managed(id);
    if (ctx.status === 'paused') return 'already_paused';
    if (ctx.status !== 'invoked' && ctx.status !== 'suspended') throw new InvocationNotRunningError(id);
    ctx.status = 'paused';
    ctx.awaiting = undefined;
    const attempt = ctx.attempt;
    ctx.attempt = undefined;
    attempt?.abort();
    this.write(ctx, [updateInvocation(ctx.id, { status: 'paused', awaiting: null, nextRetryAt: null }, new Date())]);
    await this.settled(ctx);
    if (ctx.poisoned) throw this.unavailable(id, ctx.partitionId);
    return 'paused';
  }

  /**
   * Resumes a paused or suspended invocation (one backing off retries at once; a running one is left alone).
   * `deployment` replaces the pinned deployment; only for paused or suspended invocations that have one.
   */
  async resume(id: InvocationId, deployment: DeploymentChoice | undefined): Promise<void> {
    const ctx = await this.managed(id);
    if (ctx.status === 'completed') throw new InvocationCompletedCannotResumeError(id);
    if (ctx.status === 'scheduled' || ctx.status === 'inboxed') throw new InvocationNotStartedError(id, 'resumed');
    const stmts: Stmt[] = [];
    if (deployment !== undefined && deployment.kind !== 'keep') {
      if ((ctx.status !== 'paused' && ctx.status !== 'suspended') || ctx.deploymentId === null) {
        throw new DeploymentCannotChangeError(id);
      }
      const chosen = this.chooseDeployment(id, ctx.serviceName, deployment, ctx.protocolVersion!, 'resume');
      ctx.deploymentId = chosen;
      stmts.push(updateInvocation(ctx.id, { deploymentId: chosen }, new Date()));
    }
    const now = new Date();
    if (ctx.status === 'paused' || ctx.status === 'suspended') {
      ctx.status = 'invoked';
      ctx.awaiting = undefined;
      stmts.push(updateInvocation(ctx.id, { status: 'invoked', awaiting: null, nextRetryAt: null }, now));
    }
    if (stmts.length > 0) this.write(ctx, stmts);
    await this.settled(ctx);
    if (ctx.poisoned) throw this.unavailable(id, ctx.partitionId);
    void this.startAttempt(ctx);
  }

  /** Forgets a completed invocation: its result, its journal, and for a workflow run the key's state and promises. */
  async purge(id: InvocationId): Promise<void> {
    const row = await this.completedRow(id);
    this.requireServed(row.partitionId);
    await this.submitOrUnavailable(id, row.partitionId, [purgeInvocation(id)]);
  }

  /** Drops a completed invocation's journal and keeps its result. */
  async purgeJournal(id: InvocationId): Promise<void> {
    const row = await this.completedRow(id);
    this.requireServed(row.partitionId);
    await this.submitOrUnavailable(id, row.partitionId, [
      deleteJournal(id),
      updateInvocation(id, { journalExpiresAt: null }, new Date()),
    ]);
  }

  /**
   * Starts a new invocation (new id, same partition key) from a completed one: with its input only (`from` 0), or
   * with the journal prefix up to entry `from` plus the completions of the commands in it, pinned as `deployment`
   * says. The new invocation records where it was restarted from.
   */
  async restartAsNew(id: InvocationId, from: number, deployment: DeploymentChoice | undefined): Promise<string> {
    const row = await getInvocation(this.deps.pool, id);
    if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
    if (row.status === 'scheduled' || row.status === 'inboxed') throw new InvocationNotStartedError(id, 'restarted');
    if (row.status !== 'completed') throw new InvocationStillRunningError(id);
    if (row.serviceTy === 'Workflow' && row.handlerTy === 'Workflow') throw new RestartUnsupportedError(id);
    if (row.protocolVersion !== null && row.protocolVersion < 5) throw new RestartUnsupportedError(id);
    this.requireServed(row.partitionId);
    if (deployment !== undefined && from === 0) {
      throw new BadManagementRequestError('the deployment parameter can be used only together with from > 0');
    }
    const journal = await this.loadEntries(id);
    const input = journal.find((e) => e.index === 0);
    if (input === undefined || input.type !== MessageType.InputCommand) throw new InputUnavailableError(id);

    const entries: JournalEntry[] = [];
    let pin: { deploymentId: string | null; protocolVersion: number | null } = {
      deploymentId: null,
      protocolVersion: null,
    };
    if (from > 0) {
      if (from >= journal.length) {
        throw new BadManagementRequestError(
          `from ${from} is past the end of the journal of '${id}', which has ${journal.length} entries`,
        );
      }
      const prefix = journal.slice(1, from + 1);
      const needed = new Set<number>();
      for (const e of prefix) for (const c of codec.completionIdsOf(e.type, e.raw)) needed.add(c);
      const completions = new Map<number, JournalEntry>();
      for (const e of journal) {
        if (e.completionId !== undefined && needed.has(e.completionId) && !isCommand(e.type)) {
          completions.set(e.completionId, e);
        }
      }
      const missing = [...needed].filter((c) => !completions.has(c));
      if (missing.length > 0) {
        throw new BadManagementRequestError(
          `the journal prefix up to entry ${from} of '${id}' contains commands that were not completed ` +
            `(completion ids ${missing.join(', ')}); choose an earlier entry`,
        );
      }
      const inPrefix = new Set(prefix.map((e) => e.index));
      entries.push(...prefix);
      for (const e of journal) {
        if (
          !inPrefix.has(e.index) &&
          e.completionId !== undefined &&
          needed.has(e.completionId) &&
          !isCommand(e.type)
        ) {
          entries.push(e);
        }
      }
      const protocolVersion = row.protocolVersion;
      if (protocolVersion === null) throw new DeploymentCannotChangeError(id);
      const choice = deployment ?? { kind: 'latest' };
      if (choice.kind === 'keep') {
        if (row.deploymentId === null) throw new DeploymentCannotChangeError(id);
        pin = { deploymentId: row.deploymentId, protocolVersion };
      } else {
        pin = {
          deploymentId: this.chooseDeployment(id, row.serviceName, choice, protocolVersion, 'restart'),
          protocolVersion,
        };
      }
    }

    const service = this.deps.registry.service(row.serviceName);
    const handler = service?.schema.handlers.find((h) => h.name === row.handlerName);
    if (service === undefined || handler === undefined) {
      throw new BadManagementRequestError(`${row.serviceName}/${row.handlerName} is no longer registered`);
    }
    const now = new Date();
    const newId = InvocationId.withSamePartition(id);
    const newRow: NewInvocation = {
      id: newId,
      partitionKey: row.partitionKey,
      partitionId: row.partitionId,
      serviceName: row.serviceName,
      serviceKey: row.serviceKey,
      handlerName: row.handlerName,
      serviceTy: row.serviceTy,
      handlerTy: row.handlerTy,
      status: 'invoked',
      idempotencyKey: null,
      invokedBy: 'restart_as_new',
      invokedById: null,
      invokedByTarget: null,
      randomSeed: randomU64(),
      journalLength: 1 + entries.length,
      inboxSeq: false,
      createdAt: now,
      scheduledStartAt: null,
      completionRetentionMs: row.completionRetentionMs,
      journalRetentionMs: row.journalRetentionMs,
      restartedFrom: id,
      deploymentId: pin.deploymentId,
      protocolVersion: pin.protocolVersion,
    };
    const op = newWriteOp(row.partitionId);
    const { stmts, ctx } = this.admit(newRow, input.raw, op, now, false, () => undefined);
    const runnable = newRow.status === 'invoked';
    op.stmts.push(...stmts);
    for (const { index: _index, ...e } of entries) this.appendEntry(ctx, op, e, now);
    try {
      await this.deps.committer.submit(op);
    } catch (err) {
      this.undoAdmit(ctx);
      if (err instanceof FencingError) throw rerouteIfFenced(err, row.partitionId);
      this.log.warn({ err, 'service.invocation.id': id }, 'restart-as-new could not be stored');
      throw new PartitionUnavailableError(id);
    }
    this.deps.metrics.invocationsAccepted.inc({ invoked_by: 'restart_as_new' });
    this.afterAdmit(ctx, runnable);
    return newId;
  }

  /** The deployment a resume / restart should pin: the service's latest, or one by id; it must speak `version`. */
  private chooseDeployment(
    id: string,
    serviceName: string,
    choice: DeploymentChoice,
    version: number,
    what: 'resume' | 'restart',
  ): string {
    const registry = this.deps.registry;
    let deploymentId: string | undefined;
    if (choice.kind === 'id') {
      deploymentId = choice.id;
    } else {
      deploymentId = registry.service(serviceName)?.deploymentId;
    }
    const d = deploymentId === undefined ? undefined : registry.deployment(deploymentId);
    if (d === undefined) throw new DeploymentNotFoundError(id, what);
    if (version < d.minProtocolVersion || version > d.maxProtocolVersion) {
      throw new IncompatibleDeploymentError(id, version, d.id, d.minProtocolVersion, d.maxProtocolVersion);
    }
    return d.id;
  }

  /** A non-expired invocation of an owned partition, from memory when it is live. */
  private async managed(id: InvocationId): Promise<InvocationCtx> {
    this.requireServed(this.partitionOf(InvocationId.partitionKey(id)));
    const ctx = await this.load(id);
    if (ctx === undefined) throw new InvocationNotFoundError(id);
    if (ctx.poisoned) throw new PartitionNotServedError(ctx.partitionId);
    if (ctx.status === 'completed') {
      const row = await getInvocation(this.deps.pool, id);
      if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
    }
    return ctx;
  }

  private async completedRow(id: InvocationId): Promise<InvocationRow> {
    const row = await getInvocation(this.deps.pool, id);
    if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
    if (row.status !== 'completed') throw new InvocationNotCompletedError(id);
    return row;
  }

  private async submitOrUnavailable(id: InvocationId, partition: number, stmts: Stmt[]): Promise<void> {
    try {
      await this.submitStmts(partition, stmts);
    } catch (err) {
      if (err instanceof FencingError) throw rerouteIfFenced(err, partition);
      this.log.warn({ err, 'service.invocation.id': id }, 'management write failed');
      throw new PartitionUnavailableError(id);
    }
  }

  /**
   * A management write that did not happen: the partition moved away meanwhile (the request goes to its new owner),
   * or the write failed here (the partition is being recovered; the client retries).
   */
  private unavailable(id: InvocationId, partition: number): Error {
    return this.served.has(partition) ? new PartitionUnavailableError(id) : new PartitionNotServedError(partition);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // attempts

  private async startAttempt(ctx: InvocationCtx): Promise<void> {
    if (this.stopped || ctx.starting || (ctx.attempt !== undefined && !ctx.attempt.isFinished)) return;
    if (ctx.status !== 'invoked') return;
    ctx.starting = true;
    // Only the first start after the insert may skip its start update; any other path through here writes one.
    const recorded = ctx.startRecorded;
    ctx.startRecorded = false;
    try {
      await ctx.ensureJournal(() => this.loadEntries(ctx.id));
      // Never hand the deployment an entry that is not durable yet (a run ack before its commit, for example).
      await this.settled(ctx);
      if (this.stopped || ctx.status !== 'invoked' || this.active.get(ctx.id) !== ctx) return;

      const pinned = this.pinDeployment(ctx);
      if ('failure' in pinned) {
        this.handleFailure(ctx, pinned.failure);
        return;
      }
      const { deployment, protocolVersion } = pinned;
      const service = this.deps.registry.service(ctx.serviceName);
      const handler = service?.schema.handlers.find((h) => h.name === ctx.handlerName);
      const lazy = handler?.enableLazyState ?? service?.schema.enableLazyState ?? false;
      let stateMap: StateEntry[] = [];
      let partialState = true;
      if (ctx.serviceKey !== null && !lazy) {
        stateMap = await this.eagerState(ctx);
        partialState = false;
        // Notifications may have been appended in memory while the state was read: they too must be durable before
        // they are part of Start (otherwise the SDK could act on an entry that a failed commit never stored).
        await this.settled(ctx);
      }
      if (this.stopped || ctx.status !== 'invoked' || this.active.get(ctx.id) !== ctx) return;

      // Nothing awaits from here to attempt.start(): the snapshot below is exactly what is durable.
      const journal = ctx.journal!;
      const startFrame = codec.startFrame(
        {
          id: InvocationId.toRaw(ctx.id as InvocationId),
          debugId: ctx.id,
          knownEntries: journal.length,
          stateMap,
          partialState,
          key: ctx.serviceKey ?? '',
          retryCountSinceLastStoredEntry: ctx.retrySinceAppend,
          durationSinceLastStoredEntry: BigInt(Math.max(0, Date.now() - ctx.lastAppendAt)),
          randomSeed: ctx.randomSeed,
        },
        protocolVersion,
      );
      const frames = [startFrame, ...journal.map((e) => encodeFrame(e.type, e.raw))];
      const bidi = deployment.protocolType === 'BidiStream';
      const contentType = invocationContentType(protocolVersion);
      const url = new URL(
        `invoke/${encodeURIComponent(ctx.serviceName)}/${encodeURIComponent(ctx.handlerName)}`,
        deployment.uri,
      );
      const headers: Record<string, string> = {
        ...deployment.additionalHeaders,
        'content-type': contentType,
        accept: contentType,
        'x-restate-invocation-id': ctx.id,
        'x-restate-cluster-name': this.options.clusterName,
      };
      if (ctx.serviceKey !== null) headers['x-restate-service-key'] = encodeURIComponent(ctx.serviceKey);
      const inactivity =
        handler?.inactivityTimeoutMs ??
        service?.overrides.inactivityTimeoutMs ??
        service?.schema.inactivityTimeoutMs ??
        this.options.inactivityTimeoutMs;
      const abort =
        handler?.abortTimeoutMs ??
        service?.overrides.abortTimeoutMs ??
        service?.schema.abortTimeoutMs ??
        this.options.abortTimeoutMs;
      const client = deployment.httpVersion === 'HTTP/1.1' ? this.deps.http1 : this.deps.http2;
      const attempt = new Attempt(
        ++this.attemptSeq,
        {
          request: { url, headers },
          open: (req, h) => client.open(req, h),
          bidi,
          contentType,
          inactivityTimeoutMs: inactivity,
          abortTimeoutMs: abort,
          maxMessageSize: this.options.messageSizeLimit,
        },
        {
          onFrame: (a, f) => this.onFrame(ctx, a, f),
          onFailed: (a, failure) => {
            if (ctx.attempt !== a) return;
            ctx.attempt = undefined;
            this.handleFailure(ctx, {
              code: 500,
              message: failure.message,
              rtCode: failure.code,
              retryAfterMs: failure.retryAfterMs,
            });
          },
        },
      );
      ctx.attempt = attempt;
      ctx.attemptSnapshot = journal.length;
      ctx.fromSdk.clear();
      ctx.awaiting = undefined;
      const now = new Date();
      const pinUpdate = ctx.pinUnsaved;
      ctx.pinUnsaved = false;
      if (!recorded || pinUpdate)
        this.write(ctx, [
          updateInvocation(
            ctx.id,
            {
              lastStartAt: now,
              lastAttemptDeploymentId: deployment.id,
              runningAt: now,
              ...(pinUpdate ? { deploymentId: deployment.id, protocolVersion } : {}),
            },
            now,
          ),
        ]);
      attempt.start(frames);
    } catch (err) {
      if (isDatabaseUnavailable(err))
        this.log.warn({ err, 'service.invocation.id': ctx.id }, 'could not start an attempt');
      else this.log.error({ err, 'service.invocation.id': ctx.id }, 'could not start an attempt');
      this.poison(ctx);
    } finally {
      ctx.starting = false;
    }
  }

  /** A keyed invocation's whole state for its Start message: a virtual object's from the cache when it is there. */
  private async eagerState(ctx: InvocationCtx): Promise<StateEntry[]> {
    if (ctx.serviceTy !== 'VirtualObject') return loadState(this.deps.pool, ctx.serviceName, ctx.serviceKey!);
    const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
    const cached = this.stateCache.get(lk);
    if (cached !== undefined) {
      this.deps.metrics.stateCacheReads.inc({ result: 'hit' });
      return cached;
    }
    this.deps.metrics.stateCacheReads.inc({ result: 'miss' });
    const read = this.stateCache.beginRead(lk);
    try {
      const state = await loadState(this.deps.pool, ctx.serviceName, ctx.serviceKey!);
      this.stateCache.fill(read, state);
      return state;
    } catch (err) {
      this.stateCache.abandon(read);
      throw err;
    }
  }

  /** Waits until every write queued for the invocation so far (and any queued meanwhile) is durable. */
  private async settled(ctx: InvocationCtx): Promise<void> {
    let pending = ctx.lastWrite;
    await pending;
    while (pending !== ctx.lastWrite) {
      pending = ctx.lastWrite;
      await pending;
    }
  }

  private pinDeployment(ctx: InvocationCtx): PinChoice {
    const registry = this.deps.registry;
    if (ctx.deploymentId !== null && ctx.protocolVersion !== null) {
      const d = registry.deployment(ctx.deploymentId);
      if (d === undefined) {
        return {
          failure: {
            code: 500,
            rtCode: 'RT0011',
            message: `the deployment ${ctx.deploymentId} pinned by this invocation is gone`,
          },
        };
      }
      return { deployment: d, protocolVersion: ctx.protocolVersion };
    }
    const pin = this.choosePin(ctx.serviceName);
    if ('failure' in pin) return pin;
    // Persisted with the attempt-start update in startAttempt: one UPDATE per attempt, not two.
    ctx.deploymentId = pin.deployment.id;
    ctx.protocolVersion = pin.protocolVersion;
    ctx.pinUnsaved = true;
    return pin;
  }

  /** The deployment and protocol version a new attempt of the service pins: its latest deployment's. */
  private choosePin(serviceName: string): PinChoice {
    const registry = this.deps.registry;
    const service = registry.service(serviceName);
    const d = service === undefined ? undefined : registry.deployment(service.deploymentId);
    if (d === undefined) {
      return {
        failure: { code: 500, rtCode: 'RT0011', message: `no deployment found for service ${serviceName}` },
      };
    }
    const v = negotiateProtocolVersion(d.minProtocolVersion, d.maxProtocolVersion, this.options.maxProtocolVersion);
    if (v === undefined) {
      return {
        failure: {
          code: 500,
          rtCode: 'RT0013',
          message: `deployment ${d.id} supports none of the service protocol versions 5 to ${this.options.maxProtocolVersion}`,
        },
      };
    }
    return { deployment: d, protocolVersion: v };
  }

  private onFrame(ctx: InvocationCtx, attempt: Attempt, frame: Frame): void {
    if (ctx.attempt !== attempt || ctx.poisoned) return;
    try {
      if (isCommand(frame.type)) {
        this.onCommand(ctx, attempt, frame);
        return;
      }
      switch (frame.type) {
        case MessageType.ProposeRunCompletion:
          this.onRunProposal(ctx, attempt, frame);
          return;
        case MessageType.AwaitingOn: {
          const tree = codec.awaitingOn(frame.payload);
          if (treeDepth(tree) > this.options.maxAwaitedFutureDepth) {
            attempt.markTerminal();
            ctx.attempt = undefined;
            this.pauseOnFailure(ctx, {
              code: 500,
              rtCode: 'RT0025',
              message: `awaited future depth exceeds ${this.options.maxAwaitedFutureDepth}`,
            });
          }
          return;
        }
        case MessageType.Suspension:
          attempt.markTerminal();
          ctx.attempt = undefined;
          void this.onSuspension(ctx, codec.suspension(frame.payload));
          return;
        case MessageType.Error: {
          attempt.markTerminal();
          ctx.attempt = undefined;
          const e = codec.error(frame.payload);
          this.onSdkError(ctx, e);
          return;
        }
        case MessageType.End:
          attempt.markTerminal();
          ctx.attempt = undefined;
          this.onEnd(ctx);
          return;
        default:
          this.protocolViolation(
            ctx,
            attempt,
            `unexpected message type 0x${frame.type.toString(16)} from the deployment`,
          );
      }
    } catch (err) {
      this.protocolViolation(ctx, attempt, `bad message 0x${frame.type.toString(16)}: ${(err as Error).message}`);
    }
  }

  private protocolViolation(ctx: InvocationCtx, attempt: Attempt, message: string): void {
    attempt.abort();
    if (ctx.attempt === attempt) ctx.attempt = undefined;
    this.handleFailure(ctx, { code: 571, rtCode: 'RT0012', message });
  }

  /** Persist first (in arrival order), then act. Invalid commands fail the attempt without being persisted. */
  private onCommand(ctx: InvocationCtx, attempt: Attempt, frame: Frame): void {
    const cmd = codec.command(frame.type, frame.payload);
    const keyed = ctx.serviceKey !== null;
    const canWrite = ctx.handlerTy === 'Exclusive' || ctx.handlerTy === 'Workflow';
    const now = new Date();
    const stmts: Stmt[] = [];
    const after: (() => void)[] = [];
    /** Outbox rows this command writes are delivered once it is committed. */
    const deliverAfter = (row: OutboxRow): void => void after.push(() => void this.deliver(row));
    const journalExtra: Partial<
      JournalEntry & {
        name: string;
        invokedId: string;
        invokedTarget: string;
        sleepWakeupAt: Date;
        promiseName: string;
      }
    > = {};
    const op = ownWrite(ctx);
    const reject = (rtCode: ErrorCode, message: string): void => {
      attempt.abort();
      if (ctx.attempt === attempt) ctx.attempt = undefined;
      this.handleFailure(ctx, { code: 500, rtCode, message });
    };

    switch (cmd.kind) {
      case 'input':
        reject('RT0012', 'the deployment sent an Input command');
        return;
      case 'output':
        ctx.output = cmd.outcome;
        break;
      case 'setState':
      case 'clearState':
      case 'clearAllState':
        if (!keyed || !canWrite) {
          reject(
            'RT0017',
            `${ctx.target} cannot write state: only exclusive handlers of virtual objects and workflows can`,
          );
          return;
        }
        if (cmd.kind === 'setState')
          stmts.push(setState(ctx.serviceName, ctx.serviceKey, ctx.partitionKey, cmd.key, cmd.value));
        else if (cmd.kind === 'clearState') stmts.push(clearState(ctx.serviceName, ctx.serviceKey, cmd.key));
        else stmts.push(clearAllState(ctx.serviceName, ctx.serviceKey));
        if (ctx.serviceTy === 'VirtualObject') {
          // The cached copy follows the commit (copies: the frame's buffer is not kept alive by the cache).
          const lk = lockKey(ctx.serviceName, ctx.serviceKey);
          const change: StateChange =
            cmd.kind === 'setState'
              ? { kind: 'set', key: Buffer.from(cmd.key), value: Buffer.from(cmd.value) }
              : cmd.kind === 'clearState'
                ? { kind: 'clear', key: Buffer.from(cmd.key) }
                : { kind: 'clearAll' };
          // A dropped invocation's partition was recovered meanwhile (the cache was cleared): never re-apply onto it.
          op.onCommitted = () => (ctx.poisoned ? this.stateCache.invalidate(lk) : this.stateCache.apply(lk, change));
          op.onFailed = () => this.stateCache.invalidate(lk);
        }
        break;
      case 'getEagerState':
      case 'getEagerStateKeys':
        if (!keyed) {
          reject('RT0017', `${ctx.target} has no state: only virtual objects and workflows have state`);
          return;
        }
        break;
      case 'getLazyState':
      case 'getLazyStateKeys': {
        if (!keyed) {
          reject('RT0017', `${ctx.target} has no state: only virtual objects and workflows have state`);
          return;
        }
        const completionId = cmd.completionId;
        const stateKey = cmd.kind === 'getLazyState' ? cmd.key : undefined;
        after.push(() => void this.answerLazyState(ctx, completionId, stateKey));
        break;
      }
      case 'sleep': {
        const fireAt = new Date(Number(cmd.wakeUpTime));
        journalExtra.sleepWakeupAt = fireAt;
        const t = {
          partitionId: ctx.partitionId,
          fireAt,
          invocationId: ctx.id,
          kind: 'sleep' as const,
          completionId: cmd.completionId,
        };
        ctx.mayHaveTimers = true;
        stmts.push(insertTimer(t, (id) => after.push(() => this.timers.schedule({ ...t, id }, fireAt.getTime()))));
        break;
      }
      case 'call':
      case 'oneWayCall': {
        if (cmd.scope !== undefined || cmd.limitKey !== undefined) {
          reject(
            'RT0024',
            `the call to ${cmd.service}/${cmd.handler} uses ${cmd.scope !== undefined ? 'a scope' : 'a limit key'}, ` +
              'which needs flow control (vqueues); Ratchet does not enable it, so remove the scope and limit key',
          );
          return;
        }
        const target = this.deps.registry.service(cmd.service);
        const handler = target?.schema.handlers.find((h) => h.name === cmd.handler);
        if (target === undefined || handler === undefined) {
          reject('RT0018', `the call targets ${cmd.service}/${cmd.handler}, which is not registered`);
          return;
        }
        const keyedTarget = target.schema.ty !== 'Service';
        const childReq: AcceptRequest = {
          service: { name: target.schema.name, ty: target.schema.ty },
          handler,
          key: keyedTarget ? cmd.key : undefined,
          body: cmd.parameter,
          headers: cmd.headers,
          delayMs:
            cmd.kind === 'oneWayCall' && cmd.invokeTime > 0n ? Number(cmd.invokeTime) - now.getTime() : undefined,
          idempotencyKey: cmd.idempotencyKey,
          invokedBy: 'service',
        };
        const { ctxRow, inputRaw } = this.newInvocation(childReq, now, { id: ctx.id, target: ctx.target });
        // The callee's rows (its insert, or the waiter on a running one) are written here too.
        op.keys!.push(orderKey(ctxRow.partitionKey));
        if (cmd.kind === 'oneWayCall' && ctxRow.status === 'scheduled')
          ctxRow.scheduledStartAt = new Date(Number(cmd.invokeTime));
        // A callee in a partition served elsewhere is admitted by its owner, asked in this write (and so is the
        // caller's wait for its result); the invocation id is known here, so the caller goes on at once.
        const remote = !this.served.has(ctxRow.partitionId);
        // An idempotent call whose callee is running already joins it; one that completed gets its stored result.
        let childCreated = false;
        let child: { stmts: Stmt[]; ctx: InvocationCtx } | undefined;
        let childRunnable = false;
        if (remote) {
          stmts.push(
            insertOutboxRequest(
              ctxRow.partitionId,
              ctxRow.id,
              {
                kind: 'invoke',
                invocation: encodeNewInvocation(ctxRow),
                input: Buffer.from(inputRaw).toString('base64'),
                caller:
                  cmd.kind === 'call'
                    ? {
                        id: ctx.id,
                        partition: ctx.partitionId,
                        completionId: cmd.resultCompletionId,
                        entryType: MessageType.CallCompletionNotification,
                      }
                    : undefined,
                workflowRun: target.schema.ty === 'Workflow' && handler.ty === 'Workflow',
                deterministic: ctxRow.idempotencyKey !== null,
              },
              deliverAfter,
            ),
          );
        } else if (!this.active.has(ctxRow.id)) {
          // Both partitions are written: both leases must hold.
          if (ctxRow.partitionId !== ctx.partitionId) op.partitions.push(ctxRow.partitionId);
          childCreated = true;
          child = this.admit(ctxRow, inputRaw, op, now, ctxRow.idempotencyKey !== null, (inserted) => {
            childCreated = inserted;
          });
          childRunnable = ctxRow.status === 'invoked';
          stmts.push(...child.stmts);
        }
        journalExtra.invokedId = ctxRow.id;
        journalExtra.invokedTarget = keyedTarget
          ? `${cmd.service}/${cmd.key}/${cmd.handler}`
          : `${cmd.service}/${cmd.handler}`;
        after.push(() => {
          if (child === undefined) return;
          if (childCreated) this.afterAdmit(child.ctx, childRunnable);
          else this.undoAdmit(child.ctx);
        });
        if (child !== undefined) {
          // The caller's write failed: the callee was not stored either (the caller is reloaded and calls again).
          const admitted = child.ctx;
          const beforeFailed = op.onFailed;
          op.onFailed = () => {
            beforeFailed?.();
            this.undoAdmit(admitted);
          };
        }
        // The entry itself goes first; the invocation-id notification follows it in the same transaction.
        const entry = this.appendEntry(ctx, op, { type: frame.type, raw: frame.payload }, now, journalExtra);
        ctx.fromSdk.add(entry.index);
        const idNote = this.appendEntry(
          ctx,
          op,
          {
            type: MessageType.CallInvocationIdCompletionNotification,
            raw: codec.notification(
              { kind: 'completion', id: cmd.invocationIdCompletionId },
              { kind: 'invocationId', invocationId: ctxRow.id },
            ),
            completionId: cmd.invocationIdCompletionId,
            success: true,
          },
          now,
        );
        if (cmd.kind === 'call' && !remote) {
          const wait = awaitResult(
            ctxRow.id,
            ctx.id,
            ctx.partitionId,
            cmd.resultCompletionId,
            MessageType.CallCompletionNotification,
            deliverAfter,
          );
          if (target.schema.ty === 'Workflow' && handler.ty === 'Workflow') {
            // A workflow's run executes once per key: calling it again fails, as it does at the ingress.
            const again = insertOutbox(
              {
                partitionId: ctx.partitionId,
                targetInvocationId: ctx.id,
                entryType: MessageType.CallCompletionNotification,
                completionId: cmd.resultCompletionId,
                signalIdx: null,
                signalName: null,
                sourceInvocationId: null,
                raw: Buffer.from(
                  codec.notification(
                    { kind: 'completion', id: cmd.resultCompletionId },
                    { kind: 'failure', failure: { code: 409, message: 'the workflow method was already invoked' } },
                  ),
                ),
              },
              deliverAfter,
            );
            stmts.push({ ...wait, when: () => childCreated }, { ...again, when: () => !childCreated });
          } else {
            stmts.push(wait);
          }
        }
        op.stmts.push(...stmts);
        void this.commit(ctx, op, () => {
          for (const f of after) f();
          this.sendCommitted(ctx, idNote);
        });
        return;
      }
      case 'run':
        break;
      case 'sendSignal':
      case 'completeAwakeable': {
        let targetId: string;
        let idx: number | undefined;
        let name: string | undefined;
        if (cmd.kind === 'completeAwakeable') {
          let parsed;
          try {
            parsed = parseAwakeableId(cmd.awakeableId);
          } catch (err) {
            reject('RT0017', `bad awakeable id '${cmd.awakeableId}': ${(err as Error).message}`);
            return;
          }
          // A legacy prom_1 id carries a journal entry index where sign_1 carries a signal index; protocol V5+
          // journals have no entry-indexed awakeables, so both are delivered as the signal with that index.
          targetId = parsed.invocationId;
          idx = parsed.index;
        } else {
          targetId = cmd.targetInvocationId;
          idx = cmd.idx;
          name = cmd.name;
        }
        const targetParsed = InvocationId.tryParse(targetId);
        if (targetParsed === undefined) {
          reject('RT0017', `bad target invocation id '${targetId}'`);
          return;
        }
        stmts.push(
          insertOutbox(
            {
              partitionId: partitionFor(InvocationId.partitionKey(targetParsed), this.options.partitions),
              targetInvocationId: targetParsed,
              entryType: MessageType.SignalNotification,
              completionId: null,
              signalIdx: idx ?? null,
              signalName: name ?? null,
              sourceInvocationId: null,
              raw: Buffer.from(
                codec.notification(
                  idx !== undefined ? { kind: 'signal', idx } : { kind: 'signalName', name: name! },
                  cmd.result,
                ),
              ),
            },
            deliverAfter,
          ),
        );
        break;
      }
      case 'getPromise':
      case 'peekPromise':
      case 'completePromise': {
        if (ctx.serviceTy !== 'Workflow' || ctx.serviceKey === null) {
          reject('RT0017', `${ctx.target} cannot use durable promises: only workflows have them`);
          return;
        }
        journalExtra.promiseName = cmd.key;
        const ref = { service: ctx.serviceName, key: ctx.serviceKey, name: cmd.key };
        if (cmd.kind === 'getPromise') {
          stmts.push(
            awaitPromise(
              ref,
              ctx.id,
              ctx.partitionId,
              cmd.completionId,
              MessageType.GetPromiseCompletionNotification,
              deliverAfter,
            ),
          );
        } else if (cmd.kind === 'peekPromise') {
          stmts.push(
            peekPromise(
              ref,
              ctx.id,
              ctx.partitionId,
              cmd.completionId,
              MessageType.PeekPromiseCompletionNotification,
              deliverAfter,
            ),
          );
        } else {
          const id = { kind: 'completion' as const, id: cmd.completionId };
          stmts.push(
            completePromise(
              ref,
              ctx.partitionKey,
              cmd.result,
              {
                id: ctx.id,
                partition: ctx.partitionId,
                completionId: cmd.completionId,
                entryType: MessageType.CompletePromiseCompletionNotification,
              },
              codec.notification(id, { kind: 'void' }),
              codec.notification(id, {
                kind: 'failure',
                failure: { code: 409, message: 'promise was already completed' },
              }),
              MessageType.GetPromiseCompletionNotification,
              deliverAfter,
            ),
          );
        }
        break;
      }
      case 'attach':
      case 'getOutput': {
        const targetId = resolveTarget(cmd.target, (name) => {
          const svc = this.deps.registry.service(name);
          return svc !== undefined && svc.schema.ty !== 'Service';
        });
        if (targetId === undefined) {
          reject('RT0017', `the ${cmd.kind === 'attach' ? 'attach' : 'get-output'} command names a bad invocation id`);
          return;
        }
        if (cmd.kind === 'attach') {
          // Its waiter row must not race the target's completion, which collects the waiters.
          op.keys!.push(orderKey(InvocationId.partitionKey(targetId)));
          stmts.push(
            awaitResult(
              targetId,
              ctx.id,
              ctx.partitionId,
              cmd.completionId,
              MessageType.AttachInvocationCompletionNotification,
              deliverAfter,
            ),
          );
        } else {
          // Answered with the target's state as of delivery: its result, or void while it runs.
          stmts.push(
            insertOutbox(
              {
                partitionId: ctx.partitionId,
                targetInvocationId: ctx.id,
                entryType: MessageType.GetInvocationOutputCompletionNotification,
                completionId: cmd.completionId,
                signalIdx: null,
                signalName: null,
                sourceInvocationId: targetId,
                raw: null,
              },
              deliverAfter,
            ),
          );
        }
        break;
      }
    }
    const entry = this.appendEntry(ctx, op, { type: frame.type, raw: frame.payload }, now, journalExtra);
    ctx.fromSdk.add(entry.index);
    op.stmts.push(...stmts);
    void this.commit(ctx, op, () => {
      for (const f of after) f();
    });
  }

  private async answerLazyState(
    ctx: InvocationCtx,
    completionId: number,
    stateKey: Uint8Array | undefined,
  ): Promise<void> {
    try {
      await ctx.lastWrite;
      let raw: Uint8Array;
      let type: number;
      if (stateKey !== undefined) {
        const value = await getStateValue(this.deps.pool, ctx.serviceName, ctx.serviceKey!, stateKey);
        raw = codec.notification(
          { kind: 'completion', id: completionId },
          value === undefined ? { kind: 'void' } : { kind: 'value', value },
        );
        type = MessageType.GetLazyStateCompletionNotification;
      } else {
        const rows = await loadState(this.deps.pool, ctx.serviceName, ctx.serviceKey!);
        raw = codec.notification(
          { kind: 'completion', id: completionId },
          { kind: 'stateKeys', keys: rows.map((r) => r.key) },
        );
        type = MessageType.GetLazyStateKeysCompletionNotification;
      }
      await this.appendNotification(ctx, { type, raw, completionId, success: true }, []);
    } catch (err) {
      this.log.warn({ err, 'service.invocation.id': ctx.id }, 'could not answer a lazy state read');
      this.poison(ctx);
    }
  }

  private onRunProposal(ctx: InvocationCtx, attempt: Attempt, frame: Frame): void {
    const p = codec.proposeRunCompletion(frame.payload);
    if (ctx.hasCompletion(p.completionId)) {
      // A proposal for an already completed run (a replay race): the stored result stands.
      return;
    }
    const now = new Date();
    const op = ownWrite(ctx);
    const entry = this.appendEntry(
      ctx,
      op,
      {
        type: MessageType.RunCompletionNotification,
        raw: codec.notification({ kind: 'completion', id: p.completionId }, p.result),
        completionId: p.completionId,
        success: p.result.kind !== 'failure',
      },
      now,
    );
    const wantsAck =
      ctx.protocolVersion !== null && ctx.protocolVersion >= 7 && (frame.flags & REQUESTED_ACK_FLAG) !== 0;
    void this.commit(ctx, op, () => {
      // The ack (or the full notification) goes out only now that the result is durable.
      if (ctx.attempt !== attempt || !attempt.canSend) return;
      if (wantsAck) attempt.send(codec.runAckFrame(p.completionId));
      else attempt.send(encodeFrame(entry.type, entry.raw));
    });
  }

  private async onSuspension(ctx: InvocationCtx, awaiting: ReturnType<typeof codec.suspension>): Promise<void> {
    try {
      await ctx.lastWrite;
    } catch {
      return;
    }
    if (ctx.poisoned || ctx.status !== 'invoked' || ctx.attempt !== undefined) return;
    if (canResume(awaiting, ctx)) {
      // What it waits for is already here (a run proposal in the same response, or a completion that raced the close).
      void this.startAttempt(ctx);
      return;
    }
    ctx.status = 'suspended';
    ctx.awaiting = awaiting;
    this.write(ctx, [
      updateInvocation(ctx.id, { status: 'suspended', awaiting, journalLength: ctx.journal!.length }, new Date()),
    ]);
  }

  private async recheckSuspended(ctx: InvocationCtx): Promise<void> {
    try {
      await ctx.ensureJournal(() => this.loadEntries(ctx.id));
    } catch (err) {
      this.log.warn({ err, 'service.invocation.id': ctx.id }, 'could not read a suspended invocation');
      this.poison(ctx);
      return;
    }
    if (ctx.status === 'suspended' && ctx.awaiting !== undefined && canResume(ctx.awaiting, ctx))
      this.resumeSuspended(ctx);
  }

  private resumeSuspended(ctx: InvocationCtx): void {
    ctx.status = 'invoked';
    ctx.awaiting = undefined;
    this.write(ctx, [updateInvocation(ctx.id, { status: 'invoked', awaiting: null }, new Date())]);
    void this.startAttempt(ctx);
  }

  private onSdkError(ctx: InvocationCtx, e: ReturnType<typeof codec.error>): void {
    const rtCode: ErrorCode =
      e.code === 570 ? 'RT0016' : e.code === 571 ? 'RT0012' : e.code === 573 ? 'RT0012' : 'RT0007';
    const failure: EngineFailure = {
      code: e.code,
      message: e.message,
      rtCode,
      ...(e.nextRetryDelayMs === undefined ? {} : { sdkRetryDelayMs: e.nextRetryDelayMs }),
      related: e.related,
    };
    if (e.behavior === 'pause') {
      this.pauseOnFailure(ctx, failure);
    } else if (e.behavior === 'fail') {
      void this.complete(ctx, { kind: 'failure', failure: { code: e.code, message: e.message } });
    } else {
      this.handleFailure(ctx, failure);
    }
  }

  private onEnd(ctx: InvocationCtx): void {
    // The Output may come from an earlier attempt: the SDK replays a journaled Output and sends only End. `ctx.output`
    // is lost when the invocation was reloaded from storage meanwhile, so fall back to the journal, which is the truth.
    const outcome = ctx.output ?? outputFromJournal(ctx.journal);
    if (outcome === undefined) {
      this.handleFailure(ctx, {
        code: 571,
        rtCode: 'RT0012',
        message: 'the deployment sent End without an Output command',
      });
      return;
    }
    void this.complete(ctx, outcome);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // failures, retries, pause

  private handleFailure(ctx: InvocationCtx, failure: EngineFailure): void {
    if (ctx.poisoned || ctx.status !== 'invoked') return;
    ctx.retryCount += 1;
    ctx.retrySinceAppend += 1;
    this.deps.metrics.attemptFailures.inc({ code: failure.rtCode });
    const service = this.deps.registry.service(ctx.serviceName);
    const handler = service?.schema.handlers.find((h) => h.name === ctx.handlerName);
    const policy = effectiveRetryPolicy(
      this.options.defaultRetryPolicy,
      service?.schema.retryPolicy ?? {},
      handler?.retryPolicy ?? {},
    );
    // A next_retry_delay from the SDK is its own retry loop (ctx.run retry options, RetryableError): the SDK counts
    // those attempts and fails the run terminally when they are exhausted. restate-server takes that delay instead of
    // advancing the invocation retry policy, so such a failure neither spends one of its attempts nor can exhaust it.
    let decision: RetryDecision;
    if (failure.sdkRetryDelayMs !== undefined) {
      decision = { kind: 'retry', delayMs: Math.max(0, failure.sdkRetryDelayMs) };
    } else {
      ctx.policyAttempts += 1;
      decision = decideRetry(policy, ctx.policyAttempts, failure.retryAfterMs);
    }
    this.log.warn(
      { 'service.invocation.id': ctx.id, code: failure.rtCode, attempt: ctx.retryCount, err: failure.message },
      `[${failure.rtCode}] invocation attempt failed`,
    );
    if (decision.kind === 'exhausted') {
      if (decision.onMaxAttempts === 'Kill') {
        // Like restate-server: the invocation fails with the error of its last attempt, which the row records too.
        const code = failure.code === 500 || failure.code < 400 ? 500 : failure.code;
        void this.complete(
          ctx,
          { kind: 'failure', failure: { code, message: failure.message } },
          failureColumns(ctx, failure),
        );
      } else {
        this.pauseOnFailure(ctx, failure);
      }
      return;
    }
    const now = new Date();
    const fireAt = new Date(now.getTime() + decision.delayMs);
    const t = {
      partitionId: ctx.partitionId,
      fireAt,
      invocationId: ctx.id,
      kind: 'retry' as const,
      completionId: null,
    };
    let timerId = '';
    ctx.mayHaveTimers = true;
    this.write(
      ctx,
      [
        updateInvocation(ctx.id, { ...failureColumns(ctx, failure), nextRetryAt: fireAt }, now),
        insertTimer(t, (id) => (timerId = id)),
      ],
      () => this.timers.schedule({ ...t, id: timerId }, fireAt.getTime()),
    );
  }

  private pauseOnFailure(ctx: InvocationCtx, failure: EngineFailure): void {
    ctx.attempt?.abort();
    ctx.attempt = undefined;
    ctx.status = 'paused';
    this.write(ctx, [
      updateInvocation(ctx.id, { ...failureColumns(ctx, failure), status: 'paused', nextRetryAt: null }, new Date()),
    ]);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // completion

  private complete(
    ctx: InvocationCtx,
    outcome: Outcome,
    failed: InvocationUpdate = {},
    extra: Stmt[] = [],
  ): Promise<boolean> {
    ctx.attempt?.abort();
    ctx.attempt = undefined;
    ctx.status = 'completed';
    const now = new Date();
    // Its own rows, its waiters and its key's lock and inbox (the next holder has the same key): ordered by its
    // partition key. Extra statements may touch anything, so a completion with them is a barrier.
    const op = extra.length === 0 ? ownWrite(ctx) : newWriteOp(ctx.partitionId);
    const delivered: OutboxRow[] = [];
    op.stmts.push(
      updateInvocation(
        ctx.id,
        {
          ...failed,
          status: 'completed',
          completedAt: now,
          ...retentionColumns(ctx, now),
          journalLength: ctx.journal?.length ?? 0,
          nextRetryAt: null,
          awaiting: null,
          ...(outcome.kind === 'success'
            ? { resultKind: 'success' as const, output: outcome.value }
            : {
                resultKind: 'failure' as const,
                failureCode: outcome.failure.code,
                failureMessage: outcome.failure.message,
                failureMetadata: outcome.failure.metadata ?? null,
              }),
        },
        now,
      ),
      // Most invocations never armed a timer: no statement for them.
      ...(ctx.mayHaveTimers ? [deleteTimersOf(ctx.id)] : []),
      resultToWaiters(ctx.id, (row) => delivered.push(row)),
      ...extra,
    );
    let next: InvocationCtx | undefined;
    if (ctx.isExclusiveKeyed) {
      const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
      if (this.locks.get(lk) === ctx.id) {
        this.locks.delete(lk);
        next = this.handOver(lk, op, now, ctx);
      }
    }
    const done: CompletedInvocation = {
      id: ctx.id,
      outcome,
      completedAt: now,
      completionRetentionMs: ctx.completionRetentionMs,
    };
    return this.commit(ctx, op, () => {
      this.deps.metrics.invocationsCompleted.inc({ result: outcome.kind });
      // (A scan of every scheduled timer: skipped when this invocation never had one.)
      if (ctx.mayHaveTimers) this.timers.removeWhere((t) => t.invocationId === ctx.id);
      if (this.active.get(ctx.id) === ctx) this.active.delete(ctx.id);
      const set = this.waiters.get(ctx.id);
      // (Resolving runs no continuation synchronously: the set cannot change while it is iterated.)
      if (set !== undefined) for (const w of set) w(done);
      for (const row of delivered) void this.deliver(row);
      if (next !== undefined) void this.startAttempt(next);
    });
  }

  // ---------------------------------------------------------------------------------------------------------------
  // notifications, outbox, timers

  /** Appends a runtime-authored notification; sends it to a live attempt or resumes a suspended invocation. */
  private async appendNotification(
    ctx: InvocationCtx,
    entry: Omit<JournalEntry, 'index'>,
    extra: Stmt[],
  ): Promise<void> {
    // A dead object (its partition is being recovered or moved): the outbox row or timer stays for whoever recovers it.
    if (ctx.poisoned) return;
    if (ctx.status === 'completed') {
      if (extra.length > 0) await this.submitStmts(ctx.partitionId, extra);
      return;
    }
    await ctx.ensureJournal(() => this.loadEntries(ctx.id));
    if (ctx.poisoned) return;
    if ((ctx.status as string) === 'completed') {
      if (extra.length > 0) await this.submitStmts(ctx.partitionId, extra);
      return;
    }
    // `extra` removes the outbox row or timer row that this notification delivers: rows of this invocation.
    const op = ownWrite(ctx);
    const e = this.appendEntry(ctx, op, entry, new Date());
    op.stmts.push(...extra);
    let resume = false;
    const cancel = e.type === MessageType.SignalNotification && e.signalIdx === CANCEL_SIGNAL;
    if (
      (ctx.status === 'suspended' && ctx.awaiting !== undefined && canResume(ctx.awaiting, ctx)) ||
      (ctx.status === 'paused' && cancel)
    ) {
      resume = true;
      ctx.status = 'invoked';
      ctx.awaiting = undefined;
      op.stmts.push(updateInvocation(ctx.id, { status: 'invoked', awaiting: null }, new Date()));
    }
    await this.commit(ctx, op, () => {
      if (resume) void this.startAttempt(ctx);
      else this.sendCommitted(ctx, e);
    });
  }

  private sendCommitted(ctx: InvocationCtx, e: JournalEntry): void {
    const attempt = ctx.attempt;
    if (attempt !== undefined && attempt.canSend && e.index >= ctx.attemptSnapshot && !ctx.fromSdk.has(e.index)) {
      attempt.send(encodeFrame(e.type, e.raw));
    }
  }

  /**
   * Carries out an outbox row of a served partition (once: a row being delivered, or delivered since the last poll
   * began, is skipped). A row for a partition served elsewhere is its owner's: the owner is told to look.
   */
  private async deliver(row: OutboxRow): Promise<void> {
    if (!this.served.has(row.partitionId)) {
      this.notifyOwner(row.partitionId);
      return;
    }
    if (this.outboxSeen.has(row.seq)) return;
    const seen = { partition: row.partitionId, round: Infinity };
    this.outboxSeen.set(row.seq, seen);
    try {
      await this.deliverOnce(row);
    } finally {
      seen.round = this.outboxRound;
    }
  }

  private async deliverOnce(row: OutboxRow): Promise<void> {
    if (row.request !== undefined) {
      await this.carryOut(row, row.request);
      return;
    }
    try {
      const target = await this.load(row.targetInvocationId);
      const remove = deleteOutbox(row.seq);
      if (target === undefined) {
        await this.submitStmts(row.partitionId, [remove]);
        return;
      }
      let raw = row.raw ?? undefined;
      let success = true;
      if (raw === undefined) {
        const result = await this.renderSource(row);
        success = result.kind !== 'failure';
        raw = Buffer.from(codec.notification({ kind: 'completion', id: row.completionId! }, result));
      } else {
        success = codec.notificationSucceeded(row.entryType, raw);
      }
      if (target.status === 'completed') {
        await this.submitStmts(row.partitionId, [remove]);
        return;
      }
      const cancel = row.entryType === MessageType.SignalNotification && row.signalIdx === CANCEL_SIGNAL;
      if (cancel && (target.status === 'scheduled' || target.status === 'inboxed')) {
        // Never started: nothing to run compensations, so it fails right away (restate's "canceled").
        this.forgetNotStarted(target);
        void this.complete(target, { kind: 'failure', failure: { code: 409, message: 'canceled' } }, {}, [remove]);
        return;
      }
      await this.appendNotification(
        target,
        {
          type: row.entryType,
          raw,
          completionId: row.completionId ?? undefined,
          signalIdx: row.signalIdx ?? undefined,
          signalName: row.signalName ?? undefined,
          success,
        },
        [remove],
      );
    } catch (err) {
      this.log.warn({ err, seq: row.seq }, 'outbox delivery failed; it is retried on the next start');
    }
  }

  /** Work another node asked of this partition's owner: admit an invocation it created, or kill one. */
  private async carryOut(row: OutboxRow, request: OutboxRequest): Promise<void> {
    const remove = deleteOutbox(row.seq);
    try {
      if (request.kind === 'kill') {
        const id = InvocationId.tryParse(row.targetInvocationId);
        if (id !== undefined) {
          await this.kill(id).catch((err: unknown) => {
            // Gone or finished already: nothing left to kill. Anything else: the row stays and is tried again.
            if (!(err instanceof InvocationNotFoundError || err instanceof InvocationAlreadyCompletedError)) throw err;
          });
        }
        await this.submitStmts(row.partitionId, [remove]);
        return;
      }
      await this.admitRequested(row, request, remove);
    } catch (err) {
      this.log.warn({ err, seq: row.seq }, 'outbox request could not be carried out; it is tried again');
    }
  }

  /** A call or send from a partition served elsewhere: the callee is admitted here, as a local call admits it. */
  private async admitRequested(
    row: OutboxRow,
    request: Extract<OutboxRequest, { kind: 'invoke' }>,
    remove: Stmt,
  ): Promise<void> {
    const child = decodeNewInvocation(request.invocation);
    const input = Buffer.from(request.input, 'base64');
    const now = new Date();
    const op = newWriteOp(row.partitionId, [orderKey(child.partitionKey)]);
    op.stmts.push(remove);
    let created = false;
    let admitted: { stmts: Stmt[]; ctx: InvocationCtx } | undefined;
    let runnable = false;
    if (!this.active.has(child.id)) {
      admitted = this.admit(child, input, op, now, request.deterministic, (inserted) => (created = inserted));
      runnable = child.status === 'invoked';
      op.stmts.push(...admitted.stmts);
    }
    const answers: OutboxRow[] = [];
    const caller = request.caller;
    if (caller !== undefined) {
      const wait = awaitResult(child.id, caller.id, caller.partition, caller.completionId, caller.entryType, (r) =>
        answers.push(r),
      );
      if (request.workflowRun === true) {
        const again = insertOutbox(
          {
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
          },
          (r) => answers.push(r),
        );
        op.stmts.push({ ...wait, when: () => created }, { ...again, when: () => !created });
      } else {
        op.stmts.push(wait);
      }
    }
    try {
      await this.deps.committer.submit(op);
    } catch (err) {
      if (admitted !== undefined) this.undoAdmit(admitted.ctx);
      throw err;
    }
    if (admitted !== undefined) {
      if (created) {
        this.deps.metrics.invocationsAccepted.inc({ invoked_by: child.invokedBy });
        this.afterAdmit(admitted.ctx, runnable);
      } else {
        this.undoAdmit(admitted.ctx);
      }
    }
    for (const r of answers) void this.deliver(r);
  }

  /** Tells the owner of a partition served elsewhere that its outbox has rows (coalesced; its poll is the fallback). */
  private notifyOwner(partition: number): void {
    this.toNotify.add(partition);
    if (this.notifying) return;
    this.notifying = true;
    setImmediate(() => {
      const partitions = [...this.toNotify];
      this.toNotify.clear();
      this.deps.pool
        .query(`SELECT pg_notify($1, $2)`, [OUTBOX_CHANNEL, partitions.join(',')])
        .catch((err: unknown) => this.log.debug({ err }, 'could not notify partition owners; they poll'))
        .finally(() => {
          this.notifying = false;
          if (this.toNotify.size > 0) this.notifyOwner([...this.toNotify][0]!);
        });
    });
  }

  /**
   * Reads the outbox of served partitions (all of them, or those named) and delivers what is not being delivered
   * yet: rows other nodes wrote for partitions served here. Called when told (LISTEN) and every few seconds.
   */
  async pollOutbox(partitions?: number[]): Promise<void> {
    const ids = (partitions ?? [...this.served]).filter((p) => this.served.has(p));
    if (ids.length === 0 || this.stopped) return;
    const round = ++this.outboxRound;
    const rows = await listOutbox(this.deps.pool, ids);
    for (const row of rows) void this.deliver(row);
    // A row whose delivery finished before this read began cannot have been read by it (its delete had committed):
    // forget it. Later ones are kept until the next read.
    for (const [seq, seen] of this.outboxSeen) if (seen.round < round) this.outboxSeen.delete(seq);
  }

  /**
   * The payload of an outbox row that names its source: a promise's state (void while not completed), or an
   * invocation's result (void while it runs — only get-output asks before completion; 404 when it does not exist).
   */
  private async renderSource(row: OutboxRow): Promise<codec.EngineResult> {
    if (row.sourcePromise !== undefined) {
      const p = await getPromise(this.deps.pool, row.sourcePromise);
      if (p === undefined) return { kind: 'void' };
      return p.resultKind === 'success'
        ? { kind: 'value', value: p.value ?? Buffer.alloc(0) }
        : { kind: 'failure', failure: { code: p.failureCode ?? 500, message: p.failureMessage ?? '' } };
    }
    const source =
      row.sourceInvocationId === null ? undefined : await getInvocation(this.deps.pool, row.sourceInvocationId);
    // An expired result still reaches the callers it was owed to (a cancelled never-started callee, say).
    if (source === undefined) {
      return {
        kind: 'failure',
        failure: { code: 404, message: `invocation ${row.sourceInvocationId ?? ''} not found` },
      };
    }
    if (source.status !== 'completed') return { kind: 'void' };
    const outcome = completedFromRow(source).outcome;
    return outcome.kind === 'success'
      ? { kind: 'value', value: outcome.value }
      : { kind: 'failure', failure: outcome.failure };
  }

  private async fireTimer(t: TimerRow): Promise<void> {
    if (this.stopped) return;
    try {
      const ctx = await this.load(t.invocationId);
      const remove = deleteTimer(t.id);
      if (ctx === undefined || ctx.status === 'completed') {
        await this.submitStmts(t.partitionId, [remove]);
        return;
      }
      switch (t.kind) {
        case 'sleep':
          await this.appendNotification(
            ctx,
            {
              type: MessageType.SleepCompletionNotification,
              raw: codec.notification({ kind: 'completion', id: t.completionId! }, { kind: 'void' }),
              completionId: t.completionId!,
              success: true,
            },
            [remove],
          );
          return;
        case 'retry':
          this.write(ctx, [remove, updateInvocation(ctx.id, { nextRetryAt: null }, new Date())]);
          void this.startAttempt(ctx);
          return;
        case 'start': {
          if (ctx.status !== 'scheduled') {
            this.write(ctx, [remove]);
            return;
          }
          const stmts: Stmt[] = [remove];
          if (ctx.isExclusiveKeyed) {
            const lk = lockKey(ctx.serviceName, ctx.serviceKey!);
            if (this.locks.has(lk)) {
              ctx.status = 'inboxed';
              this.inbox(lk).push(ctx.id);
              stmts.push({
                name: 'invocation_inbox',
                text: `UPDATE ratchet.invocation SET status = 'inboxed', inbox_seq = nextval('ratchet.inbox_seq'), modified_at = now() WHERE id = $1`,
                values: [ctx.id],
              });
              this.write(ctx, stmts);
              return;
            }
            this.locks.set(lk, ctx.id);
            stmts.push(takeLock(ctx.serviceName, ctx.serviceKey!, ctx.id));
          }
          ctx.status = 'invoked';
          stmts.push(updateInvocation(ctx.id, { status: 'invoked' }, new Date()));
          this.write(ctx, stmts);
          void this.startAttempt(ctx);
          return;
        }
      }
    } catch (err) {
      // Out of the in-memory schedule, still in the table: the partition is recovered, which re-arms it.
      this.log.warn({ err, timer: t.id }, 'timer could not fire; recovering its partition from PostgreSQL');
      this.deps.onSuspect?.([t.partitionId]);
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // plumbing

  private appendEntry(
    ctx: InvocationCtx,
    op: WriteOp,
    entry: Omit<JournalEntry, 'index'>,
    now: Date,
    extra: {
      name?: string;
      invokedId?: string;
      invokedTarget?: string;
      sleepWakeupAt?: Date;
      promiseName?: string;
    } = {},
  ): JournalEntry {
    const e = ctx.append(entry);
    op.journal.push({
      invocationId: ctx.id,
      index: e.index,
      entryType: e.type,
      completionId: e.completionId,
      signalIdx: e.signalIdx,
      signalName: e.signalName,
      name: extra.name,
      raw: e.raw,
      appendedAt: now,
      invokedId: extra.invokedId,
      invokedTarget: extra.invokedTarget,
      sleepWakeupAt: extra.sleepWakeupAt,
      promiseName: extra.promiseName,
    });
    return e;
  }

  /** Statements that touch no in-memory invocation (cleanup of timers and outbox rows of finished work). */
  private submitStmts(partition: number, stmts: Stmt[]): Promise<void> {
    return this.deps.committer.submit({ partitions: [partition], stmts, journal: [] });
  }

  private write(ctx: InvocationCtx, stmts: Stmt[], after?: () => void): void {
    void this.commit(ctx, ownWrite(ctx, stmts), after);
  }

  /**
   * Commits a write of this invocation and then runs `after`. Resolves to false (never rejects) when the write
   * failed: the invocation is then poisoned and reloaded from storage, so callers that fire and forget are safe.
   */
  private commit(ctx: InvocationCtx, op: WriteOp, after?: () => void): Promise<boolean> {
    const p = this.deps.committer.submit(op);
    return ctx
      .track(
        p.then(
          () => {
            if (!ctx.poisoned) after?.();
          },
          (err: unknown) => {
            // The partition is recovered from PostgreSQL (see poison); refused writes of a partition given up are
            // expected, anything else is worth a warning (a database outage logs one per failed write).
            if (err instanceof FencingError && err.unsent) {
              this.log.debug({ err, 'service.invocation.id': ctx.id }, 'write refused: the partition moved');
            } else {
              this.log.warn(
                { err, 'service.invocation.id': ctx.id },
                'write failed; the invocation is recovered from PostgreSQL',
              );
            }
            this.poison(ctx);
            throw err;
          },
        ),
      )
      .then(
        () => true,
        () => false,
      );
  }

  /**
   * Memory may be ahead of the database: this object is dead. Its partition is recovered from storage as a whole
   * (the committer reports every failed write as suspect, and the cluster coordinator drops and recovers the partition),
   * so nothing of it is re-armed here.
   */
  private poison(ctx: InvocationCtx): void {
    if (ctx.poisoned) return;
    ctx.poisoned = true;
    ctx.attempt?.abort();
    ctx.attempt = undefined;
    if (this.active.get(ctx.id) === ctx) this.active.delete(ctx.id);
    // (A failed write was reported by the committer already; a failed read is reported here. Twice is harmless.)
    if (this.served.has(ctx.partitionId)) this.deps.onSuspect?.([ctx.partitionId]);
  }

  /** The in-memory context of a non-completed invocation, loading it from storage if needed. */
  private load(id: string): Promise<InvocationCtx | undefined> {
    const known = this.active.get(id);
    if (known !== undefined) return Promise.resolve(known);
    let p = this.loading.get(id);
    if (p === undefined) {
      const generation = this.generation;
      p = getInvocation(this.deps.pool, id)
        .then((row) => {
          if (row === undefined) return undefined;
          const again = this.active.get(id);
          if (again !== undefined) return again;
          const ctx = new InvocationCtx(row);
          if (row.status === 'completed') return ctx;
          // Read before its partition was dropped, or for a partition served elsewhere: never installed, never acted on.
          if (generation !== this.generation || !this.served.has(row.partitionId)) ctx.poisoned = true;
          else this.active.set(id, ctx);
          return ctx;
        })
        .finally(() => this.loading.delete(id));
      this.loading.set(id, p);
    }
    return p;
  }

  private async loadEntries(id: string): Promise<JournalEntry[]> {
    const rows = await loadJournal(this.deps.pool, id);
    return rows.map((r) => {
      const e: JournalEntry = { index: r.index, type: r.entryType, raw: r.raw };
      if (r.completionId !== null) e.completionId = r.completionId;
      if (r.signalIdx !== null) e.signalIdx = r.signalIdx;
      if (r.signalName !== null) e.signalName = r.signalName;
      if (r.entryType >= 0x8000 && r.entryType <= 0xfbff) e.success = codec.notificationSucceeded(r.entryType, r.raw);
      return e;
    });
  }

  /**
   * An invocation cancelled or killed before it started is completed for whoever waits on it, but not retained:
   * like restate, which forgets it, it is gone for readers at once (and removed by the cleaner).
   */
  private forgetNotStarted(ctx: InvocationCtx): void {
    this.leaveInbox(ctx);
    ctx.completionRetentionMs = 0;
    ctx.journalRetentionMs = 0;
  }

  /** Takes a not-started invocation out of its key's in-memory inbox (it is being completed without running). */
  private leaveInbox(ctx: InvocationCtx): void {
    if (ctx.status !== 'inboxed' || ctx.serviceKey === null) return;
    const lk = lockKey(ctx.serviceName, ctx.serviceKey);
    const q = this.inboxes.get(lk);
    if (q === undefined) return;
    const i = q.indexOf(ctx.id);
    if (i >= 0) q.splice(i, 1);
    if (q.length === 0) this.inboxes.delete(lk);
  }

  private inbox(lk: string): string[] {
    let q = this.inboxes.get(lk);
    if (q === undefined) this.inboxes.set(lk, (q = []));
    return q;
  }
}

/** The deployment and protocol version an attempt pins, or why none can be pinned. */
type PinChoice =
  | { deployment: NonNullable<ReturnType<SchemaRegistry['deployment']>>; protocolVersion: number }
  | { failure: EngineFailure };

interface EngineFailure {
  /** The failure code as the SDK or protocol names it (500, 570, 571…). */
  code: number;
  rtCode: ErrorCode;
  message: string;
  /** Delay asked for by whatever stands in front of the deployment (Retry-After on 429/503); the attempt counts. */
  retryAfterMs?: number | undefined;
  /** The SDK's next_retry_delay: replaces the invocation retry policy for this failure (see `handleFailure`). */
  sdkRetryDelayMs?: number | undefined;
  related?: { index?: number | undefined; name?: string | undefined; type?: number | undefined } | undefined;
}

/**
 * When the completed invocation's result and journal go away: the result after its completion retention (idempotency
 * or workflow), the journal after its journal retention, never later than the result (restate caps it the same way).
 */
function retentionColumns(ctx: InvocationCtx, now: Date): InvocationUpdate {
  const keep = Math.max(0, ctx.completionRetentionMs ?? 0);
  const keepJournal = Math.min(keep, Math.max(0, ctx.journalRetentionMs ?? 0));
  return {
    expiresAt: new Date(now.getTime() + keep),
    journalExpiresAt: new Date(now.getTime() + keepJournal),
  };
}

function failureColumns(ctx: InvocationCtx, f: EngineFailure): InvocationUpdate {
  return {
    retryCount: ctx.retryCount,
    retryCountSinceAppend: ctx.retrySinceAppend,
    lastFailure: `[${f.rtCode}] ${f.message}`,
    lastFailureCode: f.rtCode,
    lastFailureRelatedCommandIndex: f.related?.index ?? null,
    lastFailureRelatedCommandName: f.related?.name ?? null,
    lastFailureRelatedCommandType: f.related?.type === undefined ? null : String(f.related.type),
  };
}

function outputFromJournal(journal: JournalEntry[] | undefined): Outcome | undefined {
  const entry = journal?.findLast((e) => e.type === MessageType.OutputCommand);
  if (entry === undefined) return undefined;
  const cmd = codec.command(entry.type, entry.raw);
  return cmd.kind === 'output' ? cmd.outcome : undefined;
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

/** The channel a node NOTIFYs (payload: comma-separated partitions) when it wrote outbox rows for another's. */
export const OUTBOX_CHANNEL = 'ratchet_outbox';

/** Draws of a generated idempotency key at most, to land in a partition served here (each hits with served / P). */
const PLACEMENT_DRAWS = 64;

/** How often results awaited here of invocations served elsewhere are read from PostgreSQL. */
const REMOTE_POLL_MS = 200;

/** Virtual-object keys whose state the engine keeps in memory at most (least recently used go first). */
const STATE_CACHE_KEYS = 10_000;

/** The ordering key (`WriteOp.keys`) of an invocation's writes: its partition key, which for keyed services is its key's. */
function orderKey(partitionKey: bigint): string {
  return partitionKey.toString();
}

/** A write of `ctx`'s own rows (and its timers, and its key's lock and inbox): ordered by its partition key. */
function ownWrite(ctx: InvocationCtx, stmts: Stmt[] = []): WriteOp {
  return { partitions: [ctx.partitionId], stmts, journal: [], keys: [orderKey(ctx.partitionKey)] };
}

/** The invocation an attach / get-output command names. */
function resolveTarget(t: InvocationTarget, keyed: (service: string) => boolean): InvocationId | undefined {
  switch (t.kind) {
    case 'invocationId':
      return InvocationId.tryParse(t.invocationId);
    case 'idempotentRequest':
      return InvocationId.forIdempotent(
        t.serviceName,
        keyed(t.serviceName) ? (t.serviceKey ?? '') : undefined,
        t.handlerName,
        t.idempotencyKey,
      );
    case 'workflow':
      return InvocationId.forWorkflow(t.workflowName, t.workflowKey);
  }
}

/**
 * A write refused for want of a lease (its partition was given up, moved or is being recovered since the request
 * passed the ownership check): it certainly did not happen, so the request may go to the partition's owner as if it
 * had been refused at once.
 */
function rerouteIfFenced(err: unknown, partition: number): unknown {
  return err instanceof FencingError ? new PartitionNotServedError(partition) : err;
}

/** Signal index 1 is cancellation; 2–16 are reserved; awakeables start at 17. */
const CANCEL_SIGNAL = 1;

function lockKey(service: string, key: string): string {
  return `${service}\u0000${key}`;
}

/** A completed invocation whose retention ended is gone, even before the cleaner removed its row. */
function isExpired(row: InvocationRow): boolean {
  return row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
}

function completedFromRow(row: InvocationRow): CompletedInvocation {
  const outcome: Outcome =
    row.resultKind === 'success'
      ? { kind: 'success', value: row.output ?? Buffer.alloc(0) }
      : {
          kind: 'failure',
          failure: {
            code: row.failureCode ?? 500,
            message: row.failureMessage ?? '',
            ...(row.failureMetadata === null ? {} : { metadata: row.failureMetadata }),
          },
        };
  return {
    id: row.id,
    outcome,
    completedAt: row.completedAt ?? row.createdAt,
    completionRetentionMs: row.completionRetentionMs,
  };
}

export type { HandlerSchema };
