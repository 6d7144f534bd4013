/**
 * The rows of the invocation-state tables as the engine reads and writes them, independent of the database: the
 * PostgreSQL tables (storage/pg/tables) and the in-memory store both speak these.
 */

export type InvocationStatus = 'scheduled' | 'inboxed' | 'invoked' | 'suspended' | 'paused' | 'completed';

/** The persisted invocation status row, as the engine reads it back. */
export interface InvocationRow {
  id: string;
  partitionKey: bigint;
  partitionId: number;
  serviceName: string;
  serviceKey: string | null;
  handlerName: string;
  serviceTy: string;
  handlerTy: string | null;
  status: InvocationStatus;
  deploymentId: string | null;
  protocolVersion: number | null;
  idempotencyKey: string | null;
  invokedBy: string;
  invokedById: string | null;
  invokedByTarget: string | null;
  randomSeed: bigint;
  journalLength: number;
  retryCount: number;
  retryCountSinceAppend: number;
  lastAppendAt: Date | null;
  awaiting: unknown;
  inboxSeq: bigint | null;
  createdAt: Date;
  scheduledStartAt: Date | null;
  completedAt: Date | null;
  completionRetentionMs: number | null;
  journalRetentionMs: number | null;
  resultKind: 'success' | 'failure' | null;
  output: Buffer | null;
  failureCode: number | null;
  failureMessage: string | null;
  failureMetadata: Record<string, string> | null;
  /** When the retained result is purged (completed invocations only). */
  expiresAt: Date | null;
  /** W3C trace context its spans are parented to: traceparent, then after a space its tracestate if any. */
  traceContext: string | null;
  /** Flow control: the scope and limit key it was made with, and its virtual queue (only with flow control on). */
  scope: string | null;
  limitKey: string | null;
  vqueueId: string | null;
  /** Start of its last attempt; null while it has not started since it (last) became runnable under flow control. */
  lastStartAt: Date | null;
}

/** A new invocation: the columns it is created with, as the row holds them, and how its insert is to be made. */
export interface NewInvocation extends Pick<
  InvocationRow,
  | 'id'
  | 'partitionKey'
  | 'partitionId'
  | 'serviceName'
  | 'serviceKey'
  | 'handlerName'
  | 'serviceTy'
  | 'handlerTy'
  | 'status'
  | 'idempotencyKey'
  | 'invokedBy'
  | 'invokedById'
  | 'invokedByTarget'
  | 'randomSeed'
  | 'journalLength'
  | 'createdAt'
  | 'scheduledStartAt'
  | 'completionRetentionMs'
  | 'journalRetentionMs'
> {
  /** Whether the insert draws an inbox sequence number (which the row then holds). */
  inboxSeq: boolean;
  /** restart-as-new: the invocation this one was restarted from, and the pin it starts with. */
  restartedFrom?: string | null;
  deploymentId?: string | null;
  protocolVersion?: number | null;
  /** Set when the first attempt is recorded with the insert (pinned deployment, last_start_at and running_at). */
  attemptStartAt?: Date | null;
  /** The trace context its spans are parented to (see InvocationRow.traceContext). */
  traceContext?: string | null;
  scope?: string | null;
  limitKey?: string | null;
  vqueueId?: string | null;
}

/** Columns the engine changes as an invocation progresses; undefined leaves a column untouched. */
export interface InvocationUpdate {
  status?: InvocationStatus;
  deploymentId?: string | null;
  protocolVersion?: number | null;
  journalLength?: number;
  retryCount?: number;
  retryCountSinceAppend?: number;
  lastAppendAt?: Date | null;
  nextRetryAt?: Date | null;
  lastFailure?: string | null;
  lastFailureCode?: string | null;
  lastFailureRelatedCommandIndex?: number | null;
  lastFailureRelatedCommandName?: string | null;
  lastFailureRelatedCommandType?: string | null;
  lastAttemptDeploymentId?: string | null;
  lastStartAt?: Date | null;
  awaiting?: unknown;
  inboxSeq?: null;
  runningAt?: Date | null;
  completedAt?: Date | null;
  resultKind?: 'success' | 'failure' | null;
  output?: Uint8Array | null;
  failureCode?: number | null;
  failureMessage?: string | null;
  failureMetadata?: Record<string, string> | null;
  expiresAt?: Date | null;
  journalExpiresAt?: Date | null;
}

export interface StoredEntry {
  index: number;
  entryType: number;
  completionId: number | null;
  signalIdx: number | null;
  signalName: string | null;
  raw: Buffer;
}

export type TimerKind = 'sleep' | 'retry' | 'start';

export interface TimerRow {
  id: string;
  partitionId: number;
  fireAt: Date;
  invocationId: string;
  kind: TimerKind;
  completionId: number | null;
}

/**
 * A notification on its way to another invocation. Either `raw` holds the notification payload, or
 * `sourceInvocationId` names a completed invocation whose result becomes the payload (call completions).
 */
export interface OutboxRow {
  seq: string;
  partitionId: number;
  targetInvocationId: string;
  entryType: number;
  completionId: number | null;
  signalIdx: number | null;
  signalName: string | null;
  sourceInvocationId: string | null;
  /** The promise whose state becomes the payload (GetPromise / PeekPromise answers). */
  sourcePromise?: { service: string; key: string; name: string } | undefined;
  raw: Buffer | null;
  /** Work for the target partition's owner other than a notification (see `OutboxRequest`); entry type 0. */
  request?: OutboxRequest | undefined;
}

/**
 * What a node asks of another partition's owner through the outbox: admit an invocation a call or send created (and,
 * for a call, send the caller its result), or kill an invocation whose caller was killed.
 */
export type OutboxRequest =
  | {
      kind: 'invoke';
      /** The new invocation's row (`NewInvocation` in JSON: bigint and dates as strings, the input in base64). */
      invocation: Record<string, unknown>;
      input: string;
      /** A call: the caller waits for the result under this completion id. */
      caller?: { id: string; partition: number; completionId: number; entryType: number } | undefined;
      /** A call of a workflow's run: a second one fails (409) instead of joining the first. */
      workflowRun?: boolean | undefined;
      /** The id was derived (idempotency or workflow key): it may exist already. */
      deterministic: boolean;
    }
  | { kind: 'kill' };

export interface StateMutationRow {
  id: string;
  partitionId: number;
  service: string;
  key: string;
  version: string | null;
  entries: { key: Buffer; value: Buffer }[];
  inboxSeq: bigint;
}

export interface PromiseRef {
  service: string;
  key: string;
  name: string;
}

export interface PromiseRow {
  resultKind: 'success' | 'failure';
  value: Buffer | null;
  failureCode: number | null;
  failureMessage: string | null;
}

/** A virtual-object or workflow key's exclusive lock. */
export interface LockRow {
  service: string;
  key: string;
  invocationId: string;
}

/** One state entry of a key. */
export interface StateEntryRow {
  key: Buffer;
  value: Buffer;
}

/** One journal entry as written (with the columns introspection shows). */
export interface JournalRow {
  invocationId: string;
  index: number;
  entryType: number;
  completionId?: number | undefined;
  signalIdx?: number | undefined;
  signalName?: string | undefined;
  name?: string | undefined;
  raw: Uint8Array;
  appendedAt: Date;
  invokedId?: string | undefined;
  invokedTarget?: string | undefined;
  sleepWakeupAt?: Date | undefined;
  promiseName?: string | undefined;
}

/** The fields of `row` that name its target and where it lives: what an invocation restarted from it keeps. */
export function sameTarget(row: InvocationRow): Pick<NewInvocation, TargetField> {
  const { partitionKey, partitionId, serviceName, serviceKey, handlerName, serviceTy, handlerTy } = row;
  return { partitionKey, partitionId, serviceName, serviceKey, handlerName, serviceTy, handlerTy };
}

type TargetField =
  'partitionKey' | 'partitionId' | 'serviceName' | 'serviceKey' | 'handlerName' | 'serviceTy' | 'handlerTy';

/**
 * The row of a new invocation as its insert stores it (what a read right after the insert returns). Every field
 * spelled out, no spread: this runs for every new invocation, and a spread into a literal this size is slower.
 */
export function insertedRow(row: NewInvocation, inboxSeq: bigint | null): InvocationRow {
  return {
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
    lastAppendAt: row.createdAt,
    awaiting: null,
    inboxSeq,
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
    traceContext: row.traceContext ?? null,
    scope: row.scope ?? null,
    limitKey: row.limitKey ?? null,
    vqueueId: row.vqueueId ?? null,
    lastStartAt: row.attemptStartAt ?? null,
  };
}
