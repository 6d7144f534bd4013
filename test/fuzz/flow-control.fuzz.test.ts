import http from 'node:http';
import * as restate from '@restatedev/restate-sdk';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonBodyShapeError } from '../../runtime/src/admin/errors.ts';
import {
  formatLimitKey,
  LimitKeyError,
  parseLimitKey,
  RESTRICTED_VALUE_MAX_BYTES,
  restrictedValueProblem,
} from '../../runtime/src/flow-control/names.ts';
import { parseRulePattern, PatternError } from '../../runtime/src/flow-control/pattern.ts';
import { parseDeleteRules, parseUpsertRules } from '../../runtime/src/flow-control/requests.ts';
import { BASE62_ALPHABET } from '../../runtime/src/ids/base62.ts';
import { InvalidIdError } from '../../runtime/src/ids/id-codec.ts';
import { parseVQueueId, VQUEUE_ID_LENGTH, vqueueId } from '../../runtime/src/ids/vqueue-id.ts';
import { startTestRuntime, type TestRuntime } from '../integration/support/runtime.ts';
import { LOOPBACK } from '../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { registerEndpoint } from '../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';
import { anyJson, mutatedString, nastyFragment, nastyString } from './support/arbitraries.ts';
import { PARSER_TIMEOUT, expectOwnError, fuzz, fuzzAsync, timeoutFor, watchProcessErrors } from './support/fuzz.ts';
import { anyId } from './support/ids.ts';

/**
 * Flow control (`RATCHET_EXPERIMENTAL_ENABLE_VQUEUES=true`) against arbitrary input: the parsers of rule patterns,
 * limit keys, rule-book request bodies and vqueue ids on their own (they throw only their own error classes, and
 * what they accept is well-formed and round-trips), then a runtime node with the switch on (PostgreSQL storage, SDK
 * services): `PUT /limits/rules`, `POST /limits/rules/bulk-delete`, `POST /vqueues/{id}/pause|resume` on the admin
 * API and scoped calls and sends with limit keys on the ingress. Every answer is a 2xx or a 4xx that says why, and the
 * node keeps serving.
 */

const SURFACE = 'flow-control';
const processErrors = watchProcessErrors();

// ---- inputs ---------------------------------------------------------------------------------------------------------

const RESTRICTED = /^[a-zA-Z0-9_.-]{1,36}$/;
const RESTRICTED_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-';

/** A restricted value (1 to 36 of `[a-zA-Z0-9_.-]`), often at the length limit. */
const restrictedValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: fc.constantFrom(...RESTRICTED_CHARS), minLength: 1, maxLength: 8 }),
  fc.string({
    unit: fc.constantFrom(...RESTRICTED_CHARS),
    minLength: RESTRICTED_VALUE_MAX_BYTES - 1,
    maxLength: RESTRICTED_VALUE_MAX_BYTES + 1,
  }),
  fc.constantFrom('s1', 'tenant-a', 'k1', 'u.1', '_', '-', '.', '..', 'a'.repeat(36), 'a'.repeat(37)),
);

/** UTF-16 code units of any value, lone surrogates included. */
const utf16 = (maxLength: number): fc.Arbitrary<string> =>
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength });

/** Text of every kind: printable, full unicode (fc.fullUnicodeString in fast-check 3), UTF-16 units, nasty. */
const anyText = (maxLength = 40): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength }),
    fc.string({ unit: 'binary', maxLength }),
    utf16(maxLength),
    nastyString(maxLength),
  );

/** A component of a pattern or a limit key: mostly well-formed, often padded, empty, too long or with odd characters. */
const component: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: restrictedValue },
  { weight: 2, arbitrary: fc.constantFrom('*', ' * ', '**', '*a', '') },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(' ', '\t', '\u00a0', '\ufeff', '\u2028', '\n'), restrictedValue)
      .map(([pad, v]) => `${pad}${v}${pad}`),
  },
  { weight: 1, arbitrary: fc.oneof(nastyFragment, nastyString(6)) },
);

const slashJoined = (minLength: number, maxLength: number): fc.Arbitrary<string> =>
  fc
    .tuple(
      fc.array(component, { minLength, maxLength }),
      fc.constantFrom('', '', '', '/', '//', ' /', '/ '),
      fc.constantFrom('', '', '', ' ', '/', '\t'),
    )
    .map(([parts, trail, lead]) => lead + parts.join('/') + trail);

const VALID_PATTERNS = ['*', 's1', 's1/*', 's1/k1', 's1/k1/*', '*/*', '*/*/*', 'tenant-a/u1', 's1/k1/k2', '*/k1/*'];
const patternText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: slashJoined(1, 4) },
  { weight: 2, arbitrary: fc.constantFrom(...VALID_PATTERNS) },
  { weight: 2, arbitrary: mutatedString(fc.constantFrom(...VALID_PATTERNS)) },
  { weight: 2, arbitrary: anyText() },
);

const LIMIT_KEYS = ['k1', 'u1', 'k1/k2', 'user-1/session.2', 'k1/', 'a'.repeat(36), 'x/y/z', '/k1', 'k1//'];
const limitKeyText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: slashJoined(1, 3) },
  { weight: 2, arbitrary: fc.constantFrom(...LIMIT_KEYS) },
  { weight: 2, arbitrary: mutatedString(fc.constantFrom(...LIMIT_KEYS)) },
  { weight: 2, arbitrary: anyText() },
);

/** Numbers where u32, nonzero u32 and JSON disagree: bounds, fractions, huge and negative values. */
const edgeNumber: fc.Arbitrary<number> = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 5 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      -1,
      -0,
      0.5,
      1.5,
      2 ** 31 - 1,
      2 ** 31,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 53,
      2 ** 53 + 2,
      1e21,
      -1e21,
      1e308,
      Number.MAX_VALUE,
      Number.MIN_VALUE,
    ),
  },
  { weight: 1, arbitrary: fc.double() },
  { weight: 1, arbitrary: fc.integer() },
);

const PROTOTYPE_KEYS = ['toString', 'valueOf', '__proto__', 'constructor', 'hasOwnProperty', 'toJSON', 'type'];

/** JSON a reader handles carelessly: objects with the names of Object.prototype's members as keys, and arrays of them. */
const prototypeKeyed: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  object: fc.dictionary(fc.constantFrom(...PROTOTYPE_KEYS), fc.oneof(anyJson, tie('object')), {
    minKeys: 1,
    maxKeys: 3,
    depthIdentifier: 'prototypeKeyed',
    noNullPrototype: true,
  }),
  value: fc.oneof(tie('object'), fc.array(tie('object'), { minLength: 1, maxLength: 2 })),
})).value;

/** `valid` or, at random, JSON of another type (prototype-keyed objects among it). */
const orWrong = (valid: fc.Arbitrary<unknown>, weight = 3): fc.Arbitrary<unknown> =>
  fc.oneof({ weight, arbitrary: valid }, { weight: 1, arbitrary: anyJson }, { weight: 1, arbitrary: prototypeKeyed });

/** Stands for "the version the rule has now" in the runtime-node property (substituted before sending). */
const KNOWN_VERSION = 'known-version';

const version: fc.Arbitrary<unknown> = orWrong(fc.oneof(edgeNumber, fc.constant(KNOWN_VERSION)));

const precondition: fc.Arbitrary<unknown> = fc.oneof(
  fc.record({ type: fc.constantFrom('none', 'does_not_exist') }),
  fc.record({ type: fc.constant('matches'), version }, { requiredKeys: ['type'] }),
  fc.record(
    { type: orWrong(fc.constantFrom('none', 'matches', 'does_not_exist', 'None', 'Matches', '')), version },
    { requiredKeys: [] },
  ),
  anyJson,
  prototypeKeyed,
);

const upsertEntry: fc.Arbitrary<unknown> = fc.record(
  {
    pattern: orWrong(patternText, 8),
    limits: orWrong(
      fc.option(fc.record({ concurrency: orWrong(fc.option(edgeNumber)), other: anyJson }, { requiredKeys: [] })),
    ),
    description: orWrong(fc.option(anyText(20))),
    disabled: orWrong(fc.boolean()),
    precondition: orWrong(precondition),
    unknown_field: anyJson,
  },
  { requiredKeys: ['pattern'] },
);

const deleteEntry: fc.Arbitrary<unknown> = fc.record(
  { pattern: orWrong(patternText, 8), expected_version: version, unknown_field: anyJson },
  { requiredKeys: ['pattern'] },
);

/** Patterns that parse: a few the runtime-node property reuses (so rules meet again), and any others. */
const validPattern: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...VALID_PATTERNS),
  fc.array(fc.oneof(restrictedValue, fc.constant('*')), { minLength: 1, maxLength: 3 }).map((parts) => parts.join('/')),
);

const validUpsertEntry: fc.Arbitrary<unknown> = fc.record(
  {
    pattern: validPattern,
    limits: fc.option(fc.record({ concurrency: fc.option(fc.integer({ min: 1, max: 8 })) }, { requiredKeys: [] })),
    description: fc.option(fc.string({ maxLength: 20 })),
    disabled: fc.boolean(),
    precondition: fc.oneof(
      fc.record({ type: fc.constantFrom('none', 'does_not_exist') }),
      fc.record({ type: fc.constant('matches'), version: fc.oneof(fc.constant(KNOWN_VERSION), fc.nat(3)) }),
    ),
  },
  { requiredKeys: ['pattern'] },
);

const validDeleteEntry: fc.Arbitrary<unknown> = fc.record(
  { pattern: validPattern, expected_version: fc.option(fc.oneof(fc.constant(KNOWN_VERSION), fc.nat(3))) },
  { requiredKeys: ['pattern'] },
);

const FIELDS = [
  'pattern',
  'limits',
  'limits.concurrency',
  'description',
  'disabled',
  'precondition',
  'precondition.type',
  'precondition.version',
  'expected_version',
];

/** A well-formed batch with one field of one entry (perhaps nested, perhaps new) set to JSON of any type. */
const oneWrongField = (valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  fc
    .tuple(
      fc.array(valid, { minLength: 1, maxLength: 4 }),
      fc.nat(),
      fc.constantFrom(...FIELDS),
      fc.oneof(anyJson, prototypeKeyed),
    )
    .map(([batch, at, field, value]) => {
      const entries = structuredClone(batch) as Record<string, unknown>[];
      const entry = entries[at % entries.length]!;
      const [outer, inner] = field.split('.') as [string, string | undefined];
      if (inner === undefined) entry[outer] = value;
      else {
        const parent = entry[outer];
        entry[outer] =
          typeof parent === 'object' && parent !== null && !Array.isArray(parent)
            ? { ...parent, [inner]: value }
            : { [inner]: value };
      }
      return entries;
    });

/**
 * A rule-book request body as a value: a well-formed batch, one with a single field of the wrong type, a batch of
 * entries of every shape (each possibly of the wrong type), or anything at all.
 */
const ruleBody = (entry: fc.Arbitrary<unknown>, valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.array(valid, { maxLength: 4 }) },
    { weight: 3, arbitrary: oneWrongField(valid) },
    { weight: 3, arbitrary: fc.array(fc.oneof(valid, orWrong(entry, 8)), { maxLength: 4 }) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    { weight: 1, arbitrary: fc.anything({ maxDepth: 3 }) },
    { weight: 1, arbitrary: anyJson },
  );

/** Valid vqueue ids of queues that do not exist (a service no deployment has), for any partition key. */
const validVQueueId: fc.Arbitrary<string> = fc
  .tuple(
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    fc.option(restrictedValue),
    fc.option(limitKeyText),
    fc.option(fc.string({ maxLength: 8 })),
  )
  .map(([pk, scope, limitKey, lock]) =>
    vqueueId(pk, { service: 'FuzzNoSuchService', scope, limitKey, lock: lock === null ? null : `x/${lock}` }),
  );

/** `vq_1` and 33 base62 digits: well-formed but for values that overflow u64 or u128 (most of them). */
const base62VQueueId: fc.Arbitrary<string> = fc
  .string({ unit: fc.constantFrom(...BASE62_ALPHABET), minLength: 33, maxLength: 33 })
  .map((digits) => `vq_1${digits}`);

const vqueueIdText: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: validVQueueId },
  { weight: 2, arbitrary: mutatedString(validVQueueId) },
  { weight: 2, arbitrary: base62VQueueId },
  {
    weight: 1,
    arbitrary: fc.constantFrom('', 'vq', 'vq_', 'vq_1', 'vq_0', 'vq_2', 'inv_1', 'VQ_1', `vq_1${'0'.repeat(33)}`),
  },
  { weight: 1, arbitrary: anyId },
  { weight: 1, arbitrary: anyText() },
);

// ---- parsers --------------------------------------------------------------------------------------------------------

describe('flow-control parsers', () => {
  it(
    'tells a restricted value exactly by /^[a-zA-Z0-9_.-]{1,36}$/',
    () => {
      fuzz(
        SURFACE,
        'restrictedValueProblem',
        fc.property(fc.oneof(component, anyText()), (value) => {
          const problem = restrictedValueProblem(value);
          if (RESTRICTED.test(value)) expect(problem).toBeUndefined();
          else expect(problem?.trim()).toBeTruthy();
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'parses rule patterns or throws PatternError; accepted patterns round-trip',
    () => {
      fuzz(
        SURFACE,
        'parseRulePattern',
        fc.property(patternText, (input) => {
          let parsed: ReturnType<typeof parseRulePattern>;
          try {
            parsed = parseRulePattern(input);
          } catch (err) {
            expectOwnError(err, [PatternError]);
            return;
          }
          expect(parseRulePattern(parsed.text)).toEqual(parsed);
          const parts = parsed.text.split('/');
          expect(parts.length).toBe({ scope: 1, l1: 2, l2: 3 }[parsed.level]);
          for (const part of parts) expect(part === '*' || RESTRICTED.test(part), parsed.text).toBe(true);
          const components = [parsed.scope, parsed.l1, parsed.l2].slice(0, parts.length);
          expect(components.map((c) => c ?? '*')).toEqual(parts);
        }),
        { runs: 4000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'parses limit keys or throws LimitKeyError; accepted keys have 1 or 2 restricted levels',
    () => {
      fuzz(
        SURFACE,
        'parseLimitKey',
        fc.property(limitKeyText, (input) => {
          let key: ReturnType<typeof parseLimitKey>;
          try {
            key = parseLimitKey(input);
          } catch (err) {
            expectOwnError(err, [LimitKeyError]);
            return;
          }
          const text = formatLimitKey(key)!;
          const levels = text.split('/');
          expect(levels.length === 1 || levels.length === 2, text).toBe(true);
          for (const level of levels) expect(level, input).toMatch(RESTRICTED);
          expect(levels).toEqual(key.l2 === undefined ? [key.l1] : [key.l1, key.l2]);
          // What was accepted is the key itself, or the key and one trailing slash.
          expect([text, `${text}/`]).toContain(input);
          expect(parseLimitKey(text)).toEqual(key);
        }),
        { runs: 4000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'reads PUT /limits/rules bodies or throws JsonBodyShapeError; what it accepts is in range',
    () => {
      fuzz(
        SURFACE,
        'parseUpsertRules',
        fc.property(ruleBody(upsertEntry, validUpsertEntry), fc.boolean(), (generated, throughJson) => {
          const value = withKnownVersions(generated, () => 1);
          const body = throughJson ? jsonRoundTrip(value) : value;
          let rules: ReturnType<typeof parseUpsertRules>;
          try {
            rules = parseUpsertRules(body);
          } catch (err) {
            expectOwnError(err, [JsonBodyShapeError]);
            return;
          }
          expect(Array.isArray(body)).toBe(true);
          const entries = body as Record<string, unknown>[];
          expect(rules.length).toBe(entries.length);
          rules.forEach((r, i) => {
            expect(r.pattern).toEqual(parseRulePattern(entries[i]!.pattern as string));
            if (r.concurrency !== undefined) expectU32(r.concurrency, 1);
            expect(r.description === undefined || typeof r.description === 'string').toBe(true);
            expect(typeof r.disabled).toBe('boolean');
            expect(['none', 'matches', 'does_not_exist']).toContain(r.precondition.type);
            if (r.precondition.type === 'matches') expectU32(r.precondition.version, 0);
          });
        }),
        { runs: 4000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'reads POST /limits/rules/bulk-delete bodies or throws JsonBodyShapeError; what it accepts is in range',
    () => {
      fuzz(
        SURFACE,
        'parseDeleteRules',
        fc.property(ruleBody(deleteEntry, validDeleteEntry), fc.boolean(), (generated, throughJson) => {
          const value = withKnownVersions(generated, () => 1);
          const body = throughJson ? jsonRoundTrip(value) : value;
          let deletes: ReturnType<typeof parseDeleteRules>;
          try {
            deletes = parseDeleteRules(body);
          } catch (err) {
            expectOwnError(err, [JsonBodyShapeError]);
            return;
          }
          expect(Array.isArray(body)).toBe(true);
          const entries = body as Record<string, unknown>[];
          expect(deletes.length).toBe(entries.length);
          deletes.forEach((d, i) => {
            expect(d.pattern).toEqual(parseRulePattern(entries[i]!.pattern as string));
            if (d.expectedVersion !== undefined) expectU32(d.expectedVersion, 0);
          });
        }),
        { runs: 4000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'parses vqueue ids or throws InvalidIdError; accepted ids are vq_1 and 33 base62 digits',
    () => {
      fuzz(
        SURFACE,
        'parseVQueueId',
        fc.property(vqueueIdText, (input) => {
          let partitionKey: bigint;
          try {
            partitionKey = parseVQueueId(input);
          } catch (err) {
            expectOwnError(err, [InvalidIdError]);
            expect((err as InvalidIdError).input).toBe(input);
            return;
          }
          expect(input).toHaveLength(VQUEUE_ID_LENGTH);
          expect(input).toMatch(/^vq_1[0-9a-zA-Z]{33}$/);
          expect(partitionKey >= 0n && partitionKey < 2n ** 64n).toBe(true);
        }),
        { runs: 4000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'reads back the partition key of every vqueue id it makes',
    () => {
      fuzz(
        SURFACE,
        'vqueueId',
        fc.property(
          fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
          fc.string({ maxLength: 12 }),
          fc.option(fc.string({ maxLength: 12 })),
          fc.option(fc.string({ maxLength: 12 })),
          fc.option(fc.string({ maxLength: 12 })),
          (pk, service, scope, limitKey, lock) => {
            const id = vqueueId(pk, { service, scope, limitKey, lock });
            expect(id).toMatch(/^vq_1[0-9a-zA-Z]{33}$/);
            expect(parseVQueueId(id)).toBe(pk);
          },
        ),
        { runs: 2000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

/** `KNOWN_VERSION` placeholders replaced by the version `versionOf` gives the entry's pattern (0 when none). */
function withKnownVersions(body: unknown, versionOf: (pattern: string) => number | undefined): unknown {
  if (!Array.isArray(body)) return body;
  return body.map((e: unknown) => {
    if (typeof e !== 'object' || e === null || Array.isArray(e)) return e;
    const entry = { ...(e as Record<string, unknown>) };
    let known = 0;
    try {
      if (typeof entry['pattern'] === 'string') known = versionOf(parseRulePattern(entry['pattern']).text) ?? 0;
    } catch {
      // Not a pattern: the entry is refused whatever its version.
    }
    if (entry['expected_version'] === KNOWN_VERSION) entry['expected_version'] = known;
    const pre = entry['precondition'];
    if (typeof pre === 'object' && pre !== null && (pre as Record<string, unknown>)['version'] === KNOWN_VERSION) {
      entry['precondition'] = { ...pre, version: known };
    }
    return entry;
  });
}

function jsonRoundTrip(value: unknown): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    // fc.anything makes values JSON cannot hold (BigInt): those are passed as they are.
    return value;
  }
  return text === undefined ? undefined : (JSON.parse(text) as unknown);
}

function expectU32(n: number, min: number): void {
  expect(Number.isInteger(n), String(n)).toBe(true);
  expect(n >= min && n <= 0xffff_ffff, String(n)).toBe(true);
}

// ---- a runtime node with flow control -------------------------------------------------------------------------------

/** Percent-encodes the UTF-8 bytes of `s` (lone surrogates as U+FFFD) except unreserved characters. */
function percentEncode(s: string): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`,
    )
    .join('');
}

/** Characters no HTTP client sends raw (spaces, controls, non-ASCII) percent-encoded as UTF-8; the rest kept. */
function sendable(target: string): string {
  return [...target].map((c) => (/^[\x21-\x7e]$/.test(c) ? c : percentEncode(c))).join('');
}

/** A path segment as a client would send it: raw, percent-encoded, or percent-escapes of arbitrary bytes. */
const pathSegment = (value: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: value.map(sendable) },
    { weight: 2, arbitrary: value.map(percentEncode) },
    { weight: 1, arbitrary: value.map((v) => encodeURIComponent(Buffer.from(v, 'utf8').toString('utf8'))) },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ maxLength: 12 })
        .map((b) => [...b].map((x) => `%${x.toString(16).padStart(2, '0').toUpperCase()}`).join('')),
    },
    { weight: 1, arbitrary: fc.constantFrom('%', '%2', '%ZZ', '%2F', '%00', '%C3%28', '%FF%FE', '..', '.', '') },
  );

interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
}

function messageOf(answer: Answer): string {
  if (answer.contentType.startsWith('application/json')) {
    try {
      const json = JSON.parse(answer.text) as { message?: unknown };
      return typeof json.message === 'string' ? json.message : '';
    } catch {
      return '';
    }
  }
  return answer.text;
}

/** 2xx, or a 4xx that says why (route and method refusals, 404 and 405, have no body on the admin API). */
function expectAnswer(what: string, answer: Answer, bodiless: readonly number[] = []): void {
  if (answer.status >= 500 || answer.status < 200 || (answer.status >= 300 && answer.status < 400)) {
    throw new Error(`${what} answered ${answer.status}: ${answer.text}`);
  }
  if (answer.status >= 400 && !bodiless.includes(answer.status)) {
    expect(messageOf(answer).trim(), `${what} answered ${answer.status}: ${answer.text}`).not.toBe('');
  }
}

describe('a runtime node with flow control (PostgreSQL storage, SDK services)', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let agent: http.Agent;

  // Handlers that take any input and answer at once: whatever reaches them, the call completes (and a concurrency
  // rule the fuzzer set up never holds a call for long).
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
    },
  });
  const signup = restate.workflow({
    name: 'Signup',
    handlers: { run: async (_ctx: restate.WorkflowContext, _input: unknown) => 'ok' },
  });

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_EXPERIMENTAL_ENABLE_VQUEUES: 'true',
      // A handler that fails is not retried for long: it would hold a concurrency permit the fuzzer's rules set.
      RATCHET_RETRY_INITIAL_INTERVAL: '20ms',
      RATCHET_RETRY_MAX_ATTEMPTS: '2',
      RATCHET_RETRY_ON_MAX_ATTEMPTS: 'kill',
    });
    endpoint = await startEndpoint({ services: [greeter, counter, signup], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    // A connection per request: a request the server's HTTP parser refuses ends its connection.
    agent = new http.Agent({ keepAlive: false });
  }, 120_000);

  afterAll(async () => {
    agent?.destroy();
    await endpoint?.close();
    await runtime?.stop();
    await db?.drop();
  });

  /** Sends the request with its path as given; undefined when node's client refuses to build it (no client could). */
  function send(
    base: string,
    method: string,
    path: string,
    headers: Record<string, string | string[]>,
    body: string,
  ): Promise<Answer | undefined> {
    // Header values node's client can send (latin-1 without controls).
    const sendableHeader = (v: string): boolean => /^[\t\x20-\x7e\x80-\xff]*$/.test(v);
    headers = Object.fromEntries(
      Object.entries(headers).filter(([, v]) => (Array.isArray(v) ? v.every(sendableHeader) : sendableHeader(v))),
    );
    return new Promise((resolve, reject) => {
      let req: http.ClientRequest;
      try {
        req = http.request({
          agent,
          host: LOOPBACK,
          port: new URL(base).port,
          method,
          path,
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          timeout: 15_000,
        });
      } catch {
        resolve(undefined);
        return;
      }
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type'] ?? ''),
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within 15 s to ${method} ${path}`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  const JSON_TYPE = { 'content-type': 'application/json' };
  const contentType = fc.oneof(
    { weight: 8, arbitrary: fc.constant('application/json') },
    { weight: 1, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'text/plain', '', 'application/jsonx') },
  );
  const VERSION_PREFIXES = ['', '', '', '', '', '', '/v2', '/v3', '/v4', '/v1'];

  /** Versions of the rules as the node last answered them, for preconditions and expected versions that hold. */
  const versions = new Map<string, number>();

  /** A rule-book body as text: a structured batch, the text of one damaged, or not JSON at all. */
  const ruleBodyText = (
    entry: fc.Arbitrary<unknown>,
    valid: fc.Arbitrary<unknown>,
  ): fc.Arbitrary<{ value?: unknown; text?: string }> =>
    fc.oneof(
      { weight: 6, arbitrary: ruleBody(entry, valid).map((value) => ({ value })) },
      {
        weight: 2,
        arbitrary: mutatedString(
          ruleBody(entry, valid).map((b) => JSON.stringify(jsonRoundTrip(b)) ?? ''),
          fc.oneof(nastyFragment, fc.constantFrom('"', ',', '{', '}', '[', ']', ':', 'null', '\\u0000', '\\ud800')),
        ).map((text) => ({ text })),
      },
      { weight: 1, arbitrary: anyText().map((text) => ({ text })) },
    );

  it(
    'answers PUT /limits/rules and POST /limits/rules/bulk-delete with a 2xx or a 4xx that says why',
    async () => {
      let accepted = 0;
      await fuzzAsync(
        SURFACE,
        'rule-book',
        fc.asyncProperty(
          fc.oneof(
            ruleBodyText(upsertEntry, validUpsertEntry).map((b) => ({ op: 'upsert' as const, ...b })),
            ruleBodyText(deleteEntry, validDeleteEntry).map((b) => ({ op: 'delete' as const, ...b })),
          ),
          fc.constantFrom(...VERSION_PREFIXES),
          contentType,
          async (req, prefix, type) => {
            const text =
              req.text ?? JSON.stringify(jsonRoundTrip(withKnownVersions(req.value, (p) => versions.get(p)))) ?? '';
            const path = `${prefix}/limits/rules${req.op === 'delete' ? '/bulk-delete' : ''}`;
            const what = `${req.op === 'upsert' ? 'PUT' : 'POST'} ${path} (${type}) ${JSON.stringify(text)}`;
            const answer = await send(
              runtime.adminUrl,
              req.op === 'upsert' ? 'PUT' : 'POST',
              path,
              type === '' ? {} : { 'content-type': type },
              text,
            );
            if (answer === undefined) throw new Error(`could not send ${what}`);
            expectAnswer(what, answer);
            if (answer.status < 300) {
              accepted++;
              const result = JSON.parse(answer.text) as unknown;
              expect(Array.isArray(result), answer.text).toBe(true);
              if (req.op === 'upsert') {
                for (const r of result as { pattern: string; version: number }[]) versions.set(r.pattern, r.version);
              } else {
                for (const p of result as string[]) versions.delete(p);
              }
            }
            await processErrors.check();
          },
        ),
        { runs: 1000, weight: 0.02 },
      );
      // The inputs are not all refusals.
      expect(accepted).toBeGreaterThan(0);
    },
    timeoutFor(1000, 0.02, 50),
  );

  it(
    'answers POST /vqueues/{id}/pause|resume with a 202 or a 4xx that says why',
    async () => {
      await fuzzAsync(
        SURFACE,
        'vqueues',
        fc.asyncProperty(
          pathSegment(vqueueIdText),
          fc.constantFrom('pause', 'resume', 'pause', 'resume', 'stop', 'pause/x', ''),
          fc.oneof(
            { weight: 8, arbitrary: fc.constant('POST') },
            { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT') },
          ),
          fc.constantFrom(...VERSION_PREFIXES),
          fc.constantFrom('', '{}', 'null', '[1]'),
          async (id, op, method, prefix, body) => {
            const path = `${prefix}/vqueues/${id}${op === '' ? '' : `/${op}`}`;
            const what = `${method} ${path}`;
            const answer = await send(runtime.adminUrl, method, path, body === '' ? {} : JSON_TYPE, body);
            if (answer === undefined) return;
            // A path no route serves (an id with a slash, an unknown operation) is a bodiless 404 or 405.
            expectAnswer(what, answer, [404, 405]);
            if (method === 'POST' && (op === 'pause' || op === 'resume') && answer.status < 300) {
              expect(answer.status, what).toBe(202);
            }
            await processErrors.check();
          },
        ),
        { runs: 600, weight: 0.02 },
      );
    },
    timeoutFor(600, 0.02, 50),
  );

  it(
    'answers scoped calls and sends with limit keys with a 2xx or a 4xx that says why',
    async () => {
      // Mostly well-formed (so that invocations are made and meet the fuzzed rules), else anything.
      const scope = fc.oneof(
        { weight: 4, arbitrary: fc.oneof(fc.constantFrom('s1', 'tenant-a', 'scope1'), restrictedValue) },
        { weight: 3, arbitrary: pathSegment(fc.oneof(component, anyText())) },
      );
      const target = fc.oneof(
        { weight: 6, arbitrary: fc.constant('/Greeter/greet') },
        { weight: 1, arbitrary: pathSegment(fc.string({ maxLength: 6 })).map((k) => `/Counter/${k}/add`) },
        { weight: 1, arbitrary: pathSegment(fc.string({ maxLength: 6 })).map((k) => `/Signup/${k}/run`) },
        { weight: 1, arbitrary: fc.constantFrom('/Unknown/greet', '/Greeter/nope', '/Greeter', '/Greeter/greet/x') },
      );
      const limitKey = fc.oneof(
        { weight: 3, arbitrary: fc.constant(null) },
        {
          weight: 3,
          arbitrary: fc.oneof(fc.constantFrom('k1', 'u1', 'k1/k2', 'user-1/session.2', 'k1/'), restrictedValue),
        },
        { weight: 2, arbitrary: limitKeyText },
      );
      const rare = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> =>
        fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
      const request = fc.record({
        kind: fc.oneof(
          { weight: 6, arbitrary: fc.constant('scoped') },
          { weight: 1, arbitrary: fc.constant('target-body') },
          { weight: 1, arbitrary: fc.constantFrom('unscoped', 'mutated') },
        ),
        scope,
        verb: fc.oneof(
          { weight: 8, arbitrary: fc.constantFrom('call', 'send') },
          { weight: 1, arbitrary: fc.constantFrom('attach', 'scope', '') },
        ),
        target,
        header: limitKey,
        // The header given twice (node joins the values with a comma).
        repeatedHeader: rare(limitKey),
        // attach/output/lookup of a scoped invocation: the scope in the target body.
        targetBody: fc.record({
          op: fc.constantFrom('attach', 'output', 'lookup'),
          body: fc.oneof(
            fc.record(
              {
                target: fc.constant('idempotentInvocation'),
                service: fc.constant('Greeter'),
                handler: fc.constant('greet'),
                idempotencyKey: fc.constantFrom('k1', 'k2', ''),
                scope: orWrong(fc.oneof(fc.constantFrom('s1', 'tenant-a'), restrictedValue, anyText()), 4),
              },
              { requiredKeys: ['target', 'service', 'handler', 'idempotencyKey'] },
            ),
            fc.record(
              {
                target: fc.constant('workflow'),
                workflowName: fc.constant('Signup'),
                workflowKey: fc.string({ maxLength: 6 }),
                scope: orWrong(fc.oneof(fc.constantFrom('s1', 'tenant-a'), restrictedValue, anyText()), 4),
              },
              { requiredKeys: ['target', 'workflowName', 'workflowKey'] },
            ),
          ),
        }),
        query: limitKey,
        delay: rare(fc.constantFrom('10ms', '0s', 'x', '-1s')),
        idempotencyKey: rare(fc.constantFrom('k1', 'k2', '')),
        body: fc.oneof(
          fc.constant('"x"'),
          fc.constant(''),
          anyJson.map((v) => JSON.stringify(v) ?? ''),
        ),
        mutations: mutatedString(fc.constant('/restate/scope/s1/send/Greeter/greet')),
      });
      let accepted = 0;
      await fuzzAsync(
        SURFACE,
        'ingress',
        fc.asyncProperty(request, async (r) => {
          const params: string[] = [];
          if (r.query !== null) params.push(`limit-key=${sendable(r.query)}`);
          if (r.delay !== null) params.push(`delay=${r.delay}`);
          const query = params.length === 0 ? '' : `?${params.join('&')}`;
          let path: string;
          let body = r.body;
          if (r.kind === 'unscoped') path = `/restate/${r.verb}${r.target}`;
          else if (r.kind === 'mutated') path = sendable(r.mutations);
          else if (r.kind === 'target-body') {
            path = `/restate/${r.targetBody.op}`;
            body = JSON.stringify(r.targetBody.body);
          } else path = `/restate/scope/${r.scope}/${r.verb}${r.target}`;
          const headers: Record<string, string | string[]> = { 'content-type': 'application/json' };
          if (r.header !== null) {
            headers['x-restate-limit-key'] = r.repeatedHeader === null ? r.header : [r.header, r.repeatedHeader ?? ''];
          }
          if (r.idempotencyKey !== null) headers['idempotency-key'] = r.idempotencyKey;
          const what = `POST ${path}${query} ${JSON.stringify(headers)} ${JSON.stringify(body)}`;
          const answer = await send(runtime.ingressUrl, 'POST', path + query, headers, body);
          if (answer === undefined) return;
          // restate's own 5xx for an attach/output/lookup target body it cannot read (as in ingress.fuzz.test.ts).
          if (r.kind === 'target-body' && answer.status === 500 && messageOf(answer).startsWith('cannot read body: ')) {
            return;
          }
          expectAnswer(what, answer);
          if (answer.status < 300) accepted++;
          await processErrors.check();
        }),
        { runs: 400, weight: 0.01 },
      );
      expect(accepted).toBeGreaterThan(0);
    },
    timeoutFor(400, 0.01, 100),
  );

  it('keeps serving: health on both listeners, a scoped call with a limit key', async () => {
    const admin = await send(runtime.adminUrl, 'GET', '/health', {}, '');
    expect(admin?.status).toBe(200);
    const ingress = await send(runtime.ingressUrl, 'GET', '/restate/health', {}, '');
    expect(ingress?.status).toBe(200);
    const call = await send(
      runtime.ingressUrl,
      'POST',
      '/restate/scope/fuzz-final/call/Greeter/greet',
      { ...JSON_TYPE, 'x-restate-limit-key': 'k1/k2' },
      '"x"',
    );
    expect(call?.status, call?.text).toBe(200);
    // What the fuzzed requests stored reads back through SQL.
    for (const table of ['sys_rules', 'sys_vqueue_meta', 'sys_user_limits', 'sys_vqueues', 'sys_invocation']) {
      const res = await send(
        runtime.adminUrl,
        'POST',
        '/query',
        JSON_TYPE,
        JSON.stringify({ query: `SELECT * FROM ${table}` }),
      );
      expect(res?.status, `${table}: ${res?.text}`).toBe(200);
    }
    await processErrors.check();
  });
});
