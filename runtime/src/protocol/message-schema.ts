/**
 * Decoded shapes of the service-protocol messages (V5–V7), field for field after shared/spec/service-protocol.md §5.
 *
 * Conventions: plain proto3 fields are always present (decoders fill defaults); proto3 `optional` fields are `?:` and
 * present exactly when they are on the wire; oneofs are discriminated unions; the `Value{1 content}` wrapper is
 * flattened to its bytes; u64 fields are `bigint`. Decoded `Uint8Array`s are views into the decoded buffer, not copies.
 */

export interface FailureMetadata {
  key: string;
  value: string;
}

export interface Failure {
  code: number;
  message: string;
  /** V6+ only: the SDK fails the attempt with 573 if user code sets it on V5. */
  metadata: FailureMetadata[];
}

export interface Header {
  key: string;
  value: string;
}

export interface StateEntry {
  key: Uint8Array;
  value: Uint8Array;
}

export interface VoidResult {
  kind: 'void';
}
export interface ValueResult {
  kind: 'value';
  value: Uint8Array;
}
export interface FailureResult {
  kind: 'failure';
  failure: Failure;
}
export interface InvocationIdResult {
  kind: 'invocationId';
  invocationId: string;
}
export interface StateKeysResult {
  kind: 'stateKeys';
  keys: Uint8Array[];
}

export type NotificationResult = VoidResult | ValueResult | FailureResult | InvocationIdResult | StateKeysResult;

export type SignalId = { kind: 'signal'; idx: number } | { kind: 'signalName'; name: string };
export type NotificationId = { kind: 'completion'; id: number } | SignalId;

export const CombinatorType = {
  /** Sent by nobody on purpose; treat like FirstCompleted. */
  Unknown: 0,
  FirstCompleted: 1,
  AllCompleted: 2,
  FirstSucceededOrAllFailed: 3,
  AllSucceededOrFirstFailed: 4,
} as const;

export const ErrorBehavior = {
  Retry: 0,
  Pause: 1,
  Fail: 2,
} as const;

/** V7 await tree. Enum values stay plain numbers so values from newer peers survive a round trip. */
export interface Future {
  waitingCompletions: number[];
  waitingSignals: number[];
  waitingNamedSignals: string[];
  nestedFutures: Future[];
  combinatorType: number;
}

export interface StartMessage {
  /** Raw invocation id (24 bytes in Restate's format); awakeable ids embed it, so it must be stable. */
  id: Uint8Array;
  debugId: string;
  knownEntries: number;
  stateMap: StateEntry[];
  partialState: boolean;
  key: string;
  retryCountSinceLastStoredEntry: number;
  /** Milliseconds. */
  durationSinceLastStoredEntry: bigint;
  /** V6+. */
  randomSeed: bigint;
  /** V7+. */
  scope?: string;
  /** V7+. */
  limitKey?: string;
  /** V7+. */
  idempotencyKey?: string;
}

/** V5/V6 fill the three flat lists; V7 sends only `awaitingOn`. */
export interface SuspensionMessage {
  waitingCompletions: number[];
  waitingSignals: number[];
  waitingNamedSignals: string[];
  awaitingOn?: Future;
}

export interface ErrorMessage {
  code: number;
  message: string;
  stacktrace: string;
  relatedCommandIndex?: number;
  relatedCommandName?: string;
  /** A message type id, e.g. 0x0411 for Run. */
  relatedCommandType?: number;
  /** Milliseconds. */
  nextRetryDelay?: bigint;
  /** See `ErrorBehavior`; 0 (retry) is the default. */
  behavior: number;
}

export type EndMessage = Record<string, never>;

export interface CommandAckMessage {
  commandIndex: number;
}

export interface ProposeRunCompletionMessage {
  resultCompletionId: number;
  result: ValueResult | FailureResult;
}

export interface AwaitingOnMessage {
  awaitingOn: Future;
  executingSideEffects: boolean;
}

export interface ProposeRunCompletionAckMessage {
  completionId: number;
}

/** `name` on every command is the user-given entry name (field 12). */
export interface InputCommand {
  headers: Header[];
  value: Uint8Array;
  name: string;
}

export interface OutputCommand {
  result: ValueResult | FailureResult;
  name: string;
}

export interface GetLazyStateCommand {
  key: Uint8Array;
  resultCompletionId: number;
  name: string;
}

export interface SetStateCommand {
  key: Uint8Array;
  value: Uint8Array;
  name: string;
}

export interface ClearStateCommand {
  key: Uint8Array;
  name: string;
}

export interface ClearAllStateCommand {
  name: string;
}

export interface GetLazyStateKeysCommand {
  resultCompletionId: number;
  name: string;
}

export interface GetEagerStateCommand {
  key: Uint8Array;
  result: VoidResult | ValueResult;
  name: string;
}

export interface GetEagerStateKeysCommand {
  keys: Uint8Array[];
  name: string;
}

/** Also used for PeekPromise. */
export interface GetPromiseCommand {
  key: string;
  resultCompletionId: number;
  name: string;
}
export type PeekPromiseCommand = GetPromiseCommand;

export interface CompletePromiseCommand {
  key: string;
  completion: ValueResult | FailureResult;
  resultCompletionId: number;
  name: string;
}

export interface SleepCommand {
  /** Absolute Unix epoch milliseconds. */
  wakeUpTime: bigint;
  resultCompletionId: number;
  name: string;
}

/** What Call and OneWayCall both carry (their field numbers differ: see journal-calls-codec.ts). */
export interface CallRequest {
  serviceName: string;
  handlerName: string;
  parameter: Uint8Array;
  headers: Header[];
  key: string;
  idempotencyKey?: string;
  /** V7+. */
  scope?: string;
  /** V7+. */
  limitKey?: string;
  invocationIdNotificationIdx: number;
  name: string;
}

export interface CallCommand extends CallRequest {
  resultCompletionId: number;
}

export interface OneWayCallCommand extends CallRequest {
  /** Absolute Unix epoch milliseconds; 0 = now. */
  invokeTime: bigint;
}

export interface SendSignalCommand {
  targetInvocationId: string;
  signalId: SignalId;
  result: VoidResult | ValueResult | FailureResult;
  /** Field 12, called `entry_name` in this message only. */
  name: string;
}

export interface RunCommand {
  resultCompletionId: number;
  name: string;
}

export interface InvocationIdTarget {
  kind: 'invocationId';
  invocationId: string;
}

export interface IdempotentRequestTarget {
  kind: 'idempotentRequest';
  serviceName: string;
  serviceKey?: string;
  handlerName: string;
  idempotencyKey: string;
  /** V7+. */
  scope?: string;
}

export interface WorkflowTarget {
  kind: 'workflow';
  workflowName: string;
  workflowKey: string;
  /** V7+. */
  scope?: string;
}

export type InvocationTarget = InvocationIdTarget | IdempotentRequestTarget | WorkflowTarget;

/** Also used for GetInvocationOutput. */
export interface AttachInvocationCommand {
  target: InvocationTarget;
  resultCompletionId: number;
  name: string;
}
export type GetInvocationOutputCommand = AttachInvocationCommand;

export interface CompleteAwakeableCommand {
  awakeableId: string;
  result: ValueResult | FailureResult;
  name: string;
}

/** Shared layout of every notification type (0x8000–0xFBFF), completions and SignalNotification alike. */
export interface NotificationMessage {
  id: NotificationId;
  result: NotificationResult;
}
