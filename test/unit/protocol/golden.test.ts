import { describe, expect, it } from 'vitest';
import { FrameDecoder, encodeFrame, hasRequestedAck } from '../../../runtime/src/protocol/framing.ts';
import type { Frame } from '../../../runtime/src/protocol/framing.ts';
import {
  MessageType,
  decodeMessage,
  encodeMessage,
  encodeMessageFrame,
  messageTypeKey,
} from '../../../runtime/src/protocol/messages.ts';
import type { DecodedMessage } from '../../../runtime/src/protocol/messages.ts';
import { hex, loadGoldenExchanges, normalizeGoldenBody, toGoldenBody } from './golden-support.ts';
import type { GoldenExchange, GoldenFrame } from './golden-support.ts';

const exchanges = loadGoldenExchanges();
const allFrames = exchanges.flatMap((e) => e.frames.map((frame) => ({ exchange: e, frame })));

function exchange(id: string): GoldenExchange {
  const found = exchanges.find((e) => e.id === id);
  if (found === undefined) throw new Error(`golden exchange ${id} not found`);
  return found;
}

function decodeGolden(frame: GoldenFrame): DecodedMessage {
  return decodeMessage(Number.parseInt(frame.type, 16), Buffer.from(frame.payloadHex, 'hex'));
}

/** The golden frames of one exchange, decoded, in stream order. */
function decodedFrames(id: string, dir: GoldenFrame['dir']): DecodedMessage[] {
  return exchange(id)
    .frames.filter((f) => f.dir === dir)
    .map(decodeGolden);
}

type MessageOf<T extends DecodedMessage['type']> = Extract<DecodedMessage, { type: T }>['message'];

function only<T extends DecodedMessage['type']>(messages: DecodedMessage[], type: T): MessageOf<T>[] {
  return messages.filter((m) => m.type === type).map((m) => m.message as MessageOf<T>);
}

function first<T>(items: T[]): T {
  expect(items.length).toBeGreaterThan(0);
  return items[0]!;
}

/** Decoded bytes are views of the (Buffer) payload, so expectations are Buffers too. */
const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

describe('golden captures', () => {
  it('are all present', () => {
    expect(exchanges.length).toBeGreaterThanOrEqual(190);
    expect(allFrames.length).toBeGreaterThan(1000);
    const dirs = new Set(exchanges.map((e) => e.id.split('/')[0]));
    expect([...dirs].sort()).toEqual(['h1-v6', 'h1-v7', 'h2-v6', 'h2-v7', 'sdk-probes']);
  });

  it('every frame header decodes to the recorded type, flags and length', () => {
    let checked = 0;
    for (const { frame } of allFrames) {
      const header = Buffer.from(frame.headerHex, 'hex');
      expect(header.length).toBe(8);
      expect(header.readUInt16BE(0)).toBe(Number.parseInt(frame.type, 16));
      expect(header.readUInt16BE(2)).toBe(Number.parseInt(frame.flags, 16));
      expect(header.readUInt32BE(4)).toBe(frame.length);
      expect(frame.payloadHex.length / 2).toBe(frame.length);
      checked++;
    }
    expect(checked).toBeGreaterThan(1000);
  });

  it('every payload decodes, matches the recorded body and re-encodes byte-identically', () => {
    let checked = 0;
    const seenTypes = new Set<number>();
    for (const { exchange: e, frame } of allFrames) {
      const where = `${e.id} ${frame.name} ${frame.payloadHex.slice(0, 40)}`;
      const decoded = decodeGolden(frame);
      expect(messageTypeKey(decoded.type), where).toBe(frame.name);
      expect(toGoldenBody(decoded), where).toEqual(normalizeGoldenBody(frame.body));
      expect(hex(encodeMessage(decoded.type, decoded.message)), where).toBe(frame.payloadHex);
      const flags = Number.parseInt(frame.flags, 16);
      expect(encodeMessageFrame(decoded.type, decoded.message, flags).toString('hex'), where).toBe(
        frame.headerHex + frame.payloadHex,
      );
      seenTypes.add(decoded.type);
      checked++;
    }
    expect(checked).toBe(allFrames.length);
    expect(checked).toBeGreaterThan(1000);
    // Every message type that occurs in the captures: a codec regression in any of them shows up here.
    expect(seenTypes.size).toBe(35);
  });

  it('Start carries ids, seeds, durations and eager state as restate sends them', () => {
    const start = first(only(decodedFrames('h2-v7/002-invoke_Greeter_greet', 'runtime->sdk'), MessageType.Start));
    expect(hex(start.id)).toBe('1f4d8c320d5cfea9f5768d5e6f598f7ab0c9060b0826973d');
    expect(start.debugId).toBe('inv_1eAS3AChqzzp1SdBDqy21USUCNH02beQ2F');
    expect(start.knownEntries).toBe(1);
    expect(start.partialState).toBe(true);
    expect(start.durationSinceLastStoredEntry).toBe(5n);
    expect(start.randomSeed).toBe(16099688528475685089n);
    expect(start.key).toBe('');
    expect(start.scope).toBeUndefined();

    const keyed = first(only(decodedFrames('h1-v6/007-invoke_Counter_get', 'runtime->sdk'), MessageType.Start));
    expect(keyed.key).toBe('Alice');
    expect(keyed.partialState).toBe(false);
    expect(keyed.stateMap).toEqual([{ key: utf8('count'), value: utf8('1') }]);

    const retried = first(only(decodedFrames('h1-v6/014-invoke_Greeter_flaky', 'runtime->sdk'), MessageType.Start));
    expect(retried.retryCountSinceLastStoredEntry).toBe(1);
    expect(retried.durationSinceLastStoredEntry).toBe(558n);
  });

  it('Run, ProposeRunCompletion (with REQUESTED_ACK), the ack and Sleep decode as in h2-v7/002', () => {
    const e = exchange('h2-v7/002-invoke_Greeter_greet');
    const sdk = decodedFrames(e.id, 'sdk->runtime');
    expect(first(only(sdk, MessageType.RunCommand))).toEqual({ resultCompletionId: 1, name: 'make-greeting' });

    const proposalFrame = e.frames.find((f) => f.name === 'ProposeRunCompletion')!;
    expect(hasRequestedAck(Number.parseInt(proposalFrame.flags, 16))).toBe(true);
    expect(first(only(sdk, MessageType.ProposeRunCompletion))).toEqual({
      resultCompletionId: 1,
      result: { kind: 'value', value: utf8('"Hello Alice"') },
    });

    const sleep = first(only(sdk, MessageType.SleepCommand));
    expect(sleep).toEqual({ wakeUpTime: 1795294342591n, resultCompletionId: 2, name: '' });

    const runtime = decodedFrames(e.id, 'runtime->sdk');
    expect(first(only(runtime, MessageType.ProposeRunCompletionAck))).toEqual({ completionId: 1 });
    expect(first(only(runtime, MessageType.SleepCompletionNotification))).toEqual({
      id: { kind: 'completion', id: 2 },
      result: { kind: 'void' },
    });
  });

  it('Call and its two notifications, Output and End', () => {
    const id = 'h2-v7/002-invoke_Greeter_greet';
    const sdk = decodedFrames(id, 'sdk->runtime');
    expect(first(only(sdk, MessageType.CallCommand))).toEqual({
      serviceName: 'Counter',
      handlerName: 'add',
      parameter: utf8('1'),
      headers: [],
      key: 'Alice',
      invocationIdNotificationIdx: 3,
      resultCompletionId: 4,
      name: '',
    });
    expect(first(only(sdk, MessageType.OutputCommand))).toEqual({
      result: { kind: 'value', value: utf8('"Hello Alice #1"') },
      name: '',
    });
    expect(sdk.at(-1)?.type).toBe(MessageType.End);

    const runtime = decodedFrames(id, 'runtime->sdk');
    expect(first(only(runtime, MessageType.CallInvocationIdCompletionNotification))).toEqual({
      id: { kind: 'completion', id: 3 },
      result: { kind: 'invocationId', invocationId: 'inv_153bdYzRwMYL2kKKV9YzRdNcVSP7QvTH1v' },
    });
    expect(first(only(runtime, MessageType.CallCompletionNotification))).toEqual({
      id: { kind: 'completion', id: 4 },
      result: { kind: 'value', value: utf8('1') },
    });

    const idempotent = first(
      only(decodedFrames('h1-v6/026-invoke_Probes_idempotentCall', 'sdk->runtime'), MessageType.CallCommand),
    );
    expect(idempotent.headers).toEqual([{ key: 'x-custom', value: '1' }]);
    expect(idempotent.idempotencyKey).toBe('idem-1');

    const scoped = first(only(decodedFrames('sdk-probes/031-scoped-call', 'sdk->runtime'), MessageType.CallCommand));
    expect(scoped.scope).toBe('tenant-a');
    expect(scoped.limitKey).toBeUndefined();
  });

  it('terminal failures in Output, run proposals and notifications keep code, message and metadata', () => {
    const output = first(
      only(decodedFrames('h1-v6/012-invoke_Greeter_fail', 'sdk->runtime'), MessageType.OutputCommand),
    );
    expect(output.result).toEqual({ kind: 'failure', failure: { code: 418, message: 'boom', metadata: [] } });

    const proposal = first(
      only(decodedFrames('h1-v6/030-invoke_Probes_runTerminal', 'sdk->runtime'), MessageType.ProposeRunCompletion),
    );
    expect(proposal.result).toEqual({
      kind: 'failure',
      failure: { code: 422, message: 'nope', metadata: [{ key: 'why', value: 'bad' }] },
    });

    const completion = first(
      only(decodedFrames('h1-v6/031-invoke_Probes_runTerminal', 'runtime->sdk'), MessageType.RunCompletionNotification),
    );
    expect(completion.result).toEqual(proposal.result);
  });

  it('Error carries related command, retry delay and behaviour', () => {
    const mismatch = first(
      only(decodedFrames('sdk-probes/008-journal-mismatch-570', 'sdk->runtime'), MessageType.Error),
    );
    expect(mismatch.code).toBe(570);
    expect(mismatch.relatedCommandIndex).toBe(1);
    expect(mismatch.relatedCommandName).toBe('make-greeting');
    expect(mismatch.relatedCommandType).toBe(MessageType.RunCommand);
    expect(mismatch.nextRetryDelay).toBeUndefined();
    expect(mismatch.behavior).toBe(0);

    const retryAfter = first(only(decodedFrames('sdk-probes/027-run-retry-after', 'sdk->runtime'), MessageType.Error));
    expect(retryAfter.nextRetryDelay).toBe(7000n);
    expect(retryAfter.stacktrace.startsWith('RetryableError: slow down')).toBe(true);

    const pause = first(only(decodedFrames('sdk-probes/028-run-pause', 'sdk->runtime'), MessageType.Error));
    expect(pause.behavior).toBe(1);

    const zero = first(only(decodedFrames('sdk-probes/006-known-entries-zero', 'sdk->runtime'), MessageType.Error));
    expect(zero).toEqual({ code: 500, message: 'Known entries is zero, expected >= 1', stacktrace: '', behavior: 0 });
  });

  it('Suspension is a flat list on V6 and a future tree on V7', () => {
    const v6 = first(
      only(decodedFrames('sdk-probes/022-combinators-future-tree-v6', 'sdk->runtime'), MessageType.Suspension),
    );
    expect(v6.awaitingOn).toBeUndefined();
    expect(v6.waitingCompletions).toEqual([2, 1]);
    expect(v6.waitingSignals).toEqual([1, 17]);

    const named = first(
      only(decodedFrames('h1-v6/037-invoke_Probes_namedSignal', 'sdk->runtime'), MessageType.Suspension),
    );
    expect(named.waitingNamedSignals).toEqual(['go']);

    const v7 = first(
      only(decodedFrames('sdk-probes/021-combinators-future-tree', 'sdk->runtime'), MessageType.Suspension),
    );
    expect(v7.waitingCompletions).toEqual([]);
    expect(v7.awaitingOn).toEqual({
      waitingCompletions: [],
      waitingSignals: [1],
      waitingNamedSignals: [],
      combinatorType: 1,
      nestedFutures: [
        {
          waitingCompletions: [2],
          waitingSignals: [],
          waitingNamedSignals: [],
          combinatorType: 4,
          nestedFutures: [
            {
              waitingCompletions: [1],
              waitingSignals: [17],
              waitingNamedSignals: [],
              nestedFutures: [],
              combinatorType: 1,
            },
          ],
        },
      ],
    });
  });

  it('signal notifications, SendSignal, awakeables, lazy state and promises', () => {
    const waiter = decodedFrames('h1-v6/039-invoke_Probes_namedSignal', 'runtime->sdk');
    expect(only(waiter, MessageType.SignalNotification)).toEqual([
      { id: { kind: 'signalName', name: 'go' }, result: { kind: 'value', value: utf8('"v"') } },
      { id: { kind: 'signal', idx: 1 }, result: { kind: 'void' } },
    ]);

    const sender = only(
      decodedFrames('h1-v6/038-invoke_Probes_signalOthers', 'sdk->runtime'),
      MessageType.SendSignalCommand,
    );
    expect(sender.map((s) => [s.signalId, s.result.kind])).toEqual([
      [{ kind: 'signalName', name: 'go' }, 'value'],
      [{ kind: 'signal', idx: 1 }, 'void'],
    ]);

    const resolver = first(
      only(decodedFrames('h1-v6/010-invoke_Greeter_resolver', 'sdk->runtime'), MessageType.CompleteAwakeableCommand),
    );
    expect(resolver.awakeableId).toBe('sign_1EE913kiDMV8sq-6YpZIy9REehQN5zK-2AAAAEQ');

    const keys = first(
      only(
        decodedFrames('sdk-probes/013-lazy-state-keys', 'runtime->sdk'),
        MessageType.GetLazyStateKeysCompletionNotification,
      ),
    );
    expect(keys.result).toEqual({ kind: 'stateKeys', keys: [utf8('a'), utf8('b')] });

    const rejected = first(
      only(
        decodedFrames('sdk-probes/019-promise-rejected', 'runtime->sdk'),
        MessageType.GetPromiseCompletionNotification,
      ),
    );
    expect(rejected.result).toEqual({
      kind: 'failure',
      failure: { code: 409, message: 'rejected by admin', metadata: [] },
    });

    const eager = only(decodedFrames('h1-v6/005-invoke_Counter_add', 'sdk->runtime'), MessageType.GetEagerStateCommand);
    expect(first(eager).result).toEqual({ kind: 'void' });
  });
});

function collectFrames(
  chunks: Iterable<Buffer>,
  decoder = new FrameDecoder(),
): { frames: Frame[]; decoder: FrameDecoder } {
  const frames: Frame[] = [];
  for (const chunk of chunks) frames.push(...decoder.push(chunk));
  return { frames, decoder };
}

function expectFrames(actual: Frame[], expected: GoldenFrame[], where: string): void {
  expect(
    actual.map((f) => [f.type, f.flags, f.payload.toString('hex')]),
    where,
  ).toEqual(expected.map((f) => [Number.parseInt(f.type, 16), Number.parseInt(f.flags, 16), f.payloadHex]));
}

function* byteByByte(chunks: Buffer[]): Generator<Buffer> {
  for (const chunk of chunks) for (let i = 0; i < chunk.length; i++) yield chunk.subarray(i, i + 1);
}

/** Deterministic re-chunking so failures reproduce. */
function* randomChunks(data: Buffer, seed: number): Generator<Buffer> {
  let state = seed;
  let offset = 0;
  while (offset < data.length) {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    const size = 1 + (state % 40);
    yield data.subarray(offset, offset + size);
    offset += size;
  }
}

/** The frame streams of the captures: request and response bodies that are protocol frames, not JSON errors. */
const streams = exchanges.flatMap((e) =>
  (
    [
      ['req', 'runtime->sdk', e.requestBodyText],
      ['res', 'sdk->runtime', e.responseBodyText],
    ] as const
  )
    .filter(([, , text]) => text === undefined)
    .map(([side, dir]) => ({
      id: `${e.id} ${side}`,
      chunks: e.chunks[side],
      expected: e.frames.filter((f) => f.dir === dir),
    }))
    .filter((s) => s.chunks.length > 0),
);

describe('FrameDecoder on the captured streams', () => {
  it('yields exactly the decoded frames with the original chunking', () => {
    let frames = 0;
    let multiFrameChunks = 0;
    for (const stream of streams) {
      const decoder = new FrameDecoder();
      const got: Frame[] = [];
      for (const chunk of stream.chunks) {
        const out = decoder.push(chunk);
        if (out.length > 1) multiFrameChunks++;
        got.push(...out);
      }
      expectFrames(got, stream.expected, stream.id);
      expect(decoder.hasRemainder(), stream.id).toBe(false);
      frames += got.length;
    }
    expect(streams.length).toBeGreaterThan(350);
    expect(frames).toBe(allFrames.length);
    // Captured chunks pack several frames but never split one; splitting is covered by the re-chunking tests.
    expect(multiFrameChunks).toBeGreaterThan(50);
  });

  it('yields the same frames from one concatenated chunk and from random re-chunking', () => {
    let checked = 0;
    for (const [i, stream] of streams.entries()) {
      const whole = Buffer.concat(stream.chunks);
      expectFrames(collectFrames([whole]).frames, stream.expected, stream.id);
      const { frames, decoder } = collectFrames(randomChunks(whole, i + 1));
      expectFrames(frames, stream.expected, `${stream.id} (random chunks)`);
      expect(decoder.hasRemainder()).toBe(false);
      checked++;
    }
    expect(checked).toBe(streams.length);
  });

  it('yields the same frames when fed byte by byte', () => {
    const ids = [
      'h2-v7/002-invoke_Greeter_greet res',
      'h2-v7/002-invoke_Greeter_greet req',
      'h1-v7/006-invoke_Greeter_greet req',
      'sdk-probes/021-combinators-future-tree res',
      'h2-v6/009-invoke_Greeter_flaky res',
    ];
    for (const id of ids) {
      const stream = streams.find((s) => s.id === id);
      expect(stream, id).toBeDefined();
      const { frames, decoder } = collectFrames(byteByByte(stream!.chunks));
      expect(frames.length, id).toBeGreaterThan(0);
      expectFrames(frames, stream!.expected, id);
      expect(decoder.hasRemainder()).toBe(false);
    }
  });

  it('reports a truncated stream through hasRemainder', () => {
    const stream = streams.find((s) => s.id === 'h2-v7/002-invoke_Greeter_greet res')!;
    const whole = Buffer.concat(stream.chunks);
    for (const cut of [1, 7, 9]) {
      const { frames, decoder } = collectFrames(randomChunks(whole.subarray(0, whole.length - cut), 7));
      expect(decoder.hasRemainder(), `cut ${cut}`).toBe(true);
      // End is an empty frame, so cutting 1–7 bytes loses only it; 9 also cuts into the Output before it.
      expect(frames.length).toBe(stream.expected.length - (cut > 8 ? 2 : 1));
    }
  });

  it('frames re-encode to the captured bytes', () => {
    const stream = streams.find((s) => s.id === 'h2-v7/002-invoke_Greeter_greet res')!;
    const { frames } = collectFrames(stream.chunks);
    expect(Buffer.concat(frames.map((f) => encodeFrame(f.type, f.payload, f.flags))).toString('hex')).toBe(
      Buffer.concat(stream.chunks).toString('hex'),
    );
  });
});
