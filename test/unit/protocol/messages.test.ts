import { describe, expect, it } from 'vitest';
import { ProtocolViolationError } from '../../../runtime/src/protocol/errors.ts';
import { encodeFrame } from '../../../runtime/src/protocol/framing.ts';
import {
  CombinatorType,
  ErrorBehavior,
  MessageType,
  decodeCallCommand,
  decodeMessage,
  decodeNotification,
  decodeRunCommand,
  decodeSetStateCommand,
  decodeStart,
  decodeSuspension,
  encodeAttachInvocationCommand,
  encodeCallCommand,
  encodeEnd,
  encodeError,
  encodeGetEagerStateKeysCommand,
  encodeInputCommand,
  encodeMessage,
  encodeMessageFrame,
  encodeNotification,
  encodeOneWayCallCommand,
  encodeRunCommand,
  encodeSetStateCommand,
  encodeStart,
  isCommand,
  isControl,
  isCustomEntry,
  isKnownMessageType,
  isNotification,
  messageTypeKey,
  messageTypeName,
  notificationTypeFor,
} from '../../../runtime/src/protocol/messages.ts';
import type {
  AttachInvocationCommand,
  DecodedMessage,
  MessageMap,
  MessageTypeId,
  StartMessage,
} from '../../../runtime/src/protocol/messages.ts';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
// Plain Uint8Arrays, because decoding an encoder's output yields views of a Uint8Array (toEqual tells them from Buffers).
const bytes = (h: string): Uint8Array => new Uint8Array(Buffer.from(h, 'hex'));
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

function roundTrip<T extends MessageTypeId>(type: T, message: MessageMap[T]): DecodedMessage {
  return decodeMessage(type, encodeMessage(type, message));
}

const start: StartMessage = {
  id: bytes('7407d8358fcbb7c71aca47e2270ef5437d87af37362ded4d'),
  debugId: 'inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo',
  knownEntries: 3,
  stateMap: [{ key: utf8('k'), value: utf8('') }],
  partialState: false,
  key: 'obj',
  retryCountSinceLastStoredEntry: 2,
  durationSinceLastStoredEntry: 1234n,
  randomSeed: 18446744073709551615n,
  scope: '',
  limitKey: 'lk',
  idempotencyKey: 'ik',
};

describe('message codec', () => {
  it('round-trips Start including u64 extremes and V7 optionals', () => {
    expect(decodeStart(encodeStart(start))).toEqual(start);
  });

  it('drops fields the target protocol version cannot carry from Start', () => {
    const v5 = decodeStart(encodeStart(start, 5));
    expect(v5.randomSeed).toBe(0n);
    expect(v5.scope).toBeUndefined();
    const v6 = decodeStart(encodeStart(start, 6));
    expect(v6.randomSeed).toBe(start.randomSeed);
    expect(v6.limitKey).toBeUndefined();
    expect(decodeStart(encodeStart(start, 7))).toEqual(start);
    expect(hex(encodeMessage(MessageType.Start, start, 6))).toBe(hex(encodeStart(start, 6)));
  });

  it('writes optional and oneof fields even when empty or zero, and omits plain defaults', () => {
    expect(hex(encodeInputCommand({ headers: [], value: new Uint8Array(0), name: '' }))).toBe('7200');
    expect(hex(encodeNotification({ id: { kind: 'completion', id: 2 }, result: { kind: 'void' } }))).toBe('08022200');
    expect(
      hex(encodeNotification({ id: { kind: 'completion', id: 0 }, result: { kind: 'value', value: utf8('') } })),
    ).toBe('08002a00');
    expect(
      hex(
        encodeError({
          code: 500,
          message: '',
          stacktrace: '',
          relatedCommandIndex: 0,
          nextRetryDelay: 0n,
          behavior: 0,
        }),
      ),
    ).toBe('08f40320004000');
    expect(hex(encodeRunCommand({ resultCompletionId: 0, name: '' }))).toBe('');
    expect(hex(encodeEnd())).toBe('');
    expect(hex(encodeGetEagerStateKeysCommand({ keys: [], name: '' }))).toBe('7200');
  });

  it('encodes `name` (field 12) before oneof members with higher numbers, like prost', () => {
    const output = encodeMessage(MessageType.OutputCommand, {
      result: { kind: 'value', value: utf8('x') },
      name: 'n',
    });
    expect(hex(output)).toBe('62016e' + '7203' + '0a0178');
    const attach: AttachInvocationCommand = {
      target: { kind: 'workflow', workflowName: 'W', workflowKey: 'k' },
      resultCompletionId: 1,
      name: 'a',
    };
    expect(hex(encodeAttachInvocationCommand(attach))).toBe('2206' + '0a0157' + '12016b' + '5801' + '620161');
  });

  it('round-trips the message shapes the captures do not cover', () => {
    const failure = { code: 409, message: 'conflict', metadata: [{ key: 'a', value: 'b' }] };
    const messages: { [K in MessageTypeId]?: MessageMap[K] } = {
      [MessageType.OutputCommand]: { result: { kind: 'failure', failure }, name: '' },
      [MessageType.GetLazyStateCommand]: { key: utf8('k'), resultCompletionId: 1, name: 'g' },
      [MessageType.ClearStateCommand]: { key: utf8('k'), name: '' },
      [MessageType.ClearAllStateCommand]: { name: 'c' },
      [MessageType.GetLazyStateKeysCommand]: { resultCompletionId: 3, name: '' },
      [MessageType.GetEagerStateCommand]: { key: utf8('k'), result: { kind: 'value', value: utf8('1') }, name: '' },
      [MessageType.GetEagerStateKeysCommand]: { keys: [utf8('a'), utf8('b')], name: '' },
      [MessageType.PeekPromiseCommand]: { key: 'p', resultCompletionId: 1, name: '' },
      [MessageType.CompletePromiseCommand]: {
        key: 'p',
        completion: { kind: 'failure', failure },
        resultCompletionId: 2,
        name: '',
      },
      [MessageType.OneWayCallCommand]: {
        serviceName: 'S',
        handlerName: 'h',
        parameter: utf8('{}'),
        invokeTime: 1795294410441n,
        headers: [{ key: 'x', value: 'y' }],
        key: '',
        idempotencyKey: '',
        scope: 's',
        limitKey: 'l',
        invocationIdNotificationIdx: 1,
        name: 'send',
      },
      [MessageType.SendSignalCommand]: {
        targetInvocationId: 'inv_1',
        signalId: { kind: 'signal', idx: 17 },
        result: { kind: 'failure', failure },
        name: 'sig',
      },
      [MessageType.GetInvocationOutputCommand]: {
        target: {
          kind: 'idempotentRequest',
          serviceName: 'S',
          serviceKey: '',
          handlerName: 'h',
          idempotencyKey: 'i',
          scope: 'sc',
        },
        resultCompletionId: 1,
        name: '',
      },
      [MessageType.CompleteAwakeableCommand]: {
        awakeableId: 'sign_1abc',
        result: { kind: 'value', value: utf8('') },
        name: '',
      },
      [MessageType.CommandAck]: { commandIndex: 4 },
      [MessageType.AwaitingOn]: {
        awaitingOn: {
          waitingCompletions: [],
          waitingSignals: [1],
          waitingNamedSignals: ['go'],
          nestedFutures: [],
          combinatorType: CombinatorType.AllCompleted,
        },
        executingSideEffects: true,
      },
      [MessageType.Error]: {
        code: 571,
        message: 'm',
        stacktrace: 's',
        relatedCommandName: '',
        relatedCommandType: MessageType.SleepCommand,
        behavior: ErrorBehavior.Fail,
      },
      [MessageType.GetInvocationOutputCompletionNotification]: {
        id: { kind: 'completion', id: 9 },
        result: { kind: 'stateKeys', keys: [] },
      },
    };
    const entries = Object.entries(messages);
    expect(entries.length).toBe(17);
    for (const [type, message] of entries) {
      const decoded = roundTrip(Number(type) as MessageTypeId, message as never);
      expect(decoded.message, messageTypeName(Number(type))).toEqual(message);
    }
  });

  it('encodes large values with the right length prefixes', () => {
    const big = Buffer.alloc(100_000, 0x61);
    const set = encodeSetStateCommand({ key: utf8('k'), value: big, name: '' });
    expect(Buffer.from(decodeSetStateCommand(set).value).equals(big)).toBe(true);
    const call = decodeCallCommand(
      encodeCallCommand({
        serviceName: 'S'.repeat(200),
        handlerName: 'h',
        parameter: big,
        headers: [{ key: 'k'.repeat(300), value: 'v' }],
        key: 'ü'.repeat(100),
        invocationIdNotificationIdx: 1,
        resultCompletionId: 2,
        name: '',
      }),
    );
    expect(call.serviceName.length).toBe(200);
    expect(call.headers[0]?.key.length).toBe(300);
    expect(call.key).toBe('ü'.repeat(100));
    expect(Buffer.from(call.parameter).equals(big)).toBe(true);
  });

  it('skips unknown fields of every wire type', () => {
    const run = encodeRunCommand({ resultCompletionId: 7, name: 'r' });
    // field 99 varint, field 50 length-delimited, field 51 fixed64, field 52 fixed32
    const unknown = Buffer.from(bytes('98063f' + '92030300ff00' + '9903' + '0102030405060708' + 'a503' + '01020304'));
    expect(decodeRunCommand(Buffer.concat([unknown, run, unknown]))).toEqual({ resultCompletionId: 7, name: 'r' });
    const notification = Buffer.concat([Buffer.from('0801', 'hex'), unknown, Buffer.from('2200', 'hex')]);
    expect(decodeNotification(notification)).toEqual({ id: { kind: 'completion', id: 1 }, result: { kind: 'void' } });
  });

  it('accepts unpacked repeated u32 in Suspension', () => {
    expect(decodeSuspension(bytes('08030801100112020211'))).toEqual({
      waitingCompletions: [3, 1],
      waitingSignals: [1, 2, 17],
      waitingNamedSignals: [],
    });
  });

  it('rejects unknown message types with ProtocolViolationError', () => {
    for (const type of [0x0008, 0x040f, 0x8000, 0x8003, 0xfc00, 0xffff]) {
      expect(() => decodeMessage(type, new Uint8Array(0))).toThrow(ProtocolViolationError);
    }
    expect(() => decodeMessage(0x040f, new Uint8Array(0))).toThrow(/unknown message type 0x040f/);
  });

  it('rejects malformed payloads with ProtocolViolationError', () => {
    const cases: [number, string][] = [
      [MessageType.RunCommand, '58'], // varint cut short
      [MessageType.RunCommand, '620561'], // string longer than the payload
      [MessageType.OutputCommand, '7205' + '0a0378'], // nested message longer than its content
      [MessageType.RunCommand, '5a01'], // field 11 with the wrong wire type
      [MessageType.OutputCommand, ''], // no result
      [MessageType.SleepCompletionNotification, '0801'], // no result
      [MessageType.SleepCompletionNotification, '2200'], // no id
      [MessageType.ProposeRunCompletion, '0801'], // no result
      [MessageType.RunCommand, '00'], // field number 0
      [MessageType.RunCommand, '5f'], // wire type 7
    ];
    for (const [type, payload] of cases) {
      expect(() => decodeMessage(type, bytes(payload)), payload).toThrow(ProtocolViolationError);
    }
    expect(() => decodeMessage(MessageType.OutputCommand, new Uint8Array(0))).toThrow(
      'malformed Command: Output message: missing result (value or failure)',
    );
  });

  it('encodeMessageFrame equals encodeFrame over encodeMessage', () => {
    const message = { resultCompletionId: 1, result: { kind: 'value', value: utf8('"Hello Alice"') } } as const;
    const frame = encodeMessageFrame(MessageType.ProposeRunCompletion, message, 0x8000);
    expect(frame.toString('hex')).toBe('0005800000000011' + '0801720d2248656c6c6f20416c69636522');
    expect(
      frame.equals(
        encodeFrame(MessageType.ProposeRunCompletion, encodeMessage(MessageType.ProposeRunCompletion, message), 0x8000),
      ),
    ).toBe(true);
    const big = encodeMessageFrame(MessageType.OutputCommand, {
      result: { kind: 'value', value: Buffer.alloc(300_000, 1) },
      name: '',
    });
    expect(big.readUInt32BE(4)).toBe(big.length - 8);
  });

  it('keeps encoding correctly after an encoder error', () => {
    expect(() => encodeRunCommand({ resultCompletionId: -1, name: '' })).toThrow();
    expect(() => encodeOneWayCallCommand({ invokeTime: -1n } as never)).toThrow();
    expect(hex(encodeRunCommand({ resultCompletionId: 1, name: '' }))).toBe('5801');
  });
});

describe('message types', () => {
  it('classifies type ids by range', () => {
    expect(isControl(MessageType.Start)).toBe(true);
    expect(isCommand(MessageType.InputCommand)).toBe(true);
    expect(isCommand(MessageType.CompleteAwakeableCommand)).toBe(true);
    expect(isCommand(MessageType.RunCompletionNotification)).toBe(false);
    expect(isNotification(MessageType.GetLazyStateCompletionNotification)).toBe(true);
    expect(isNotification(MessageType.SignalNotification)).toBe(true);
    expect(isNotification(0xfc00)).toBe(false);
    expect(isCustomEntry(0xfc00)).toBe(true);
    expect(isKnownMessageType(0x040f)).toBe(false);
    expect(isKnownMessageType(MessageType.GetInvocationOutputCommand)).toBe(true);
  });

  it('names types the way restate introspection does', () => {
    expect(messageTypeName(MessageType.InputCommand)).toBe('Command: Input');
    expect(messageTypeName(MessageType.RunCommand)).toBe('Command: Run');
    expect(messageTypeName(MessageType.RunCompletionNotification)).toBe('Notification: Run');
    expect(messageTypeName(MessageType.SleepCompletionNotification)).toBe('Notification: Sleep');
    expect(messageTypeName(MessageType.SignalNotification)).toBe('Notification: Signal');
    expect(messageTypeName(MessageType.ProposeRunCompletion)).toBe('ProposeRunCompletion');
    expect(messageTypeName(0x1234)).toBe('Unknown(0x1234)');
    expect(messageTypeKey(0x800e)).toBe('CallInvocationIdCompletionNotification');
    expect(Object.keys(MessageType).length).toBe(40);
    for (const type of Object.values(MessageType)) expect(messageTypeName(type)).not.toMatch(/^Unknown/);
  });

  it('maps commands to the notification that completes them', () => {
    expect(notificationTypeFor(MessageType.SleepCommand)).toBe(MessageType.SleepCompletionNotification);
    expect(notificationTypeFor(MessageType.CallCommand)).toBe(MessageType.CallCompletionNotification);
    expect(notificationTypeFor(MessageType.OneWayCallCommand)).toBe(MessageType.CallInvocationIdCompletionNotification);
    expect(notificationTypeFor(MessageType.RunCommand)).toBe(0x8011);
    expect(notificationTypeFor(MessageType.GetInvocationOutputCommand)).toBe(0x8013);
    expect(notificationTypeFor(MessageType.SetStateCommand)).toBeUndefined();
    expect(notificationTypeFor(MessageType.GetEagerStateCommand)).toBeUndefined();
    // Completion notifications are 0x8000 | the command's low byte.
    for (const command of Object.values(MessageType)) {
      const notification = notificationTypeFor(command);
      if (notification !== undefined && command !== MessageType.OneWayCallCommand) {
        expect(notification).toBe(0x8000 | (command & 0xff));
      }
    }
  });
});
