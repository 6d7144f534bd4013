import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { ProtocolViolationError } from './errors.ts';
import { FRAME_HEADER_SIZE } from './framing.ts';
import { MessageType, messageTypeName } from './message-types.ts';
import type { MessageTypeId } from './message-types.ts';

export {
  MessageType,
  isCommand,
  isControl,
  isCustomEntry,
  isKnownMessageType,
  isNotification,
  messageTypeKey,
  messageTypeName,
  notificationTypeFor,
} from './message-types.ts';
export type {
  CommandMessageType,
  ControlMessageType,
  MessageTypeId,
  MessageTypeKey,
  NotificationMessageType,
} from './message-types.ts';

/*
 * Hand-written proto3 codec for the Restate service protocol V5–V7 (field numbers from
 * shared/spec/service-protocol.md §5).
 *
 * Wire rules that make re-encoding byte-identical to restate-server and the SDK (both use prost):
 * - fields are written in ascending field-number order; a oneof sits at the position of its member's number;
 * - plain scalars equal to their default (0, 0n, '', empty bytes, false, enum 0) and empty repeated fields are
 *   omitted; `optional` fields (`?:` here) are written whenever set, even when empty or 0;
 * - oneof members and message-typed fields are always written, so an empty `Value` is `<tag> 00`;
 * - repeated u32 are packed.
 * The `Value{1 content}` wrapper is flattened to its bytes in these types.
 *
 * Decoded `Uint8Array`s are views into the decoded buffer, not copies.
 */

// ---------------------------------------------------------------------------------------------------------------
// Types

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

export interface CallCommand {
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
  resultCompletionId: number;
  name: string;
}

export interface OneWayCallCommand {
  serviceName: string;
  handlerName: string;
  parameter: Uint8Array;
  /** Absolute Unix epoch milliseconds; 0 = now. */
  invokeTime: bigint;
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

// ---------------------------------------------------------------------------------------------------------------
// Low-level reading

const VARINT = WireType.Varint;
const LEN = WireType.LengthDelimited;
const EMPTY_BYTES: Uint8Array = new Uint8Array(0);

/** Thrown by the readers; `decodeWith` prefixes the message name. */
class MalformedError extends Error {}

function expectWire(actual: number, expected: number, field: number): void {
  if (actual !== expected) throw new MalformedError(`field ${field} has wire type ${actual}, expected ${expected}`);
}

function readU32(r: BinaryReader, wt: number, field: number): number {
  expectWire(wt, VARINT, field);
  return r.uint32();
}

function readU64(r: BinaryReader, wt: number, field: number): bigint {
  expectWire(wt, VARINT, field);
  const v = r.uint64();
  return typeof v === 'bigint' ? v : BigInt(v);
}

function readBool(r: BinaryReader, wt: number, field: number): boolean {
  expectWire(wt, VARINT, field);
  return r.bool();
}

function readBytes(r: BinaryReader, wt: number, field: number): Uint8Array {
  expectWire(wt, LEN, field);
  return r.bytes();
}

function readString(r: BinaryReader, wt: number, field: number): string {
  expectWire(wt, LEN, field);
  return r.string();
}

/** Repeated u32: proto3 writes them packed, but parsers must accept the unpacked form too. */
function readU32List(r: BinaryReader, wt: number, field: number, into: number[]): void {
  if (wt === VARINT) {
    into.push(r.uint32());
    return;
  }
  expectWire(wt, LEN, field);
  const end = nestedEnd(r);
  while (r.pos < end) into.push(r.uint32());
  checkEnd(r, end);
}

function nestedEnd(r: BinaryReader): number {
  const len = r.uint32();
  const end = r.pos + len;
  if (end > r.len) throw new MalformedError('length-delimited field overruns the message');
  return end;
}

function readNested<T>(r: BinaryReader, wt: number, field: number, read: (r: BinaryReader, end: number) => T): T {
  expectWire(wt, LEN, field);
  return read(r, nestedEnd(r));
}

function checkEnd(r: BinaryReader, end: number): void {
  if (r.pos !== end) throw new MalformedError('truncated message');
}

function skipField(r: BinaryReader, tag: number): void {
  const field = tag >>> 3;
  if (field === 0) throw new MalformedError('illegal field number 0');
  r.skip(tag & 7, field);
}

function readEmpty(r: BinaryReader, end: number): null {
  while (r.pos < end) skipField(r, r.uint32());
  checkEnd(r, end);
  return null;
}

function readValue(r: BinaryReader, end: number): Uint8Array {
  let content = EMPTY_BYTES;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) content = readBytes(r, tag & 7, 1);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return content;
}

function readStateKeys(r: BinaryReader, end: number): Uint8Array[] {
  const keys: Uint8Array[] = [];
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) keys.push(readBytes(r, tag & 7, 1));
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return keys;
}

/** Reads a `{1 key string, 2 value string}` pair (Header, Failure metadata). */
function readStringPair(r: BinaryReader, end: number): Header {
  const pair: Header = { key: '', value: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        pair.key = readString(r, wt, 1);
        break;
      case 2:
        pair.value = readString(r, wt, 2);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return pair;
}

function readStateEntry(r: BinaryReader, end: number): StateEntry {
  const entry: StateEntry = { key: EMPTY_BYTES, value: EMPTY_BYTES };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        entry.key = readBytes(r, wt, 1);
        break;
      case 2:
        entry.value = readBytes(r, wt, 2);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return entry;
}

function readFailure(r: BinaryReader, end: number): Failure {
  const failure: Failure = { code: 0, message: '', metadata: [] };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        failure.code = readU32(r, wt, 1);
        break;
      case 2:
        failure.message = readString(r, wt, 2);
        break;
      case 3:
        failure.metadata.push(readNested(r, wt, 3, readStringPair));
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return failure;
}

function readFuture(r: BinaryReader, end: number): Future {
  const future: Future = {
    waitingCompletions: [],
    waitingSignals: [],
    waitingNamedSignals: [],
    nestedFutures: [],
    combinatorType: 0,
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        readU32List(r, wt, 1, future.waitingCompletions);
        break;
      case 2:
        readU32List(r, wt, 2, future.waitingSignals);
        break;
      case 3:
        future.waitingNamedSignals.push(readString(r, wt, 3));
        break;
      case 4:
        future.nestedFutures.push(readNested(r, wt, 4, readFuture));
        break;
      case 5:
        future.combinatorType = readU32(r, wt, 5);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return future;
}

function missing(what: string): never {
  throw new MalformedError(`missing ${what}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Low-level writing

const WRITER_RETAIN_LIMIT = 256 * 1024;
let sharedWriter = new BinaryWriter();

/**
 * Encoding is synchronous and never re-entrant, so one writer is reused to avoid growing a fresh buffer per message;
 * it is dropped after an unusually large message or a failure so neither memory nor a half-written state lingers.
 */
function encodeWith<T>(write: (w: BinaryWriter, m: T) => void, m: T, prefix?: Uint8Array): Uint8Array {
  const w = sharedWriter;
  try {
    if (prefix !== undefined) w.raw(prefix);
    write(w, m);
    const out = w.finish();
    if (out.length > WRITER_RETAIN_LIMIT) sharedWriter = new BinaryWriter();
    return out;
  } catch (error) {
    sharedWriter = new BinaryWriter();
    throw error;
  }
}

function varintSize(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x200000) return 3;
  if (v < 0x10000000) return 4;
  return 5;
}

function tagOf(field: number, wt: number): number {
  return ((field << 3) | wt) >>> 0;
}

function writeU32(w: BinaryWriter, field: number, v: number): void {
  if (v !== 0) w.uint32(tagOf(field, VARINT)).uint32(v);
}

function writeU32Present(w: BinaryWriter, field: number, v: number | undefined): void {
  if (v !== undefined) w.uint32(tagOf(field, VARINT)).uint32(v);
}

function writeU64(w: BinaryWriter, field: number, v: bigint): void {
  if (v !== 0n) w.uint32(tagOf(field, VARINT)).uint64(v);
}

function writeBool(w: BinaryWriter, field: number, v: boolean): void {
  if (v) w.uint32(tagOf(field, VARINT)).bool(true);
}

function writeString(w: BinaryWriter, field: number, v: string): void {
  if (v.length !== 0) w.uint32(tagOf(field, LEN)).string(v);
}

function writeStringPresent(w: BinaryWriter, field: number, v: string | undefined): void {
  if (v !== undefined) w.uint32(tagOf(field, LEN)).string(v);
}

function writeBytes(w: BinaryWriter, field: number, v: Uint8Array): void {
  if (v.length !== 0) w.uint32(tagOf(field, LEN)).bytes(v);
}

function writePackedU32(w: BinaryWriter, field: number, vs: readonly number[]): void {
  if (vs.length === 0) return;
  w.uint32(tagOf(field, LEN)).fork();
  for (const v of vs) w.uint32(v);
  w.join();
}

function writeEmpty(w: BinaryWriter, field: number): void {
  w.uint32(tagOf(field, LEN)).uint32(0);
}

/** `Value{1 content}`; the length is computed up front because fork/join would shift large payloads. */
function writeValue(w: BinaryWriter, field: number, content: Uint8Array): void {
  w.uint32(tagOf(field, LEN));
  const n = content.length;
  if (n === 0) {
    w.uint32(0);
    return;
  }
  w.uint32(1 + varintSize(n) + n)
    .uint32(tagOf(1, LEN))
    .bytes(content);
}

function writeMessage<T>(w: BinaryWriter, field: number, write: (w: BinaryWriter, m: T) => void, m: T): void {
  w.uint32(tagOf(field, LEN)).fork();
  write(w, m);
  w.join();
}

function writeStringPair(w: BinaryWriter, pair: Header): void {
  writeString(w, 1, pair.key);
  writeString(w, 2, pair.value);
}

function writeStateEntry(w: BinaryWriter, entry: StateEntry): void {
  writeBytes(w, 1, entry.key);
  writeBytes(w, 2, entry.value);
}

function writeFailure(w: BinaryWriter, failure: Failure): void {
  writeU32(w, 1, failure.code);
  writeString(w, 2, failure.message);
  for (const pair of failure.metadata) writeMessage(w, 3, writeStringPair, pair);
}

function writeStateKeys(w: BinaryWriter, keys: readonly Uint8Array[]): void {
  for (const key of keys) w.uint32(tagOf(1, LEN)).bytes(key);
}

function writeFuture(w: BinaryWriter, future: Future): void {
  writePackedU32(w, 1, future.waitingCompletions);
  writePackedU32(w, 2, future.waitingSignals);
  for (const name of future.waitingNamedSignals) w.uint32(tagOf(3, LEN)).string(name);
  for (const nested of future.nestedFutures) writeMessage(w, 4, writeFuture, nested);
  writeU32(w, 5, future.combinatorType);
}

function writeHeaders(w: BinaryWriter, field: number, headers: readonly Header[]): void {
  for (const header of headers) writeMessage(w, field, writeStringPair, header);
}

/** Writes a `value`/`failure` oneof whose members sit at `valueField` and `valueField + 1`. */
function writeValueOrFailure(w: BinaryWriter, valueField: number, result: ValueResult | FailureResult): void {
  if (result.kind === 'value') writeValue(w, valueField, result.value);
  else writeMessage(w, valueField + 1, writeFailure, result.failure);
}

function readValueOrFailure(
  r: BinaryReader,
  wt: number,
  field: number,
  valueField: number,
): ValueResult | FailureResult {
  return field === valueField
    ? { kind: 'value', value: readNested(r, wt, field, readValue) }
    : { kind: 'failure', failure: readNested(r, wt, field, readFailure) };
}

// ---------------------------------------------------------------------------------------------------------------
// Control messages

function readStart(r: BinaryReader, end: number): StartMessage {
  const m: StartMessage = {
    id: EMPTY_BYTES,
    debugId: '',
    knownEntries: 0,
    stateMap: [],
    partialState: false,
    key: '',
    retryCountSinceLastStoredEntry: 0,
    durationSinceLastStoredEntry: 0n,
    randomSeed: 0n,
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.id = readBytes(r, wt, 1);
        break;
      case 2:
        m.debugId = readString(r, wt, 2);
        break;
      case 3:
        m.knownEntries = readU32(r, wt, 3);
        break;
      case 4:
        m.stateMap.push(readNested(r, wt, 4, readStateEntry));
        break;
      case 5:
        m.partialState = readBool(r, wt, 5);
        break;
      case 6:
        m.key = readString(r, wt, 6);
        break;
      case 7:
        m.retryCountSinceLastStoredEntry = readU32(r, wt, 7);
        break;
      case 8:
        m.durationSinceLastStoredEntry = readU64(r, wt, 8);
        break;
      case 9:
        m.randomSeed = readU64(r, wt, 9);
        break;
      case 10:
        m.scope = readString(r, wt, 10);
        break;
      case 11:
        m.limitKey = readString(r, wt, 11);
        break;
      case 12:
        m.idempotencyKey = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

/** With a `version`, fields that version cannot carry are left out (random_seed < V6, scope & co. < V7). */
function writeStart(w: BinaryWriter, m: StartMessage, version?: number): void {
  writeBytes(w, 1, m.id);
  writeString(w, 2, m.debugId);
  writeU32(w, 3, m.knownEntries);
  for (const entry of m.stateMap) writeMessage(w, 4, writeStateEntry, entry);
  writeBool(w, 5, m.partialState);
  writeString(w, 6, m.key);
  writeU32(w, 7, m.retryCountSinceLastStoredEntry);
  writeU64(w, 8, m.durationSinceLastStoredEntry);
  if (version === undefined || version >= 6) writeU64(w, 9, m.randomSeed);
  if (version === undefined || version >= 7) {
    writeStringPresent(w, 10, m.scope);
    writeStringPresent(w, 11, m.limitKey);
    writeStringPresent(w, 12, m.idempotencyKey);
  }
}

function readSuspension(r: BinaryReader, end: number): SuspensionMessage {
  const m: SuspensionMessage = { waitingCompletions: [], waitingSignals: [], waitingNamedSignals: [] };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        readU32List(r, wt, 1, m.waitingCompletions);
        break;
      case 2:
        readU32List(r, wt, 2, m.waitingSignals);
        break;
      case 3:
        m.waitingNamedSignals.push(readString(r, wt, 3));
        break;
      case 4:
        m.awaitingOn = readNested(r, wt, 4, readFuture);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeSuspension(w: BinaryWriter, m: SuspensionMessage): void {
  writePackedU32(w, 1, m.waitingCompletions);
  writePackedU32(w, 2, m.waitingSignals);
  for (const name of m.waitingNamedSignals) w.uint32(tagOf(3, LEN)).string(name);
  if (m.awaitingOn !== undefined) writeMessage(w, 4, writeFuture, m.awaitingOn);
}

function readError(r: BinaryReader, end: number): ErrorMessage {
  const m: ErrorMessage = { code: 0, message: '', stacktrace: '', behavior: 0 };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.code = readU32(r, wt, 1);
        break;
      case 2:
        m.message = readString(r, wt, 2);
        break;
      case 3:
        m.stacktrace = readString(r, wt, 3);
        break;
      case 4:
        m.relatedCommandIndex = readU32(r, wt, 4);
        break;
      case 5:
        m.relatedCommandName = readString(r, wt, 5);
        break;
      case 6:
        m.relatedCommandType = readU32(r, wt, 6);
        break;
      case 8:
        m.nextRetryDelay = readU64(r, wt, 8);
        break;
      case 9:
        m.behavior = readU32(r, wt, 9);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeError(w: BinaryWriter, m: ErrorMessage): void {
  writeU32(w, 1, m.code);
  writeString(w, 2, m.message);
  writeString(w, 3, m.stacktrace);
  writeU32Present(w, 4, m.relatedCommandIndex);
  writeStringPresent(w, 5, m.relatedCommandName);
  writeU32Present(w, 6, m.relatedCommandType);
  if (m.nextRetryDelay !== undefined) w.uint32(tagOf(8, VARINT)).uint64(m.nextRetryDelay);
  writeU32(w, 9, m.behavior);
}

function readEnd(r: BinaryReader, end: number): EndMessage {
  readEmpty(r, end);
  return {};
}

function writeNothing(): void {}

function readCommandAck(r: BinaryReader, end: number): CommandAckMessage {
  const m: CommandAckMessage = { commandIndex: 0 };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) m.commandIndex = readU32(r, tag & 7, 1);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return m;
}

function writeCommandAck(w: BinaryWriter, m: CommandAckMessage): void {
  writeU32(w, 1, m.commandIndex);
}

function readProposeRunCompletion(r: BinaryReader, end: number): ProposeRunCompletionMessage {
  let resultCompletionId = 0;
  let result: ValueResult | FailureResult | undefined;
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        resultCompletionId = readU32(r, wt, 1);
        break;
      case 14:
        // Unlike commands, the proposal carries raw bytes here, not a Value wrapper.
        result = { kind: 'value', value: readBytes(r, wt, 14) };
        break;
      case 15:
        result = { kind: 'failure', failure: readNested(r, wt, 15, readFailure) };
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { resultCompletionId, result: result ?? missing('result (value or failure)') };
}

function writeProposeRunCompletion(w: BinaryWriter, m: ProposeRunCompletionMessage): void {
  writeU32(w, 1, m.resultCompletionId);
  if (m.result.kind === 'value') w.uint32(tagOf(14, LEN)).bytes(m.result.value);
  else writeMessage(w, 15, writeFailure, m.result.failure);
}

function readAwaitingOn(r: BinaryReader, end: number): AwaitingOnMessage {
  let awaitingOn: Future | undefined;
  let executingSideEffects = false;
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        awaitingOn = readNested(r, wt, 1, readFuture);
        break;
      case 2:
        executingSideEffects = readBool(r, wt, 2);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { awaitingOn: awaitingOn ?? missing('awaiting_on'), executingSideEffects };
}

function writeAwaitingOn(w: BinaryWriter, m: AwaitingOnMessage): void {
  writeMessage(w, 1, writeFuture, m.awaitingOn);
  writeBool(w, 2, m.executingSideEffects);
}

function readProposeRunCompletionAck(r: BinaryReader, end: number): ProposeRunCompletionAckMessage {
  const m: ProposeRunCompletionAckMessage = { completionId: 0 };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) m.completionId = readU32(r, tag & 7, 1);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return m;
}

function writeProposeRunCompletionAck(w: BinaryWriter, m: ProposeRunCompletionAckMessage): void {
  writeU32(w, 1, m.completionId);
}

// ---------------------------------------------------------------------------------------------------------------
// Commands

function readInput(r: BinaryReader, end: number): InputCommand {
  const m: InputCommand = { headers: [], value: EMPTY_BYTES, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.headers.push(readNested(r, wt, 1, readStringPair));
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      case 14:
        m.value = readNested(r, wt, 14, readValue);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeInput(w: BinaryWriter, m: InputCommand): void {
  writeHeaders(w, 1, m.headers);
  writeString(w, 12, m.name);
  writeValue(w, 14, m.value);
}

function readOutput(r: BinaryReader, end: number): OutputCommand {
  let result: ValueResult | FailureResult | undefined;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    const field = tag >>> 3;
    switch (field) {
      case 12:
        name = readString(r, wt, 12);
        break;
      case 14:
      case 15:
        result = readValueOrFailure(r, wt, field, 14);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { result: result ?? missing('result (value or failure)'), name };
}

function writeOutput(w: BinaryWriter, m: OutputCommand): void {
  writeString(w, 12, m.name);
  writeValueOrFailure(w, 14, m.result);
}

function readGetLazyState(r: BinaryReader, end: number): GetLazyStateCommand {
  const m: GetLazyStateCommand = { key: EMPTY_BYTES, resultCompletionId: 0, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.key = readBytes(r, wt, 1);
        break;
      case 11:
        m.resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeGetLazyState(w: BinaryWriter, m: GetLazyStateCommand): void {
  writeBytes(w, 1, m.key);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readSetState(r: BinaryReader, end: number): SetStateCommand {
  const m: SetStateCommand = { key: EMPTY_BYTES, value: EMPTY_BYTES, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.key = readBytes(r, wt, 1);
        break;
      case 3:
        m.value = readNested(r, wt, 3, readValue);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeSetState(w: BinaryWriter, m: SetStateCommand): void {
  writeBytes(w, 1, m.key);
  writeValue(w, 3, m.value);
  writeString(w, 12, m.name);
}

function readClearState(r: BinaryReader, end: number): ClearStateCommand {
  const m: ClearStateCommand = { key: EMPTY_BYTES, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.key = readBytes(r, wt, 1);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeClearState(w: BinaryWriter, m: ClearStateCommand): void {
  writeBytes(w, 1, m.key);
  writeString(w, 12, m.name);
}

function readNameOnly(r: BinaryReader, end: number): ClearAllStateCommand {
  const m: ClearAllStateCommand = { name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 12) m.name = readString(r, tag & 7, 12);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return m;
}

function writeNameOnly(w: BinaryWriter, m: ClearAllStateCommand): void {
  writeString(w, 12, m.name);
}

/** Layout shared by GetLazyStateKeys and Run: `11 result_completion_id · 12 name`. */
function readCompletionIdAndName(r: BinaryReader, end: number): RunCommand {
  const m: RunCommand = { resultCompletionId: 0, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 11:
        m.resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeCompletionIdAndName(w: BinaryWriter, m: RunCommand): void {
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readGetEagerState(r: BinaryReader, end: number): GetEagerStateCommand {
  let key = EMPTY_BYTES;
  let result: VoidResult | ValueResult | undefined;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        key = readBytes(r, wt, 1);
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      case 13:
        readNested(r, wt, 13, readEmpty);
        result = { kind: 'void' };
        break;
      case 14:
        result = { kind: 'value', value: readNested(r, wt, 14, readValue) };
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { key, result: result ?? missing('result (void or value)'), name };
}

function writeGetEagerState(w: BinaryWriter, m: GetEagerStateCommand): void {
  writeBytes(w, 1, m.key);
  writeString(w, 12, m.name);
  if (m.result.kind === 'void') writeEmpty(w, 13);
  else writeValue(w, 14, m.result.value);
}

function readGetEagerStateKeys(r: BinaryReader, end: number): GetEagerStateKeysCommand {
  const m: GetEagerStateKeysCommand = { keys: [], name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 12:
        m.name = readString(r, wt, 12);
        break;
      case 14:
        m.keys = readNested(r, wt, 14, readStateKeys);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeGetEagerStateKeys(w: BinaryWriter, m: GetEagerStateKeysCommand): void {
  writeString(w, 12, m.name);
  writeMessage(w, 14, writeStateKeys, m.keys);
}

function readGetPromise(r: BinaryReader, end: number): GetPromiseCommand {
  const m: GetPromiseCommand = { key: '', resultCompletionId: 0, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.key = readString(r, wt, 1);
        break;
      case 11:
        m.resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeGetPromise(w: BinaryWriter, m: GetPromiseCommand): void {
  writeString(w, 1, m.key);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readCompletePromise(r: BinaryReader, end: number): CompletePromiseCommand {
  let key = '';
  let completion: ValueResult | FailureResult | undefined;
  let resultCompletionId = 0;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    const field = tag >>> 3;
    switch (field) {
      case 1:
        key = readString(r, wt, 1);
        break;
      case 2:
      case 3:
        completion = readValueOrFailure(r, wt, field, 2);
        break;
      case 11:
        resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { key, completion: completion ?? missing('completion (value or failure)'), resultCompletionId, name };
}

function writeCompletePromise(w: BinaryWriter, m: CompletePromiseCommand): void {
  writeString(w, 1, m.key);
  writeValueOrFailure(w, 2, m.completion);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readSleep(r: BinaryReader, end: number): SleepCommand {
  const m: SleepCommand = { wakeUpTime: 0n, resultCompletionId: 0, name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.wakeUpTime = readU64(r, wt, 1);
        break;
      case 11:
        m.resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeSleep(w: BinaryWriter, m: SleepCommand): void {
  writeU64(w, 1, m.wakeUpTime);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readCall(r: BinaryReader, end: number): CallCommand {
  const m: CallCommand = {
    serviceName: '',
    handlerName: '',
    parameter: EMPTY_BYTES,
    headers: [],
    key: '',
    invocationIdNotificationIdx: 0,
    resultCompletionId: 0,
    name: '',
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.serviceName = readString(r, wt, 1);
        break;
      case 2:
        m.handlerName = readString(r, wt, 2);
        break;
      case 3:
        m.parameter = readBytes(r, wt, 3);
        break;
      case 4:
        m.headers.push(readNested(r, wt, 4, readStringPair));
        break;
      case 5:
        m.key = readString(r, wt, 5);
        break;
      case 6:
        m.idempotencyKey = readString(r, wt, 6);
        break;
      case 7:
        m.scope = readString(r, wt, 7);
        break;
      case 8:
        m.limitKey = readString(r, wt, 8);
        break;
      case 10:
        m.invocationIdNotificationIdx = readU32(r, wt, 10);
        break;
      case 11:
        m.resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeCall(w: BinaryWriter, m: CallCommand): void {
  writeString(w, 1, m.serviceName);
  writeString(w, 2, m.handlerName);
  writeBytes(w, 3, m.parameter);
  writeHeaders(w, 4, m.headers);
  writeString(w, 5, m.key);
  writeStringPresent(w, 6, m.idempotencyKey);
  writeStringPresent(w, 7, m.scope);
  writeStringPresent(w, 8, m.limitKey);
  writeU32(w, 10, m.invocationIdNotificationIdx);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readOneWayCall(r: BinaryReader, end: number): OneWayCallCommand {
  const m: OneWayCallCommand = {
    serviceName: '',
    handlerName: '',
    parameter: EMPTY_BYTES,
    invokeTime: 0n,
    headers: [],
    key: '',
    invocationIdNotificationIdx: 0,
    name: '',
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.serviceName = readString(r, wt, 1);
        break;
      case 2:
        m.handlerName = readString(r, wt, 2);
        break;
      case 3:
        m.parameter = readBytes(r, wt, 3);
        break;
      case 4:
        m.invokeTime = readU64(r, wt, 4);
        break;
      case 5:
        m.headers.push(readNested(r, wt, 5, readStringPair));
        break;
      case 6:
        m.key = readString(r, wt, 6);
        break;
      case 7:
        m.idempotencyKey = readString(r, wt, 7);
        break;
      case 8:
        m.scope = readString(r, wt, 8);
        break;
      case 9:
        m.limitKey = readString(r, wt, 9);
        break;
      case 10:
        m.invocationIdNotificationIdx = readU32(r, wt, 10);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

function writeOneWayCall(w: BinaryWriter, m: OneWayCallCommand): void {
  writeString(w, 1, m.serviceName);
  writeString(w, 2, m.handlerName);
  writeBytes(w, 3, m.parameter);
  writeU64(w, 4, m.invokeTime);
  writeHeaders(w, 5, m.headers);
  writeString(w, 6, m.key);
  writeStringPresent(w, 7, m.idempotencyKey);
  writeStringPresent(w, 8, m.scope);
  writeStringPresent(w, 9, m.limitKey);
  writeU32(w, 10, m.invocationIdNotificationIdx);
  writeString(w, 12, m.name);
}

function readSendSignal(r: BinaryReader, end: number): SendSignalCommand {
  let targetInvocationId = '';
  let signalId: SignalId | undefined;
  let result: VoidResult | ValueResult | FailureResult | undefined;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        targetInvocationId = readString(r, wt, 1);
        break;
      case 2:
        signalId = { kind: 'signal', idx: readU32(r, wt, 2) };
        break;
      case 3:
        signalId = { kind: 'signalName', name: readString(r, wt, 3) };
        break;
      case 4:
        readNested(r, wt, 4, readEmpty);
        result = { kind: 'void' };
        break;
      case 5:
        result = { kind: 'value', value: readNested(r, wt, 5, readValue) };
        break;
      case 6:
        result = { kind: 'failure', failure: readNested(r, wt, 6, readFailure) };
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return {
    targetInvocationId,
    signalId: signalId ?? missing('signal id (idx or name)'),
    result: result ?? missing('result (void, value or failure)'),
    name,
  };
}

function writeSendSignal(w: BinaryWriter, m: SendSignalCommand): void {
  writeString(w, 1, m.targetInvocationId);
  if (m.signalId.kind === 'signal') w.uint32(tagOf(2, VARINT)).uint32(m.signalId.idx);
  else w.uint32(tagOf(3, LEN)).string(m.signalId.name);
  writeVoidValueOrFailure(w, m.result);
  writeString(w, 12, m.name);
}

/** The `4 void · 5 value · 6 failure` oneof shared by SendSignal and notifications. */
function writeVoidValueOrFailure(w: BinaryWriter, result: VoidResult | ValueResult | FailureResult): void {
  switch (result.kind) {
    case 'void':
      writeEmpty(w, 4);
      break;
    case 'value':
      writeValue(w, 5, result.value);
      break;
    case 'failure':
      writeMessage(w, 6, writeFailure, result.failure);
      break;
  }
}

function readWorkflowTarget(r: BinaryReader, end: number): WorkflowTarget {
  const t: WorkflowTarget = { kind: 'workflow', workflowName: '', workflowKey: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        t.workflowName = readString(r, wt, 1);
        break;
      case 2:
        t.workflowKey = readString(r, wt, 2);
        break;
      case 3:
        t.scope = readString(r, wt, 3);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return t;
}

function readIdempotentRequestTarget(r: BinaryReader, end: number): IdempotentRequestTarget {
  const t: IdempotentRequestTarget = { kind: 'idempotentRequest', serviceName: '', handlerName: '', idempotencyKey: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        t.serviceName = readString(r, wt, 1);
        break;
      case 2:
        t.serviceKey = readString(r, wt, 2);
        break;
      case 3:
        t.handlerName = readString(r, wt, 3);
        break;
      case 4:
        t.idempotencyKey = readString(r, wt, 4);
        break;
      case 5:
        t.scope = readString(r, wt, 5);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return t;
}

function writeInvocationTarget(w: BinaryWriter, t: InvocationTarget): void {
  switch (t.kind) {
    case 'invocationId':
      w.uint32(tagOf(1, LEN)).string(t.invocationId);
      break;
    case 'idempotentRequest':
      writeMessage(w, 3, writeIdempotentRequestTarget, t);
      break;
    case 'workflow':
      writeMessage(w, 4, writeWorkflowTarget, t);
      break;
  }
}

function writeIdempotentRequestTarget(w: BinaryWriter, t: IdempotentRequestTarget): void {
  writeString(w, 1, t.serviceName);
  writeStringPresent(w, 2, t.serviceKey);
  writeString(w, 3, t.handlerName);
  writeString(w, 4, t.idempotencyKey);
  writeStringPresent(w, 5, t.scope);
}

function writeWorkflowTarget(w: BinaryWriter, t: WorkflowTarget): void {
  writeString(w, 1, t.workflowName);
  writeString(w, 2, t.workflowKey);
  writeStringPresent(w, 3, t.scope);
}

function readAttachInvocation(r: BinaryReader, end: number): AttachInvocationCommand {
  let target: InvocationTarget | undefined;
  let resultCompletionId = 0;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        target = { kind: 'invocationId', invocationId: readString(r, wt, 1) };
        break;
      case 3:
        target = readNested(r, wt, 3, readIdempotentRequestTarget);
        break;
      case 4:
        target = readNested(r, wt, 4, readWorkflowTarget);
        break;
      case 11:
        resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { target: target ?? missing('target'), resultCompletionId, name };
}

function writeAttachInvocation(w: BinaryWriter, m: AttachInvocationCommand): void {
  writeInvocationTarget(w, m.target);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

function readCompleteAwakeable(r: BinaryReader, end: number): CompleteAwakeableCommand {
  let awakeableId = '';
  let result: ValueResult | FailureResult | undefined;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    const field = tag >>> 3;
    switch (field) {
      case 1:
        awakeableId = readString(r, wt, 1);
        break;
      case 2:
      case 3:
        result = readValueOrFailure(r, wt, field, 2);
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { awakeableId, result: result ?? missing('result (value or failure)'), name };
}

function writeCompleteAwakeable(w: BinaryWriter, m: CompleteAwakeableCommand): void {
  writeString(w, 1, m.awakeableId);
  writeValueOrFailure(w, 2, m.result);
  writeString(w, 12, m.name);
}

// ---------------------------------------------------------------------------------------------------------------
// Notifications

function readNotification(r: BinaryReader, end: number): NotificationMessage {
  let id: NotificationId | undefined;
  let result: NotificationResult | undefined;
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        id = { kind: 'completion', id: readU32(r, wt, 1) };
        break;
      case 2:
        id = { kind: 'signal', idx: readU32(r, wt, 2) };
        break;
      case 3:
        id = { kind: 'signalName', name: readString(r, wt, 3) };
        break;
      case 4:
        readNested(r, wt, 4, readEmpty);
        result = { kind: 'void' };
        break;
      case 5:
        result = { kind: 'value', value: readNested(r, wt, 5, readValue) };
        break;
      case 6:
        result = { kind: 'failure', failure: readNested(r, wt, 6, readFailure) };
        break;
      case 16:
        result = { kind: 'invocationId', invocationId: readString(r, wt, 16) };
        break;
      case 17:
        result = { kind: 'stateKeys', keys: readNested(r, wt, 17, readStateKeys) };
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { id: id ?? missing('id (completion_id, idx or name)'), result: result ?? missing('result') };
}

function writeNotification(w: BinaryWriter, m: NotificationMessage): void {
  const id = m.id;
  switch (id.kind) {
    case 'completion':
      w.uint32(tagOf(1, VARINT)).uint32(id.id);
      break;
    case 'signal':
      w.uint32(tagOf(2, VARINT)).uint32(id.idx);
      break;
    case 'signalName':
      w.uint32(tagOf(3, LEN)).string(id.name);
      break;
  }
  const result = m.result;
  switch (result.kind) {
    case 'invocationId':
      w.uint32(tagOf(16, LEN)).string(result.invocationId);
      break;
    case 'stateKeys':
      writeMessage(w, 17, writeStateKeys, result.keys);
      break;
    default:
      writeVoidValueOrFailure(w, result);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Public API

/** Message type id → its decoded shape. */
export interface MessageMap {
  [MessageType.Start]: StartMessage;
  [MessageType.Suspension]: SuspensionMessage;
  [MessageType.Error]: ErrorMessage;
  [MessageType.End]: EndMessage;
  [MessageType.CommandAck]: CommandAckMessage;
  [MessageType.ProposeRunCompletion]: ProposeRunCompletionMessage;
  [MessageType.AwaitingOn]: AwaitingOnMessage;
  [MessageType.ProposeRunCompletionAck]: ProposeRunCompletionAckMessage;
  [MessageType.InputCommand]: InputCommand;
  [MessageType.OutputCommand]: OutputCommand;
  [MessageType.GetLazyStateCommand]: GetLazyStateCommand;
  [MessageType.SetStateCommand]: SetStateCommand;
  [MessageType.ClearStateCommand]: ClearStateCommand;
  [MessageType.ClearAllStateCommand]: ClearAllStateCommand;
  [MessageType.GetLazyStateKeysCommand]: GetLazyStateKeysCommand;
  [MessageType.GetEagerStateCommand]: GetEagerStateCommand;
  [MessageType.GetEagerStateKeysCommand]: GetEagerStateKeysCommand;
  [MessageType.GetPromiseCommand]: GetPromiseCommand;
  [MessageType.PeekPromiseCommand]: PeekPromiseCommand;
  [MessageType.CompletePromiseCommand]: CompletePromiseCommand;
  [MessageType.SleepCommand]: SleepCommand;
  [MessageType.CallCommand]: CallCommand;
  [MessageType.OneWayCallCommand]: OneWayCallCommand;
  [MessageType.SendSignalCommand]: SendSignalCommand;
  [MessageType.RunCommand]: RunCommand;
  [MessageType.AttachInvocationCommand]: AttachInvocationCommand;
  [MessageType.GetInvocationOutputCommand]: GetInvocationOutputCommand;
  [MessageType.CompleteAwakeableCommand]: CompleteAwakeableCommand;
  [MessageType.GetLazyStateCompletionNotification]: NotificationMessage;
  [MessageType.GetLazyStateKeysCompletionNotification]: NotificationMessage;
  [MessageType.GetPromiseCompletionNotification]: NotificationMessage;
  [MessageType.PeekPromiseCompletionNotification]: NotificationMessage;
  [MessageType.CompletePromiseCompletionNotification]: NotificationMessage;
  [MessageType.SleepCompletionNotification]: NotificationMessage;
  [MessageType.CallCompletionNotification]: NotificationMessage;
  [MessageType.CallInvocationIdCompletionNotification]: NotificationMessage;
  [MessageType.RunCompletionNotification]: NotificationMessage;
  [MessageType.AttachInvocationCompletionNotification]: NotificationMessage;
  [MessageType.GetInvocationOutputCompletionNotification]: NotificationMessage;
  [MessageType.SignalNotification]: NotificationMessage;
}

/** Tagged union of every known message; switch on `type` to narrow `message`. */
export type DecodedMessage = { [K in MessageTypeId]: { type: K; message: MessageMap[K] } }[MessageTypeId];

interface Codec<T> {
  read: (r: BinaryReader, end: number) => T;
  write: (w: BinaryWriter, m: T, version?: number) => void;
}

const notificationCodec: Codec<NotificationMessage> = { read: readNotification, write: writeNotification };
const promiseCodec: Codec<GetPromiseCommand> = { read: readGetPromise, write: writeGetPromise };
const attachCodec: Codec<AttachInvocationCommand> = { read: readAttachInvocation, write: writeAttachInvocation };
const runCodec: Codec<RunCommand> = { read: readCompletionIdAndName, write: writeCompletionIdAndName };

const CODECS: { readonly [K in MessageTypeId]: Codec<MessageMap[K]> } = {
  [MessageType.Start]: { read: readStart, write: writeStart },
  [MessageType.Suspension]: { read: readSuspension, write: writeSuspension },
  [MessageType.Error]: { read: readError, write: writeError },
  [MessageType.End]: { read: readEnd, write: writeNothing },
  [MessageType.CommandAck]: { read: readCommandAck, write: writeCommandAck },
  [MessageType.ProposeRunCompletion]: { read: readProposeRunCompletion, write: writeProposeRunCompletion },
  [MessageType.AwaitingOn]: { read: readAwaitingOn, write: writeAwaitingOn },
  [MessageType.ProposeRunCompletionAck]: { read: readProposeRunCompletionAck, write: writeProposeRunCompletionAck },
  [MessageType.InputCommand]: { read: readInput, write: writeInput },
  [MessageType.OutputCommand]: { read: readOutput, write: writeOutput },
  [MessageType.GetLazyStateCommand]: { read: readGetLazyState, write: writeGetLazyState },
  [MessageType.SetStateCommand]: { read: readSetState, write: writeSetState },
  [MessageType.ClearStateCommand]: { read: readClearState, write: writeClearState },
  [MessageType.ClearAllStateCommand]: { read: readNameOnly, write: writeNameOnly },
  [MessageType.GetLazyStateKeysCommand]: runCodec,
  [MessageType.GetEagerStateCommand]: { read: readGetEagerState, write: writeGetEagerState },
  [MessageType.GetEagerStateKeysCommand]: { read: readGetEagerStateKeys, write: writeGetEagerStateKeys },
  [MessageType.GetPromiseCommand]: promiseCodec,
  [MessageType.PeekPromiseCommand]: promiseCodec,
  [MessageType.CompletePromiseCommand]: { read: readCompletePromise, write: writeCompletePromise },
  [MessageType.SleepCommand]: { read: readSleep, write: writeSleep },
  [MessageType.CallCommand]: { read: readCall, write: writeCall },
  [MessageType.OneWayCallCommand]: { read: readOneWayCall, write: writeOneWayCall },
  [MessageType.SendSignalCommand]: { read: readSendSignal, write: writeSendSignal },
  [MessageType.RunCommand]: runCodec,
  [MessageType.AttachInvocationCommand]: attachCodec,
  [MessageType.GetInvocationOutputCommand]: attachCodec,
  [MessageType.CompleteAwakeableCommand]: { read: readCompleteAwakeable, write: writeCompleteAwakeable },
  [MessageType.GetLazyStateCompletionNotification]: notificationCodec,
  [MessageType.GetLazyStateKeysCompletionNotification]: notificationCodec,
  [MessageType.GetPromiseCompletionNotification]: notificationCodec,
  [MessageType.PeekPromiseCompletionNotification]: notificationCodec,
  [MessageType.CompletePromiseCompletionNotification]: notificationCodec,
  [MessageType.SleepCompletionNotification]: notificationCodec,
  [MessageType.CallCompletionNotification]: notificationCodec,
  [MessageType.CallInvocationIdCompletionNotification]: notificationCodec,
  [MessageType.RunCompletionNotification]: notificationCodec,
  [MessageType.AttachInvocationCompletionNotification]: notificationCodec,
  [MessageType.GetInvocationOutputCompletionNotification]: notificationCodec,
  [MessageType.SignalNotification]: notificationCodec,
};

const CODEC_BY_TYPE: ReadonlyMap<number, Codec<unknown>> = new Map(
  Object.entries(CODECS).map(([type, codec]) => [Number(type), codec as Codec<unknown>]),
);

function decodeWith<T>(read: (r: BinaryReader, end: number) => T, bytes: Uint8Array, what: string): T {
  try {
    const r = new BinaryReader(bytes);
    return read(r, bytes.length);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ProtocolViolationError(`malformed ${what} message: ${reason}`, { cause: error });
  }
}

function codecFor(type: number): Codec<unknown> {
  const codec = CODEC_BY_TYPE.get(type);
  if (codec === undefined) {
    throw new ProtocolViolationError(`unknown message type 0x${type.toString(16).padStart(4, '0')}`);
  }
  return codec;
}

/** Decodes the payload of a frame; unknown types and malformed payloads throw `ProtocolViolationError`. */
export function decodeMessage(type: number, payload: Uint8Array): DecodedMessage {
  const codec = codecFor(type);
  return { type, message: decodeWith(codec.read, payload, messageTypeName(type)) } as DecodedMessage;
}

/**
 * Encodes a message payload. `version` only matters for Start, where it drops fields the peer's protocol version
 * does not know; without it every set field is written.
 */
export function encodeMessage<T extends MessageTypeId>(type: T, message: MessageMap[T], version?: number): Uint8Array {
  const codec = codecFor(type);
  return encodeWith((w, m) => codec.write(w, m, version), message);
}

const HEADER_PLACEHOLDER = new Uint8Array(FRAME_HEADER_SIZE);

/** Header + payload in one buffer, encoded without the extra copy of `encodeFrame(type, encodeMessage(...))`. */
export function encodeMessageFrame<T extends MessageTypeId>(
  type: T,
  message: MessageMap[T],
  flags = 0,
  version?: number,
): Buffer {
  const codec = codecFor(type);
  const out = encodeWith((w, m) => codec.write(w, m, version), message, HEADER_PLACEHOLDER);
  const frame = Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  frame.writeUInt16BE(type, 0);
  frame.writeUInt16BE(flags, 2);
  frame.writeUInt32BE(out.byteLength - FRAME_HEADER_SIZE, 4);
  return frame;
}

// Per-message entry points, for callers that know the type statically.

export const encodeStart = (m: StartMessage, version?: number): Uint8Array =>
  encodeWith((w, x: StartMessage) => writeStart(w, x, version), m);
export const decodeStart = (b: Uint8Array): StartMessage => decodeWith(readStart, b, 'Start');
export const encodeSuspension = (m: SuspensionMessage): Uint8Array => encodeWith(writeSuspension, m);
export const decodeSuspension = (b: Uint8Array): SuspensionMessage => decodeWith(readSuspension, b, 'Suspension');
export const encodeError = (m: ErrorMessage): Uint8Array => encodeWith(writeError, m);
export const decodeError = (b: Uint8Array): ErrorMessage => decodeWith(readError, b, 'Error');
export const encodeEnd = (m: EndMessage = {}): Uint8Array => encodeWith(writeNothing, m);
export const decodeEnd = (b: Uint8Array): EndMessage => decodeWith(readEnd, b, 'End');
export const encodeCommandAck = (m: CommandAckMessage): Uint8Array => encodeWith(writeCommandAck, m);
export const decodeCommandAck = (b: Uint8Array): CommandAckMessage => decodeWith(readCommandAck, b, 'CommandAck');
export const encodeProposeRunCompletion = (m: ProposeRunCompletionMessage): Uint8Array =>
  encodeWith(writeProposeRunCompletion, m);
export const decodeProposeRunCompletion = (b: Uint8Array): ProposeRunCompletionMessage =>
  decodeWith(readProposeRunCompletion, b, 'ProposeRunCompletion');
export const encodeAwaitingOn = (m: AwaitingOnMessage): Uint8Array => encodeWith(writeAwaitingOn, m);
export const decodeAwaitingOn = (b: Uint8Array): AwaitingOnMessage => decodeWith(readAwaitingOn, b, 'AwaitingOn');
export const encodeProposeRunCompletionAck = (m: ProposeRunCompletionAckMessage): Uint8Array =>
  encodeWith(writeProposeRunCompletionAck, m);
export const decodeProposeRunCompletionAck = (b: Uint8Array): ProposeRunCompletionAckMessage =>
  decodeWith(readProposeRunCompletionAck, b, 'ProposeRunCompletionAck');

export const encodeInputCommand = (m: InputCommand): Uint8Array => encodeWith(writeInput, m);
export const decodeInputCommand = (b: Uint8Array): InputCommand => decodeWith(readInput, b, 'InputCommand');
export const encodeOutputCommand = (m: OutputCommand): Uint8Array => encodeWith(writeOutput, m);
export const decodeOutputCommand = (b: Uint8Array): OutputCommand => decodeWith(readOutput, b, 'OutputCommand');
export const encodeGetLazyStateCommand = (m: GetLazyStateCommand): Uint8Array => encodeWith(writeGetLazyState, m);
export const decodeGetLazyStateCommand = (b: Uint8Array): GetLazyStateCommand =>
  decodeWith(readGetLazyState, b, 'GetLazyStateCommand');
export const encodeSetStateCommand = (m: SetStateCommand): Uint8Array => encodeWith(writeSetState, m);
export const decodeSetStateCommand = (b: Uint8Array): SetStateCommand =>
  decodeWith(readSetState, b, 'SetStateCommand');
export const encodeClearStateCommand = (m: ClearStateCommand): Uint8Array => encodeWith(writeClearState, m);
export const decodeClearStateCommand = (b: Uint8Array): ClearStateCommand =>
  decodeWith(readClearState, b, 'ClearStateCommand');
export const encodeClearAllStateCommand = (m: ClearAllStateCommand): Uint8Array => encodeWith(writeNameOnly, m);
export const decodeClearAllStateCommand = (b: Uint8Array): ClearAllStateCommand =>
  decodeWith(readNameOnly, b, 'ClearAllStateCommand');
export const encodeGetLazyStateKeysCommand = (m: GetLazyStateKeysCommand): Uint8Array =>
  encodeWith(writeCompletionIdAndName, m);
export const decodeGetLazyStateKeysCommand = (b: Uint8Array): GetLazyStateKeysCommand =>
  decodeWith(readCompletionIdAndName, b, 'GetLazyStateKeysCommand');
export const encodeGetEagerStateCommand = (m: GetEagerStateCommand): Uint8Array => encodeWith(writeGetEagerState, m);
export const decodeGetEagerStateCommand = (b: Uint8Array): GetEagerStateCommand =>
  decodeWith(readGetEagerState, b, 'GetEagerStateCommand');
export const encodeGetEagerStateKeysCommand = (m: GetEagerStateKeysCommand): Uint8Array =>
  encodeWith(writeGetEagerStateKeys, m);
export const decodeGetEagerStateKeysCommand = (b: Uint8Array): GetEagerStateKeysCommand =>
  decodeWith(readGetEagerStateKeys, b, 'GetEagerStateKeysCommand');
export const encodeGetPromiseCommand = (m: GetPromiseCommand): Uint8Array => encodeWith(writeGetPromise, m);
export const decodeGetPromiseCommand = (b: Uint8Array): GetPromiseCommand =>
  decodeWith(readGetPromise, b, 'GetPromiseCommand');
export const encodePeekPromiseCommand = (m: PeekPromiseCommand): Uint8Array => encodeWith(writeGetPromise, m);
export const decodePeekPromiseCommand = (b: Uint8Array): PeekPromiseCommand =>
  decodeWith(readGetPromise, b, 'PeekPromiseCommand');
export const encodeCompletePromiseCommand = (m: CompletePromiseCommand): Uint8Array =>
  encodeWith(writeCompletePromise, m);
export const decodeCompletePromiseCommand = (b: Uint8Array): CompletePromiseCommand =>
  decodeWith(readCompletePromise, b, 'CompletePromiseCommand');
export const encodeSleepCommand = (m: SleepCommand): Uint8Array => encodeWith(writeSleep, m);
export const decodeSleepCommand = (b: Uint8Array): SleepCommand => decodeWith(readSleep, b, 'SleepCommand');
export const encodeCallCommand = (m: CallCommand): Uint8Array => encodeWith(writeCall, m);
export const decodeCallCommand = (b: Uint8Array): CallCommand => decodeWith(readCall, b, 'CallCommand');
export const encodeOneWayCallCommand = (m: OneWayCallCommand): Uint8Array => encodeWith(writeOneWayCall, m);
export const decodeOneWayCallCommand = (b: Uint8Array): OneWayCallCommand =>
  decodeWith(readOneWayCall, b, 'OneWayCallCommand');
export const encodeSendSignalCommand = (m: SendSignalCommand): Uint8Array => encodeWith(writeSendSignal, m);
export const decodeSendSignalCommand = (b: Uint8Array): SendSignalCommand =>
  decodeWith(readSendSignal, b, 'SendSignalCommand');
export const encodeRunCommand = (m: RunCommand): Uint8Array => encodeWith(writeCompletionIdAndName, m);
export const decodeRunCommand = (b: Uint8Array): RunCommand => decodeWith(readCompletionIdAndName, b, 'RunCommand');
export const encodeAttachInvocationCommand = (m: AttachInvocationCommand): Uint8Array =>
  encodeWith(writeAttachInvocation, m);
export const decodeAttachInvocationCommand = (b: Uint8Array): AttachInvocationCommand =>
  decodeWith(readAttachInvocation, b, 'AttachInvocationCommand');
export const encodeGetInvocationOutputCommand = (m: GetInvocationOutputCommand): Uint8Array =>
  encodeWith(writeAttachInvocation, m);
export const decodeGetInvocationOutputCommand = (b: Uint8Array): GetInvocationOutputCommand =>
  decodeWith(readAttachInvocation, b, 'GetInvocationOutputCommand');
export const encodeCompleteAwakeableCommand = (m: CompleteAwakeableCommand): Uint8Array =>
  encodeWith(writeCompleteAwakeable, m);
export const decodeCompleteAwakeableCommand = (b: Uint8Array): CompleteAwakeableCommand =>
  decodeWith(readCompleteAwakeable, b, 'CompleteAwakeableCommand');

/** Every notification type (completions 0x8002–0x8013 and SignalNotification 0xFBFF) shares this layout. */
export const encodeNotification = (m: NotificationMessage): Uint8Array => encodeWith(writeNotification, m);
export const decodeNotification = (b: Uint8Array): NotificationMessage =>
  decodeWith(readNotification, b, 'Notification');
