import type { Frame } from '../../../runtime/src/protocol/framing.ts';
import {
  ErrorBehavior,
  MessageType,
  decodeMessage,
  decodeNotification,
  encodeMessage,
  type NotificationMessage,
  type NotificationResult,
} from '../../../runtime/src/protocol/messages.ts';

/**
 * What a deployment would send, as frames the engine reads from an attempt's effects: payloads encoded by the
 * protocol codec, exactly as the invoker hands them over (`{ type, flags: 0, payload }`).
 */

const bytes = (v: string | Uint8Array): Buffer => (typeof v === 'string' ? Buffer.from(v) : Buffer.from(v));

function frame(type: number, payload: Uint8Array): Frame {
  return { type, flags: 0, payload: Buffer.from(payload) };
}

export const commands = {
  output: (value: string | Uint8Array): Frame =>
    frame(
      MessageType.OutputCommand,
      encodeMessage(MessageType.OutputCommand, { result: { kind: 'value', value: bytes(value) }, name: '' }),
    ),
  outputFailure: (code: number, message: string): Frame =>
    frame(
      MessageType.OutputCommand,
      encodeMessage(MessageType.OutputCommand, {
        result: { kind: 'failure', failure: { code, message, metadata: [] } },
        name: '',
      }),
    ),
  /** `wakeUpAt`: Unix epoch milliseconds. */
  sleep: (completionId: number, wakeUpAt: number): Frame =>
    frame(
      MessageType.SleepCommand,
      encodeMessage(MessageType.SleepCommand, {
        wakeUpTime: BigInt(wakeUpAt),
        resultCompletionId: completionId,
        name: '',
      }),
    ),
  setState: (key: string, value: string): Frame =>
    frame(
      MessageType.SetStateCommand,
      encodeMessage(MessageType.SetStateCommand, { key: bytes(key), value: bytes(value), name: '' }),
    ),
  call: (c: {
    service: string;
    handler: string;
    key?: string;
    parameter?: string;
    idempotencyKey?: string;
    invocationIdCompletionId: number;
    resultCompletionId: number;
  }): Frame =>
    frame(
      MessageType.CallCommand,
      encodeMessage(MessageType.CallCommand, {
        serviceName: c.service,
        handlerName: c.handler,
        parameter: bytes(c.parameter ?? ''),
        headers: [],
        key: c.key ?? '',
        ...(c.idempotencyKey === undefined ? {} : { idempotencyKey: c.idempotencyKey }),
        invocationIdNotificationIdx: c.invocationIdCompletionId,
        resultCompletionId: c.resultCompletionId,
        name: '',
      }),
    ),
};

export const control = {
  /** V5/V6 suspension: resume when any of these completions (or signals) is there. */
  suspension: (completions: number[], signals: number[] = []): Frame =>
    frame(
      MessageType.Suspension,
      encodeMessage(MessageType.Suspension, {
        waitingCompletions: completions,
        waitingSignals: signals,
        waitingNamedSignals: [],
      }),
    ),
  error: (code: number, message: string, behavior: 'retry' | 'pause' | 'fail' = 'retry', stacktrace = ''): Frame =>
    frame(
      MessageType.Error,
      encodeMessage(MessageType.Error, {
        code,
        message,
        stacktrace,
        behavior:
          behavior === 'pause' ? ErrorBehavior.Pause : behavior === 'fail' ? ErrorBehavior.Fail : ErrorBehavior.Retry,
      }),
    ),
};

/** The body of an invocation's Input command (journal entry 0). */
export function inputBody(raw: Uint8Array): string {
  const decoded = decodeMessage(MessageType.InputCommand, raw);
  if (decoded.type !== MessageType.InputCommand) throw new Error('not an Input command');
  return Buffer.from(decoded.message.value).toString();
}

export function notification(raw: Uint8Array): NotificationMessage {
  return decodeNotification(raw);
}

/** A notification's result in a form tests compare: values as strings. */
export function resultOf(raw: Uint8Array): NotificationResult | { kind: 'value'; value: string } {
  const r = decodeNotification(raw).result;
  return r.kind === 'value' ? { kind: 'value', value: Buffer.from(r.value).toString() } : r;
}
