import { LOG_FIELDS } from '../telemetry/logger.ts';
import type { Logger } from 'pino';
import type { InvocationId } from '../ids/invocation-id.ts';
import type { SchemaRegistry } from '../schema/registry.ts';
import { effectiveHandlerSettings, type HandlerSettings } from '../schema/handler-settings.ts';
import type { AttemptStarter } from '../invoker/invoker.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import * as codec from './codec.ts';
import { InvocationCtx } from './invocation.ts';
import { KeyQueue } from './key-queue.ts';
import { PartitionNotServedError, PartitionUnavailableError } from './management-errors.ts';
import type { InvocationObserver, LifecycleEvent } from './observer.ts';
import type { Roles } from './roles.ts';
import { StateCache } from './state-cache.ts';
import { TimerQueue } from './timer-queue.ts';
import { FlowGate } from '../flow-control/gate.ts';
import type { CompletedInvocation, JournalEntry } from './types.ts';

export type { EngineFailure } from './types.ts';
import { type Write, type WriteBatch, type Storage } from '../storage/api.ts';
import type { NewInvocation, TimerRow } from '../storage/rows.ts';
import { FencingError } from '../storage/errors.ts';
import { partitionFor, partitionKeyForKey } from '../ids/partition-key.ts';

export interface EngineOptions {
  node: string;
  partitions: number;
  maxAwaitedFutureDepth: number;
  /** New invocations refuse (RT0020) deployments that speak only versions below this one. Default 5. */
  minProtocolVersion?: number;
  maxProtocolVersion: number;
  /**
   * Flow control (experimental, restate's vqueues): invocations get a virtual queue, scopes and limit keys are
   * accepted and the limiter's rules enforced. Off: scopes and limit keys are refused (RT0024).
   */
  flowControl?: boolean;
}

export interface EngineDeps {
  /** Reads the tables and commits write batches (fenced by the partition leases). */
  storage: Storage;
  registry: SchemaRegistry;
  /** Runs attempts against deployments; the engine reads their effects. */
  invoker: AttemptStarter;
  logger: Logger;
  metrics: Metrics;
  /**
   * What this process holds in memory of these partitions may be wrong (a read or write failed midway): they are to be
   * dropped and recovered from PostgreSQL (the cluster coordinator does it). Without it nothing is recovered.
   */
  onSuspect?: (partitions: number[]) => void;
  /** Told of every lifecycle event of an invocation, once it is durable (logs and traces). */
  observer?: InvocationObserver;
}

/** Resolved with the completed invocation, or with undefined when it turned out to be gone (purged, expired). */
export type Waiter = (done: CompletedInvocation | undefined) => void;

/** What the outbox courier (outbox.ts) remembers between deliveries. */
export interface OutboxState {
  /** Outbox rows being delivered (round Infinity) or delivered during outbox read `round` (see pollOutbox). */
  readonly seen: Map<string, { partition: number; round: number }>;
  round: number;
  readonly toNotify: Set<number>;
  notifying: boolean;
}

/**
 * The partition processor's shell: what this process holds of the partitions it serves (the active invocations, key
 * locks and inboxes, timers, cached state, awaited results) and the plumbing every role uses to read and commit. The
 * roles (admission, attempts, commands/, lifecycle/, outbox, timers, results) are modules of functions over it; they
 * reach each other through `roles`, bound once by the Engine, so that no role module imports another's.
 */
export class PartitionProcessor {
  readonly active = new Map<string, InvocationCtx>();
  readonly loading = new Map<string, Promise<InvocationCtx | undefined>>();
  /** Exclusive lock holder per `service/key`, the FIFO inbox behind it, and queued state replacements. */
  readonly keys = new KeyQueue();
  readonly waiters = new Map<string, Set<Waiter>>();
  readonly timers: TimerQueue<TimerRow>;
  /** Committed state of virtual-object keys, so that an attempt starts without reading it (see StateCache). */
  readonly stateCache = new StateCache(STATE_CACHE_KEYS);
  /** Flow control: paused virtual queues and the concurrency limiter every attempt start of a queued one passes. */
  readonly flow: FlowGate = new FlowGate((id) => {
    const ctx = this.active.get(id);
    if (ctx !== undefined) void this.roles.startAttempt(ctx);
  });
  stopped = false;
  /** Partitions served: their invocations, locks, inboxes, timers and outbox live in this object's memory. */
  readonly served = new Set<number>();
  /** Bumped whenever partitions are dropped: a read started before a drop must not install what it read. */
  generation = 0;
  /** Polls PostgreSQL for the results awaited here of invocations whose partition this process does not serve. */
  remotePoll: NodeJS.Timeout | undefined;
  readonly outbox: OutboxState = { seen: new Map(), round: 0, toNotify: new Set(), notifying: false };
  readonly log: Logger;
  /** Bound by the Engine right after construction. */
  roles!: Roles;

  constructor(
    readonly options: EngineOptions,
    readonly deps: EngineDeps,
  ) {
    this.log = deps.logger.child({ component: 'engine' });
    this.timers = new TimerQueue((t) => this.roles.fireTimer(t));
  }

  /**
   * The settings a handler's invocations run with (retentions, timeouts, lazy state, retry policy), as the admin API
   * shows them; undefined when the service is no longer registered.
   */
  settingsOf(serviceName: string, handlerName: string): HandlerSettings | undefined {
    const service = this.deps.registry.service(serviceName);
    if (service === undefined) return undefined;
    const handler = service.schema.handlers.find((h) => h.name === handlerName);
    return effectiveHandlerSettings(service, handler, this.deps.registry.defaults);
  }

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

  /** Refuses a request for a partition this process does not serve, before anything is written. */
  requireServed(partition: number): void {
    if (!this.served.has(partition)) throw new PartitionNotServedError(partition);
  }

  /** The partition of a lock key (`service\0key`). */
  lockPartition(lk: string): number {
    return this.partitionOfKey(lk.slice(lk.indexOf('\u0000') + 1));
  }

  /**
   * A management write that did not happen: the partition moved away meanwhile (the request goes to its new owner),
   * or the write failed here (the partition is being recovered; the client retries).
   */
  unavailable(id: InvocationId, partition: number): Error {
    return this.served.has(partition) ? new PartitionUnavailableError(id) : new PartitionNotServedError(partition);
  }

  /** Waits until every write queued for the invocation so far (and any queued meanwhile) is durable. */
  async settled(ctx: InvocationCtx): Promise<void> {
    let pending = ctx.lastWrite;
    await pending;
    while (pending !== ctx.lastWrite) {
      pending = ctx.lastWrite;
      await pending;
    }
  }

  appendEntry(
    ctx: InvocationCtx,
    op: WriteBatch,
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

  /** Tells the observer of a lifecycle event of `ctx` (after the change it reports is durable). */
  observe(ctx: InvocationCtx, e: LifecycleEvent): void {
    const observer = this.deps.observer;
    if (observer === undefined) return;
    observer.event(
      {
        id: ctx.id,
        target: ctx.target,
        service: ctx.serviceName,
        handler: ctx.handlerName,
        key: ctx.serviceKey,
        deploymentId: ctx.deploymentId,
        attempt: ctx.retryCount,
        partition: ctx.partitionId,
        traceContext: ctx.traceContext,
      },
      e,
    );
  }

  /** Starts the trace of a new invocation (`row`) with the observer; its context is stored with the row. */
  startTrace(row: NewInvocation, parent: string | undefined, caller: string | null | undefined): void {
    const ctx = this.deps.observer?.newTrace?.({
      id: row.id,
      target:
        row.serviceKey === null
          ? `${row.serviceName}/${row.handlerName}`
          : `${row.serviceName}/${row.serviceKey}/${row.handlerName}`,
      service: row.serviceName,
      handler: row.handlerName,
      key: row.serviceKey,
      parent,
      caller,
    });
    if (ctx !== undefined) row.traceContext = ctx;
  }

  /** Statements that touch no in-memory invocation (cleanup of timers and outbox rows of finished work). */
  submitWrites(partition: number, writes: Write[]): Promise<void> {
    return this.deps.storage.submit({ partitions: [partition], writes, journal: [] });
  }

  /** What follows a batch's commit or failure in memory (the state cache: in commit order); storage never sees it. */
  private readonly hooks = new WeakMap<WriteBatch, { committed: (() => void)[]; failed: (() => void)[] }>();

  /** Runs `fn` once `op` committed, before anything that awaits `op`'s commit goes on (so in commit order). */
  onCommitted(op: WriteBatch, fn: () => void): void {
    this.hooksOf(op).committed.push(fn);
  }

  /** Runs `fn` once `op` did not commit or its outcome is unknown. */
  onFailed(op: WriteBatch, fn: () => void): void {
    this.hooksOf(op).failed.push(fn);
  }

  private hooksOf(op: WriteBatch): { committed: (() => void)[]; failed: (() => void)[] } {
    let h = this.hooks.get(op);
    if (h === undefined) this.hooks.set(op, (h = { committed: [], failed: [] }));
    return h;
  }

  /**
   * Submits a batch; its hooks are the first reaction to its commit. The committer settles batches in commit order,
   * so the hooks of two batches run in that order too.
   */
  submit(op: WriteBatch): Promise<void> {
    const done = this.deps.storage.submit(op);
    const hooks = this.hooks.get(op);
    if (hooks === undefined) return done;
    this.hooks.delete(op);
    return done.then(
      () => this.runHooks(hooks.committed),
      (err: unknown) => {
        this.runHooks(hooks.failed);
        throw err;
      },
    );
  }

  private runHooks(fns: (() => void)[]): void {
    for (const fn of fns) {
      try {
        fn();
      } catch (err) {
        this.log.error({ err }, 'a commit hook failed');
      }
    }
  }

  write(ctx: InvocationCtx, writes: Write[], after?: () => void): void {
    void this.commit(ctx, ownWrite(ctx, writes), after);
  }

  /**
   * Commits a write of this invocation and then runs `after`. Resolves to false (never rejects) when the write
   * failed: the invocation is then poisoned and reloaded from storage, so callers that fire and forget are safe.
   */
  commit(ctx: InvocationCtx, op: WriteBatch, after?: () => void): Promise<boolean> {
    const p = this.submit(op);
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
              this.log.debug({ err, [LOG_FIELDS.invocationId]: ctx.id }, 'write refused: the partition moved');
            } else {
              this.log.warn(
                { err, [LOG_FIELDS.invocationId]: ctx.id },
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
  poison(ctx: InvocationCtx): void {
    if (ctx.poisoned) return;
    ctx.poisoned = true;
    ctx.attempt?.abort();
    ctx.attemptEnded();
    if (this.active.get(ctx.id) === ctx) this.active.delete(ctx.id);
    // (A failed write was reported by the committer already; a failed read is reported here. Twice is harmless.)
    if (this.served.has(ctx.partitionId)) this.deps.onSuspect?.([ctx.partitionId]);
  }

  /** The in-memory context of a non-completed invocation, loading it from storage if needed. */
  load(id: string): Promise<InvocationCtx | undefined> {
    const known = this.active.get(id);
    if (known !== undefined) return Promise.resolve(known);
    let p = this.loading.get(id);
    if (p === undefined) {
      const generation = this.generation;
      p = this.deps.storage.invocations
        .get(id)
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

  async loadEntries(id: string): Promise<JournalEntry[]> {
    const rows = await this.deps.storage.journal.load(id);
    return rows.map((r) => {
      const e: JournalEntry = { index: r.index, type: r.entryType, raw: r.raw };
      if (r.completionId !== null) e.completionId = r.completionId;
      if (r.signalIdx !== null) e.signalIdx = r.signalIdx;
      if (r.signalName !== null) e.signalName = r.signalName;
      if (r.entryType >= 0x8000 && r.entryType <= 0xfbff) e.success = codec.notificationSucceeded(r.entryType, r.raw);
      return e;
    });
  }
}

/** Virtual-object keys whose state the engine keeps in memory at most (least recently used go first). */
const STATE_CACHE_KEYS = 10_000;

/** The ordering key (`WriteBatch.keys`) of an invocation's writes: its partition key, which for keyed services is its key's. */
export function orderKey(partitionKey: bigint): string {
  return partitionKey.toString();
}

/** A write of `ctx`'s own rows (and its timers, and its key's lock and inbox): ordered by its partition key. */
export function ownWrite(ctx: InvocationCtx, writes: Write[] = []): WriteBatch {
  return { partitions: [ctx.partitionId], writes, journal: [], keys: [orderKey(ctx.partitionKey)] };
}

/**
 * A write refused for want of a lease (its partition was given up, moved or is being recovered since the request
 * passed the ownership check): it certainly did not happen, so the request may go to the partition's owner as if it
 * had been refused at once.
 */
export function rerouteIfFenced(err: unknown, partition: number): unknown {
  return err instanceof FencingError ? new PartitionNotServedError(partition) : err;
}

/** Signal index 1 is cancellation; 2–16 are reserved; awakeables start at 17. */
export const CANCEL_SIGNAL = 1;

export function lockKey(service: string, key: string): string {
  return `${service}\u0000${key}`;
}
