import { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import {
  AWAITING_ON,
  COMMAND_ACK,
  END,
  ERROR,
  PROPOSE_RUN_COMPLETION,
  PROPOSE_RUN_COMPLETION_ACK,
  START,
  SUSPENSION,
} from './control-codec.ts';
import { ProtocolViolationError } from './errors.ts';
import type { MessageSchema } from './fields.ts';
import { FRAME_HEADER_SIZE } from './framing.ts';
import {
  CLEAR_STATE,
  COMPLETE_PROMISE,
  COMPLETION_ID_AND_NAME,
  GET_EAGER_STATE,
  GET_EAGER_STATE_KEYS,
  GET_LAZY_STATE,
  GET_PROMISE,
  INPUT,
  NAME_ONLY,
  OUTPUT,
  SET_STATE,
  SLEEP,
} from './journal-codec.ts';
import {
  ATTACH_INVOCATION,
  CALL,
  COMPLETE_AWAKEABLE,
  NOTIFICATION,
  ONE_WAY_CALL,
  SEND_SIGNAL,
} from './journal-calls-codec.ts';
import type { EndMessage, NotificationMessage, StartMessage } from './message-schema.ts';
import { MessageType, messageTypeKey, messageTypeName } from './message-types.ts';
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

const CODECS = {
  [MessageType.Start]: START,
  [MessageType.Suspension]: SUSPENSION,
  [MessageType.Error]: ERROR,
  [MessageType.End]: END,
  [MessageType.CommandAck]: COMMAND_ACK,
  [MessageType.ProposeRunCompletion]: PROPOSE_RUN_COMPLETION,
  [MessageType.AwaitingOn]: AWAITING_ON,
  [MessageType.ProposeRunCompletionAck]: PROPOSE_RUN_COMPLETION_ACK,
  [MessageType.InputCommand]: INPUT,
  [MessageType.OutputCommand]: OUTPUT,
  [MessageType.GetLazyStateCommand]: GET_LAZY_STATE,
  [MessageType.SetStateCommand]: SET_STATE,
  [MessageType.ClearStateCommand]: CLEAR_STATE,
  [MessageType.ClearAllStateCommand]: NAME_ONLY,
  [MessageType.GetLazyStateKeysCommand]: COMPLETION_ID_AND_NAME,
  [MessageType.GetEagerStateCommand]: GET_EAGER_STATE,
  [MessageType.GetEagerStateKeysCommand]: GET_EAGER_STATE_KEYS,
  [MessageType.GetPromiseCommand]: GET_PROMISE,
  [MessageType.PeekPromiseCommand]: GET_PROMISE,
  [MessageType.CompletePromiseCommand]: COMPLETE_PROMISE,
  [MessageType.SleepCommand]: SLEEP,
  [MessageType.CallCommand]: CALL,
  [MessageType.OneWayCallCommand]: ONE_WAY_CALL,
  [MessageType.SendSignalCommand]: SEND_SIGNAL,
  [MessageType.RunCommand]: COMPLETION_ID_AND_NAME,
  [MessageType.AttachInvocationCommand]: ATTACH_INVOCATION,
  [MessageType.GetInvocationOutputCommand]: ATTACH_INVOCATION,
  [MessageType.CompleteAwakeableCommand]: COMPLETE_AWAKEABLE,
  [MessageType.GetLazyStateCompletionNotification]: NOTIFICATION,
  [MessageType.GetLazyStateKeysCompletionNotification]: NOTIFICATION,
  [MessageType.GetPromiseCompletionNotification]: NOTIFICATION,
  [MessageType.PeekPromiseCompletionNotification]: NOTIFICATION,
  [MessageType.CompletePromiseCompletionNotification]: NOTIFICATION,
  [MessageType.SleepCompletionNotification]: NOTIFICATION,
  [MessageType.CallCompletionNotification]: NOTIFICATION,
  [MessageType.CallInvocationIdCompletionNotification]: NOTIFICATION,
  [MessageType.RunCompletionNotification]: NOTIFICATION,
  [MessageType.AttachInvocationCompletionNotification]: NOTIFICATION,
  [MessageType.GetInvocationOutputCompletionNotification]: NOTIFICATION,
  [MessageType.SignalNotification]: NOTIFICATION,
} satisfies Record<MessageTypeId, unknown>;

/** Message type id → its decoded shape. */
export type MessageMap = { [K in MessageTypeId]: (typeof CODECS)[K] extends MessageSchema<infer T> ? T : never };

/** Tagged union of every known message; switch on `type` to narrow `message`. */
export type DecodedMessage = { [K in MessageTypeId]: { type: K; message: MessageMap[K] } }[MessageTypeId];

const WRITER_RETAIN_LIMIT = 256 * 1024;
let sharedWriter = new BinaryWriter();

/**
 * Encoding is synchronous and never re-entrant, so one writer is reused to avoid growing a fresh buffer per message;
 * it is dropped after an unusually large message or a failure so neither memory nor a half-written state lingers.
 */
function encodeWith<T>(codec: MessageSchema<T>, m: T, version?: number, prefix?: Uint8Array): Uint8Array {
  const w = sharedWriter;
  try {
    if (prefix !== undefined) w.raw(prefix);
    codec.write(w, m, version);
    const out = w.finish();
    if (out.length > WRITER_RETAIN_LIMIT) sharedWriter = new BinaryWriter();
    return out;
  } catch (error) {
    sharedWriter = new BinaryWriter();
    throw error;
  }
}

const CODEC_BY_TYPE: ReadonlyMap<number, MessageSchema<unknown>> = new Map(
  Object.entries(CODECS).map(([type, codec]) => [Number(type), codec as MessageSchema<unknown>]),
);

function decodeWith<T>(codec: MessageSchema<T>, bytes: Uint8Array, what: string): T {
  try {
    const r = new BinaryReader(bytes);
    return codec.read(r, bytes.length);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ProtocolViolationError(`malformed ${what} message: ${reason}`, { cause: error });
  }
}

function codecFor(type: number): MessageSchema<unknown> {
  const codec = CODEC_BY_TYPE.get(type);
  if (codec === undefined) {
    throw new ProtocolViolationError(`unknown message type 0x${type.toString(16).padStart(4, '0')}`);
  }
  return codec;
}

/** Decodes the payload of a frame; unknown types and malformed payloads throw `ProtocolViolationError`. */
export function decodeMessage(type: number, payload: Uint8Array): DecodedMessage {
  return { type, message: decodeWith(codecFor(type), payload, messageTypeName(type)) } as DecodedMessage;
}

/**
 * Encodes a message payload. `version` only matters for Start, where it drops fields the peer's protocol version
 * does not know; without it every set field is written.
 */
export function encodeMessage<T extends MessageTypeId>(type: T, message: MessageMap[T], version?: number): Uint8Array {
  return encodeWith(codecFor(type), message, version);
}

const HEADER_PLACEHOLDER = new Uint8Array(FRAME_HEADER_SIZE);

/** Header + payload in one buffer, encoded without the extra copy of `encodeFrame(type, encodeMessage(...))`. */
export function encodeMessageFrame<T extends MessageTypeId>(
  type: T,
  message: MessageMap[T],
  flags = 0,
  version?: number,
): Buffer {
  const out = encodeWith(codecFor(type), message, version, HEADER_PLACEHOLDER);
  const frame = Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  frame.writeUInt16BE(type, 0);
  frame.writeUInt16BE(flags, 2);
  frame.writeUInt32BE(out.byteLength - FRAME_HEADER_SIZE, 4);
  return frame;
}

// Per-message entry points, for callers that know the type statically: only the directions something uses (mostly
// Ratchet encoding what it sends and decoding what SDKs send). Every type goes both ways through `encodeMessage` and
// `decodeMessage`. Errors name the message by its key (`malformed SleepCommand message: …`).

/** `MessageMap` is read off `CODECS`, so this cast only undoes the indexing TypeScript cannot follow. */
function codecOf<K extends MessageTypeId>(type: K): MessageSchema<MessageMap[K]> {
  return CODECS[type] as unknown as MessageSchema<MessageMap[K]>;
}

function encoder<K extends MessageTypeId>(type: K): (m: MessageMap[K]) => Uint8Array {
  const codec = codecOf(type);
  return (m) => encodeWith(codec, m);
}

function decoder<K extends MessageTypeId>(type: K, what = messageTypeKey(type)!): (b: Uint8Array) => MessageMap[K] {
  const codec = codecOf(type);
  return (b) => decodeWith(codec, b, what);
}

export const encodeStart = (m: StartMessage, version?: number): Uint8Array => encodeWith(START, m, version);
export const decodeStart = decoder(MessageType.Start);
export const decodeSuspension = decoder(MessageType.Suspension);
export const encodeError = encoder(MessageType.Error);
export const decodeError = decoder(MessageType.Error);
export const encodeEnd = (m: EndMessage = {}): Uint8Array => encodeWith(END, m);
export const decodeProposeRunCompletion = decoder(MessageType.ProposeRunCompletion);
export const decodeAwaitingOn = decoder(MessageType.AwaitingOn);
export const encodeProposeRunCompletionAck = encoder(MessageType.ProposeRunCompletionAck);

export const encodeInputCommand = encoder(MessageType.InputCommand);
export const encodeOutputCommand = encoder(MessageType.OutputCommand);
export const decodeOutputCommand = decoder(MessageType.OutputCommand);
export const decodeGetLazyStateCommand = decoder(MessageType.GetLazyStateCommand);
export const encodeSetStateCommand = encoder(MessageType.SetStateCommand);
export const decodeSetStateCommand = decoder(MessageType.SetStateCommand);
export const decodeClearStateCommand = decoder(MessageType.ClearStateCommand);
export const decodeGetLazyStateKeysCommand = decoder(MessageType.GetLazyStateKeysCommand);
export const encodeGetEagerStateKeysCommand = encoder(MessageType.GetEagerStateKeysCommand);
export const decodeGetPromiseCommand = decoder(MessageType.GetPromiseCommand);
export const decodePeekPromiseCommand = decoder(MessageType.PeekPromiseCommand);
export const decodeCompletePromiseCommand = decoder(MessageType.CompletePromiseCommand);
export const decodeSleepCommand = decoder(MessageType.SleepCommand);
export const encodeCallCommand = encoder(MessageType.CallCommand);
export const decodeCallCommand = decoder(MessageType.CallCommand);
export const encodeOneWayCallCommand = encoder(MessageType.OneWayCallCommand);
export const decodeOneWayCallCommand = decoder(MessageType.OneWayCallCommand);
export const decodeSendSignalCommand = decoder(MessageType.SendSignalCommand);
export const encodeRunCommand = encoder(MessageType.RunCommand);
export const decodeRunCommand = decoder(MessageType.RunCommand);
export const encodeAttachInvocationCommand = encoder(MessageType.AttachInvocationCommand);
export const decodeAttachInvocationCommand = decoder(MessageType.AttachInvocationCommand);
export const decodeGetInvocationOutputCommand = decoder(MessageType.GetInvocationOutputCommand);
export const decodeCompleteAwakeableCommand = decoder(MessageType.CompleteAwakeableCommand);

/** Every notification type (completions 0x8002–0x8013 and SignalNotification 0xFBFF) shares this layout. */
export const encodeNotification = (m: NotificationMessage): Uint8Array => encodeWith(NOTIFICATION, m);
export const decodeNotification = (b: Uint8Array): NotificationMessage => decodeWith(NOTIFICATION, b, 'Notification');
