import { ProtocolViolationError } from '../protocol/errors.ts';
import { encodeFrame } from '../protocol/framing.ts';
import { isCommand } from '../protocol/message-types.ts';
import {
  CombinatorType,
  ErrorBehavior,
  MessageType,
  decodeAwaitingOn,
  decodeCallCommand,
  decodeClearStateCommand,
  decodeMessage,
  decodeAttachInvocationCommand,
  decodeCompleteAwakeableCommand,
  decodeCompletePromiseCommand,
  decodeGetInvocationOutputCommand,
  decodeGetPromiseCommand,
  decodePeekPromiseCommand,
  decodeError,
  decodeGetLazyStateCommand,
  decodeGetLazyStateKeysCommand,
  decodeNotification,
  decodeOneWayCallCommand,
  decodeOutputCommand,
  decodeProposeRunCompletion,
  decodeSendSignalCommand,
  decodeSetStateCommand,
  decodeSleepCommand,
  decodeSuspension,
  encodeInputCommand,
  encodeNotification,
  encodeProposeRunCompletionAck,
  encodeStart,
  type Failure as WireFailure,
  type Future,
  type InvocationTarget,
  type NotificationId,
  type NotificationResult,
  type StartMessage,
} from '../protocol/messages.ts';
import type {
  CallCommand as CallCommandMessage,
  OneWayCallCommand as OneWayCallCommandMessage,
} from '../protocol/message-schema.ts';
import type { AwaitingTree } from './awaiting.ts';
import type { Failure, Outcome } from './types.ts';

/** The engine's view of the protocol: just the fields it acts on, decoded from the stored bytes. */

export function startFrame(m: StartMessage, protocolVersion: number): Buffer {
  return encodeFrame(MessageType.Start, encodeStart(m, protocolVersion));
}

export function inputCommand(headers: [string, string][], body: Uint8Array): Uint8Array {
  return encodeInputCommand({ headers: headers.map(([key, value]) => ({ key, value })), value: body, name: '' });
}

export type EngineResult =
  | { kind: 'void' }
  | { kind: 'value'; value: Uint8Array }
  | { kind: 'failure'; failure: Failure }
  | { kind: 'invocationId'; invocationId: string }
  | { kind: 'stateKeys'; keys: Uint8Array[] };

export function notification(id: NotificationId, result: EngineResult | NotificationResult): Uint8Array {
  return encodeNotification({ id, result: toWireResult(result) });
}

function toWireResult(r: EngineResult | NotificationResult): NotificationResult {
  if (r.kind !== 'failure') return r;
  const f = r.failure;
  if (Array.isArray(f.metadata)) return r as NotificationResult;
  return {
    kind: 'failure',
    failure: {
      code: f.code,
      message: f.message,
      metadata: Object.entries((f as Failure).metadata ?? {}).map(([key, value]) => ({ key, value })),
    },
  };
}

export function fromWireFailure(f: WireFailure): Failure {
  return f.metadata.length === 0
    ? { code: f.code, message: f.message }
    : { code: f.code, message: f.message, metadata: Object.fromEntries(f.metadata.map((m) => [m.key, m.value])) };
}

export function runAckFrame(completionId: number): Buffer {
  return encodeFrame(MessageType.ProposeRunCompletionAck, encodeProposeRunCompletionAck({ completionId }));
}

export function notificationSucceeded(_type: number, raw: Uint8Array): boolean {
  return decodeNotification(raw).result.kind !== 'failure';
}

export function notificationResult(raw: Uint8Array): NotificationResult {
  return decodeNotification(raw).result;
}

/** What a call and a one-way call share: the target, its input and headers, and the id notification's index. */
interface CallTarget {
  service: string;
  handler: string;
  parameter: Uint8Array;
  headers: [string, string][];
  key: string;
  idempotencyKey: string | undefined;
  invocationIdCompletionId: number;
  scope: string | undefined;
  limitKey: string | undefined;
}

export type Command =
  | { kind: 'input' }
  | { kind: 'output'; outcome: Outcome }
  | { kind: 'setState'; key: Uint8Array; value: Uint8Array }
  | { kind: 'clearState'; key: Uint8Array }
  | { kind: 'clearAllState' }
  | { kind: 'getEagerState' }
  | { kind: 'getEagerStateKeys' }
  | { kind: 'getLazyState'; key: Uint8Array; completionId: number }
  | { kind: 'getLazyStateKeys'; completionId: number }
  | { kind: 'sleep'; wakeUpTime: bigint; completionId: number }
  | ({ kind: 'call'; resultCompletionId: number } & CallTarget)
  | ({ kind: 'oneWayCall'; invokeTime: bigint } & CallTarget)
  | { kind: 'run' }
  | {
      kind: 'sendSignal';
      targetInvocationId: string;
      idx: number | undefined;
      name: string | undefined;
      result: NotificationResult;
    }
  | { kind: 'completeAwakeable'; awakeableId: string; result: NotificationResult }
  | { kind: 'getPromise'; key: string; completionId: number }
  | { kind: 'peekPromise'; key: string; completionId: number }
  | {
      kind: 'completePromise';
      key: string;
      completionId: number;
      result: { kind: 'success'; value: Uint8Array } | { kind: 'failure'; code: number; message: string };
    }
  | { kind: 'attach'; target: InvocationTarget; completionId: number }
  | { kind: 'getOutput'; target: InvocationTarget; completionId: number };

/*
 * What a deployment sends is stored as it is read, in one group commit with other invocations' writes: a value
 * PostgreSQL cannot hold (U+0000 in text, a time or code out of range) would fail the whole batch. Such values are
 * refused here as protocol violations (that attempt fails with RT0012 and nothing else), or, in free text, made
 * storable (U+0000 becomes U+FFFD).
 */

/** The latest time a JavaScript Date (and PostgreSQL's timestamptz) holds, in ms since the epoch. */
const MAX_TIME_MS = 8_640_000_000_000_000n;
/** Failure codes are stored as PostgreSQL integers. */
const MAX_FAILURE_CODE = 2_147_483_647;
/** A retry delay asked by the SDK is capped at a year. */
const MAX_RETRY_DELAY_MS = 365 * 24 * 3600 * 1000;

function checkedTime(ms: bigint, what: string): bigint {
  if (ms > MAX_TIME_MS) throw new ProtocolViolationError(`${what} ${ms} ms is past the latest time that can be stored`);
  return ms;
}

/** An identifier (service, handler, key, header, id): U+0000 cannot be stored, and no name holds one. */
function checkedName<T extends string | undefined>(value: T, what: string): T {
  if (value?.includes('\0') === true)
    throw new ProtocolViolationError(`${what} contains U+0000, which cannot be stored`);
  return value;
}

/** Free text (messages, stack traces): kept, with U+0000 replaced. */
function storableText(value: string): string {
  return value.includes('\0') ? value.replaceAll('\0', '\uFFFD') : value;
}

function inInt4(n: number | undefined): number | undefined {
  return n !== undefined && n <= MAX_FAILURE_CODE ? n : undefined;
}

function checkedFailure(f: WireFailure): WireFailure {
  if (f.code > MAX_FAILURE_CODE) {
    throw new ProtocolViolationError(`failure code ${f.code} is out of range (at most ${MAX_FAILURE_CODE})`);
  }
  return { ...f, message: storableText(f.message) };
}

function outcomeOf(r: { kind: 'value'; value: Uint8Array } | { kind: 'failure'; failure: WireFailure }): Outcome {
  return r.kind === 'value'
    ? { kind: 'success', value: r.value }
    : { kind: 'failure', failure: fromWireFailure(checkedFailure(r.failure)) };
}

function callTarget(m: CallCommandMessage | OneWayCallCommandMessage): CallTarget {
  return {
    service: checkedName(m.serviceName, 'the service name'),
    handler: checkedName(m.handlerName, 'the handler name'),
    parameter: m.parameter,
    headers: m.headers.map((h): [string, string] => [
      checkedName(h.key, 'a header name'),
      checkedName(h.value, 'a header value'),
    ]),
    key: checkedName(m.key, 'the key'),
    idempotencyKey: m.idempotencyKey === '' ? undefined : checkedName(m.idempotencyKey, 'the idempotency key'),
    invocationIdCompletionId: m.invocationIdNotificationIdx,
    scope: m.scope === '' ? undefined : checkedName(m.scope, 'the scope'),
    limitKey: m.limitKey === '' ? undefined : checkedName(m.limitKey, 'the limit key'),
  };
}

/** Completion ids and signal indexes are stored as PostgreSQL integers. */
const ID_FIELDS = ['completionId', 'resultCompletionId', 'invocationIdCompletionId', 'idx'] as const;

export function command(type: number, payload: Uint8Array): Command {
  const c = decodeCommand(type, payload);
  for (const field of ID_FIELDS) {
    const id = (c as Partial<Record<(typeof ID_FIELDS)[number], number>>)[field];
    if (id !== undefined && id > MAX_FAILURE_CODE) {
      throw new ProtocolViolationError(`${field} ${id} is out of range (at most ${MAX_FAILURE_CODE})`);
    }
  }
  return c;
}

function decodeCommand(type: number, payload: Uint8Array): Command {
  switch (type) {
    case MessageType.InputCommand:
      return { kind: 'input' };
    case MessageType.OutputCommand:
      return { kind: 'output', outcome: outcomeOf(decodeOutputCommand(payload).result) };
    case MessageType.SetStateCommand: {
      const m = decodeSetStateCommand(payload);
      return { kind: 'setState', key: m.key, value: m.value };
    }
    case MessageType.ClearStateCommand:
      return { kind: 'clearState', key: decodeClearStateCommand(payload).key };
    case MessageType.ClearAllStateCommand:
      return { kind: 'clearAllState' };
    case MessageType.GetEagerStateCommand:
      return { kind: 'getEagerState' };
    case MessageType.GetEagerStateKeysCommand:
      return { kind: 'getEagerStateKeys' };
    case MessageType.GetLazyStateCommand: {
      const m = decodeGetLazyStateCommand(payload);
      return { kind: 'getLazyState', key: m.key, completionId: m.resultCompletionId };
    }
    case MessageType.GetLazyStateKeysCommand:
      return { kind: 'getLazyStateKeys', completionId: decodeGetLazyStateKeysCommand(payload).resultCompletionId };
    case MessageType.SleepCommand: {
      const m = decodeSleepCommand(payload);
      return {
        kind: 'sleep',
        wakeUpTime: checkedTime(m.wakeUpTime, 'the wake-up time'),
        completionId: m.resultCompletionId,
      };
    }
    case MessageType.CallCommand: {
      const m = decodeCallCommand(payload);
      return { kind: 'call', ...callTarget(m), resultCompletionId: m.resultCompletionId };
    }
    case MessageType.OneWayCallCommand: {
      const m = decodeOneWayCallCommand(payload);
      return { kind: 'oneWayCall', ...callTarget(m), invokeTime: checkedTime(m.invokeTime, 'the invoke time') };
    }
    case MessageType.RunCommand:
      return { kind: 'run' };
    case MessageType.SendSignalCommand: {
      const m = decodeSendSignalCommand(payload);
      return {
        kind: 'sendSignal',
        targetInvocationId: checkedName(m.targetInvocationId, 'the target invocation id'),
        idx: m.signalId.kind === 'signal' ? m.signalId.idx : undefined,
        name: m.signalId.kind === 'signalName' ? m.signalId.name : undefined,
        result: m.result,
      };
    }
    case MessageType.CompleteAwakeableCommand: {
      const m = decodeCompleteAwakeableCommand(payload);
      return { kind: 'completeAwakeable', awakeableId: m.awakeableId, result: m.result };
    }
    case MessageType.GetPromiseCommand: {
      const m = decodeGetPromiseCommand(payload);
      return { kind: 'getPromise', key: checkedName(m.key, 'the promise key'), completionId: m.resultCompletionId };
    }
    case MessageType.PeekPromiseCommand: {
      const m = decodePeekPromiseCommand(payload);
      return { kind: 'peekPromise', key: checkedName(m.key, 'the promise key'), completionId: m.resultCompletionId };
    }
    case MessageType.CompletePromiseCommand: {
      const m = decodeCompletePromiseCommand(payload);
      return {
        kind: 'completePromise',
        key: checkedName(m.key, 'the promise key'),
        completionId: m.resultCompletionId,
        result:
          m.completion.kind === 'value'
            ? { kind: 'success', value: m.completion.value }
            : {
                kind: 'failure',
                code: checkedFailure(m.completion.failure).code,
                message: storableText(m.completion.failure.message),
              },
      };
    }
    case MessageType.AttachInvocationCommand: {
      const m = decodeAttachInvocationCommand(payload);
      return { kind: 'attach', target: m.target, completionId: m.resultCompletionId };
    }
    case MessageType.GetInvocationOutputCommand: {
      const m = decodeGetInvocationOutputCommand(payload);
      return { kind: 'getOutput', target: m.target, completionId: m.resultCompletionId };
    }
    default:
      throw new ProtocolViolationError(`unknown command type 0x${type.toString(16).padStart(4, '0')}`);
  }
}

/**
 * The completion ids a journaled command waits for (a Call has two: its invocation id and its result). Used to
 * check that a journal prefix is complete before it is copied into a restarted invocation.
 */
export function completionIdsOf(type: number, payload: Uint8Array): number[] {
  if (!isCommand(type)) return [];
  const m = decodeMessage(type, payload).message as Record<string, unknown>;
  const ids: number[] = [];
  for (const field of ['resultCompletionId', 'invocationIdNotificationIdx']) {
    const v = m[field];
    if (typeof v === 'number' && v > 0) ids.push(v);
  }
  return ids;
}

export function proposeRunCompletion(payload: Uint8Array): {
  completionId: number;
  result: { kind: 'value'; value: Uint8Array } | { kind: 'failure'; failure: WireFailure };
} {
  const m = decodeProposeRunCompletion(payload);
  if (m.resultCompletionId > MAX_FAILURE_CODE) {
    throw new ProtocolViolationError(
      `completionId ${m.resultCompletionId} is out of range (at most ${MAX_FAILURE_CODE})`,
    );
  }
  return {
    completionId: m.resultCompletionId,
    result: m.result.kind === 'failure' ? { kind: 'failure', failure: checkedFailure(m.result.failure) } : m.result,
  };
}

function toTree(f: Future): AwaitingTree {
  const combinator =
    f.combinatorType === CombinatorType.AllCompleted
      ? 'all_completed'
      : f.combinatorType === CombinatorType.FirstSucceededOrAllFailed
        ? 'first_succeeded_or_all_failed'
        : f.combinatorType === CombinatorType.AllSucceededOrFirstFailed
          ? 'all_succeeded_or_first_failed'
          : 'first_completed';
  return {
    combinator,
    completions: f.waitingCompletions,
    signals: f.waitingSignals,
    namedSignals: f.waitingNamedSignals,
    nested: f.nestedFutures.map(toTree),
  };
}

export function suspension(payload: Uint8Array): AwaitingTree {
  const m = decodeSuspension(payload);
  if (m.awaitingOn !== undefined) return toTree(m.awaitingOn);
  return {
    combinator: 'first_completed',
    completions: m.waitingCompletions,
    signals: m.waitingSignals,
    namedSignals: m.waitingNamedSignals,
    nested: [],
  };
}

export function awaitingOn(payload: Uint8Array): AwaitingTree {
  return toTree(decodeAwaitingOn(payload).awaitingOn);
}

export function error(payload: Uint8Array): {
  code: number;
  message: string;
  /** The SDK's stack trace of the error ('' when it sent none). */
  stacktrace: string;
  nextRetryDelayMs: number | undefined;
  behavior: 'retry' | 'pause' | 'fail';
  related: { index?: number | undefined; name?: string | undefined; type?: number | undefined };
} {
  const m = decodeError(payload);
  return {
    code: Math.min(m.code, MAX_FAILURE_CODE),
    message: storableText(m.message),
    stacktrace: storableText(m.stacktrace),
    nextRetryDelayMs:
      m.nextRetryDelay === undefined ? undefined : Math.min(Number(m.nextRetryDelay), MAX_RETRY_DELAY_MS),
    behavior: m.behavior === ErrorBehavior.Pause ? 'pause' : m.behavior === ErrorBehavior.Fail ? 'fail' : 'retry',
    // Kept as PostgreSQL integers and text: what cannot be stored is left out.
    related: {
      index: inInt4(m.relatedCommandIndex),
      name: m.relatedCommandName === undefined ? undefined : storableText(m.relatedCommandName),
      type: inInt4(m.relatedCommandType),
    },
  };
}
