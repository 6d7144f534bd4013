import type {
  InvocationRow,
  InvocationUpdate,
  JournalRow,
  LockRow,
  NewInvocation,
  OutboxRequest,
  OutboxRow,
  PromiseRef,
  PromiseRow,
  StateEntryRow,
  StateMutationRow,
  StoredEntry,
  TimerRow,
} from './rows.ts';

/**
 * The storage contract of the engine: one interface per table for what it reads, and writes as data. A change to
 * invocation state is a WriteBatch — writes to the tables plus journal rows — committed atomically, fenced by the
 * partitions it names. Writes whose outcome the engine needs (was the invocation inserted? which outbox rows did the
 * completion create?) carry it back in their own fields, set by the storage when the batch committed; a write can be
 * made conditional on an insert of the same batch (`onlyIf` / `unless`). PostgreSQL (storage/pg/storage.ts) and the
 * in-memory store of the engine's unit tests implement it.
 */

// ---------------------------------------------------------------------------------------------------------------
// reads, one interface per table

export interface InvocationTable {
  get(id: string): Promise<InvocationRow | undefined>;
  getMany(ids: string[]): Promise<InvocationRow[]>;
  /** Every invocation of the partitions that is not completed. */
  listActive(partitions: number[]): Promise<InvocationRow[]>;
  /**
   * Of `ids`, those not finished yet: stored and not completed, or still waiting in the outbox to be admitted. An id
   * found in neither finished (completed and already removed).
   */
  unfinished(ids: string[]): Promise<string[]>;
}

export interface JournalTable {
  load(invocationId: string): Promise<StoredEntry[]>;
}

export interface StateTable {
  /** A key's whole state, ordered by state key. */
  load(service: string, key: string): Promise<StateEntryRow[]>;
  get(service: string, key: string, stateKey: Uint8Array): Promise<Buffer | undefined>;
}

export interface LockTable {
  list(partitions: number[]): Promise<LockRow[]>;
}

export interface TimerTable {
  list(partitions: number[]): Promise<TimerRow[]>;
}

/** A request for the owner of `partition` (see `OutboxRequest`), queued with `OutboxTable.enqueue`. */
export interface QueuedRequest {
  partition: number;
  targetInvocationId: string;
  request: OutboxRequest;
}

export interface OutboxTable {
  list(partitions: number[]): Promise<OutboxRow[]>;
  /**
   * Queues requests for the owners of their partitions, in one commit, in the order given (their `seq`s ascend in that
   * order); resolves once committed, with the rows. Not fenced by a lease: any node may ask any partition's owner for
   * work (the owner alone carries it out, and an invocation request with a derived id is admitted at most once).
   */
  enqueue(requests: QueuedRequest[]): Promise<OutboxRow[]>;
}

export interface StateMutationTable {
  list(partitions: number[]): Promise<StateMutationRow[]>;
}

export interface PromiseTable {
  get(ref: PromiseRef): Promise<PromiseRow | undefined>;
}

export interface VQueueTable {
  listPaused(partitions: number[]): Promise<{ vqueueId: string; partitionId: number }[]>;
  setPaused(partitionId: number, vqueueId: string, paused: boolean): Promise<void>;
}

export interface Storage {
  readonly invocations: InvocationTable;
  readonly journal: JournalTable;
  readonly state: StateTable;
  readonly locks: LockTable;
  readonly timers: TimerTable;
  readonly outbox: OutboxTable;
  readonly stateMutations: StateMutationTable;
  readonly promises: PromiseTable;
  /** Virtual queues paused through the admin API (flow control). */
  readonly vqueues: VQueueTable;
  /** Commits a batch (see WriteBatch); rejects when it did not commit or its outcome is unknown. */
  submit(batch: WriteBatch): Promise<void>;
  /** The epoch this process holds `partition` at, or undefined when it does not hold it. */
  epochOf(partition: number): string | undefined;
  /** Wakes the owners of `partitions` to read their outbox (best effort: they also poll). */
  notifyOutbox(partitions: number[]): Promise<void>;
  /** Whether `err` says the database could not be reached (expected while it restarts: worth a warning only). */
  isUnavailable(err: unknown): boolean;
  /** Waits for the writes submitted so far, then refuses new ones. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------------
// writes

/** A write that only happens if an invocation insert of the same batch inserted (`onlyIf`) or did not (`unless`). */
interface Conditional {
  onlyIf?: InsertInvocation | undefined;
  unless?: InsertInvocation | undefined;
}

/** A write whose result is the outbox rows it created, set when the batch committed (to deliver them). */
interface MakesOutboxRows {
  rows?: OutboxRow[];
}

export interface InsertInvocation extends Conditional {
  kind: 'invocation.insert';
  row: NewInvocation;
  input: Uint8Array;
  /** Set at commit: false when an invocation with this id existed already (nothing was written). */
  inserted?: boolean;
}
export interface UpdateInvocation extends Conditional {
  kind: 'invocation.update';
  id: string;
  update: InvocationUpdate;
  now: Date;
}
/** A delayed invocation whose start came while its key was locked joins the key's inbox, at the end. */
export interface InboxInvocation extends Conditional {
  kind: 'invocation.inbox';
  id: string;
}
/** Forgets a completed invocation now (its journal, and a workflow run's state and promises). */
export interface PurgeInvocation extends Conditional {
  kind: 'invocation.purge';
  id: string;
}
/** Before an insert with a deterministic id: a completed invocation whose retention ended is gone for good. */
export interface PurgeIfExpired extends Conditional {
  kind: 'invocation.purgeIfExpired';
  id: string;
}
export interface DeleteJournal extends Conditional {
  kind: 'journal.delete';
  invocationId: string;
}
export interface TakeLock extends Conditional {
  kind: 'lock.take';
  service: string;
  key: string;
  invocationId: string;
}
export interface ReleaseLock extends Conditional {
  kind: 'lock.release';
  service: string;
  key: string;
  invocationId: string;
}
export interface TransferLock extends Conditional {
  kind: 'lock.transfer';
  service: string;
  key: string;
  from: string;
  to: string;
}
export interface InsertTimer extends Conditional {
  kind: 'timer.insert';
  timer: Omit<TimerRow, 'id'>;
  /** Set at commit. */
  id?: string;
}
export interface DeleteTimer extends Conditional {
  kind: 'timer.delete';
  id: string;
}
export interface DeleteTimersOf extends Conditional {
  kind: 'timer.deleteOf';
  invocationId: string;
}
export interface InsertOutbox extends Conditional, MakesOutboxRows {
  kind: 'outbox.insert';
  row: Omit<OutboxRow, 'seq'>;
}
/** Asks the owner of `partition` to carry out `request` for `targetInvocationId`. */
export interface InsertOutboxRequest extends Conditional, MakesOutboxRows {
  kind: 'outbox.request';
  partition: number;
  targetInvocationId: string;
  request: OutboxRequest;
}
export interface DeleteOutbox extends Conditional {
  kind: 'outbox.delete';
  seq: string;
}
/**
 * Registers a caller for the result of `invocationId`, or, when that invocation already completed or does not exist,
 * queues the answer for the caller at once (an outbox row in `rows`).
 */
export interface AwaitResult extends Conditional, MakesOutboxRows {
  kind: 'outbox.awaitResult';
  invocationId: string;
  callerId: string;
  callerPartition: number;
  callerCompletionId: number;
  entryType: number;
}
/** On completion: every waiter of the invocation becomes an outbox row carrying its result. */
export interface ResultToWaiters extends Conditional, MakesOutboxRows {
  kind: 'outbox.resultToWaiters';
  invocationId: string;
}
export interface SetState extends Conditional {
  kind: 'state.set';
  service: string;
  key: string;
  partitionKey: bigint;
  stateKey: Uint8Array;
  value: Uint8Array;
}
export interface ClearState extends Conditional {
  kind: 'state.clear';
  service: string;
  key: string;
  stateKey: Uint8Array;
}
export interface ClearAllState extends Conditional {
  kind: 'state.clearAll';
  service: string;
  key: string;
}
/** Queues a state replacement in its key's inbox (it shares the inbox sequence with invocations). */
export interface InsertStateMutation extends Conditional {
  kind: 'stateMutation.insert';
  mutation: Omit<StateMutationRow, 'inboxSeq'>;
}
export interface DeleteStateMutation extends Conditional {
  kind: 'stateMutation.delete';
  id: string;
}
/** Replaces the whole state of a key if `version` (when given) still names its current state. */
export interface ApplyStateMutation extends Conditional {
  kind: 'stateMutation.apply';
  service: string;
  key: string;
  partitionKey: bigint;
  version: string | null;
  entries: StateEntryRow[];
  /** Set at commit: false when the version did not match and nothing changed. */
  applied?: boolean;
}
/** GetPromise: answered at once through the outbox when completed; otherwise the caller waits. */
export interface AwaitPromise extends Conditional, MakesOutboxRows {
  kind: 'promise.await';
  promise: PromiseRef;
  callerId: string;
  callerPartition: number;
  completionId: number;
  entryType: number;
}
/** PeekPromise: answered with the promise's state as of delivery. */
export interface PeekPromise extends Conditional, MakesOutboxRows {
  kind: 'promise.peek';
  promise: PromiseRef;
  callerId: string;
  callerPartition: number;
  completionId: number;
  entryType: number;
}
/**
 * CompletePromise: the first completion wins; its waiters get the result, and the completer gets `ifCompleted` or,
 * when the promise was completed before, `ifAlreadyCompleted` (both notification payloads), all as outbox rows.
 */
export interface CompletePromise extends Conditional, MakesOutboxRows {
  kind: 'promise.complete';
  promise: PromiseRef;
  partitionKey: bigint;
  result: { kind: 'success'; value: Uint8Array } | { kind: 'failure'; code: number; message: string };
  completer: { id: string; partition: number; completionId: number; entryType: number };
  ifCompleted: Uint8Array;
  ifAlreadyCompleted: Uint8Array;
  waiterEntryType: number;
}

export type Write =
  | InsertInvocation
  | UpdateInvocation
  | InboxInvocation
  | PurgeInvocation
  | PurgeIfExpired
  | DeleteJournal
  | TakeLock
  | ReleaseLock
  | TransferLock
  | InsertTimer
  | DeleteTimer
  | DeleteTimersOf
  | InsertOutbox
  | InsertOutboxRequest
  | DeleteOutbox
  | AwaitResult
  | ResultToWaiters
  | SetState
  | ClearState
  | ClearAllState
  | InsertStateMutation
  | DeleteStateMutation
  | ApplyStateMutation
  | AwaitPromise
  | PeekPromise
  | CompletePromise;

/** The outbox rows a write created, once its batch committed (none for writes that create none). */
export function outboxRowsOf(w: Write): OutboxRow[] {
  return 'rows' in w ? (w.rows ?? []) : [];
}

export interface WriteBatch {
  partitions: number[];
  writes: Write[];
  journal: JournalRow[];
  /**
   * Ordering keys: the partition keys of every invocation (and virtual-object or workflow key) whose rows this write
   * touches or whose rows it assumes. Batches that share a key commit in submission order and never in two
   * concurrent transactions; batches with disjoint keys may commit concurrently, in any order. Without keys the
   * batch is a barrier, ordered against every other one.
   */
  keys?: string[];
}

export function newWriteBatch(partition?: number, keys?: string[]): WriteBatch {
  const batch: WriteBatch = { partitions: partition === undefined ? [] : [partition], writes: [], journal: [] };
  if (keys !== undefined) batch.keys = keys;
  return batch;
}

/** `w`, made conditional on an invocation insert of the same batch having inserted. */
export function onlyIfInserted<W extends Write>(w: W, insert: InsertInvocation): W {
  w.onlyIf = insert;
  return w;
}

/** `w`, made conditional on an invocation insert of the same batch having found the invocation already there. */
export function unlessInserted<W extends Write>(w: W, insert: InsertInvocation): W {
  w.unless = insert;
  return w;
}

// Constructors, by table: what the engine writes reads as the change it is.

export const invocationWrite = {
  insert: (row: NewInvocation, input: Uint8Array): InsertInvocation => ({ kind: 'invocation.insert', row, input }),
  update: (id: string, update: InvocationUpdate, now: Date): UpdateInvocation => ({
    kind: 'invocation.update',
    id,
    update,
    now,
  }),
  inbox: (id: string): InboxInvocation => ({ kind: 'invocation.inbox', id }),
  purge: (id: string): PurgeInvocation => ({ kind: 'invocation.purge', id }),
  purgeIfExpired: (id: string): PurgeIfExpired => ({ kind: 'invocation.purgeIfExpired', id }),
};

export const journalWrite = {
  delete: (invocationId: string): DeleteJournal => ({ kind: 'journal.delete', invocationId }),
};

export const lockWrite = {
  take: (service: string, key: string, invocationId: string): TakeLock => ({
    kind: 'lock.take',
    service,
    key,
    invocationId,
  }),
  release: (service: string, key: string, invocationId: string): ReleaseLock => ({
    kind: 'lock.release',
    service,
    key,
    invocationId,
  }),
  /** The holder completed and the next in the inbox takes the key. */
  transfer: (service: string, key: string, from: string, to: string): TransferLock => ({
    kind: 'lock.transfer',
    service,
    key,
    from,
    to,
  }),
};

export const timerWrite = {
  insert: (timer: Omit<TimerRow, 'id'>): InsertTimer => ({ kind: 'timer.insert', timer }),
  delete: (id: string): DeleteTimer => ({ kind: 'timer.delete', id }),
  deleteOf: (invocationId: string): DeleteTimersOf => ({ kind: 'timer.deleteOf', invocationId }),
};

export const outboxWrite = {
  insert: (row: Omit<OutboxRow, 'seq'>): InsertOutbox => ({ kind: 'outbox.insert', row }),
  request: (partition: number, targetInvocationId: string, request: OutboxRequest): InsertOutboxRequest => ({
    kind: 'outbox.request',
    partition,
    targetInvocationId,
    request,
  }),
  delete: (seq: string): DeleteOutbox => ({ kind: 'outbox.delete', seq }),
  awaitResult: (
    invocationId: string,
    callerId: string,
    callerPartition: number,
    callerCompletionId: number,
    entryType: number,
  ): AwaitResult => ({
    kind: 'outbox.awaitResult',
    invocationId,
    callerId,
    callerPartition,
    callerCompletionId,
    entryType,
  }),
  resultToWaiters: (invocationId: string): ResultToWaiters => ({ kind: 'outbox.resultToWaiters', invocationId }),
};

export const stateWrite = {
  set: (service: string, key: string, partitionKey: bigint, stateKey: Uint8Array, value: Uint8Array): SetState => ({
    kind: 'state.set',
    service,
    key,
    partitionKey,
    stateKey,
    value,
  }),
  clear: (service: string, key: string, stateKey: Uint8Array): ClearState => ({
    kind: 'state.clear',
    service,
    key,
    stateKey,
  }),
  clearAll: (service: string, key: string): ClearAllState => ({ kind: 'state.clearAll', service, key }),
};

export const stateMutationWrite = {
  insert: (mutation: Omit<StateMutationRow, 'inboxSeq'>): InsertStateMutation => ({
    kind: 'stateMutation.insert',
    mutation,
  }),
  delete: (id: string): DeleteStateMutation => ({ kind: 'stateMutation.delete', id }),
  apply: (
    service: string,
    key: string,
    partitionKey: bigint,
    version: string | null,
    entries: StateEntryRow[],
  ): ApplyStateMutation => ({ kind: 'stateMutation.apply', service, key, partitionKey, version, entries }),
};

export const promiseWrite = {
  await: (
    promise: PromiseRef,
    callerId: string,
    callerPartition: number,
    completionId: number,
    entryType: number,
  ): AwaitPromise => ({ kind: 'promise.await', promise, callerId, callerPartition, completionId, entryType }),
  peek: (
    promise: PromiseRef,
    callerId: string,
    callerPartition: number,
    completionId: number,
    entryType: number,
  ): PeekPromise => ({ kind: 'promise.peek', promise, callerId, callerPartition, completionId, entryType }),
  complete: (
    promise: PromiseRef,
    partitionKey: bigint,
    result: CompletePromise['result'],
    completer: CompletePromise['completer'],
    ifCompleted: Uint8Array,
    ifAlreadyCompleted: Uint8Array,
    waiterEntryType: number,
  ): CompletePromise => ({
    kind: 'promise.complete',
    promise,
    partitionKey,
    result,
    completer,
    ifCompleted,
    ifAlreadyCompleted,
    waiterEntryType,
  }),
};
