import type { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import type {
  AwaitingOnMessage,
  CommandAckMessage,
  EndMessage,
  ErrorMessage,
  FailureResult,
  Future,
  ProposeRunCompletionAckMessage,
  ProposeRunCompletionMessage,
  StartMessage,
  SuspensionMessage,
  ValueResult,
} from './message-schema.ts';
import {
  EMPTY_BYTES,
  LEN,
  VARINT,
  checkEnd,
  missing,
  readBool,
  readBytes,
  readEmpty,
  readFailure,
  readFuture,
  readNested,
  readStateEntry,
  readString,
  readU32,
  readU32List,
  readU64,
  skipField,
  tagOf,
  writeBool,
  writeBytes,
  writeFailure,
  writeFuture,
  writeMessage,
  writePackedU32,
  writeStateEntry,
  writeString,
  writeStringPresent,
  writeU32,
  writeU32Present,
  writeU64,
} from './wire.ts';

/* Readers and writers of the control messages (0x0000–0x0007), which are never journaled. */

export function readStart(r: BinaryReader, end: number): StartMessage {
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
export function writeStart(w: BinaryWriter, m: StartMessage, version?: number): void {
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

export function readSuspension(r: BinaryReader, end: number): SuspensionMessage {
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

export function writeSuspension(w: BinaryWriter, m: SuspensionMessage): void {
  writePackedU32(w, 1, m.waitingCompletions);
  writePackedU32(w, 2, m.waitingSignals);
  for (const name of m.waitingNamedSignals) w.uint32(tagOf(3, LEN)).string(name);
  if (m.awaitingOn !== undefined) writeMessage(w, 4, writeFuture, m.awaitingOn);
}

export function readError(r: BinaryReader, end: number): ErrorMessage {
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

export function writeError(w: BinaryWriter, m: ErrorMessage): void {
  writeU32(w, 1, m.code);
  writeString(w, 2, m.message);
  writeString(w, 3, m.stacktrace);
  writeU32Present(w, 4, m.relatedCommandIndex);
  writeStringPresent(w, 5, m.relatedCommandName);
  writeU32Present(w, 6, m.relatedCommandType);
  if (m.nextRetryDelay !== undefined) w.uint32(tagOf(8, VARINT)).uint64(m.nextRetryDelay);
  writeU32(w, 9, m.behavior);
}

export function readEnd(r: BinaryReader, end: number): EndMessage {
  readEmpty(r, end);
  return {};
}

export function writeNothing(): void {}

export function readCommandAck(r: BinaryReader, end: number): CommandAckMessage {
  const m: CommandAckMessage = { commandIndex: 0 };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) m.commandIndex = readU32(r, tag & 7, 1);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return m;
}

export function writeCommandAck(w: BinaryWriter, m: CommandAckMessage): void {
  writeU32(w, 1, m.commandIndex);
}

export function readProposeRunCompletion(r: BinaryReader, end: number): ProposeRunCompletionMessage {
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

export function writeProposeRunCompletion(w: BinaryWriter, m: ProposeRunCompletionMessage): void {
  writeU32(w, 1, m.resultCompletionId);
  if (m.result.kind === 'value') w.uint32(tagOf(14, LEN)).bytes(m.result.value);
  else writeMessage(w, 15, writeFailure, m.result.failure);
}

export function readAwaitingOn(r: BinaryReader, end: number): AwaitingOnMessage {
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

export function writeAwaitingOn(w: BinaryWriter, m: AwaitingOnMessage): void {
  writeMessage(w, 1, writeFuture, m.awaitingOn);
  writeBool(w, 2, m.executingSideEffects);
}

export function readProposeRunCompletionAck(r: BinaryReader, end: number): ProposeRunCompletionAckMessage {
  const m: ProposeRunCompletionAckMessage = { completionId: 0 };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 1) m.completionId = readU32(r, tag & 7, 1);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return m;
}

export function writeProposeRunCompletionAck(w: BinaryWriter, m: ProposeRunCompletionAckMessage): void {
  writeU32(w, 1, m.completionId);
}
