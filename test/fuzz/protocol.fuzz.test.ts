import http2 from 'node:http2';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../runtime/src/config/config.ts';
import * as codec from '../../runtime/src/engine/codec.ts';
import { RatchetError } from '../../runtime/src/errors/errors.ts';
import { MessageTooLargeError, ProtocolViolationError } from '../../runtime/src/protocol/errors.ts';
import { FrameDecoder, encodeFrame, type Frame } from '../../runtime/src/protocol/framing.ts';
import { isCommand } from '../../runtime/src/protocol/message-types.ts';
import { MessageType, decodeMessage, encodeMessage, type MessageTypeId } from '../../runtime/src/protocol/messages.ts';
import { MalformedError } from '../../runtime/src/protocol/wire.ts';
import { createNode, type RuntimeHandle } from '../../runtime/src/runtime.ts';
import { parseManifest } from '../../runtime/src/schema/manifest.ts';
import { createLogger } from '../../runtime/src/telemetry/logger.ts';
import { LOOPBACK } from '../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { registerDeployment } from '../support/registration.ts';
import { anyJson, chunked, mutatedBytes, nastyString, sometimes } from './support/arbitraries.ts';
import { FUZZ_SERVICES, startFuzzEngine, type DeploymentAnswer, type FuzzEngine } from './support/engine.ts';
import {
  PARSER_TIMEOUT,
  describeError,
  expectOwnError,
  fuzz,
  fuzzAsync,
  timeoutFor,
  watchProcessErrors,
} from './support/fuzz.ts';
import { invocationId } from './support/ids.ts';

/**
 * What a deployment sends the runtime: service-protocol frames (framing, every message type's payload, the engine's
 * reading of them) and the discovery manifest. Bad bytes are the protocol's error: the decoders throw only their own
 * errors (ProtocolViolationError, MessageTooLargeError; RatchetErrors for a manifest), and a whole attempt fed
 * through the real invoker ends the attempt with an RT code and a message while the engine carries on (no engine
 * failure, no error logged, the invocation retried, paused, suspended or completed): in memory, and on a runtime node
 * over HTTP/2 and PostgreSQL, where nothing a deployment sends may fail a write (that would recover the partition).
 */

const SURFACE = 'protocol';
const processErrors = watchProcessErrors();

// ---- typed messages, as an SDK would send them ---------------------------------------------------------------------

const bytes = fc.uint8Array({ maxLength: 16 });
const text = fc.oneof(fc.string({ maxLength: 12 }), nastyString(12));
const u32 = fc.oneof(fc.integer({ min: 0, max: 6 }), fc.constantFrom(0xffffffff, 0x7fffffff), fc.nat());
const completionId = fc.integer({ min: 0, max: 6 });
const failure = fc.record({
  code: fc.oneof(fc.constantFrom(500, 409, 570, 571, 0, 200, 999), u32),
  message: text,
  metadata: fc.array(fc.record({ key: text, value: text }), { maxLength: 2 }),
});
const valueOrFailure = fc.oneof(
  bytes.map((value) => ({ kind: 'value' as const, value })),
  failure.map((f) => ({ kind: 'failure' as const, failure: f })),
);
const serviceName = fc.oneof(fc.constantFrom(...Object.keys(FUZZ_SERVICES), 'Unknown', ''), text);
const handlerName = fc.oneof(fc.constantFrom('greet', 'add', 'get', 'run', 'status', 'x', ''), text);
const time = fc.oneof(
  fc.constant(0n),
  fc.integer({ min: -1000, max: 1000 }).map((d) => BigInt(Date.now() + d)),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
);
const header = fc.record({ key: text, value: text });
const target = fc.oneof(
  invocationId.map((id) => ({ kind: 'invocationId' as const, invocationId: id })),
  fc
    .record({ serviceName, handlerName, idempotencyKey: text, serviceKey: text })
    .map((t) => ({ kind: 'idempotentRequest' as const, ...t })),
  fc.record({ workflowName: serviceName, workflowKey: text }).map((t) => ({ kind: 'workflow' as const, ...t })),
);
const futureTree: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  future: fc.record({
    waitingCompletions: fc.array(completionId, { maxLength: 3 }),
    waitingSignals: fc.array(completionId, { maxLength: 2 }),
    waitingNamedSignals: fc.array(text, { maxLength: 2 }),
    nestedFutures: fc.oneof(
      { depthSize: 'small', maxDepth: 4 },
      fc.constant([]),
      fc.array(tie('future'), { maxLength: 2 }),
    ),
    combinatorType: fc.integer({ min: 0, max: 5 }),
  }),
})).future;

type Encoded = { type: number; payload: Uint8Array };

function typed<T extends MessageTypeId>(type: T, message: fc.Arbitrary<unknown>): fc.Arbitrary<Encoded> {
  return message.map((m) => ({ type, payload: encodeMessage(type, m as never) }));
}

const callFields = {
  serviceName,
  handlerName,
  parameter: bytes,
  headers: fc.array(header, { maxLength: 2 }),
  key: text,
  invocationIdNotificationIdx: completionId,
  name: text,
};

/** One message of every kind a deployment sends, with plausible and odd field values. */
const sdkMessage: fc.Arbitrary<Encoded> = fc.oneof(
  typed(MessageType.OutputCommand, fc.record({ result: valueOrFailure, name: text })),
  typed(MessageType.SetStateCommand, fc.record({ key: bytes, value: bytes, name: text })),
  typed(MessageType.ClearStateCommand, fc.record({ key: bytes, name: text })),
  typed(MessageType.ClearAllStateCommand, fc.record({ name: text })),
  typed(MessageType.GetLazyStateCommand, fc.record({ key: bytes, resultCompletionId: completionId, name: text })),
  typed(MessageType.GetLazyStateKeysCommand, fc.record({ resultCompletionId: completionId, name: text })),
  typed(MessageType.GetEagerStateCommand, fc.record({ key: bytes, result: fc.constant({ kind: 'void' }), name: text })),
  typed(MessageType.GetEagerStateKeysCommand, fc.record({ keys: fc.array(bytes, { maxLength: 3 }), name: text })),
  typed(MessageType.GetPromiseCommand, fc.record({ key: text, resultCompletionId: completionId, name: text })),
  typed(MessageType.PeekPromiseCommand, fc.record({ key: text, resultCompletionId: completionId, name: text })),
  typed(
    MessageType.CompletePromiseCommand,
    fc.record({ key: text, completion: valueOrFailure, resultCompletionId: completionId, name: text }),
  ),
  typed(MessageType.SleepCommand, fc.record({ wakeUpTime: time, resultCompletionId: completionId, name: text })),
  typed(MessageType.CallCommand, fc.record({ ...callFields, resultCompletionId: completionId })),
  typed(MessageType.OneWayCallCommand, fc.record({ ...callFields, invokeTime: time })),
  typed(
    MessageType.SendSignalCommand,
    fc.record({
      targetInvocationId: fc.oneof(invocationId, text),
      signalId: fc.oneof(
        completionId.map((idx) => ({ kind: 'signal' as const, idx })),
        text.map((name) => ({ kind: 'signalName' as const, name })),
      ),
      result: fc.oneof(fc.constant({ kind: 'void' as const }), valueOrFailure),
      name: text,
    }),
  ),
  typed(MessageType.RunCommand, fc.record({ resultCompletionId: completionId, name: text })),
  typed(MessageType.AttachInvocationCommand, fc.record({ target, resultCompletionId: completionId, name: text })),
  typed(MessageType.GetInvocationOutputCommand, fc.record({ target, resultCompletionId: completionId, name: text })),
  typed(
    MessageType.CompleteAwakeableCommand,
    fc.record({ awakeableId: fc.oneof(text, invocationId), result: valueOrFailure, name: text }),
  ),
  typed(MessageType.ProposeRunCompletion, fc.record({ resultCompletionId: completionId, result: valueOrFailure })),
  typed(MessageType.AwaitingOn, fc.record({ awaitingOn: futureTree, executingSideEffects: fc.boolean() })),
  typed(
    MessageType.Suspension,
    fc.record({
      waitingCompletions: fc.array(completionId, { maxLength: 3 }),
      waitingSignals: fc.array(completionId, { maxLength: 2 }),
      waitingNamedSignals: fc.array(text, { maxLength: 2 }),
    }),
  ),
  typed(
    MessageType.Error,
    fc.record(
      {
        code: fc.oneof(fc.constantFrom(500, 570, 571, 573), u32),
        message: text,
        stacktrace: text,
        relatedCommandIndex: u32,
        relatedCommandName: text,
        relatedCommandType: u32,
        nextRetryDelay: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        behavior: fc.integer({ min: 0, max: 3 }),
      },
      { requiredKeys: ['code', 'message', 'stacktrace', 'behavior'] },
    ),
  ),
  typed(MessageType.End, fc.constant({})),
  typed(MessageType.CommandAck, fc.record({ commandIndex: u32 })),
);

// ---- raw protobuf, for payloads no SDK would write -----------------------------------------------------------------

type PbField =
  | { no: number; kind: 'varint'; v: bigint }
  | { no: number; kind: 'len'; v: Uint8Array }
  | { no: number; kind: 'fixed32'; v: number }
  | { no: number; kind: 'fixed64'; v: bigint }
  | { no: number; kind: 'nested'; v: PbField[] };

const fieldNo = fc.oneof(fc.integer({ min: 1, max: 16 }), fc.constantFrom(536_870_911, 19_000, 100));
const pbMessage: fc.Arbitrary<PbField[]> = fc.letrec((tie) => ({
  msg: fc.array(tie('field') as fc.Arbitrary<PbField>, { maxLength: 6, depthIdentifier: 'pb' }),
  field: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    fc.record({ no: fieldNo, kind: fc.constant('varint' as const), v: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
    fc.record({ no: fieldNo, kind: fc.constant('len' as const), v: bytes }),
    fc.record({ no: fieldNo, kind: fc.constant('fixed32' as const), v: fc.nat() }),
    fc.record({ no: fieldNo, kind: fc.constant('fixed64' as const), v: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
    fc.record({ no: fieldNo, kind: fc.constant('nested' as const), v: tie('msg') as fc.Arbitrary<PbField[]> }),
  ),
})).msg;

function encodePb(fields: readonly PbField[]): Uint8Array {
  const w = new BinaryWriter();
  for (const f of fields) {
    switch (f.kind) {
      case 'varint':
        w.tag(f.no, WireType.Varint).uint64(f.v);
        break;
      case 'len':
        w.tag(f.no, WireType.LengthDelimited).bytes(f.v);
        break;
      case 'fixed32':
        w.tag(f.no, WireType.Bit32).fixed32(f.v);
        break;
      case 'fixed64':
        w.tag(f.no, WireType.Bit64).fixed64(f.v);
        break;
      case 'nested':
        w.tag(f.no, WireType.LengthDelimited).bytes(encodePb(f.v));
        break;
    }
  }
  return w.finish();
}

const KNOWN_TYPES = Object.values(MessageType) as number[];
const messageType = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...KNOWN_TYPES) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
);

/** A payload of some message type: an SDK's, one mutated at the byte level, or raw protobuf under any type. */
const anyMessage: fc.Arbitrary<Encoded> = fc.oneof(
  { weight: 3, arbitrary: sdkMessage },
  {
    weight: 2,
    arbitrary: fc
      .tuple(sdkMessage, fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: messageType }))
      .chain(([m, retype]) =>
        mutatedBytes(fc.constant(m.payload), 3).map((payload) => ({ type: retype ?? m.type, payload })),
      ),
  },
  { weight: 1, arbitrary: fc.tuple(messageType, pbMessage).map(([type, m]) => ({ type, payload: encodePb(m) })) },
  { weight: 1, arbitrary: fc.tuple(messageType, bytes).map(([type, payload]) => ({ type, payload })) },
);

const flags = fc.oneof(
  { weight: 5, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
);

/** A response body: frames of any messages, then byte-level damage to the stream (often none). */
const frameStream: fc.Arbitrary<Uint8Array> = mutatedBytes(
  fc
    .array(fc.tuple(anyMessage, flags), { minLength: 1, maxLength: 6 })
    .map((frames) => Buffer.concat(frames.map(([m, f]) => encodeFrame(m.type, m.payload, f)))),
  2,
);

// ---- checks ---------------------------------------------------------------------------------------------------------

/**
 * What the codec's readers may throw inside a ProtocolViolationError: its own MalformedError, and the protobuf
 * reader's plain Errors ("invalid varint", "cant skip wire type", "illegal tag") and RangeError "premature EOF".
 * Anything else (a TypeError, another RangeError) is a case the codec does not handle.
 */
function expectCodecError(err: unknown): void {
  expectOwnError(err, [ProtocolViolationError]);
  const cause = (err as Error).cause;
  const fromReader =
    cause instanceof MalformedError ||
    (cause instanceof RangeError && cause.message === 'premature EOF') ||
    (cause instanceof Error && cause.constructor === Error);
  if (cause !== undefined && !fromReader) throw new Error(`unexpected cause ${describeError(cause)}`, { cause: err });
}

// ---- properties -----------------------------------------------------------------------------------------------------

describe('framing', () => {
  it(
    'frames a byte stream the same way whatever its chunking, or refuses an oversized frame',
    () => {
      fuzz(
        SURFACE,
        'FrameDecoder',
        fc.property(frameStream, fc.array(fc.nat(), { maxLength: 6 }), (stream, cuts) => {
          const limit = 4096;
          const summary = (frames: Frame[]): string[] =>
            frames.map((f) => `${f.type}/${f.flags}/${Buffer.from(f.payload).toString('hex')}`);
          let whole: string[] | undefined;
          let wholeError: unknown;
          const one = new FrameDecoder({ maxMessageSize: limit });
          try {
            whole = summary(one.push(Buffer.from(stream)));
          } catch (err) {
            expectOwnError(err, [MessageTooLargeError]);
            wholeError = err;
          }
          const decoder = new FrameDecoder({ maxMessageSize: limit });
          const parts: Frame[] = [];
          let partsError: unknown;
          try {
            for (const chunk of chunked(stream, cuts)) parts.push(...decoder.push(chunk));
          } catch (err) {
            expectOwnError(err, [MessageTooLargeError]);
            partsError = err;
          }
          expect(partsError === undefined).toBe(wholeError === undefined);
          if (whole !== undefined) {
            expect(summary(parts)).toEqual(whole);
            expect(decoder.bufferedBytes).toBe(one.bufferedBytes);
          }
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('message payloads', () => {
  it(
    'decodes every message type or throws ProtocolViolationError; what decodes re-encodes to the same message',
    () => {
      fuzz(
        SURFACE,
        'decodeMessage',
        fc.property(anyMessage, ({ type, payload }) => {
          let decoded;
          try {
            decoded = decodeMessage(type, payload);
          } catch (err) {
            expectCodecError(err);
            return;
          }
          const again = decodeMessage(type, encodeMessage(decoded.type, decoded.message as never));
          expect(again).toEqual(decoded);
        }),
        { runs: 5000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    "reads the engine's view of every message or throws ProtocolViolationError",
    () => {
      fuzz(
        SURFACE,
        'engine-codec',
        fc.property(anyMessage, ({ type, payload }) => {
          const readers: (() => unknown)[] = [
            () => (isCommand(type) ? codec.command(type, payload) : undefined),
            () => codec.completionIdsOf(type, payload),
            () => codec.suspension(payload),
            () => codec.awaitingOn(payload),
            () => codec.error(payload),
            () => codec.proposeRunCompletion(payload),
            () => codec.notificationResult(payload),
          ];
          for (const read of readers) {
            try {
              read();
            } catch (err) {
              expectCodecError(err);
            }
          }
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('discovery manifest', () => {
  it(
    'validates any manifest or refuses it with a RatchetError that names the problem',
    () => {
      const name = fc.oneof(fc.constantFrom('Greeter', 'Counter', '_x', 'a.b-c', ''), text);
      const handler = fc.record(
        {
          name: sometimes(fc.oneof(fc.constantFrom('greet', 'add', '_1'), text)),
          ty: sometimes(fc.constantFrom('EXCLUSIVE', 'SHARED', 'WORKFLOW', 'exclusive')),
          input: sometimes(fc.record({ contentType: sometimes(fc.constantFrom('application/json', '*/*', '')) })),
          output: sometimes(fc.record({ contentType: sometimes(fc.constantFrom('application/json', '')) })),
          inactivityTimeout: sometimes(fc.integer()),
          retryPolicyMaxAttempts: sometimes(fc.integer()),
          retryPolicyOnMaxAttempts: sometimes(fc.constantFrom('PAUSE', 'KILL')),
          ingressPrivate: sometimes(fc.boolean()),
          metadata: sometimes(fc.dictionary(text, text, { maxKeys: 2 })),
        },
        { requiredKeys: [] },
      );
      const service = fc.record(
        {
          name: sometimes(name),
          ty: sometimes(fc.constantFrom('SERVICE', 'VIRTUAL_OBJECT', 'WORKFLOW', 'Service')),
          handlers: sometimes(fc.array(handler, { maxLength: 3 })),
          idempotencyRetention: sometimes(fc.integer()),
          journalRetention: sometimes(fc.integer()),
          enableLazyState: sometimes(fc.boolean()),
          documentation: sometimes(text),
        },
        { requiredKeys: [] },
      );
      const manifest = fc.record(
        {
          protocolMode: sometimes(fc.constantFrom('BIDI_STREAM', 'REQUEST_RESPONSE', 'bidi')),
          minProtocolVersion: sometimes(fc.integer({ min: -1, max: 8 })),
          maxProtocolVersion: sometimes(fc.integer({ min: -1, max: 8 })),
          lambdaCompression: sometimes(fc.constantFrom('zstd', 'gzip')),
          services: sometimes(fc.array(service, { maxLength: 3 })),
        },
        { requiredKeys: [] },
      );
      fuzz(
        SURFACE,
        'parseManifest',
        fc.property(
          fc.oneof({ weight: 4, arbitrary: manifest }, { weight: 1, arbitrary: anyJson }),
          fc.constantFrom<2 | 3 | 4>(2, 3, 4),
          fc.constantFrom<'HTTP/2.0' | 'HTTP/1.1' | 'Lambda'>('HTTP/2.0', 'HTTP/1.1', 'Lambda'),
          (m, manifestVersion, transport) => {
            try {
              parseManifest(m, { manifestVersion, transport });
            } catch (err) {
              expectOwnError(err, [RatchetError]);
            }
          },
        ),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('attempts fed through the real invoker and engine', () => {
  let fuzzEngine: FuzzEngine;
  const errorLogs: string[] = [];
  // Errors logged by the engine or the invoker mean a case they did not expect: each fails the input.
  const logger = pino({ level: 'error' }, { write: (line: string) => void errorLogs.push(line) });
  let inputs = 0;

  beforeAll(async () => {
    fuzzEngine = await startFuzzEngine(logger);
  });

  afterAll(async () => {
    await fuzzEngine?.stop();
  });

  const SETTLED = new Set(['completed', 'paused', 'suspended', 'killed']);
  let sequence = 0;

  const status = fc.oneof(
    { weight: 8, arbitrary: fc.constant(200) },
    { weight: 1, arbitrary: fc.constantFrom(400, 404, 413, 415, 429, 500, 502, 503, 504) },
  );
  const contentType = fc.oneof(
    { weight: 8, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom('application/json', '', 'application/vnd.restate.invocation.v4') },
  );
  const targetService = fc.constantFrom(['Greeter', 'greet'], ['Counter', 'add'], ['Signup', 'run']);

  it(
    'ends a fuzzed attempt with the protocol error and a message, and keeps running invocations',
    async () => {
      await fuzzAsync(
        SURFACE,
        'invoker+engine',
        fc.asyncProperty(
          targetService,
          status,
          contentType,
          frameStream,
          fc.array(fc.nat(), { maxLength: 4 }),
          async ([service, handlerName], code, ct, stream, cuts) => {
            // A fresh engine now and then: the in-memory store scans all its rows, so a long run would slow down.
            if (++inputs % 1000 === 0) {
              await fuzzEngine.stop();
              fuzzEngine = await startFuzzEngine(logger);
            }
            const { engine, registry, deployment, events, suspects } = fuzzEngine;
            let answered = false;
            deployment.script = (_id, attempt, request) => {
              if (answered || attempt > 0) return undefined;
              answered = true;
              const answer: DeploymentAnswer = {
                status: code,
                headers: { 'content-type': ct ?? request.headers['content-type'] },
                chunks: chunked(stream, cuts),
              };
              return answer;
            };
            const svc = registry.service(service)!;
            const handler = svc.schema.handlers.find((h) => h.name === handlerName)!;
            const accepted = await engine.accept({
              service: { name: service, ty: svc.schema.ty },
              handler,
              key: svc.schema.ty === 'Service' ? undefined : `k${sequence++}`,
              body: Buffer.from('"input"'),
              headers: [],
              invokedBy: 'ingress',
            });
            const id = accepted.id;
            let settled: string | undefined;
            try {
              await vi.waitFor(
                () => {
                  const last = events.get(id)?.at(-1);
                  // Retrying after more than a minute: the SDK asked for that delay (ErrorMessage.next_retry_delay).
                  const parked = last?.kind === 'retrying' && last.delayMs > 60_000;
                  if (last === undefined || (!SETTLED.has(last.kind) && !parked)) throw new Error('not settled');
                  settled = parked ? 'parked' : last.kind;
                },
                { timeout: 5_000, interval: 2 },
              );
            } catch {
              throw new Error(
                `the invocation did not settle: ${JSON.stringify(events.get(id)?.map((e) => e.kind))}, ` +
                  `stream ${Buffer.from(stream).toString('hex')}`,
              );
            }
            // A failed attempt was retried with its reason: an RT code (the message is the SDK's own when an Error
            // message made the attempt fail, and may be empty then).
            for (const e of events.get(id) ?? []) {
              if (e.kind === 'retrying') expect(e.code).toMatch(/^RT\d{4}$/);
            }
            if (settled === 'suspended' || settled === 'paused' || settled === 'parked') {
              // Nothing would wake it up in this test; clean up so a long run stays small.
              await engine.kill(id as never);
            }
            expect(suspects).toEqual([]);
            if (errorLogs.length > 0) throw new Error(`logged an error: ${errorLogs.splice(0).join('\n')}`);
            await processErrors.check();
          },
        ),
        { runs: 300, weight: 0.05 },
      );
      // Still serving: a well-behaved attempt completes.
      const { engine, registry, deployment } = fuzzEngine;
      deployment.script = () => undefined;
      const svc = registry.service('Greeter')!;
      const accepted = await engine.accept({
        service: { name: 'Greeter', ty: 'Service' },
        handler: svc.schema.handlers[0]!,
        body: Buffer.from('"x"'),
        headers: [],
        invokedBy: 'ingress',
      });
      const done = await engine.awaitCompletion(accepted.id);
      expect(done?.outcome.kind).toBe('success');
    },
    timeoutFor(300, 0.05, 40),
  );
});

describe('attempts of a runtime node (real invoker over HTTP/2, PostgreSQL storage)', () => {
  let db: TestDatabase;
  let node: RuntimeHandle;
  let deployment: http2.Http2Server;
  const sessions = new Set<http2.ServerHttp2Session>();
  const warnings: string[] = [];
  /** The response body of the next first attempt; every other attempt is answered like a well-behaved SDK. */
  let nextAnswer: Buffer[] | undefined;
  const attempts = new Map<string, number>();
  const ok = [
    encodeFrame(
      MessageType.OutputCommand,
      encodeMessage(MessageType.OutputCommand, { result: { kind: 'value', value: Buffer.from('"ok"') }, name: '' }),
    ),
    encodeFrame(MessageType.End, encodeMessage(MessageType.End, {})),
  ];
  const handler = {
    input: { required: false, contentType: 'application/json' },
    output: { setContentTypeIfEmpty: false },
  };
  const manifest = {
    protocolMode: 'BIDI_STREAM',
    minProtocolVersion: 5,
    maxProtocolVersion: 6,
    services: [
      { name: 'Greeter', ty: 'SERVICE', handlers: [{ name: 'greet', ...handler }] },
      { name: 'Counter', ty: 'VIRTUAL_OBJECT', handlers: [{ name: 'add', ty: 'EXCLUSIVE', ...handler }] },
    ],
  };

  const adminUrl = (): string => `http://${LOOPBACK}:${node.admin.port}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    // A deployment written by hand (h2c): discovery, then the fuzzed bytes as the first attempt's response.
    deployment = http2.createServer();
    deployment.on('session', (session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    });
    deployment.on('stream', (stream, headers) => {
      if (String(headers[':path']).endsWith('/discover')) {
        stream.respond({ ':status': 200, 'content-type': 'application/vnd.restate.endpointmanifest.v4+json' });
        stream.end(JSON.stringify(manifest));
        return;
      }
      const id = String(headers['x-restate-invocation-id']);
      const attempt = attempts.get(id) ?? 0;
      attempts.set(id, attempt + 1);
      const answer = attempt === 0 && nextAnswer !== undefined ? nextAnswer : ok;
      if (attempt === 0) nextAnswer = undefined;
      stream.on('error', () => undefined);
      stream.on('data', () => undefined);
      stream.respond({ ':status': 200, 'content-type': String(headers['content-type']) });
      for (const chunk of answer) stream.write(chunk);
      stream.end();
    });
    await new Promise<void>((resolve) => deployment.listen(0, LOOPBACK, resolve));
    const config = loadConfig({
      env: {
        RATCHET_INGRESS_BIND: `${LOOPBACK}:0`,
        RATCHET_ADMIN_BIND: `${LOOPBACK}:0`,
        RATCHET_METRICS_BIND: `${LOOPBACK}:0`,
        RATCHET_INTROSPECTION_BIND: `${LOOPBACK}:0`,
        RATCHET_OBSERVABILITY_STORE: 'off',
        RATCHET_NODE_NAME: `fuzz-${process.pid}`,
        RATCHET_RETRY_INITIAL_INTERVAL: '10ms',
        RATCHET_RETRY_MAX_INTERVAL: '10ms',
      },
    });
    // Warnings and errors of the node: a partition recovered after a failed write means bad bytes got as far as the
    // storage, and failed a whole batch of commits.
    const logger = createLogger(
      { level: 'warn' },
      { destination: { write: (line: string) => void warnings.push(line) } },
    );
    node = await createNode(config, { databaseUrl: db.url, logger });
    const { port } = deployment.address() as { port: number };
    const registered = await registerDeployment(adminUrl(), `http://${LOOPBACK}:${port}/`);
    expect(registered.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await node?.stop();
    for (const s of sessions) s.destroy();
    await new Promise<void>((resolve) => (deployment === undefined ? resolve() : deployment.close(() => resolve())));
    await db?.drop();
  });

  async function sql<T>(query: string): Promise<T[]> {
    const res = await fetch(`${adminUrl()}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query }),
    });
    return ((await res.json()) as { rows: T[] }).rows;
  }

  /** Settled: completed, suspended or paused, or retrying only after more than a minute (the SDK asked for that). */
  async function settle(id: string): Promise<string> {
    const SETTLED = `status IN ('completed', 'suspended', 'paused')
      OR (status = 'backing-off' AND next_retry_at > now() + interval '1 minute')`;
    try {
      return await vi.waitFor(
        async () => {
          const rows = await sql<{ status: string; settled: boolean }>(
            `SELECT status, (${SETTLED}) AS settled FROM sys_invocation WHERE id = '${id}'`,
          );
          if (rows[0]?.settled !== true) throw new Error(`not settled: ${JSON.stringify(rows)}`);
          return rows[0].status;
        },
        { timeout: 15_000, interval: 20 },
      );
    } catch (err) {
      throw new Error(`invocation ${id} did not settle: ${(err as Error).message}`, { cause: err });
    }
  }

  it(
    'ends a fuzzed attempt with the protocol error, never failing a write to PostgreSQL, and keeps serving',
    async () => {
      const port = (): number => node.ingress.port;
      await fuzzAsync(
        SURFACE,
        'runtime-node',
        fc.asyncProperty(
          fc.constantFrom('/Greeter/greet/send', '/Counter/k/add/send'),
          frameStream,
          fc.array(fc.nat(), { maxLength: 3 }),
          async (path, stream, cuts) => {
            warnings.length = 0;
            nextAnswer = chunked(stream, cuts);
            const res = await fetch(`http://${LOOPBACK}:${port()}${path}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: '1',
            });
            expect(res.status).toBe(202);
            const { invocationId } = (await res.json()) as { invocationId: string };
            const status = await settle(invocationId);
            if (status !== 'completed') {
              await fetch(`${adminUrl()}/invocations/${invocationId}/kill`, { method: 'PATCH' });
            }
            const failed = warnings.filter((w) => /a read or write failed|"level":"error"/.test(w));
            if (failed.length > 0) {
              throw new Error(
                `bytes from the deployment failed a write to PostgreSQL: ${failed.join('\n')}\n` +
                  `stream ${Buffer.from(stream).toString('hex')}`,
              );
            }
            await processErrors.check();
          },
        ),
        { runs: 40, weight: 0.002 },
      );
    },
    timeoutFor(40, 0.002, 500),
  );
});
