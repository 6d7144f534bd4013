import { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import {
  readAwaitingOn,
  readCommandAck,
  readEnd,
  readError,
  readProposeRunCompletion,
  readProposeRunCompletionAck,
  readStart,
  readSuspension,
  writeAwaitingOn,
  writeCommandAck,
  writeError,
  writeNothing,
  writeProposeRunCompletion,
  writeProposeRunCompletionAck,
  writeStart,
  writeSuspension,
} from './control-codec.ts';
import { ProtocolViolationError } from './errors.ts';
import { FRAME_HEADER_SIZE } from './framing.ts';
import {
  readClearState,
  readCompletePromise,
  readCompletionIdAndName,
  readGetEagerState,
  readGetEagerStateKeys,
  readGetLazyState,
  readGetPromise,
  readInput,
  readNameOnly,
  readOutput,
  readSetState,
  readSleep,
  writeClearState,
  writeCompletePromise,
  writeCompletionIdAndName,
  writeGetEagerState,
  writeGetEagerStateKeys,
  writeGetLazyState,
  writeGetPromise,
  writeInput,
  writeNameOnly,
  writeOutput,
  writeSetState,
  writeSleep,
} from './journal-codec.ts';
import {
  readAttachInvocation,
  readCall,
  readCompleteAwakeable,
  readNotification,
  readOneWayCall,
  readSendSignal,
  writeAttachInvocation,
  writeCall,
  writeCompleteAwakeable,
  writeNotification,
  writeOneWayCall,
  writeSendSignal,
} from './journal-calls-codec.ts';
import type {
  AttachInvocationCommand,
  AwaitingOnMessage,
  CallCommand,
  ClearAllStateCommand,
  ClearStateCommand,
  CommandAckMessage,
  CompleteAwakeableCommand,
  CompletePromiseCommand,
  EndMessage,
  ErrorMessage,
  GetEagerStateCommand,
  GetEagerStateKeysCommand,
  GetInvocationOutputCommand,
  GetLazyStateCommand,
  GetLazyStateKeysCommand,
  GetPromiseCommand,
  InputCommand,
  NotificationMessage,
  OneWayCallCommand,
  OutputCommand,
  PeekPromiseCommand,
  ProposeRunCompletionAckMessage,
  ProposeRunCompletionMessage,
  RunCommand,
  SendSignalCommand,
  SetStateCommand,
  SleepCommand,
  StartMessage,
  SuspensionMessage,
} from './message-schema.ts';
import { MessageType, messageTypeName } from './message-types.ts';
import type { MessageTypeId } from './message-types.ts';

export { CombinatorType, ErrorBehavior } from './message-schema.ts';
export type {
  AttachInvocationCommand,
  AwaitingOnMessage,
  CallCommand,
  ClearAllStateCommand,
  ClearStateCommand,
  CommandAckMessage,
  CompleteAwakeableCommand,
  CompletePromiseCommand,
  EndMessage,
  ErrorMessage,
  Failure,
  Future,
  GetEagerStateCommand,
  GetEagerStateKeysCommand,
  GetInvocationOutputCommand,
  GetLazyStateCommand,
  GetLazyStateKeysCommand,
  GetPromiseCommand,
  Header,
  InputCommand,
  InvocationTarget,
  NotificationId,
  NotificationMessage,
  NotificationResult,
  OneWayCallCommand,
  OutputCommand,
  PeekPromiseCommand,
  ProposeRunCompletionAckMessage,
  ProposeRunCompletionMessage,
  RunCommand,
  SendSignalCommand,
  SetStateCommand,
  SleepCommand,
  StartMessage,
  SuspensionMessage,
} from './message-schema.ts';
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
export type { MessageTypeId } from './message-types.ts';

/*
 * Entry point of the service-protocol codec (V5–V7): `decodeMessage`/`encodeMessage` for frames whose type is only
 * known at run time, `encodeX`/`decodeX` for callers that know it statically.
 *
 * Wire rules that make re-encoding byte-identical to restate-server and the SDK (both encode with prost):
 * - fields are written in ascending field-number order; a oneof sits at the position of its member's number
 *   (so `name` = 12 comes before an Output's `value` = 14 but after a CompletePromise's `completion_value` = 2);
 * - plain scalars holding their default (0, 0n, '', empty bytes, false, enum 0) and empty repeated fields are
 *   omitted; `optional` fields are written whenever set, even when empty or 0;
 * - oneof members and message-typed fields are always written, so an empty `Value` is `<tag> 00`;
 * - repeated u32 are packed (unpacked ones are accepted when decoding); unknown fields are skipped.
 */

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

// Per-message entry points, for callers that know the type statically: only the directions something uses (mostly
// Ratchet encoding what it sends and decoding what SDKs send). Every type goes both ways through `encodeMessage` and
// `decodeMessage`.

export const encodeStart = (m: StartMessage, version?: number): Uint8Array =>
  encodeWith((w, x: StartMessage) => writeStart(w, x, version), m);
export const decodeStart = (b: Uint8Array): StartMessage => decodeWith(readStart, b, 'Start');
export const decodeSuspension = (b: Uint8Array): SuspensionMessage => decodeWith(readSuspension, b, 'Suspension');
export const encodeError = (m: ErrorMessage): Uint8Array => encodeWith(writeError, m);
export const decodeError = (b: Uint8Array): ErrorMessage => decodeWith(readError, b, 'Error');
export const encodeEnd = (m: EndMessage = {}): Uint8Array => encodeWith(writeNothing, m);
export const decodeProposeRunCompletion = (b: Uint8Array): ProposeRunCompletionMessage =>
  decodeWith(readProposeRunCompletion, b, 'ProposeRunCompletion');
export const decodeAwaitingOn = (b: Uint8Array): AwaitingOnMessage => decodeWith(readAwaitingOn, b, 'AwaitingOn');
export const encodeProposeRunCompletionAck = (m: ProposeRunCompletionAckMessage): Uint8Array =>
  encodeWith(writeProposeRunCompletionAck, m);

export const encodeInputCommand = (m: InputCommand): Uint8Array => encodeWith(writeInput, m);
export const encodeOutputCommand = (m: OutputCommand): Uint8Array => encodeWith(writeOutput, m);
export const decodeOutputCommand = (b: Uint8Array): OutputCommand => decodeWith(readOutput, b, 'OutputCommand');
export const decodeGetLazyStateCommand = (b: Uint8Array): GetLazyStateCommand =>
  decodeWith(readGetLazyState, b, 'GetLazyStateCommand');
export const encodeSetStateCommand = (m: SetStateCommand): Uint8Array => encodeWith(writeSetState, m);
export const decodeSetStateCommand = (b: Uint8Array): SetStateCommand => decodeWith(readSetState, b, 'SetStateCommand');
export const decodeClearStateCommand = (b: Uint8Array): ClearStateCommand =>
  decodeWith(readClearState, b, 'ClearStateCommand');
export const decodeGetLazyStateKeysCommand = (b: Uint8Array): GetLazyStateKeysCommand =>
  decodeWith(readCompletionIdAndName, b, 'GetLazyStateKeysCommand');
export const encodeGetEagerStateKeysCommand = (m: GetEagerStateKeysCommand): Uint8Array =>
  encodeWith(writeGetEagerStateKeys, m);
export const decodeGetPromiseCommand = (b: Uint8Array): GetPromiseCommand =>
  decodeWith(readGetPromise, b, 'GetPromiseCommand');
export const decodePeekPromiseCommand = (b: Uint8Array): PeekPromiseCommand =>
  decodeWith(readGetPromise, b, 'PeekPromiseCommand');
export const decodeCompletePromiseCommand = (b: Uint8Array): CompletePromiseCommand =>
  decodeWith(readCompletePromise, b, 'CompletePromiseCommand');
export const decodeSleepCommand = (b: Uint8Array): SleepCommand => decodeWith(readSleep, b, 'SleepCommand');
export const encodeCallCommand = (m: CallCommand): Uint8Array => encodeWith(writeCall, m);
export const decodeCallCommand = (b: Uint8Array): CallCommand => decodeWith(readCall, b, 'CallCommand');
export const encodeOneWayCallCommand = (m: OneWayCallCommand): Uint8Array => encodeWith(writeOneWayCall, m);
export const decodeOneWayCallCommand = (b: Uint8Array): OneWayCallCommand =>
  decodeWith(readOneWayCall, b, 'OneWayCallCommand');
export const decodeSendSignalCommand = (b: Uint8Array): SendSignalCommand =>
  decodeWith(readSendSignal, b, 'SendSignalCommand');
export const encodeRunCommand = (m: RunCommand): Uint8Array => encodeWith(writeCompletionIdAndName, m);
export const decodeRunCommand = (b: Uint8Array): RunCommand => decodeWith(readCompletionIdAndName, b, 'RunCommand');
export const encodeAttachInvocationCommand = (m: AttachInvocationCommand): Uint8Array =>
  encodeWith(writeAttachInvocation, m);
export const decodeAttachInvocationCommand = (b: Uint8Array): AttachInvocationCommand =>
  decodeWith(readAttachInvocation, b, 'AttachInvocationCommand');
export const decodeGetInvocationOutputCommand = (b: Uint8Array): GetInvocationOutputCommand =>
  decodeWith(readAttachInvocation, b, 'GetInvocationOutputCommand');
export const decodeCompleteAwakeableCommand = (b: Uint8Array): CompleteAwakeableCommand =>
  decodeWith(readCompleteAwakeable, b, 'CompleteAwakeableCommand');

/** Every notification type (completions 0x8002–0x8013 and SignalNotification 0xFBFF) shares this layout. */
export const encodeNotification = (m: NotificationMessage): Uint8Array => encodeWith(writeNotification, m);
export const decodeNotification = (b: Uint8Array): NotificationMessage =>
  decodeWith(readNotification, b, 'Notification');
