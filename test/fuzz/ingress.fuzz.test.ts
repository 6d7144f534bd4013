import http from 'node:http';
import { connect } from 'node:net';
import * as restate from '@restatedev/restate-sdk';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIngressApp } from '../../runtime/src/ingress/app.ts';
import { validateInput } from '../../runtime/src/ingress/content-type.ts';
import { IngressError } from '../../runtime/src/ingress/errors.ts';
import { decodeKey, normalizePath, parseIngressPath } from '../../runtime/src/ingress/path.ts';
import { parseTargetBody } from '../../runtime/src/ingress/target-body.ts';
import { startTestRuntime, type TestRuntime } from '../integration/support/runtime.ts';
import { LOOPBACK } from '../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { registerEndpoint } from '../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';
import { anyJson, mutatedString, nastyFragment, nastyString, sometimes } from './support/arbitraries.ts';
import { FUZZ_SERVICES, startFuzzEngine, type FuzzEngine } from './support/engine.ts';
import { PARSER_TIMEOUT, expectOwnError, fuzz, fuzzAsync, timeoutFor, watchProcessErrors } from './support/fuzz.ts';
import { anyId, awakeableId, invocationId } from './support/ids.ts';

/**
 * The ingress (8080) against arbitrary paths, query strings, headers and bodies: the path parser, key decoding and the
 * target bodies of attach/output/lookup on their own, then whole requests through the app (in process) and raw
 * request bytes over a socket, and requests to a whole runtime node (PostgreSQL storage, SDK services). Every refusal
 * is a 4xx with `{code, message}`; the only 5xx restate itself gives is the 500 "cannot read body" of a malformed
 * attach/output/lookup target body (`restate5xx` below).
 */

const SURFACE = 'ingress';
const processErrors = watchProcessErrors();

let fuzzEngine: FuzzEngine;
let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  fuzzEngine = await startFuzzEngine();
  app = buildIngressApp({
    engine: fuzzEngine.engine,
    registry: fuzzEngine.registry.asSchemaRegistry(),
    logger: pino({ level: 'silent' }),
    requestSizeLimit: 64 * 1024,
  });
  await app.listen({ host: LOOPBACK, port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('unexpected ingress address');
  port = address.port;
});

afterAll(async () => {
  await app?.close();
  await fuzzEngine?.stop();
});

// ---- inputs ---------------------------------------------------------------------------------------------------------

const SERVICES = [...Object.keys(FUZZ_SERVICES), 'Unknown', 'greeter'];
const HANDLERS = ['greet', 'json', 'none', 'add', 'get', 'run', 'status', 'open', 'missing'];
const WORDS = [
  'restate',
  'health',
  'awakeables',
  'a',
  'invocation',
  'workflow',
  'call',
  'send',
  'scope',
  'attach',
  'output',
  'lookup',
  'openapi',
  'resolve',
  'reject',
];

/** Percent-encodes the UTF-8 bytes of `s` (lone surrogates included, as U+FFFD) except unreserved characters. */
function percentEncode(s: string): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`,
    )
    .join('');
}

/** A key as a client would put it in a path: raw, or percent-encoded (partly, or with bad escapes). */
const key = fc.oneof(
  nastyString(16),
  nastyString(16).map(percentEncode),
  fc.uint8Array({ maxLength: 8 }).map((b) => [...b].map((x) => `%${x.toString(16).padStart(2, '0')}`).join('')),
);

/** Paths of every route, well-formed. */
const validPath: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('/Greeter/greet', '/Greeter/json', '/Greeter/none/send', '/Vault/open', '/restate/health'),
  key.map((k) => `/Counter/${k}/add`),
  key.map((k) => `/Counter/${k}/get/send`),
  key.map((k) => `/Signup/${k}/run`),
  key.map((k) => `/restate/call/Counter/${k}/add`),
  fc.constantFrom('/restate/call/Greeter/greet', '/restate/send/Greeter/greet', '/restate/lookup'),
  fc.constantFrom('/restate/attach', '/restate/output'),
  invocationId.map((id) => `/restate/attach/${id}`),
  invocationId.map((id) => `/restate/invocation/${id}/output`),
  key.map((k) => `/restate/invocation/Greeter/greet/${k}/attach`),
  fc.tuple(key, key).map(([k, i]) => `/restate/invocation/Counter/${k}/add/${i}/output`),
  key.map((k) => `/restate/workflow/Signup/${k}/output`),
  fc.tuple(awakeableId, fc.constantFrom('resolve', 'reject')).map(([id, op]) => `/restate/awakeables/${id}/${op}`),
  fc.tuple(awakeableId, fc.constantFrom('resolve', 'reject')).map(([id, op]) => `/restate/a/${id}/${op}`),
  key.map((s) => `/restate/scope/${s}/call/Greeter/greet`),
);

const segment = fc.oneof(fc.constantFrom(...SERVICES, ...HANDLERS, ...WORDS), anyId, key, fc.constant(''));

/** Random segments, 0 to 9 of them, with every kind of leading and trailing slash. */
const segmentsPath: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom('/', '//', '///'), fc.array(segment, { maxLength: 9 }), fc.constantFrom('', '/', '//'))
  .map(([lead, segments, trail]) => lead + segments.join('/') + trail);

const anyPath: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: validPath },
  { weight: 2, arbitrary: mutatedString(validPath) },
  { weight: 1, arbitrary: segmentsPath },
);

const DURATIONS = ['10ms', '0s', 'PT0.01S', 'P0D', '1ms', '', '-1s', 'PT', 'P1Y', '1e3ms', '1h'];
const query: fc.Arbitrary<string> = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom('delay', 'DELAY', 'limit-key', 'x'), nastyString(6)),
      fc.oneof(fc.constantFrom(...DURATIONS), nastyString(10)),
    ),
    { maxLength: 3 },
  )
  .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`));

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/octet-stream',
  '*/*',
  'application/*',
  '',
  ' ',
  ';',
  '/',
  'application/json;;',
];
const contentType = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('application/json', 'text/plain', 'application/octet-stream') },
  { weight: 1, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
  { weight: 1, arbitrary: mutatedString(fc.constantFrom(...CONTENT_TYPES)) },
);

/** Target bodies of attach/output/lookup: the three variants with fields of any type, and broken JSON. */
const targetBody: fc.Arbitrary<string> = fc.oneof(
  fc
    .record(
      {
        target: sometimes(fc.constantFrom('workflow', 'idempotentInvocation', 'invocation', 'Invocation')),
        workflowName: sometimes(fc.constantFrom('Signup', 'Unknown')),
        workflowKey: sometimes(fc.string()),
        service: sometimes(fc.constantFrom('Greeter', 'Counter')),
        key: sometimes(fc.option(fc.string())),
        handler: sometimes(fc.constantFrom('greet', 'add')),
        idempotencyKey: sometimes(fc.string()),
        invocationId: sometimes(invocationId),
        scope: sometimes(fc.option(fc.string({ maxLength: 40 }))),
      },
      { requiredKeys: [] },
    )
    .chain((body) => mutatedString(fc.constant(JSON.stringify(body)))),
  anyJson.map((v) => JSON.stringify(v) ?? ''),
  nastyString(),
);

const body: fc.Arbitrary<string | Buffer> = fc.oneof(
  fc.constant(''),
  targetBody,
  anyJson.map((v) => JSON.stringify(v) ?? ''),
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
);

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'] as const;
const method = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('GET', 'POST') },
  { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
);

const headers: fc.Arbitrary<Record<string, string>> = fc
  .record(
    {
      'content-type': contentType,
      'idempotency-key': fc.oneof(fc.constantFrom('', 'k1', 'k2'), nastyString(12)),
      'x-restate-limit-key': fc.oneof(fc.constant(''), nastyString(6)),
      origin: fc.constantFrom('http://example.com', ''),
      'access-control-request-method': fc.constantFrom('POST', ''),
      traceparent: fc.oneof(fc.constant('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'), nastyString(20)),
    },
    { requiredKeys: [] },
  )
  // Header values a client can actually send: no CR, LF or NUL (Node refuses to build such a request).
  .map((h) => Object.fromEntries(Object.entries(h).filter(([, v]) => !/[\r\n\0]/.test(v))));

// ---- checks ---------------------------------------------------------------------------------------------------------

/**
 * restate-server answers an unreadable attach/output/lookup target body with 500 "cannot read body" (Ratchet keeps
 * the status for compatibility, `IngressErrors.unreadableBody`): the one 5xx a malformed request may get.
 */
function restate5xx(method: string, path: string, status: number, message: string): boolean {
  return (
    status === 500 &&
    method === 'POST' &&
    /^\/+restate\/+(attach|output|lookup)\/*$/.test(path) &&
    message.startsWith('cannot read body: ')
  );
}

function expectIngressRefusal(err: unknown): void {
  expectOwnError(err, [IngressError]);
  const status = (err as IngressError).status;
  expect(status === 470 || (status >= 400 && status < 500)).toBe(true);
}

function messageOf(text: string): string {
  try {
    const json = JSON.parse(text) as { message?: unknown };
    return typeof json.message === 'string' ? json.message : '';
  } catch {
    return '';
  }
}

function expectAnswer(method: string, path: string, status: number, text: string): void {
  const message = messageOf(text);
  if (status >= 500 && !restate5xx(method, path, status, message)) {
    throw new Error(`${method} ${path} answered ${status}: ${text}`);
  }
  // A refusal says why (HEAD answers carry no body).
  if (status >= 400 && method !== 'HEAD') expect(message.trim(), `${status} ${text}`).not.toBe('');
}

// ---- properties -----------------------------------------------------------------------------------------------------

describe('ingress path parsing', () => {
  it(
    'routes or refuses every path with a 4xx IngressError',
    () => {
      const registry = fuzzEngine.registry;
      fuzz(
        SURFACE,
        'parseIngressPath',
        fc.property(anyPath, (path) => {
          try {
            parseIngressPath(normalizePath(path), registry);
          } catch (err) {
            expectIngressRefusal(err);
          }
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'decodes keys like decodeURIComponent where that succeeds, and refuses bad UTF-8 with a 400',
    () => {
      const ascii = fc
        .array(fc.oneof(nastyFragment, fc.string({ unit: 'binary-ascii', maxLength: 4 })), { maxLength: 10 })
        .map((p) => p.join(''));
      fuzz(
        SURFACE,
        'decodeKey',
        fc.property(fc.oneof(key, ascii), (segment) => {
          let decoded: string;
          try {
            decoded = decodeKey(segment);
          } catch (err) {
            expectIngressRefusal(err);
            return;
          }
          // The reference holds for ASCII input only: a JS string with non-ASCII is not what an HTTP path carries.
          if (/^[\x00-\x7f]*$/.test(segment)) {
            let reference: string | undefined;
            try {
              reference = decodeURIComponent(segment);
            } catch {
              reference = undefined;
            }
            if (reference !== undefined) expect(decoded).toBe(reference);
          }
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'reads attach/output/lookup target bodies or refuses them with IngressError',
    () => {
      fuzz(
        SURFACE,
        'parseTargetBody',
        fc.property(targetBody, fc.constantFrom<'lookup' | 'request'>('lookup', 'request'), (b, what) => {
          try {
            parseTargetBody(Buffer.from(b), what);
          } catch (err) {
            expectOwnError(err, [IngressError]);
            const status = (err as IngressError).status;
            if (status === 500) expect((err as Error).message).toMatch(/^cannot read body: /);
            else expect(status >= 400 && status < 500).toBe(true);
          }
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'checks request content types against every kind of input rule',
    () => {
      const rules = Object.values(FUZZ_SERVICES).flatMap((s) => Object.values(s.handlers).map((h) => h.input));
      fuzz(
        SURFACE,
        'validateInput',
        fc.property(fc.constantFrom(...rules), fc.option(contentType), fc.nat(10), (r, ct, length) => {
          try {
            validateInput(r, ct ?? undefined, length);
          } catch (err) {
            expectIngressRefusal(err);
          }
        }),
        { runs: 2000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('ingress requests', () => {
  it(
    'answers every request (fastify inject) with a 2xx or a 4xx that says why',
    async () => {
      await fuzzAsync(
        SURFACE,
        'inject',
        fc.asyncProperty(method, anyPath, query, headers, body, async (method, path, q, h, b) => {
          // inject sends what `new URL` makes of the path (the raw-socket property below sends the bytes as they are).
          if (!path.startsWith('/')) return;
          let url: URL;
          try {
            url = new URL(path + q, 'http://localhost');
          } catch {
            return;
          }
          const payload = method === 'GET' || method === 'HEAD' ? {} : { payload: b };
          const res = await app.inject({ method, url: path + q, headers: h, ...payload });
          expectAnswer(method, url.pathname, res.statusCode, res.body);
          await processErrors.check();
        }),
        { runs: 600, weight: 0.3 },
      );
    },
    timeoutFor(600, 0.3, 5),
  );

  it(
    'answers raw request bytes over a socket with a 2xx or a 4xx, and keeps serving',
    async () => {
      // What fastify inject cannot send: targets with raw bytes (spaces, controls, non-ASCII), duplicated headers.
      const rawTarget = fc.oneof(
        anyPath,
        fc.uint8Array({ minLength: 1, maxLength: 40 }).map((b) => `/${Buffer.from(b).toString('latin1')}`),
        mutatedString(fc.constantFrom('/Greeter/greet', 'http://host/Greeter/greet', '*', '/restate/health')),
      );
      const rawHeader = fc.oneof(
        headers.map((h) => Object.entries(h).map(([k, v]) => `${k}: ${v}`)),
        fc.array(
          fc.tuple(nastyString(10), nastyString(20)).map(([k, v]) => `${k}: ${v}`),
          { maxLength: 3 },
        ),
      );
      await fuzzAsync(
        SURFACE,
        'raw-socket',
        fc.asyncProperty(method, rawTarget, rawHeader, body, async (method, target, lines, b) => {
          const payload = Buffer.from(b);
          const head = [
            `${method} ${target} HTTP/1.1`,
            'host: 127.0.0.1',
            'connection: close',
            ...lines,
            `content-length: ${payload.length}`,
            '',
            '',
          ].join('\r\n');
          const answer = await rawRequest(port, Buffer.concat([Buffer.from(head, 'latin1'), payload]));
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? NaN);
          if (Number.isNaN(status))
            throw new Error(`no HTTP answer to ${JSON.stringify(head)}: ${JSON.stringify(answer)}`);
          const bodyText = answer.slice(answer.indexOf('\r\n\r\n') + 4);
          if (status >= 500 && !restate5xx(method, target.split('?')[0]!, status, messageOf(bodyText))) {
            throw new Error(`${JSON.stringify(head)} answered ${answer}`);
          }
          await processErrors.check();
        }),
        { runs: 150, weight: 0.05 },
      );
      // Still serving: a well-formed call completes.
      const res = await app.inject({
        method: 'POST',
        url: '/Greeter/greet',
        payload: '"x"',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.statusCode).toBe(200);
      expect(fuzzEngine.suspects).toEqual([]);
    },
    timeoutFor(150, 0.05, 20),
  );
});

/** `target` with spaces, controls and non-ASCII characters percent-encoded (as UTF-8); everything else kept. */
function sendable(target: string): string {
  return [...target].map((c) => (/^[\x21-\x7e]$/.test(c) ? c : percentEncode(c))).join('');
}

/** Sends `bytes` on a new connection and returns everything the server wrote until it closed (5 s at most). */
function rawRequest(p: number, bytes: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: LOOPBACK, port: p });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within 5 s to ${JSON.stringify(bytes.toString('latin1'))}`));
    }, 5_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    socket.write(bytes);
  });
}

describe('ingress of a runtime node (PostgreSQL storage, SDK services)', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let agent: http.Agent;

  // Handlers that take any input and answer at once: whatever reaches them, the call completes.
  const greeter = restate.service({
    name: 'Greeter',
    handlers: { greet: async (_ctx: restate.Context, _input: unknown) => 'hi' },
  });
  const counter = restate.object({
    name: 'Counter',
    handlers: {
      add: async (ctx: restate.ObjectContext, _input: unknown) => {
        const v = ((await ctx.get<number>('v')) ?? 0) + 1;
        ctx.set('v', v);
        return v;
      },
      get: restate.handlers.object.shared(
        async (ctx: restate.ObjectSharedContext) => (await ctx.get<number>('v')) ?? 0,
      ),
    },
  });
  const signup = restate.workflow({
    name: 'Signup',
    handlers: {
      run: async (_ctx: restate.WorkflowContext, _input: unknown) => 'ok',
      status: async (_ctx: restate.WorkflowSharedContext) => 'done',
    },
  });

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url);
    endpoint = await startEndpoint({ services: [greeter, counter, signup], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    // A connection per request: a request the server's HTTP parser refuses ends its connection, which a pooled
    // connection would only notice on the next request (ECONNRESET).
    agent = new http.Agent({ keepAlive: false });
  }, 120_000);

  afterAll(async () => {
    agent?.destroy();
    await endpoint?.close();
    await runtime?.stop();
    await db?.drop();
  });

  /** Sends the request with its path as given (node's http client refuses what no client may send: skipped). */
  function send(method: string, path: string, headers: Record<string, string>, b: string | Buffer) {
    const payload = method === 'GET' || method === 'HEAD' ? '' : b;
    // Header values node's client can send (no characters outside latin-1, no controls).
    headers = Object.fromEntries(Object.entries(headers).filter(([, v]) => /^[\t\x20-\x7e\x80-\xff]*$/.test(v)));
    return new Promise<{ status: number; text: string } | undefined>((resolve, reject) => {
      let req: http.ClientRequest;
      try {
        req = http.request({
          agent,
          host: LOOPBACK,
          port: new URL(runtime.ingressUrl).port,
          method,
          path,
          headers: { ...headers, 'content-length': String(Buffer.byteLength(payload)) },
          timeout: 15_000,
        });
      } catch {
        resolve(undefined);
        return;
      }
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within 15 s to ${method} ${path}`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  it(
    'answers every request with a 2xx or a 4xx that says why, and keeps serving',
    async () => {
      // Short delays only: an attach to a send delayed by an hour would wait for it.
      const shortQuery = fc
        .array(
          fc.oneof(
            fc.constantFrom('delay=10ms', 'delay=0s', 'delay=PT0.01S', 'delay=', 'delay=-1s', 'delay=PT', 'delay=x'),
            fc.tuple(nastyString(6), nastyString(10)).map(([k, v]) => `${k.replace(/delay/gi, '')}=${v}`),
          ),
          { maxLength: 3 },
        )
        .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.join('&')}`));
      await fuzzAsync(
        SURFACE,
        'runtime-node',
        fc.asyncProperty(method, anyPath, shortQuery, headers, body, async (m, path, q, h, b) => {
          if (!path.startsWith('/')) return;
          // Characters no HTTP client sends raw are percent-encoded, as clients do.
          const res = await send(m, sendable(path + q), h, b);
          if (res === undefined) return;
          expectAnswer(m, path, res.status, res.text);
          await processErrors.check();
        }),
        { runs: 150, weight: 0.01 },
      );
      const res = await send('POST', '/Greeter/greet', { 'content-type': 'application/json' }, '"x"');
      expect(res?.status).toBe(200);
    },
    timeoutFor(150, 0.01, 100),
  );
});
