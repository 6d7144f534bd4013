import type { AttemptHandle } from '../invoker/invoker.ts';
import type { AwaitingTree, NotificationIndex } from './awaiting.ts';
import type { JournalEntry, Outcome } from './types.ts';
import { type InsertTimer } from '../storage/api.ts';
import type { InvocationRow, InvocationStatus } from '../storage/rows.ts';

/**
 * What an invocation is doing, with what exists only then: an attempt only while invoked, what it awaits only while
 * suspended, its inbox position only while inboxed, its start timer only while scheduled. A status change replaces
 * the phase, so nothing of the previous one survives it.
 */
export type Phase =
  | {
      readonly status: 'scheduled';
      /** Created with the invocation; armed once that commit is durable. */ startTimer: InsertTimer | undefined;
    }
  | {
      readonly status: 'inboxed';
      /** As stored; undefined for one queued in memory since. */ readonly inboxSeq: bigint | undefined;
    }
  | Running
  | {
      readonly status: 'suspended';
      /** As stored (undefined: nothing recorded, only resume() wakes it). */ readonly awaiting:
        AwaitingTree | undefined;
    }
  | { readonly status: 'paused' }
  | { readonly status: 'completed' };

/** The phase of a running invocation: the attempt in flight (none between attempts, e.g. while backing off). */
export interface Running {
  readonly status: 'invoked';
  attempt: AttemptHandle | undefined;
  /** Entries [0, attemptSnapshot) were sent in the current attempt's Start. */
  attemptSnapshot: number;
  /** Indexes of entries the SDK itself sent in the current attempt (never echoed back). */
  fromSdk: Set<number>;
}

/**
 * The owner's in-memory view of one invocation that is not completed. It runs ahead of the database by at most
 * the writes queued in the group committer; `lastWrite` settles when all of them are durable.
 */
export class InvocationCtx implements NotificationIndex {
  readonly id: string;
  readonly partitionKey: bigint;
  readonly partitionId: number;
  readonly serviceName: string;
  readonly serviceKey: string | null;
  readonly handlerName: string;
  readonly serviceTy: string;
  readonly handlerTy: string | null;
  readonly randomSeed: bigint;
  readonly idempotencyKey: string | null;
  /** What it is doing now; change it only through the transitions below (`toInvoked`, `toSuspended`…). */
  phase: Phase;
  deploymentId: string | null;
  protocolVersion: number | null;
  /** The pin was chosen in memory but not written yet; it is written with the next attempt-start update. */
  pinUnsaved = false;
  /** The first attempt's start (and pin) was written with the invocation's insert: startAttempt writes none. */
  startRecorded = false;
  /**
   * Admitted with an id that may exist already (idempotency or workflow key) and the insert's outcome is not known
   * yet: it may be a duplicate of an invocation that is running or completed, so it must not be handed its key's lock.
   */
  insertPending = false;
  /** Failed attempts so far (the row's retry_count). */
  retryCount: number;
  /**
   * Failed attempts that count against the invocation retry policy: those without an SDK-requested delay. Kept in
   * memory only; a reloaded invocation starts from retry_count, which may count more but never lets it retry more
   * often than its policy allows.
   */
  policyAttempts: number;
  retrySinceAppend: number;
  lastAppendAt: number;
  completionRetentionMs: number | null;
  journalRetentionMs: number | null;
  /** The W3C trace context its spans are parented to (see InvocationRow.traceContext). */
  readonly traceContext: string | null;
  /** Flow control: its scope, limit key and virtual queue (null without flow control). */
  readonly scope: string | null;
  readonly limitKey: string | null;
  readonly vqueueId: string | null;
  /**
   * Called once when it stops running (suspends, pauses, completes) while flow control counts it, so that its
   * permit or its place in line is given back. Set by the flow gate.
   */
  onStopRunning: ((ctx: InvocationCtx) => void) | undefined;

  journal: JournalEntry[] | undefined;
  private journalLoading: Promise<void> | undefined;
  /** completion id → success?; signal idx → success?; signal name → success? */
  private readonly completions = new Map<number, boolean>();
  private readonly signals = new Map<number, boolean>();
  private readonly namedSignals = new Map<string, boolean>();
  /** The Output command of the current journal, once the SDK sent it. */
  output: Outcome | undefined;

  /** startAttempt is preparing an attempt (reading the journal or state): a second call does nothing. */
  starting = false;
  /** False only while this process knows no timer row exists for it (created here, never armed one). */
  mayHaveTimers = true;
  lastWrite: Promise<void> = Promise.resolve();
  /** Set when a write failed: memory may be ahead of the database, so this object must be dropped and reloaded. */
  poisoned = false;

  constructor(row: InvocationRow) {
    this.id = row.id;
    this.partitionKey = row.partitionKey;
    this.partitionId = row.partitionId;
    this.serviceName = row.serviceName;
    this.serviceKey = row.serviceKey;
    this.handlerName = row.handlerName;
    this.serviceTy = row.serviceTy;
    this.handlerTy = row.handlerTy;
    this.randomSeed = row.randomSeed;
    this.idempotencyKey = row.idempotencyKey;
    this.phase = phaseOf(row);
    this.deploymentId = row.deploymentId;
    this.protocolVersion = row.protocolVersion;
    this.retryCount = row.retryCount;
    this.policyAttempts = row.retryCount;
    this.retrySinceAppend = row.retryCountSinceAppend;
    this.lastAppendAt = (row.lastAppendAt ?? row.createdAt).getTime();
    this.completionRetentionMs = row.completionRetentionMs;
    this.journalRetentionMs = row.journalRetentionMs;
    this.traceContext = row.traceContext;
    this.scope = row.scope;
    this.limitKey = row.limitKey;
    this.vqueueId = row.vqueueId;
  }

  private stopRunning(): void {
    const hook = this.onStopRunning;
    this.onStopRunning = undefined;
    hook?.(this);
  }

  get status(): InvocationStatus {
    return this.phase.status;
  }

  /** The running phase, or undefined when it is not running. */
  get running(): Running | undefined {
    return this.phase.status === 'invoked' ? this.phase : undefined;
  }

  /** The attempt in flight (only while running). */
  get attempt(): AttemptHandle | undefined {
    return this.phase.status === 'invoked' ? this.phase.attempt : undefined;
  }

  /** What a suspended invocation awaits. */
  get awaiting(): AwaitingTree | undefined {
    return this.phase.status === 'suspended' ? this.phase.awaiting : undefined;
  }

  toScheduled(startTimer: InsertTimer | undefined): void {
    this.phase = { status: 'scheduled', startTimer };
  }

  toInboxed(): void {
    this.phase = { status: 'inboxed', inboxSeq: undefined };
  }

  /** Running, between attempts (a running invocation stays as it is). */
  toInvoked(): void {
    if (this.phase.status !== 'invoked')
      this.phase = { status: 'invoked', attempt: undefined, attemptSnapshot: 0, fromSdk: new Set() };
  }

  toSuspended(awaiting: AwaitingTree): void {
    this.phase = { status: 'suspended', awaiting };
    this.stopRunning();
  }

  toPaused(): void {
    this.phase = { status: 'paused' };
    this.stopRunning();
  }

  toCompleted(): void {
    this.phase = { status: 'completed' };
    this.stopRunning();
  }

  /** A new attempt runs with entries [0, snapshot) in its Start. Only while running. */
  attemptStarted(attempt: AttemptHandle, snapshot: number): void {
    if (this.phase.status !== 'invoked') throw new Error(`an attempt of ${this.id} started while ${this.phase.status}`);
    this.phase.attempt = attempt;
    this.phase.attemptSnapshot = snapshot;
    this.phase.fromSdk = new Set();
  }

  /** The attempt in flight ended (or was given up); the invocation keeps its status. */
  attemptEnded(): void {
    if (this.phase.status === 'invoked') this.phase.attempt = undefined;
  }

  get target(): string {
    return this.serviceKey === null
      ? `${this.serviceName}/${this.handlerName}`
      : `${this.serviceName}/${this.serviceKey}/${this.handlerName}`;
  }

  get isExclusiveKeyed(): boolean {
    return this.serviceKey !== null && (this.handlerTy === 'Exclusive' || this.handlerTy === 'Workflow');
  }

  ensureJournal(load: () => Promise<JournalEntry[]>): Promise<void> {
    if (this.journal !== undefined) return Promise.resolve();
    this.journalLoading ??= load().then((entries) => {
      this.journal = [];
      for (const e of entries) this.index(e);
      this.journal = entries;
    });
    return this.journalLoading;
  }

  /** Adds an entry at the end of the in-memory journal and returns it with its index. */
  append(entry: Omit<JournalEntry, 'index'>): JournalEntry {
    const journal = this.journal;
    if (journal === undefined) throw new Error(`journal of ${this.id} is not loaded`);
    const e: JournalEntry = {
      index: journal.length,
      type: entry.type,
      raw: entry.raw,
      completionId: entry.completionId,
      signalIdx: entry.signalIdx,
      signalName: entry.signalName,
      success: entry.success,
    };
    journal.push(e);
    this.index(e);
    this.lastAppendAt = Date.now();
    this.retrySinceAppend = 0;
    return e;
  }

  private index(e: JournalEntry): void {
    if (e.success === undefined) return;
    if (e.completionId !== undefined) this.completions.set(e.completionId, e.success);
    else if (e.signalIdx !== undefined) this.signals.set(e.signalIdx, e.success);
    else if (e.signalName !== undefined) this.namedSignals.set(e.signalName, e.success);
  }

  hasCompletion(id: number): boolean {
    return this.completions.has(id);
  }

  completion(id: number): boolean | undefined {
    return this.completions.get(id);
  }

  signal(idx: number): boolean | undefined {
    return this.signals.get(idx);
  }

  namedSignal(name: string): boolean | undefined {
    return this.namedSignals.get(name);
  }

  /** Chains a durable write so that later steps can wait for everything queued so far. */
  track(write: Promise<void>): Promise<void> {
    // Handled at once: `write` may fail before the writes queued ahead of it settle, i.e. before `next` listens to it.
    write.catch(() => undefined);
    const next = this.lastWrite.then(() => write);
    this.lastWrite = next.catch(() => undefined);
    return next;
  }
}

function phaseOf(row: InvocationRow): Phase {
  switch (row.status) {
    case 'scheduled':
      return { status: 'scheduled', startTimer: undefined };
    case 'inboxed':
      return { status: 'inboxed', inboxSeq: row.inboxSeq ?? undefined };
    case 'invoked':
      return { status: 'invoked', attempt: undefined, attemptSnapshot: 0, fromSdk: new Set() };
    case 'suspended':
      return { status: 'suspended', awaiting: (row.awaiting ?? undefined) as AwaitingTree | undefined };
    case 'paused':
      return { status: 'paused' };
    case 'completed':
      return { status: 'completed' };
  }
}
