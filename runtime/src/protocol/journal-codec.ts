import type { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import type {
  ClearAllStateCommand,
  ClearStateCommand,
  CompletePromiseCommand,
  FailureResult,
  GetEagerStateCommand,
  GetEagerStateKeysCommand,
  GetLazyStateCommand,
  GetPromiseCommand,
  InputCommand,
  OutputCommand,
  RunCommand,
  SetStateCommand,
  SleepCommand,
  ValueResult,
  VoidResult,
} from './message-schema.ts';
import {
  EMPTY_BYTES,
  checkEnd,
  missing,
  readBytes,
  readEmpty,
  readNested,
  readStateKeys,
  readString,
  readStringPair,
  readU32,
  readU64,
  readValue,
  readValueOrFailure,
  skipField,
  writeBytes,
  writeEmpty,
  writeHeaders,
  writeMessage,
  writeStateKeys,
  writeString,
  writeU32,
  writeU64,
  writeValue,
  writeValueOrFailure,
} from './wire.ts';

/* Readers and writers of the journal commands that stay inside one invocation: input, output, state, promises, sleep (0x0400–0x040C). Calls, signals, attach and the notification layout are in journal-calls-codec.ts. */

export function readInput(r: BinaryReader, end: number): InputCommand {
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

export function writeInput(w: BinaryWriter, m: InputCommand): void {
  writeHeaders(w, 1, m.headers);
  writeString(w, 12, m.name);
  writeValue(w, 14, m.value);
}

export function readOutput(r: BinaryReader, end: number): OutputCommand {
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

export function writeOutput(w: BinaryWriter, m: OutputCommand): void {
  writeString(w, 12, m.name);
  writeValueOrFailure(w, 14, m.result);
}

export function readGetLazyState(r: BinaryReader, end: number): GetLazyStateCommand {
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

export function writeGetLazyState(w: BinaryWriter, m: GetLazyStateCommand): void {
  writeBytes(w, 1, m.key);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

export function readSetState(r: BinaryReader, end: number): SetStateCommand {
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

export function writeSetState(w: BinaryWriter, m: SetStateCommand): void {
  writeBytes(w, 1, m.key);
  writeValue(w, 3, m.value);
  writeString(w, 12, m.name);
}

export function readClearState(r: BinaryReader, end: number): ClearStateCommand {
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

export function writeClearState(w: BinaryWriter, m: ClearStateCommand): void {
  writeBytes(w, 1, m.key);
  writeString(w, 12, m.name);
}

export function readNameOnly(r: BinaryReader, end: number): ClearAllStateCommand {
  const m: ClearAllStateCommand = { name: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 === 12) m.name = readString(r, tag & 7, 12);
    else skipField(r, tag);
  }
  checkEnd(r, end);
  return m;
}

export function writeNameOnly(w: BinaryWriter, m: ClearAllStateCommand): void {
  writeString(w, 12, m.name);
}

/** Layout shared by GetLazyStateKeys and Run: `11 result_completion_id · 12 name`. */
export function readCompletionIdAndName(r: BinaryReader, end: number): RunCommand {
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

export function writeCompletionIdAndName(w: BinaryWriter, m: RunCommand): void {
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

export function readGetEagerState(r: BinaryReader, end: number): GetEagerStateCommand {
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

export function writeGetEagerState(w: BinaryWriter, m: GetEagerStateCommand): void {
  writeBytes(w, 1, m.key);
  writeString(w, 12, m.name);
  if (m.result.kind === 'void') writeEmpty(w, 13);
  else writeValue(w, 14, m.result.value);
}

export function readGetEagerStateKeys(r: BinaryReader, end: number): GetEagerStateKeysCommand {
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

export function writeGetEagerStateKeys(w: BinaryWriter, m: GetEagerStateKeysCommand): void {
  writeString(w, 12, m.name);
  writeMessage(w, 14, writeStateKeys, m.keys);
}

export function readGetPromise(r: BinaryReader, end: number): GetPromiseCommand {
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

export function writeGetPromise(w: BinaryWriter, m: GetPromiseCommand): void {
  writeString(w, 1, m.key);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

export function readCompletePromise(r: BinaryReader, end: number): CompletePromiseCommand {
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

export function writeCompletePromise(w: BinaryWriter, m: CompletePromiseCommand): void {
  writeString(w, 1, m.key);
  writeValueOrFailure(w, 2, m.completion);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

export function readSleep(r: BinaryReader, end: number): SleepCommand {
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

export function writeSleep(w: BinaryWriter, m: SleepCommand): void {
  writeU64(w, 1, m.wakeUpTime);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}
