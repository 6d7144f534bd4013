import * as restate from '@restatedev/restate-sdk';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../support/postgres.ts';
import { registerEndpoint } from '../support/registration.ts';
import { startRestateServer } from '../support/restate-server.ts';
import { startEndpoint } from '../support/sdk-endpoint.ts';
import { counterObject } from '../support/services/counter.ts';
import { greeterService } from '../support/services/greeter.ts';
import { waitFor } from '../support/wait.ts';
import {
  INVOCATION_ID,
  describeExchange,
  httpRequest,
  normalize,
  selectedTargets,
  useTargets,
  type Exchange,
  type HttpRequest,
  type Target,
  type TargetName,
} from './targets.ts';

/**
 * Flow control (restate's experimental vqueues), restate-server 1.7.12 with `experimental-enable-vqueues = true` vs
 * Ratchet with `RATCHET_EXPERIMENTAL_ENABLE_VQUEUES=true`: the same requests on both, in the same order, each target
 * with its own SDK endpoint (same services, HTTP/2). Covered: the limiter's rule book (`PUT /limits/rules`,
 * `POST /limits/rules/bulk-delete`, its versions and preconditions, `sys_rules`), `POST /vqueues/{id}/pause|resume`,
 * scoped ingress calls with limit keys, and `GET /version`.
 *
 * Compared: status, content type, `allow`, and the body: JSON with `last_modified*` left out and rule versions taken
 * relative to an anchor rule written at the start of the test (both books start empty, which the first test checks
 * with absolute versions, so a discrepancy in one test does not spill into the next); text with restate's serde
 * position suffix (` at line 1 column N`) left out; Ratchet's `service_code` (its mirror of `restate_code` in every
 * admin error, see admin-schema.compat.test.ts) left out. Ingress answers are compared as the ingress suite compares
 * them (targets.ts `normalize`). restate-server's answer is also checked against what restate-server 1.7.12 answered
 * when probed by hand (the expected values below), so a change in the harness shows up as such.
 *
 * Intended differences, asserted as such:
 * - a scoped Workflow call: restate accepts it, Ratchet refuses it (400 "scope is not supported for Workflow
 *   targets");
 * - pausing an idle vqueue: restate still starts new invocations of it, Ratchet holds them until it is resumed;
 * - the words after "Failed to parse the request body as JSON: " (each server's JSON parser);
 * - vqueue ids: same format and partition prefix, each server's own digest after it;
 * - a limit key header that is not ASCII: 400 on both, restate's message is a Rust debug value.
 */

// --------------------------------------------------------------------------------------------------------------------
// Services (identical for both targets)

/** What the handler saw: its input, and the scope and limit key of the invocation. */
const whoami = async (
  ctx: restate.Context,
  input?: unknown,
): Promise<{ input: unknown; scope: string | null; limitKey: string | null }> => {
  const request = ctx.request();
  return Promise.resolve({ input: input ?? null, scope: request.scope ?? null, limitKey: request.limitKey ?? null });
};

const greeter = greeterService({ handlers: { whoami } });
const counter = counterObject();
const flow = restate.workflow({
  name: 'Flow',
  handlers: {
    run: (ctx: restate.WorkflowContext, input: unknown) =>
      Promise.resolve({ input, key: ctx.key, scope: ctx.request().scope ?? null }),
  },
});
const SERVICES = [greeter, counter, flow];

// --------------------------------------------------------------------------------------------------------------------
// Targets

/** restate-server propagates a new schema to its ingress asynchronously, sometimes slowly on a busy machine. */
const SERVICES_VISIBLE_TIMEOUT_MS = 30_000;

async function startFlowTarget(name: TargetName): Promise<Target> {
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async (): Promise<void> => {
    const errors: unknown[] = [];
    for (const close of closers.reverse()) await close().catch((err: unknown) => errors.push(err));
    closers.length = 0;
    if (errors.length > 0) throw new AggregateError(errors, `stopping the ${name} target failed`);
  };
  try {
    const endpoint = await startEndpoint({ services: SERVICES, transport: 'h2' });
    closers.push(() => endpoint.close());
    if (name === 'restate') {
      const server = await startRestateServer({
        enableProtocolV7: true,
        config: { 'experimental-enable-vqueues': true },
      });
      closers.push(() => server.stop());
      try {
        await registerEndpoint(server, endpoint, { timeoutMs: SERVICES_VISIBLE_TIMEOUT_MS });
      } catch (err) {
        throw new Error(`${String(err)}\n--- restate-server output ---\n${server.output().slice(-20_000)}`, {
          cause: err,
        });
      }
      return {
        name,
        tag: 'via-restate',
        ingressUrl: server.ingressUrl,
        adminUrl: server.adminUrl,
        output: () => server.output(),
        stop: closeAll,
      };
    }
    // Imported lazily: the restate half runs even while Ratchet's runtime does not build.
    const { startTestRuntime } = await import('../integration/support/runtime.ts');
    const db = await createTestDatabase();
    closers.push(() => db.drop());
    const runtime = await startTestRuntime(db.url, { RATCHET_EXPERIMENTAL_ENABLE_VQUEUES: 'true' });
    closers.push(() => runtime.stop());
    await registerEndpoint(runtime, endpoint, { timeoutMs: SERVICES_VISIBLE_TIMEOUT_MS });
    return {
      name,
      tag: 'via-ratchet',
      ingressUrl: runtime.ingressUrl,
      adminUrl: runtime.adminUrl,
      output: () => '',
      stop: closeAll,
    };
  } catch (err) {
    await closeAll().catch(() => undefined);
    throw err;
  }
}

const names = selectedTargets();
const targets = useTargets(startFlowTarget);

// --------------------------------------------------------------------------------------------------------------------
// Requests

type Sides = Map<TargetName, Exchange>;
type Api = 'admin' | 'ingress';
type Build = HttpRequest | ((t: Target) => HttpRequest);

const JSON_CT = { 'content-type': 'application/json' };

/** Sends the request to every target at once (one request per target). */
async function onBoth(api: Api, build: Build): Promise<Sides> {
  const list = [...targets.values()];
  const exchanges = await Promise.all(
    list.map(async (t): Promise<Exchange> => {
      const request = typeof build === 'function' ? build(t) : build;
      const response = await httpRequest(api === 'admin' ? t.adminUrl : t.ingressUrl, request);
      return { target: t.name, request, response };
    }),
  );
  return new Map(list.map((t, i) => [t.name, exchanges[i]!]));
}

function put(body: unknown, headers: Record<string, string> = JSON_CT): HttpRequest {
  return {
    method: 'PUT',
    path: '/limits/rules',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  };
}

function bulkDelete(body: unknown): HttpRequest {
  return { method: 'POST', path: '/limits/rules/bulk-delete', headers: JSON_CT, body: JSON.stringify(body) };
}

function post(path: string, body?: unknown, headers: Record<string, string> = JSON_CT): HttpRequest {
  return body === undefined
    ? { method: 'POST', path, headers }
    : { method: 'POST', path, headers, body: JSON.stringify(body) };
}

function dump(sides: Sides): string {
  return [...sides.values()].map(describeExchange).join('\n\n');
}

function side(sides: Sides, name: TargetName): Exchange {
  const x = sides.get(name);
  if (x === undefined) throw new Error(`no ${name} exchange`);
  return x;
}

// --------------------------------------------------------------------------------------------------------------------
// Admin comparison

/** Per target, the rule-book version rule versions are taken relative to (0: absolute). */
type Bases = Map<TargetName, number>;

const ABSOLUTE: Bases = new Map();

interface View {
  status: number;
  contentType: string | null;
  allow: string | null;
  body: unknown;
}

function header(x: Exchange, name: string): string | null {
  const v = x.response.headers[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(', ') : v;
}

/** Rule versions relative to `base`; `last_modified*` dropped. */
function normalizeJson(value: unknown, base: number): unknown {
  if (typeof value === 'string') {
    return value.replace(
      /actual version: Some\(v(\d+)\)/g,
      (_m, n: string) => `actual version: Some(v${Number(n) - base})`,
    );
  }
  if (Array.isArray(value)) return value.map((v) => normalizeJson(v, base));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        // Ratchet mirrors restate_code as service_code (the specification's name) in every admin error, as in
        // admin-schema.compat.test.ts; restate has only the former.
        .filter(([k]) => k !== 'last_modified_millis_since_epoch' && k !== 'last_modified' && k !== 'service_code')
        .map(([k, v]) => [k, k === 'version' && typeof v === 'number' ? v - base : normalizeJson(v, base)]),
    );
  }
  return value;
}

/** Key order of every object in a JSON value, depth first. */
function keyOrders(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(keyOrders);
  if (typeof value === 'object' && value !== null) {
    return [Object.keys(value).join(','), ...Object.values(value).flatMap(keyOrders)];
  }
  return [];
}

/** restate's 422 and 400 texts end with serde's position; Ratchet's need not. */
const SERDE_POSITION = / at line \d+ column \d+$/;

function view(x: Exchange, base: number): View {
  const contentType = header(x, 'content-type');
  const text = x.response.text;
  let body: unknown = text;
  if (text !== '' && contentType !== null && contentType.startsWith('application/json')) {
    try {
      body = normalizeJson(JSON.parse(text), base);
    } catch {
      body = text;
    }
  } else if (text !== '') {
    body = text.replace(SERDE_POSITION, '');
  }
  return { status: x.response.status, contentType, allow: header(x, 'allow'), body };
}

interface Expected {
  readonly status: number;
  /** restate-server's normalized body (relative versions); checked when given. */
  readonly body?: unknown;
}

/**
 * restate-server's answer must have the transcript's status (and body, when given); Ratchet's view must equal
 * restate-server's, key order included. Returns the views.
 */
function expectSame(sides: Sides, expected: Expected, bases: Bases = ABSOLUTE): Map<TargetName, View> {
  const views = new Map([...sides].map(([n, x]) => [n, view(x, bases.get(n) ?? 0)] as const));
  const ref = views.get('restate');
  const msg = `\n${dump(sides)}\n`;
  if (ref !== undefined) {
    expect(ref.status, `restate-server vs transcript${msg}`).toBe(expected.status);
    if (expected.body !== undefined) expect(ref.body, `restate-server vs transcript${msg}`).toEqual(expected.body);
  }
  const ratchet = views.get('ratchet');
  if (ratchet !== undefined) {
    if (ref === undefined) {
      expect(ratchet.status, `Ratchet vs transcript${msg}`).toBe(expected.status);
      if (expected.body !== undefined) expect(ratchet.body, `Ratchet vs transcript${msg}`).toEqual(expected.body);
    } else {
      expect(ratchet, `Ratchet vs restate-server${msg}`).toEqual(ref);
      expect(keyOrders(ratchet.body), `Ratchet vs restate-server: key order${msg}`).toEqual(keyOrders(ref.body));
    }
  }
  return views;
}

async function same(api: Api, build: Build, expected: Expected, bases: Bases = ABSOLUTE): Promise<Sides> {
  const sides = await onBoth(api, build);
  expectSame(sides, expected, bases);
  return sides;
}

/** A 422 as restate words it (the serde position left out). */
function unprocessable(detail: string): Expected {
  return { status: 422, body: `Failed to deserialize the JSON body into the target type: ${detail}` };
}

function conflict(message: string): Expected {
  return { status: 409, body: { message, restate_code: null } };
}

/** A rule as `PUT /limits/rules` answers it, version relative. */
function rule(
  pattern: string,
  version: number,
  limits: { concurrency?: number } = {},
  extra: { description?: string; disabled?: boolean } = {},
): unknown {
  return {
    pattern,
    limits,
    ...(extra.description === undefined ? {} : { description: extra.description }),
    disabled: extra.disabled ?? false,
    version,
  };
}

let anchors = 0;

/**
 * Writes a fresh rule on every target and answers its version per target: the rule book's current version, which
 * the test's versions are then taken relative to.
 */
async function anchor(): Promise<Bases> {
  anchors += 1;
  const pattern = `anchor/a${anchors}`;
  const sides = await onBoth('admin', put([{ pattern, limits: { concurrency: 1 } }]));
  const bases: Bases = new Map();
  for (const [n, x] of sides) {
    expect(x.response.status, `anchor ${pattern}\n${dump(sides)}`).toBe(200);
    const [r] = JSON.parse(x.response.text) as { version: number }[];
    bases.set(n, r!.version);
  }
  return bases;
}

/** The version the target answered for the first rule of a `PUT /limits/rules`. */
function versionOf(x: Exchange): number {
  const [r] = JSON.parse(x.response.text) as { version: number }[];
  return r!.version;
}

/** `POST /query` rows (JSON). */
async function query(t: Target, sql: string): Promise<Record<string, unknown>[]> {
  const res = await httpRequest(t.adminUrl, {
    method: 'POST',
    path: '/query',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: sql }),
  });
  if (res.status !== 200) throw new Error(`[${t.name}] ${sql} -> ${res.status} ${res.text}`);
  return (JSON.parse(res.text) as { rows: Record<string, unknown>[] }).rows;
}

async function queryBoth(sql: string | ((t: Target) => string)): Promise<Map<TargetName, Record<string, unknown>[]>> {
  const list = [...targets.values()];
  const rows = await Promise.all(list.map((t) => query(t, typeof sql === 'function' ? sql(t) : sql)));
  return new Map(list.map((t, i) => [t.name, rows[i]!]));
}

function expectSameRows(
  rows: Map<TargetName, Record<string, unknown>[]>,
  expected: unknown[] | undefined,
  bases: Bases = ABSOLUTE,
): void {
  const norm = new Map([...rows].map(([n, r]) => [n, normalizeJson(r, bases.get(n) ?? 0)] as const));
  const msg = `\n${[...rows].map(([n, r]) => `[${n}] ${JSON.stringify(r)}`).join('\n')}\n`;
  const ref = norm.get('restate');
  if (ref !== undefined && expected !== undefined) expect(ref, `restate-server vs transcript${msg}`).toEqual(expected);
  const ratchet = norm.get('ratchet');
  if (ratchet !== undefined) expect(ratchet, `Ratchet vs restate-server${msg}`).toEqual(ref ?? expected);
}

// --------------------------------------------------------------------------------------------------------------------
// Ingress comparison

function ingressOk(sides: Sides, body: unknown): void {
  expectIngress(sides, 200, body);
}

function ingressAccepted(sides: Sides): void {
  expectIngress(sides, 202, { invocationId: '<invocation-id>', status: 'Accepted' });
}

function ingressError(sides: Sides, status: number, message: string): void {
  expectIngress(sides, status, { code: status, message, source: 'ingress' });
}

/** restate-server's status and body must be the transcript's; Ratchet's normalized answer must equal restate's. */
function expectIngress(sides: Sides, status: number, body: unknown): void {
  const msg = `\n${dump(sides)}\n`;
  const norms = new Map([...sides].map(([n, x]) => [n, normalize(x, targets.get(n)!.tag)] as const));
  const ref = norms.get('restate');
  const first = ref ?? norms.get('ratchet')!;
  expect(
    { status: first.status, body: first.body },
    `${ref === undefined ? 'Ratchet' : 'restate-server'} vs transcript${msg}`,
  ).toEqual({
    status,
    body,
  });
  const ratchet = norms.get('ratchet');
  if (ref !== undefined && ratchet !== undefined) expect(ratchet, `Ratchet vs restate-server${msg}`).toEqual(ref);
}

function scoped(scope: string, kind: 'call' | 'send', target: string, limitKey?: string, query = ''): HttpRequest {
  return post(
    `/restate/scope/${scope}/${kind}/${target}${query}`,
    { n: 1 },
    limitKey === undefined ? JSON_CT : { ...JSON_CT, 'x-restate-limit-key': limitKey },
  );
}

function invocationIdOf(x: Exchange): string {
  const id = x.response.headers['x-restate-id'];
  expect(id, describeExchange(x)).toMatch(INVOCATION_ID);
  return id as string;
}

const A36 = 'a'.repeat(36);
const A37 = 'a'.repeat(37);
const CHARSET = 'value contains characters outside the allowed set [a-zA-Z0-9_.-]';

// --------------------------------------------------------------------------------------------------------------------

describe(`flow control compatibility (${names.join(' vs ')})`, () => {
  it('GET /version: features.vqueues is true', async () => {
    const sides = await onBoth('admin', { method: 'GET', path: '/version' });
    for (const [n, x] of sides) {
      expect(x.response.status, dump(sides)).toBe(200);
      const body = JSON.parse(x.response.text) as { features?: Record<string, unknown> };
      expect(body.features?.['vqueues'], `[${n}] ${x.response.text}`).toBe(true);
    }
  });

  describe('PUT /limits/rules', () => {
    it('the rule book starts empty: the first insert is version 1 on both', async () => {
      await same('admin', put([{ pattern: '*', limits: { concurrency: 5 } }]), {
        status: 200,
        body: [rule('*', 1, { concurrency: 5 })],
      });
    });

    it('valid patterns are stored, each insert with the next book version; `scope1/` is `scope1`', async () => {
      const bases = await anchor();
      const patterns = ['scope1/*', 'scope1/foo/*', 'scope1/foo/bar', 'scope1', '*/foo', '*/*', '*/*/*', A36];
      for (const [i, pattern] of patterns.entries()) {
        await same(
          'admin',
          put([{ pattern, limits: { concurrency: 5 } }]),
          { status: 200, body: [rule(pattern, i + 1, { concurrency: 5 })] },
          bases,
        );
      }
      // Normalised to the existing `scope1` (the 4th insert above), unchanged.
      await same(
        'admin',
        put([{ pattern: 'scope1/', limits: { concurrency: 5 } }]),
        { status: 200, body: [rule('scope1', 4, { concurrency: 5 })] },
        bases,
      );
    });

    it.each([
      ['**', `[0].pattern: invalid component: ${CHARSET}`],
      ['s*', `[0].pattern: invalid component: ${CHARSET}`],
      ['a/b/c/d', '[0].pattern: too many path components (max 3)'],
      ['bad!', `[0].pattern: invalid component: ${CHARSET}`],
      ['scope1/bad!', `[0].pattern: invalid component: ${CHARSET}`],
      ['', '[0].pattern: pattern cannot be empty'],
      ['/scope1', '[0].pattern: invalid component: value cannot be empty'],
      ['scope1//x', '[0].pattern: invalid component: value cannot be empty'],
      [A37, '[0].pattern: invalid component: value too long: 37 bytes (max 36)'],
      [`scope1/${A37}`, '[0].pattern: invalid component: value too long: 37 bytes (max 36)'],
    ])('pattern %j → 422 %s', async (pattern, detail) => {
      await same('admin', put([{ pattern, limits: { concurrency: 5 } }]), unprocessable(detail));
    });

    it('limits null, missing or {} → a rule without concurrency', async () => {
      const bases = await anchor();
      await same(
        'admin',
        put([{ pattern: 'lim/x', limits: { concurrency: null } }]),
        { status: 200, body: [rule('lim/x', 1)] },
        bases,
      );
      await same('admin', put([{ pattern: 'lim/x' }]), { status: 200, body: [rule('lim/x', 1)] }, bases);
      await same('admin', put([{ pattern: 'lim/x', limits: {} }]), { status: 200, body: [rule('lim/x', 1)] }, bases);
    });

    it.each([
      ['0', '[0].limits.concurrency: invalid value: integer `0`, expected a nonzero u32'],
      ['-1', '[0].limits.concurrency: invalid value: integer `-1`, expected a nonzero u32'],
      ['1.5', '[0].limits.concurrency: invalid type: floating point `1.5`, expected a nonzero u32'],
      ['"2"', '[0].limits.concurrency: invalid type: string "2", expected a nonzero u32'],
      ['4294967296', '[0].limits.concurrency: invalid value: integer `4294967296`, expected a nonzero u32'],
    ])('concurrency %s → 422 %s', async (raw, detail) => {
      await same('admin', put(`[{"pattern": "lim/y", "limits": {"concurrency": ${raw}}}]`), unprocessable(detail));
    });

    it('concurrency 2^31 and 2^32-1 are accepted; unknown fields are ignored', async () => {
      const bases = await anchor();
      await same(
        'admin',
        put([{ pattern: 'lim/big', limits: { concurrency: 2 ** 31 } }]),
        { status: 200, body: [rule('lim/big', 1, { concurrency: 2 ** 31 })] },
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'lim/big', limits: { concurrency: 2 ** 32 - 1 } }]),
        { status: 200, body: [rule('lim/big', 2, { concurrency: 2 ** 32 - 1 })] },
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'lim/unk', limits: { concurrency: 1, rate: 5 }, extra: 1 }]),
        { status: 200, body: [rule('lim/unk', 3, { concurrency: 1 })] },
        bases,
      );
    });

    it('an object instead of an array → 422', async () => {
      await same(
        'admin',
        put({ pattern: 'lim/z', limits: { concurrency: 3 } }),
        unprocessable('invalid type: map, expected a sequence'),
      );
    });

    it('an array of strings → 422', async () => {
      await same(
        'admin',
        put(['lim/z']),
        unprocessable('[0]: invalid type: string "lim/z", expected struct UpsertRuleRequest'),
      );
    });

    it('an empty array → 200 []', async () => {
      await same('admin', put([]), { status: 200, body: [] });
    });

    it("invalid JSON → 400 (the parser's own words after the common prefix: an intended difference)", async () => {
      const sides = await onBoth('admin', put('not json'));
      for (const [name, x] of sides) {
        expect(x.response.status, name).toBe(400);
        expect(x.response.text, name).toMatch(/^Failed to parse the request body as JSON: /);
      }
      const restate = sides.get('restate');
      if (restate !== undefined) expect(restate.response.text).toMatch(/: expected ident at line 1 column 2$/);
    });

    it('no content-type → 415', async () => {
      await same('admin', put([{ pattern: 'ct/x', limits: { concurrency: 1 } }], {}), {
        status: 415,
        body: 'Expected request with `Content-Type: application/json`',
      });
    });

    it('content-type text/plain → 415', async () => {
      await same('admin', put([{ pattern: 'ct/y', limits: { concurrency: 1 } }], { 'content-type': 'text/plain' }), {
        status: 415,
        body: 'Expected request with `Content-Type: application/json`',
      });
    });

    it('precondition type bogus, or matches without a version → 422', async () => {
      await same(
        'admin',
        put([{ pattern: 'pre/x', limits: { concurrency: 3 }, precondition: { type: 'bogus' } }]),
        unprocessable(
          '[0].precondition.type: unknown variant `bogus`, expected one of `none`, `matches`, `does_not_exist`',
        ),
      );
      await same(
        'admin',
        put([{ pattern: 'pre/x', limits: { concurrency: 3 }, precondition: { type: 'matches' } }]),
        unprocessable('[0].precondition: missing field `version`'),
      );
    });

    it('versions: insert, identical re-upsert, concurrency, description, disabled, limits removed', async () => {
      const bases = await anchor();
      const p = 'ver/a';
      const step = (body: unknown, expected: unknown): Promise<Sides> =>
        same('admin', put([body]), { status: 200, body: [expected] }, bases);
      await step({ pattern: p, limits: { concurrency: 1 } }, rule(p, 1, { concurrency: 1 }));
      // Identical: nothing changes.
      await step({ pattern: p, limits: { concurrency: 1 } }, rule(p, 1, { concurrency: 1 }));
      // Runtime-relevant: the rule's own version + 1.
      await step({ pattern: p, limits: { concurrency: 2 } }, rule(p, 2, { concurrency: 2 }));
      // Description only: the rule's version stays.
      await step(
        { pattern: p, limits: { concurrency: 2 }, description: 'hello' },
        rule(p, 2, { concurrency: 2 }, { description: 'hello' }),
      );
      await step(
        { pattern: p, limits: { concurrency: 2 }, description: 'hello', disabled: true },
        rule(p, 3, { concurrency: 2 }, { description: 'hello', disabled: true }),
      );
      await step(
        { pattern: p, limits: { concurrency: 2 }, description: 'hello', disabled: false },
        rule(p, 4, { concurrency: 2 }, { description: 'hello' }),
      );
      await step({ pattern: p, limits: {}, description: 'hello' }, rule(p, 5, {}, { description: 'hello' }));
      // Omitting the description clears it.
      await step({ pattern: p, limits: { concurrency: 2 } }, rule(p, 6, { concurrency: 2 }));
    });

    it('preconditions: matches (stale, current, absent), does_not_exist (existing, new), none', async () => {
      const bases = await anchor();
      const first = await same(
        'admin',
        put([{ pattern: 'pre/a', limits: { concurrency: 1 } }]),
        { status: 200, body: [rule('pre/a', 1, { concurrency: 1 })] },
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'pre/a', limits: { concurrency: 2 }, precondition: { type: 'matches', version: 999 } }]),
        conflict('rule precondition Matches(v999) for pattern pre/a failed (actual version: Some(v1))'),
        bases,
      );
      // Each target's own current version.
      await same(
        'admin',
        (t) =>
          put([
            {
              pattern: 'pre/a',
              limits: { concurrency: 3 },
              precondition: { type: 'matches', version: versionOf(side(first, t.name)) },
            },
          ]),
        { status: 200, body: [rule('pre/a', 2, { concurrency: 3 })] },
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'pre/a', limits: { concurrency: 3 }, precondition: { type: 'does_not_exist' } }]),
        conflict('rule precondition DoesNotExist for pattern pre/a failed (actual version: Some(v2))'),
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'pre/new', limits: { concurrency: 3 }, precondition: { type: 'does_not_exist' } }]),
        { status: 200, body: [rule('pre/new', 3, { concurrency: 3 })] },
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'pre/new2', limits: { concurrency: 3 }, precondition: { type: 'matches', version: 1 } }]),
        conflict('rule precondition Matches(v1) for pattern pre/new2 failed (actual version: None)'),
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'pre/new3', limits: { concurrency: 3 }, precondition: { type: 'none' } }]),
        { status: 200, body: [rule('pre/new3', 4, { concurrency: 3 })] },
        bases,
      );
      await same(
        'admin',
        put([{ pattern: 'pre/dis', limits: { concurrency: 3 }, disabled: true }]),
        { status: 200, body: [rule('pre/dis', 5, { concurrency: 3 }, { disabled: true })] },
        bases,
      );
      await same('admin', put([{ pattern: 'pre/nolim' }]), { status: 200, body: [rule('pre/nolim', 6)] }, bases);
    });

    it('the book version: batches, description-only changes, no-ops, failed batches, deletes', async () => {
      const bases = await anchor();
      const one = { concurrency: 1 };
      const ok = (body: unknown[], expected: unknown[]): Promise<Sides> =>
        same('admin', put(body), { status: 200, body: expected }, bases);
      await ok([{ pattern: 'vx/1', limits: one }], [rule('vx/1', 1, one)]);
      await ok([{ pattern: 'vx/2', limits: one }], [rule('vx/2', 2, one)]);
      // One batch, one book version.
      await ok(
        [
          { pattern: 'vx/3', limits: one },
          { pattern: 'vx/4', limits: one },
        ],
        [rule('vx/3', 3, one), rule('vx/4', 3, one)],
      );
      // Description only: the rule keeps its version, the book moves on (4).
      await ok([{ pattern: 'vx/1', limits: one, description: 'd1' }], [rule('vx/1', 1, one, { description: 'd1' })]);
      await same(
        'admin',
        put([
          { pattern: 'vx/5', limits: one },
          { pattern: 'vx/1', limits: one, precondition: { type: 'does_not_exist' } },
        ]),
        conflict('rule precondition DoesNotExist for pattern vx/1 failed (actual version: Some(v1))'),
        bases,
      );
      // The failed batch wrote nothing.
      await ok([{ pattern: 'vx/6', limits: one }], [rule('vx/6', 5, one)]);
      // Identical: no-op, the book does not move.
      await ok([{ pattern: 'vx/2', limits: one }], [rule('vx/2', 2, one)]);
      await ok([{ pattern: 'vx/7', limits: one }], [rule('vx/7', 6, one)]);
      // The rule's own version + 1 (the book moves to 7).
      await ok([{ pattern: 'vx/2', limits: { concurrency: 9 } }], [rule('vx/2', 3, { concurrency: 9 })]);
      // A delete moves the book (8).
      await same('admin', bulkDelete([{ pattern: 'vx/3' }]), { status: 200, body: ['vx/3'] }, bases);
      await ok([{ pattern: 'vx/8', limits: one }], [rule('vx/8', 9, one)]);
      // Re-inserted: a fresh book version, not the old one + 1.
      await ok([{ pattern: 'vx/3', limits: one }], [rule('vx/3', 10, one)]);
      await same(
        'admin',
        put([{ pattern: 'vx/1', limits: one, description: 'd2', precondition: { type: 'matches', version: 1 } }]),
        // An absolute version 1 is stale on both (the anchor alone is ≥ 1).
        { status: 409 },
        bases,
      );
      const rows = await queryBoth(
        "SELECT pattern, concurrency, description, disabled, version FROM sys_rules WHERE pattern LIKE 'vx/%' ORDER BY pattern",
      );
      expectSameRows(
        rows,
        [
          { pattern: 'vx/1', concurrency: 1, description: 'd1', disabled: false, version: 1 },
          { pattern: 'vx/2', concurrency: 9, disabled: false, version: 3 },
          { pattern: 'vx/3', concurrency: 1, disabled: false, version: 10 },
          { pattern: 'vx/4', concurrency: 1, disabled: false, version: 3 },
          { pattern: 'vx/6', concurrency: 1, disabled: false, version: 5 },
          { pattern: 'vx/7', concurrency: 1, disabled: false, version: 6 },
          { pattern: 'vx/8', concurrency: 1, disabled: false, version: 9 },
        ],
        bases,
      );
    });

    it('the same pattern twice in one batch: applied in order, both entries show the final rule', async () => {
      const bases = await anchor();
      // Sent before anything is compared, so that the book version after the batch is seen even when the batch's
      // answer differs.
      const batch = await onBoth(
        'admin',
        put([
          { pattern: 'dup/x', limits: { concurrency: 1 } },
          { pattern: 'dup/x', limits: { concurrency: 2 } },
        ]),
      );
      const next = await onBoth('admin', put([{ pattern: 'dup/next', limits: { concurrency: 1 } }]));
      // restate: the first entry is an insert (book version + 1), the second an update of it (that rule's version
      // + 1); the batch moves the book by one only, so the next insert gets the same version as dup/x.
      expectSame(
        batch,
        { status: 200, body: [rule('dup/x', 2, { concurrency: 2 }), rule('dup/x', 2, { concurrency: 2 })] },
        bases,
      );
      expectSame(next, { status: 200, body: [rule('dup/next', 2, { concurrency: 1 })] }, bases);
    });

    it('a batch is atomic: a valid rule with an invalid one (422) or a failing precondition (409) leaves nothing', async () => {
      const bases = await anchor();
      await same(
        'admin',
        put([
          { pattern: 'ok/a', limits: { concurrency: 1 } },
          { pattern: 'bad!', limits: { concurrency: 2 } },
        ]),
        unprocessable(`[1].pattern: invalid component: ${CHARSET}`),
      );
      await same(
        'admin',
        put([
          { pattern: 'ok/b', limits: { concurrency: 1 } },
          { pattern: `anchor/a${anchors}`, limits: { concurrency: 2 }, precondition: { type: 'does_not_exist' } },
        ]),
        conflict(`rule precondition DoesNotExist for pattern anchor/a${anchors} failed (actual version: Some(v0))`),
        bases,
      );
      expectSameRows(await queryBoth("SELECT pattern FROM sys_rules WHERE pattern LIKE 'ok/%'"), []);
      // Nothing was written: the next insert is the anchor's version + 1.
      await same(
        'admin',
        put([{ pattern: 'ok/c', limits: { concurrency: 1 } }]),
        { status: 200, body: [rule('ok/c', 1, { concurrency: 1 })] },
        bases,
      );
    });

    it.each([
      ['GET', '/limits/rules', 405, 'PUT'],
      ['POST', '/limits/rules', 405, 'PUT'],
      ['DELETE', '/limits/rules', 405, 'PUT'],
      ['GET', '/limits/rules/bulk-delete', 405, 'POST'],
      ['GET', '/limits/rules/ver%2Fa', 404, null],
      ['GET', '/limits', 404, null],
    ])('%s %s → %i (allow %s)', async (method, path, status, allow) => {
      const sides = await same('admin', { method, path }, { status, body: '' });
      const ref = [...sides.values()][0]!;
      expect(header(ref, 'allow'), dump(sides)).toBe(allow);
    });
  });

  describe('POST /limits/rules/bulk-delete', () => {
    it('absent pattern → []; with expected_version → 409', async () => {
      await same('admin', bulkDelete([{ pattern: 'absent/x' }]), { status: 200, body: [] });
      await same(
        'admin',
        bulkDelete([{ pattern: 'absent/x', expected_version: 1 }]),
        conflict('rule precondition Matches(v1) for pattern absent/x failed (actual version: None)'),
      );
    });

    it('expected_version mismatch → 409; matching → deleted', async () => {
      const bases = await anchor();
      const inserted = await same(
        'admin',
        put([{ pattern: 'del/a', limits: { concurrency: 1 } }]),
        { status: 200, body: [rule('del/a', 1, { concurrency: 1 })] },
        bases,
      );
      await same(
        'admin',
        bulkDelete([{ pattern: 'del/a', expected_version: 999 }]),
        conflict('rule precondition Matches(v999) for pattern del/a failed (actual version: Some(v1))'),
        bases,
      );
      await same(
        'admin',
        (t) => bulkDelete([{ pattern: 'del/a', expected_version: versionOf(side(inserted, t.name)) }]),
        { status: 200, body: ['del/a'] },
      );
    });

    it('the same pattern twice → both listed', async () => {
      const bases = await anchor();
      await same(
        'admin',
        put([{ pattern: 'del/twice', limits: { concurrency: 1 } }]),
        { status: 200, body: [rule('del/twice', 1, { concurrency: 1 })] },
        bases,
      );
      await same('admin', bulkDelete([{ pattern: 'del/twice' }, { pattern: 'del/twice' }]), {
        status: 200,
        body: ['del/twice', 'del/twice'],
      });
    });

    it('atomic: a valid delete with a wrong expected_version deletes nothing', async () => {
      const bases = await anchor();
      await same(
        'admin',
        put([
          { pattern: 'del/k1', limits: { concurrency: 1 } },
          { pattern: 'del/k2', limits: { concurrency: 1 } },
        ]),
        { status: 200, body: [rule('del/k1', 1, { concurrency: 1 }), rule('del/k2', 1, { concurrency: 1 })] },
        bases,
      );
      await same(
        'admin',
        bulkDelete([{ pattern: 'del/k1' }, { pattern: 'del/k2', expected_version: 999 }]),
        conflict('rule precondition Matches(v999) for pattern del/k2 failed (actual version: Some(v1))'),
        bases,
      );
      expectSameRows(await queryBoth("SELECT pattern FROM sys_rules WHERE pattern LIKE 'del/k%' ORDER BY pattern"), [
        { pattern: 'del/k1' },
        { pattern: 'del/k2' },
      ]);
    });

    it('invalid pattern → 422', async () => {
      await same(
        'admin',
        bulkDelete([{ pattern: 'bad!' }]),
        unprocessable(`[0].pattern: invalid component: ${CHARSET}`),
      );
    });

    it('empty array → []; object → 422; array of strings → 422', async () => {
      await same('admin', bulkDelete([]), { status: 200, body: [] });
      await same('admin', bulkDelete({ pattern: 'x/y' }), unprocessable('invalid type: map, expected a sequence'));
      await same(
        'admin',
        bulkDelete(['x/y']),
        unprocessable('[0]: invalid type: string "x/y", expected struct DeleteRuleRequest'),
      );
    });
  });

  describe('sys_rules', () => {
    it('lists the same rows as the rule responses', async () => {
      const bases = await anchor();
      await same(
        'admin',
        put([
          { pattern: 'sq/a', limits: { concurrency: 2 }, description: 'first' },
          { pattern: 'sq/b', disabled: true, limits: { concurrency: 1 } },
          { pattern: 'sq/c' },
          { pattern: 'sq/*/*', limits: { concurrency: 7 } },
        ]),
        {
          status: 200,
          body: [
            rule('sq/a', 1, { concurrency: 2 }, { description: 'first' }),
            rule('sq/b', 1, { concurrency: 1 }, { disabled: true }),
            rule('sq/c', 1),
            rule('sq/*/*', 1, { concurrency: 7 }),
          ],
        },
        bases,
      );
      const rows = await queryBoth("SELECT * FROM sys_rules WHERE pattern LIKE 'sq/%' ORDER BY pattern");
      for (const [n, r] of rows) {
        for (const row of r) expect(row['last_modified'], `[${n}] ${JSON.stringify(row)}`).toMatch(/^\d{4}-\d\d-\d\dT/);
      }
      expectSameRows(
        rows,
        [
          { pattern: 'sq/*/*', concurrency: 7, disabled: false, version: 1 },
          { pattern: 'sq/a', concurrency: 2, description: 'first', disabled: false, version: 1 },
          { pattern: 'sq/b', concurrency: 1, disabled: true, version: 1 },
          { pattern: 'sq/c', disabled: false, version: 1 },
        ],
        bases,
      );
    });

    it('the whole book is the same on both (absolute versions)', async () => {
      const rows = await queryBoth('SELECT * FROM sys_rules ORDER BY pattern');
      expectSameRows(rows, undefined);
      expect(rows.get('restate')?.length ?? rows.get('ratchet')?.length).toBeGreaterThan(10);
    });
  });

  describe('POST /vqueues/{id}/pause|resume', () => {
    const WELL_FORMED = 'vq_10C1ZNkluGcx3JhzhmPEcA8tl4Zgixz7eK';
    const invalid = (reason: string): Expected => ({
      status: 400,
      body: { message: `The request field 'vqueue_id' is invalid. Reason: ${reason}`, restate_code: null },
    });

    it.each(['pause', 'resume'])('%s: a well-formed unknown id → 202, empty', async (action) => {
      await same('admin', post(`/vqueues/${WELL_FORMED}/${action}`, undefined, {}), { status: 202, body: '' });
      await same('admin', post(`/vqueues/vq_1000000000000000000000000000000000/${action}`, undefined, {}), {
        status: 202,
        body: '',
      });
    });

    it('pause with a JSON body → 202', async () => {
      await same('admin', post(`/vqueues/${WELL_FORMED}/pause`, { x: 1 }), { status: 202, body: '' });
      await same('admin', post(`/vqueues/${WELL_FORMED}/resume`, undefined, {}), { status: 202, body: '' });
    });

    it.each([
      ['vq_123', 'bad length'],
      ['vq_10C1ZNkluGcx3JhzhmPEcA8tl4Zgixz7e', 'bad length'],
      ['vq_10C1ZNkluGcx3JhzhmPEcA8tl4Zgixz7eJX', 'bad length'],
      ['inv_10C1ZNkluGcx3JhzhmPEcA8tl4Zgixz7eJ', "id doesn't match the expected type"],
      ['xx', 'bad format'],
      ['vq_2OC1ZNkluGcx3JhzhmPEcA8tl4Zgixz7eJ', 'unrecognized codec version'],
      ['vq_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz', 'unrecognized codec version'],
      ['vq_10C1ZNkluGcx3Jhzhm!EcA8tl4Zgixz7eJ', 'base62 decode error'],
      ['VQ_10C1ZNkluGcx3JhzhmPEcA8tl4Zgixz7eJ', 'unrecognized resource type: VQ'],
    ])('pause %s → 400 %s', async (id, reason) => {
      await same('admin', post(`/vqueues/${id}/pause`, undefined, {}), invalid(reason));
      await same('admin', post(`/vqueues/${id}/resume`, undefined, {}), invalid(reason));
    });

    it.each([
      [`/vqueues/${WELL_FORMED}/pause`, 405, 'POST'],
      [`/vqueues/${WELL_FORMED}/resume`, 405, 'POST'],
      [`/vqueues/${WELL_FORMED}`, 404, null],
      ['/vqueues', 404, null],
    ])('GET %s → %i (allow %s)', async (path, status, allow) => {
      const sides = await same('admin', { method: 'GET', path }, { status, body: '' });
      for (const x of sides.values()) expect(header(x, 'allow'), dump(sides)).toBe(allow);
    });
  });

  describe('ingress', () => {
    it('scoped call, no limit key → 200, the handler sees the scope', async () => {
      ingressOk(await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami')), {
        input: { n: 1 },
        scope: 'scope1',
        limitKey: null,
      });
    });

    it('scoped send → 202 Accepted', async () => {
      ingressAccepted(await onBoth('ingress', scoped('scope1', 'send', 'Greeter/whoami', 'a/b')));
    });

    it("scoped invocation ids carry the scope's partition key", async () => {
      const sides = await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami', 'vk'));
      for (const x of sides.values()) {
        // restate's partition key for scope1 (the transcript's ids all start so).
        expect(invocationIdOf(x).slice(0, 16), dump(sides)).toBe('inv_10C1ZNkluGcx');
      }
    });

    it('vqueue ids are derived the same way (scope, service, limit key)', async () => {
      const sides = await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami', 'vk'));
      const rows = await queryBoth(
        (t) =>
          `SELECT vqueue_id, scope, limit_key FROM sys_invocation WHERE id = '${invocationIdOf(side(sides, t.name))}'`,
      );
      // Deterministic on both. An intended difference: the same format and the scope's partition prefix, but the
      // 128 bits after it are each server's own digest of the queue (restate's input to it is not documented).
      for (const [name, r] of rows) {
        expect(r, name).toHaveLength(1);
        expect(r[0], name).toMatchObject({ scope: 'scope1', limit_key: 'vk' });
        expect(String(r[0]!['vqueue_id']), name).toMatch(/^vq_10C1ZNkluGcx[0-9A-Za-z]{22}$/);
      }
      const restate = rows.get('restate');
      if (restate !== undefined) expect(restate[0]!['vqueue_id']).toBe('vq_10C1ZNkluGcx5nCTrWKzR305ncTSnTXieq');
    });

    it.each([
      ['a', 'a'],
      ['a/b', 'a/b'],
      [A36, A36],
      ['a/', 'a'],
      ['', null],
    ])('x-restate-limit-key %j → 200, limit key %j', async (key, seen) => {
      ingressOk(await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami', key)), {
        input: { n: 1 },
        scope: 'scope1',
        limitKey: seen,
      });
    });

    it.each([
      ['?limit-key=qa', 'qa'],
      ['?limit_key=qa', null],
      ['?limitKey=qa', null],
    ])('query %s → limit key %j', async (q, seen) => {
      ingressOk(await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami', undefined, q)), {
        input: { n: 1 },
        scope: 'scope1',
        limitKey: seen,
      });
    });

    it.each([
      ['a/b/c', 'invalid limit-key: too many path components in the given limit-key (max 2)'],
      ['a/b/c/d', 'invalid limit-key: too many path components in the given limit-key (max 2)'],
      [A37, 'invalid limit-key: invalid limit-key component: value too long: 37 bytes (max 36)'],
      [`b/${A37}`, 'invalid limit-key: invalid limit-key component: value too long: 37 bytes (max 36)'],
      ['a//b', 'invalid limit-key: invalid limit-key component: value cannot be empty'],
      ['/a', 'invalid limit-key: invalid limit-key component: value cannot be empty'],
      ['bad!', `invalid limit-key: invalid limit-key component: ${CHARSET}`],
    ])('x-restate-limit-key %j → 400 %s', async (key, message) => {
      ingressError(await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami', key)), 400, message);
    });

    it.each([
      [A37, 'bad scope value: value too long: 37 bytes (max 36)'],
      ['bad!', `bad scope value: ${CHARSET}`],
      ['', 'bad scope value: value cannot be empty'],
      ['%C3%A9t%C3%A9', `bad scope value: ${CHARSET}`],
      ['a%2Fb', `bad scope value: ${CHARSET}`],
      ['a%20b', `bad scope value: ${CHARSET}`],
    ])('scope %j → 400 %s', async (scope, message) => {
      ingressError(await onBoth('ingress', scoped(scope, 'call', 'Greeter/whoami')), 400, message);
    });

    it('a limit key header that is not ASCII → 400 on both (restate prints a Rust debug value: an intended difference)', async () => {
      const sides = await onBoth('ingress', scoped('scope1', 'call', 'Greeter/whoami', 'é'));
      for (const [name, x] of sides) expect(x.response.status, name).toBe(400);
      const restate = sides.get('restate');
      if (restate !== undefined) expect(restate.response.text).toContain('bad header x-restate-limit-key: ToStrError');
      const ratchet = sides.get('ratchet');
      if (ratchet !== undefined)
        expect(ratchet.response.text).toContain('invalid limit-key: invalid limit-key component');
    });

    it.each([A36, 'a.b-c_D9'])('scope %j → 200', async (scope) => {
      ingressOk(await onBoth('ingress', scoped(scope, 'call', 'Greeter/whoami')), {
        input: { n: 1 },
        scope,
        limitKey: null,
      });
    });

    it.each([
      '/restate/call/Greeter/whoami',
      '/restate/send/Greeter/whoami',
      '/Greeter/whoami',
      '/restate/call/Counter/k1/add',
    ])('a limit key without a scope: %s → 400', async (path) => {
      ingressError(
        await onBoth('ingress', post(path, 1, { ...JSON_CT, 'x-restate-limit-key': 'a' })),
        400,
        'limit-key requires a scope to be set',
      );
    });

    it.each([
      ['call', undefined],
      ['send', undefined],
      ['call', 'a'],
    ] as const)('scoped %s to a Virtual Object (limit key %j) → 400', async (kind, key) => {
      ingressError(
        await onBoth('ingress', scoped('scope1', kind, 'Counter/k1/add', key)),
        400,
        'scope is not supported for Virtual Object targets',
      );
    });

    it.each(['/restate/scope/scope1/call/Greeter/whoami/send', '/restate/scope/scope1/Greeter/whoami'])(
      '%s → 400 bad path',
      async (path) => {
        ingressError(
          await onBoth('ingress', post(path, { n: 1 })),
          400,
          'bad path, expected /restate/call/:service/:handler, /restate/send/:service/:handler, /restate/scope/:scope/call/:service/:handler, /restate/attach/:invocation_id, /restate/output/:invocation_id, or /restate/lookup',
        );
      },
    );
  });

  describe('intended differences', () => {
    it('a scoped Workflow call: restate runs it, Ratchet refuses it', async () => {
      const sides = await onBoth('ingress', scoped('scope1', 'call', 'Flow/w1/run'));
      const msg = dump(sides);
      const r = sides.get('restate');
      if (r !== undefined) {
        expect(r.response.status, msg).toBe(200);
        expect(JSON.parse(r.response.text), msg).toEqual({ input: { n: 1 }, key: 'w1', scope: 'scope1' });
      }
      const x = sides.get('ratchet');
      if (x !== undefined) {
        expect(x.response.status, msg).toBe(400);
        expect(JSON.parse(x.response.text), msg).toEqual({
          code: 400,
          message: 'scope is not supported for Workflow targets',
          source: 'ingress',
        });
      }
    });

    it('pausing an idle vqueue: restate still starts new invocations, Ratchet holds them until resumed', async () => {
      const path = (kind: 'call' | 'send'): HttpRequest => scoped('pz', kind, 'Greeter/whoami', 'p1');
      const firstCall = await onBoth('ingress', path('call'));
      ingressOk(firstCall, { input: { n: 1 }, scope: 'pz', limitKey: 'p1' });
      const vqueues = new Map<TargetName, string>();
      for (const t of targets.values()) {
        const id = invocationIdOf(side(firstCall, t.name));
        const [row] = await query(t, `SELECT vqueue_id FROM sys_invocation WHERE id = '${id}'`);
        vqueues.set(t.name, row!['vqueue_id'] as string);
      }
      await same('admin', (t) => post(`/vqueues/${vqueues.get(t.name)}/pause`, undefined, {}), {
        status: 202,
        body: '',
      });
      const meta = (t: Target): string =>
        `SELECT service_name, scope, limit_key, queue_is_paused FROM sys_vqueue_meta WHERE id = '${vqueues.get(t.name)}'`;
      expectSameRows(await queryBoth(meta), [
        { service_name: 'Greeter', scope: 'pz', limit_key: 'p1', queue_is_paused: true },
      ]);

      const sent = await onBoth('ingress', path('send'));
      ingressAccepted(sent);
      const status = async (t: Target): Promise<unknown> => {
        const [row] = await query(
          t,
          `SELECT status FROM sys_invocation WHERE id = '${invocationIdOf(side(sent, t.name))}'`,
        );
        return row?.['status'];
      };
      const restateTarget = targets.get('restate');
      if (restateTarget !== undefined) await waitFor(async () => expect(await status(restateTarget)).toBe('completed'));
      const ratchetTarget = targets.get('ratchet');
      if (ratchetTarget !== undefined) {
        // Held: a call through another vqueue of the same scope, sent after it, completes first.
        const control = await httpRequest(ratchetTarget.ingressUrl, scoped('pz', 'call', 'Greeter/whoami', 'p2'));
        expect(control.status, control.text).toBe(200);
        expect(await status(ratchetTarget)).toBe('pending');
      }
      await same('admin', (t) => post(`/vqueues/${vqueues.get(t.name)}/resume`, undefined, {}), {
        status: 202,
        body: '',
      });
      for (const t of targets.values()) await waitFor(async () => expect(await status(t)).toBe('completed'));
      expectSameRows(await queryBoth(meta), [
        { service_name: 'Greeter', scope: 'pz', limit_key: 'p1', queue_is_paused: false },
      ]);
    });
  });
});
