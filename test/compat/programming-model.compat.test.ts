import * as restate from '@restatedev/restate-sdk';
import { describe, expect, it } from 'vitest';
import { signupWorkflow, statusOr } from '../support/services/signup.ts';
import { waitFor } from '../support/wait.ts';
import {
  INVOCATION_ID,
  counter,
  describeExchange,
  greeter,
  helper,
  normalize,
  selectedTargets,
  useTargets,
  startRatchetTargetServing,
  startRestateTargetServing,
  type Exchange,
  type HttpRequest,
  type Normalized,
  type ServiceSet,
  type TargetName,
  RecordedRun,
  dumpRun,
  playRuns,
} from './targets.ts';

/**
 * Programming-model compatibility: virtual objects, idempotency, attach/output, workflows and durable promises,
 * awakeables and cancellation, each scenario played step by step against the real restate-server 1.7.12 and against
 * Ratchet (each with its own SDK endpoint serving the services below). restate-server's answers are checked against
 * what the transcripts in shared/spec say; Ratchet's must then equal restate-server's after normalization (ids, times
 * and the per-target tag reduced to placeholders). Ratchet mismatches are soft: a scenario reports every step where
 * Ratchet differs, not just the first. `RATCHET_COMPAT_TARGETS=restate|ratchet` runs one side only.
 *
 * Ids that are a pure function of identical inputs (workflow key, idempotency key; shared/spec/http-api.md §D) use
 * untagged keys, so they must be byte-equal on both targets and equal to the spec's test vectors. Everything else
 * carries the target's tag.
 */

// --------------------------------------------------------------------------------------------------------------------
// Services

interface Letter {
  awakeableId: string;
  invocationId: string;
}

/** Where a waiting invocation leaves its awakeable id and its own invocation id for the test to pick up. */
const mailbox = restate.object({
  name: 'Mailbox',
  handlers: {
    post: async (ctx: restate.ObjectContext, letter: Letter) => {
      ctx.set('letter', letter);
    },
    read: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext) => (await ctx.get<Letter>('letter')) ?? null,
    ),
  },
});

const waiter = restate.service({
  name: 'Waiter',
  handlers: {
    /** Creates an awakeable, posts its id to `Mailbox/<mailboxKey>`, and returns what it is completed with. */
    wait: async (ctx: restate.Context, mailboxKey: string) => {
      const awakeable = ctx.awakeable<unknown>();
      ctx.objectSendClient(mailbox, mailboxKey).post({ awakeableId: awakeable.id, invocationId: ctx.request().id });
      return { got: await awakeable.promise };
    },
  },
});

const parent = restate.service({
  name: 'Parent',
  handlers: {
    /** A request-response call to a child blocked on an awakeable: cancelling the parent must cancel the child. */
    callWaiter: async (ctx: restate.Context, mailboxKey: string) => ctx.serviceClient(waiter).wait(mailboxKey),
  },
});

const signup = signupWorkflow({ handlers: { status: statusOr('unknown') } });

const SERVICES: ServiceSet = [counter, greeter, helper, mailbox, parent, signup, waiter];

// --------------------------------------------------------------------------------------------------------------------
// Targets

const names = selectedTargets();
const targets = useTargets((n) =>
  n === 'restate' ? startRestateTargetServing(SERVICES) : startRatchetTargetServing(SERVICES),
);

// --------------------------------------------------------------------------------------------------------------------
// Scenario runs

/** A request that may block (attach) gives up after this; nothing in these scenarios takes nearly as long. */
const REQUEST_TIMEOUT_MS = 20_000;
const SCENARIO_TIMEOUT_MS = 120_000;

/** One target's run of a scenario: each step's exchange (a poll keeps its last), and what stopped the run early. */
class Run extends RecordedRun {
  send(step: string, request: HttpRequest): Promise<Exchange> {
    return this.exchange(step, this.target.ingressUrl, request);
  }

  /** Sends `request` without waiting for the answer (an attach that blocks until a later step completes it). */
  start(step: string, request: HttpRequest): Promise<Exchange> {
    const answer = this.send(step, request);
    // The script awaits it later; a script that stops before then must not leave a rejection unhandled.
    answer.catch(() => undefined);
    return answer;
  }

  admin(step: string, request: HttpRequest): Promise<Exchange> {
    return this.exchange(step, this.target.adminUrl, request);
  }

  /** Repeats `request` until `done` holds for the answer (bounded by the suite's wait timeout). */
  until(step: string, request: HttpRequest, done: (x: Exchange) => boolean): Promise<Exchange> {
    return waitFor(async () => {
      const x = await this.send(step, request);
      if (!done(x)) throw new Error(`'${step}' not there yet\n${describeExchange(x)}`);
      return x;
    });
  }
}

type Runs = Map<TargetName, Run>;

/**
 * Plays `script` on every target at once (each target's steps in order). restate-server must get through it; a
 * Ratchet run that stops early is reported at every step it did not reach.
 */
function play(script: (run: Run) => Promise<void>): Promise<Runs> {
  return playRuns(
    [...targets.values()].map((t) => new Run(t, REQUEST_TIMEOUT_MS)),
    script,
  );
}

// --------------------------------------------------------------------------------------------------------------------
// Comparison

/** `2026-11-21T22:44:09.702+00:00`: completion time + retention, RFC 3339 with milliseconds. */
const EXPIRES = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?\+00:00$/;
/** `sign_1` + base64url(raw invocation id ‖ u32 signal index): 44 characters. */
const AWAKEABLE_ID = /^sign_1[0-9A-Za-z_-]{38}$/;

interface Observed extends Omit<Normalized, 'headers'> {
  headers: Normalized['headers'] & { 'idempotency-expires': string | null };
}

interface StepOptions {
  /** Reduces the parsed JSON body before comparison (after ids, times and the tag are replaced). */
  readonly body?: (json: unknown) => unknown;
  /**
   * The step attached while the invocation was running. Whether the answer carries `idempotency-expires` depends on
   * whether the invocation completed before the server registered the attach (then it answers from the stored
   * result), a race the test cannot order, so that header is not compared.
   */
  readonly attachedWhileRunning?: boolean;
}

const NOT_COMPARED = '<not compared>';

function observe(x: Exchange, tag: string, options: StepOptions = {}): Observed {
  const n = normalize(x, tag, options.body);
  const raw = x.response.headers['idempotency-expires'];
  const expires = raw === undefined ? null : Array.isArray(raw) ? raw.join(', ') : raw;
  return {
    ...n,
    headers: {
      ...n.headers,
      'idempotency-expires':
        options.attachedWhileRunning === true
          ? NOT_COMPARED
          : expires !== null && EXPIRES.test(expires)
            ? '<expires>'
            : expires,
    },
  };
}

function stopped(run: Run, step: string): string {
  const why = run.error === undefined ? 'the script skipped it' : run.error.message;
  return `Ratchet did not reach '${step}': ${why}`;
}

/**
 * restate-server's answer at `step` must be `expected`; Ratchet's must equal restate-server's (or `expected` when
 * only Ratchet runs).
 */
function expectStep(runs: Runs, step: string, expected: Observed, options: StepOptions = {}): void {
  const spec: Observed =
    options.attachedWhileRunning === true
      ? { ...expected, headers: { ...expected.headers, 'idempotency-expires': NOT_COMPARED } }
      : expected;
  const ref = runs.get('restate');
  let refObserved: Observed | undefined;
  if (ref !== undefined) {
    const x = ref.steps.get(step);
    expect(x, `restate-server run has no step '${step}'\n${dumpRun(ref)}`).toBeDefined();
    refObserved = observe(x!, ref.tag, options);
    expect(refObserved, `restate-server vs spec at '${step}'\n${describeExchange(x!)}\n`).toEqual(spec);
  }
  const ratchet = runs.get('ratchet');
  if (ratchet !== undefined) {
    const x = ratchet.steps.get(step);
    if (x === undefined) {
      expect.soft(stopped(ratchet, step)).toBe(`Ratchet reached '${step}'`);
      return;
    }
    const want = refObserved ?? spec;
    const context = ref?.steps.get(step);
    expect
      .soft(
        observe(x, ratchet.tag, options),
        `Ratchet vs restate-server at '${step}'\n${describeExchange(x)}\n\n${context === undefined ? '' : describeExchange(context)}\n`,
      )
      .toEqual(want);
  }
}

interface AdminObserved {
  status: number;
  'content-type': string | null;
  body: unknown;
}

/** Admin answers: status, content-type and body, invocation ids anywhere in the body reduced to `<invocation-id>`. */
function observeAdmin(x: Exchange): AdminObserved {
  const text = x.response.text.replace(/inv_1[0-9A-Za-z]{33}/g, '<invocation-id>');
  let body: unknown = text;
  try {
    body = text === '' ? '' : JSON.parse(text);
  } catch {
    // Not JSON: compared as text.
  }
  const ct = x.response.headers['content-type'];
  return { status: x.response.status, 'content-type': typeof ct === 'string' ? ct : null, body };
}

function expectAdmin(runs: Runs, step: string, expected: AdminObserved): void {
  const ref = runs.get('restate');
  let refObserved: AdminObserved | undefined;
  if (ref !== undefined) {
    const x = ref.steps.get(step);
    expect(x, `restate-server run has no step '${step}'\n${dumpRun(ref)}`).toBeDefined();
    refObserved = observeAdmin(x!);
    expect(refObserved, `restate-server admin vs spec at '${step}'\n${describeExchange(x!)}\n`).toEqual(expected);
  }
  const ratchet = runs.get('ratchet');
  if (ratchet !== undefined) {
    const x = ratchet.steps.get(step);
    if (x === undefined) {
      expect.soft(stopped(ratchet, step)).toBe(`Ratchet reached '${step}'`);
      return;
    }
    const observed = observeAdmin(x);
    // Documented difference: the specification names the error code field `service_code`; Ratchet sends it next to
    // restate's `restate_code`, always with the same value.
    if (typeof observed.body === 'object' && observed.body !== null && 'service_code' in observed.body) {
      const { service_code: serviceCode, ...rest } = observed.body as Record<string, unknown>;
      expect.soft(serviceCode, `service_code equals restate_code at '${step}'`).toEqual(rest['restate_code']);
      observed.body = rest;
    }
    expect
      .soft(observed, `Ratchet admin vs restate-server at '${step}'\n${describeExchange(x)}\n`)
      .toEqual(refObserved ?? expected);
  }
}

type IdSource = (x: Exchange) => string | undefined;

const headerId: IdSource = (x) => {
  const id = x.response.headers['x-restate-id'];
  return typeof id === 'string' ? id : undefined;
};

/** The invocation id a later step of the script needs; a run without one cannot go on. */
function idOf(x: Exchange): string {
  const id = headerId(x);
  if (id === undefined) throw new Error(`no x-restate-id\n${describeExchange(x)}`);
  return id;
}

const bodyId: IdSource = (x) => {
  try {
    const id = (JSON.parse(x.response.text) as { invocationId?: unknown }).invocationId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
};

/** Asserts on the restate-server run, softly on Ratchet's. */
function onEveryRun(runs: Runs, check: (run: Run, soft: boolean) => void): void {
  for (const run of runs.values()) check(run, run.target.name === 'ratchet');
}

function expectThat(soft: boolean): typeof expect {
  return soft ? (expect.soft as typeof expect) : expect;
}

/** On every target, the invocation id at each of `steps` is the same, and equal to `expected` when given. */
function expectSameId(runs: Runs, steps: string[], expected?: string, source: IdSource = headerId): void {
  onEveryRun(runs, (run, soft) => {
    const ids = steps.map((s) => {
      const x = run.steps.get(s);
      return x === undefined ? stopped(run, s) : (source(x) ?? `no id at '${s}'`);
    });
    const context = `${run.target.name}: ids at ${steps.join(', ')}\n${dumpRun(run)}\n`;
    expectThat(soft)(ids, context).toEqual(steps.map(() => expected ?? ids[0]));
    expectThat(soft)(ids[0], context).toMatch(INVOCATION_ID);
  });
}

/** Ratchet computed the same id as restate-server at `step` (the inputs were identical). */
function expectIdAgrees(runs: Runs, step: string, source: IdSource = headerId): void {
  const ref = runs.get('restate')?.steps.get(step);
  const ratchet = runs.get('ratchet');
  if (ref === undefined || ratchet === undefined) return;
  const x = ratchet.steps.get(step);
  const id = x === undefined ? stopped(ratchet, step) : source(x);
  expect.soft(id, `Ratchet's id vs restate-server's at '${step}'`).toBe(source(ref));
}

// --------------------------------------------------------------------------------------------------------------------
// Expected answers

const JSON_CT = { 'content-type': 'application/json' };
const common = {
  vary: 'origin, access-control-request-method, access-control-request-headers',
  'access-control-allow-credentials': 'true',
} as const;

interface Retained {
  /** `idempotency-expires` is present (the result is retained and this answer came from the stored result). */
  readonly expires?: boolean;
}

function ok(body: unknown, { expires = false }: Retained = {}): Observed {
  const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
  return {
    status: 200,
    headers: {
      'x-restate-id': '<invocation-id>',
      'x-restate-error-source': null,
      'content-type': 'application/json',
      'idempotency-expires': expires ? '<expires>' : null,
      ...common,
    },
    body,
    ...(isObject ? { keyOrder: Object.keys(body) } : {}),
  };
}

function invocationFailure(status: number, message: string, { expires = false }: Retained = {}): Observed {
  return {
    status,
    headers: {
      'x-restate-id': '<invocation-id>',
      'x-restate-error-source': 'invocation',
      'content-type': 'application/json',
      'idempotency-expires': expires ? '<expires>' : null,
      ...common,
    },
    body: { code: status, message, source: 'invocation' },
    keyOrder: ['code', 'message', 'source'],
  };
}

function ingressError(status: number, message: string): Observed {
  return {
    status,
    headers: {
      'x-restate-id': null,
      'x-restate-error-source': 'ingress',
      'content-type': 'application/json',
      'idempotency-expires': null,
      ...common,
    },
    body: { code: status, message, source: 'ingress' },
    keyOrder: ['code', 'message', 'source'],
  };
}

function accepted(status: 'Accepted' | 'PreviouslyAccepted', { executionTime = false } = {}): Observed {
  return {
    status: 202,
    headers: {
      'x-restate-id': '<invocation-id>',
      'x-restate-error-source': null,
      'content-type': 'application/json',
      'idempotency-expires': null,
      ...common,
    },
    body: executionTime
      ? { invocationId: '<invocation-id>', executionTime: '<timestamp>', status }
      : { invocationId: '<invocation-id>', status },
    keyOrder: executionTime ? ['invocationId', 'executionTime', 'status'] : ['invocationId', 'status'],
  };
}

/** Awakeable completion: 202 with an empty body and no content-type. */
const EMPTY_202: Observed = {
  status: 202,
  headers: {
    'x-restate-id': null,
    'x-restate-error-source': null,
    'content-type': null,
    'idempotency-expires': null,
    ...common,
  },
  body: '',
};

const NOT_COMPLETED = ingressError(470, 'the invocation exists but has not completed yet');
const NOT_FOUND = ingressError(404, 'invocation not found');
const INVOCATION_NOT_FOUND = invocationFailure(404, 'not found');

/** The 1.7 lookup answer: the id in the body, no `x-restate-id` header. */
const LOOKUP: Observed = {
  status: 200,
  headers: {
    'x-restate-id': null,
    'x-restate-error-source': null,
    'content-type': 'application/json',
    'idempotency-expires': null,
    ...common,
  },
  body: { invocationId: '<invocation-id>' },
  keyOrder: ['invocationId'],
};

function post(path: string, json?: unknown, headers: Record<string, string> = JSON_CT): HttpRequest {
  return json === undefined
    ? { method: 'POST', path, headers }
    : { method: 'POST', path, headers, body: JSON.stringify(json) };
}

function get(path: string): HttpRequest {
  return { method: 'GET', path };
}

function json<T>(x: Exchange): T {
  return JSON.parse(x.response.text) as T;
}

/** Polls `Mailbox/<key>/read` until the waiting invocation has posted its letter. */
async function letterFrom(run: Run, step: string, key: string): Promise<Letter> {
  const x = await run.until(
    step,
    post(`/Mailbox/${key}/read`),
    (r) => r.response.status === 200 && r.response.text !== 'null',
  );
  return json<Letter>(x);
}

const BASE62 = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** Little-endian bytes of a fixed-width base62 field: ids encode the byte-swapped integer (http-api.md §D). */
function base62Bytes(field: string, width: number): Buffer | undefined {
  let value = 0n;
  for (const c of field) {
    const digit = BASE62.indexOf(c);
    if (digit < 0) return undefined;
    value = value * 62n + BigInt(digit);
  }
  const bytes = Buffer.alloc(width);
  for (let i = 0; i < width; i++) {
    bytes[i] = Number(value & 0xffn);
    value >>= 8n;
  }
  return value === 0n ? bytes : undefined;
}

/** The raw 24-byte form u64be(partition key) ‖ u128be(uuid) of `inv_1…`. */
function rawInvocationId(id: string): Buffer | undefined {
  if (!INVOCATION_ID.test(id)) return undefined;
  const pk = base62Bytes(id.slice(5, 16), 8);
  const uuid = base62Bytes(id.slice(16), 16);
  return pk === undefined || uuid === undefined ? undefined : Buffer.concat([pk, uuid]);
}

/**
 * A letter's awakeable id reduced to what is deterministic: that it names the invocation that created it, and its
 * signal index (`sign_1` + base64url(raw invocation id ‖ u32be index)).
 */
function letterShape(j: unknown): unknown {
  const letter = j as Partial<Letter> | null;
  if (letter === null || typeof letter.awakeableId !== 'string' || typeof letter.invocationId !== 'string') return j;
  if (!AWAKEABLE_ID.test(letter.awakeableId)) return j;
  const payload = Buffer.from(letter.awakeableId.slice('sign_1'.length), 'base64url');
  const raw = rawInvocationId(letter.invocationId);
  const owner = raw !== undefined && payload.subarray(0, 24).equals(raw) ? 'invocationId' : 'another invocation';
  return { ...letter, awakeableId: `<awakeable of ${owner}, signal ${payload.readUInt32BE(24)}>` };
}

/** SDK 1.17 numbers awakeable signals from 17 (lower indexes are reserved, 1 is cancellation). */
const LETTER = ok({ awakeableId: '<awakeable of invocationId, signal 17>', invocationId: '<invocation-id>' });

// --------------------------------------------------------------------------------------------------------------------
// Test vectors (shared/spec/http-api.md §D and the transcripts): ids restate-server 1.7.12 returned for these inputs.

const GREETER_IDEM_1 = 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4';
const GREETER_IDEM_2 = 'inv_17wAacjsoPkD5tKsm6HE96vzUyGoZiUxTi';
const GREETER_UNKNOWN_KEY = 'inv_12tGYk7ETSeH19n5X9FYxrICM8sV24zQ2T';
const COUNTER_K3_C1 = 'inv_1ceQMii6q8iL7yDzWEbdirQIjEtELrlgv5';
const SIGNUP_U1 = 'inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa';
const SIGNUP_NOBODY = 'inv_1bzZJ2k11PoS2GPAumgziyf88jlZgvYsYz';
const SIGNUP_NEVER = 'inv_1fw5nUK6lrrS12ky4vkEtXxSgSRuvnKR8c';
const GREETER_EMPTY_KEY = 'inv_1kgQAJVeTJB627TCZF2y375rzjzqyt2J2U';
const WELL_FORMED_UNKNOWN = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';

const WORKFLOW_IDEMPOTENCY =
  'cannot use the idempotency key with workflow handlers. The handler invocation will already be idempotent by the workflow key itself.';

// --------------------------------------------------------------------------------------------------------------------

/** Polls an invocation's output until it is no longer 470 (still running). */
function untilCompleted(run: Run, step: string, path: string): Promise<Exchange> {
  return run.until(step, get(path), (x) => x.response.status !== 470);
}

describe(`programming-model compatibility (${names.join(' vs ')})`, () => {
  it(
    'virtual object: exclusive add, shared get, a URL-encoded key, a delayed send',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const key = `k-${run.tag}`;
        await run.send('add 5', post(`/Counter/${key}/add`, 5));
        await run.send('add 2', post(`/restate/call/Counter/${key}/add`, 2));
        await run.send('get', post(`/Counter/${key}/get`));
        await run.send('encoded add', post(`/Counter/a%2Fb-${run.tag}/add`, 1));
        await run.send('encoded whoami', post(`/Counter/a%2Fb-${run.tag}/whoami`));
        const sent = await run.send('send add 3 delay=1s', post(`/Counter/${key}/add/send?delay=1s`, 3));
        await run.send('attach delayed', get(`/restate/invocation/${idOf(sent)}/attach`));
        await run.send('get after delayed', post(`/Counter/${key}/get`));
      });
      expectStep(runs, 'add 5', ok(5));
      expectStep(runs, 'add 2', ok(7));
      expectStep(runs, 'get', ok(7));
      expectStep(runs, 'encoded add', ok(1));
      expectStep(runs, 'encoded whoami', ok('a/b-<tag>'));
      expectStep(runs, 'send add 3 delay=1s', accepted('Accepted', { executionTime: true }));
      expectStep(runs, 'attach delayed', ok(10), { attachedWhileRunning: true });
      expectStep(runs, 'get after delayed', ok(10));
      onEveryRun(runs, (run, soft) => {
        const prefixes = ['add 5', 'add 2', 'get', 'send add 3 delay=1s'].map((s) => {
          const x = run.steps.get(s);
          return x === undefined ? undefined : headerId(x)?.slice(0, 16);
        });
        expectThat(soft)(new Set(prefixes).size, `one partition key per object key\n${dumpRun(run)}`).toBe(1);
      });
      expectSameId(runs, ['send add 3 delay=1s', 'attach delayed']);
    },
  );

  it(
    'idempotency keys: stored result on repeats, PreviouslyAccepted sends, ids from the spec',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const idem = (key: string): Record<string, string> => ({ ...JSON_CT, 'idempotency-key': key });
        await run.send('call idem-1', post('/Greeter/greet', 'Idem', idem('idem-1')));
        await run.send('call idem-1 again', post('/Greeter/greet', 'Idem', idem('idem-1')));
        await run.send('call idem-1, other body', post('/Greeter/greet', 'Other', idem('idem-1')));
        await run.send('send idem-1', post('/Greeter/greet/send', 'Idem', idem('idem-1')));
        await run.send('send idem-2', post('/Greeter/greet/send', 'Idem2', idem('idem-2')));
        await run.send('send idem-2 again', post('/Greeter/greet/send', 'Idem2', idem('idem-2')));
        await run.send('object c-1', post('/Counter/k3/add', 10, idem('c-1')));
        await run.send('object c-1 again', post('/Counter/k3/add', 10, idem('c-1')));
        await run.send('empty key', post('/Greeter/greet', 'x', idem('')));
        await run.send('empty key, other body', post('/Greeter/greet', 'y', idem('')));
      });
      expectStep(runs, 'call idem-1', ok('Hello Idem!'));
      expectStep(runs, 'call idem-1 again', ok('Hello Idem!', { expires: true }));
      expectStep(runs, 'call idem-1, other body', ok('Hello Idem!', { expires: true }));
      expectStep(runs, 'send idem-1', accepted('PreviouslyAccepted'));
      expectStep(runs, 'send idem-2', accepted('Accepted'));
      expectStep(runs, 'send idem-2 again', accepted('PreviouslyAccepted'));
      expectStep(runs, 'object c-1', ok(10));
      expectStep(runs, 'object c-1 again', ok(10, { expires: true }));
      // An empty idempotency-key header is the key "" (not "no key", as http-api.md §B.4 says): a deterministic id and
      // the stored result on a repeat.
      expectStep(runs, 'empty key', ok('Hello x!'));
      expectStep(runs, 'empty key, other body', ok('Hello x!', { expires: true }));
      expectSameId(
        runs,
        ['call idem-1', 'call idem-1 again', 'call idem-1, other body', 'send idem-1'],
        GREETER_IDEM_1,
      );
      expectSameId(runs, ['send idem-1'], GREETER_IDEM_1, bodyId);
      expectSameId(runs, ['send idem-2', 'send idem-2 again'], GREETER_IDEM_2);
      expectSameId(runs, ['send idem-2', 'send idem-2 again'], GREETER_IDEM_2, bodyId);
      expectSameId(runs, ['object c-1', 'object c-1 again'], COUNTER_K3_C1);
      expectSameId(runs, ['empty key', 'empty key, other body'], GREETER_EMPTY_KEY);
    },
  );

  it(
    'attach and output: by id, by idempotency key, 1.7 POST forms, unknown/malformed ids, 470 while running',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const call = await run.send(
          'call attach-1',
          post('/Greeter/greet', 'Att', { ...JSON_CT, 'idempotency-key': 'attach-1' }),
        );
        const id = idOf(call);
        await run.send('output by id', get(`/restate/invocation/${id}/output`));
        await run.send('attach by id', get(`/restate/invocation/${id}/attach`));
        await run.send('output by id (1.7)', get(`/restate/output/${id}`));
        await run.send('attach by id (1.7)', get(`/restate/attach/${id}`));
        await run.send('output by key', get('/restate/invocation/Greeter/greet/attach-1/output'));
        await run.send('attach by key', get('/restate/invocation/Greeter/greet/attach-1/attach'));
        const objectKey = `ka-${run.tag}`;
        await run.send(
          'object call c-2',
          post(`/Counter/${objectKey}/add`, 4, { ...JSON_CT, 'idempotency-key': 'c-2' }),
        );
        await run.send('object output by key', get(`/restate/invocation/Counter/${objectKey}/add/c-2/output`));
        await run.send('output unknown key', get('/restate/invocation/Greeter/greet/unknown-key/output'));
        await run.send('attach unknown key', get('/restate/invocation/Greeter/greet/unknown-key/attach'));
        await run.send('output unknown id', get(`/restate/invocation/${WELL_FORMED_UNKNOWN}/output`));
        await run.send('output malformed id', get('/restate/invocation/inv_garbage/output'));
        await run.send('POST output', post(`/restate/invocation/${id}/output`));

        await run.send(
          'POST /restate/attach invocation',
          post('/restate/attach', { target: 'invocation', invocationId: id }),
        );
        await run.send(
          'POST /restate/output idempotentInvocation',
          post('/restate/output', {
            target: 'idempotentInvocation',
            service: 'Greeter',
            handler: 'greet',
            idempotencyKey: 'attach-1',
          }),
        );
        await run.send(
          'POST /restate/attach idempotentInvocation with key',
          post('/restate/attach', {
            target: 'idempotentInvocation',
            service: 'Counter',
            key: objectKey,
            handler: 'add',
            idempotencyKey: 'c-2',
          }),
        );
        await run.send(
          'lookup idempotentInvocation',
          post('/restate/lookup', {
            target: 'idempotentInvocation',
            service: 'Greeter',
            handler: 'greet',
            idempotencyKey: 'attach-1',
          }),
        );
        await run.send(
          'lookup workflow never run',
          post('/restate/lookup', { target: 'workflow', workflowName: 'Signup', workflowKey: 'never' }),
        );
        await run.send('lookup invocation', post('/restate/lookup', { target: 'invocation', invocationId: id }));
        await run.send('GET lookup', get('/restate/lookup'));
        await run.send(
          'POST /restate/output unknown workflow',
          post('/restate/output', { target: 'workflow', workflowName: 'Signup', workflowKey: 'nobody' }),
        );

        // Still running: blocked on an awakeable until the test resolves it.
        const mailboxKey = `att-${run.tag}`;
        const sent = await run.send('send waiter', post('/Waiter/wait/send', mailboxKey));
        const waiting = idOf(sent);
        const letter = await letterFrom(run, 'letter', mailboxKey);
        await run.send('output while running', get(`/restate/invocation/${waiting}/output`));
        await run.send('output while running (1.7)', get(`/restate/output/${waiting}`));
        const attached = run.start('attach while running', get(`/restate/invocation/${waiting}/attach`));
        await run.send('resolve', post(`/restate/awakeables/${letter.awakeableId}/resolve`, { approved: true }));
        await attached;
        await untilCompleted(run, 'output after completion', `/restate/invocation/${waiting}/output`);
        await run.send('attach after completion', get(`/restate/invocation/${waiting}/attach`));
      });

      const stored = ok('Hello Att!', { expires: true });
      expectStep(runs, 'call attach-1', ok('Hello Att!'));
      const storedSteps = [
        'output by id',
        'attach by id',
        'output by id (1.7)',
        'attach by id (1.7)',
        'output by key',
        'attach by key',
        'POST /restate/attach invocation',
        'POST /restate/output idempotentInvocation',
      ];
      for (const step of storedSteps) expectStep(runs, step, stored);
      expectSameId(runs, ['call attach-1', ...storedSteps]);
      expectIdAgrees(runs, 'call attach-1');
      expectSameId(runs, ['lookup idempotentInvocation', 'lookup invocation'], undefined, bodyId);
      expectIdAgrees(runs, 'lookup idempotentInvocation', bodyId);
      onEveryRun(runs, (run, soft) => {
        const call = run.steps.get('call attach-1');
        const lookup = run.steps.get('lookup idempotentInvocation');
        if (call === undefined || lookup === undefined) return;
        expectThat(soft)(bodyId(lookup), `${run.target.name}: lookup vs call id`).toBe(headerId(call));
      });

      expectStep(runs, 'object call c-2', ok(4));
      expectStep(runs, 'object output by key', ok(4, { expires: true }));
      expectStep(runs, 'POST /restate/attach idempotentInvocation with key', ok(4, { expires: true }));
      expectSameId(runs, [
        'object call c-2',
        'object output by key',
        'POST /restate/attach idempotentInvocation with key',
      ]);

      expectStep(runs, 'output unknown key', NOT_FOUND);
      expectStep(runs, 'attach unknown key', INVOCATION_NOT_FOUND);
      expectSameId(runs, ['attach unknown key'], GREETER_UNKNOWN_KEY);
      expectStep(runs, 'output unknown id', NOT_FOUND);
      expectStep(
        runs,
        'output malformed id',
        ingressError(400, "bad invocation id 'inv_garbage': unrecognized codec version"),
      );
      expectStep(runs, 'POST output', ingressError(405, 'method not allowed'));

      expectStep(runs, 'lookup idempotentInvocation', LOOKUP);
      expectStep(runs, 'lookup workflow never run', LOOKUP);
      expectSameId(runs, ['lookup workflow never run'], SIGNUP_NEVER, bodyId);
      expectStep(runs, 'lookup invocation', LOOKUP);
      expectStep(runs, 'GET lookup', ingressError(405, 'method not allowed'));
      expectStep(runs, 'POST /restate/output unknown workflow', NOT_FOUND);

      const result = { got: { approved: true } };
      expectStep(runs, 'send waiter', accepted('Accepted'));
      expectStep(runs, 'letter', LETTER, { body: letterShape });
      expectLetterFrom(runs, 'send waiter', 'letter');
      expectStep(runs, 'output while running', NOT_COMPLETED);
      expectStep(runs, 'output while running (1.7)', NOT_COMPLETED);
      expectStep(runs, 'resolve', EMPTY_202);
      expectStep(runs, 'attach while running', ok(result), { attachedWhileRunning: true });
      expectStep(runs, 'output after completion', ok(result, { expires: true }));
      expectStep(runs, 'attach after completion', ok(result, { expires: true }));
      expectSameId(runs, ['send waiter', 'attach while running', 'output after completion', 'attach after completion']);
    },
  );

  it(
    'workflow: submit, durable promise, shared handlers, attach/output, run twice, promise completed twice',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const input = { email: 'u1@x' };
        const wf = { target: 'workflow', workflowName: 'Signup', workflowKey: 'u1' };
        await run.send('status before run', post('/Signup/u1/status'));
        await run.send('submit', post('/Signup/u1/run/send', input));
        await run.send('submit again', post('/Signup/u1/run/send', input));
        await run.until('status waiting', post('/Signup/u1/status'), (x) => x.response.text === '"waiting"');
        await run.send('output while running', get('/restate/workflow/Signup/u1/output'));
        await run.send('POST /restate/output while running', post('/restate/output', wf));
        const attached = run.start('attach while running', get('/restate/workflow/Signup/u1/attach'));
        await run.send('approve', post('/Signup/u1/approve', 'yes'));
        await attached;
        await untilCompleted(run, 'output', '/restate/workflow/Signup/u1/output');
        await run.send('attach after completion', get('/restate/workflow/Signup/u1/attach'));
        await run.send('POST /restate/output', post('/restate/output', wf));
        await run.send('POST /restate/attach', post('/restate/attach', wf));
        await run.send('lookup', post('/restate/lookup', wf));
        await run.send('status after run', post('/Signup/u1/status'));
        await run.send('approve again', post('/Signup/u1/approve', 'again'));
        await run.send('call run after completion', post('/Signup/u1/run', { email: 'again' }));
        await run.send('submit after completion', post('/Signup/u1/run/send', { email: 'again' }));
        await run.send('output unknown key', get('/restate/workflow/Signup/nobody/output'));
        await run.send('attach unknown key', get('/restate/workflow/Signup/nobody/attach'));
        await run.send('output not a workflow', get('/restate/workflow/Greeter/x/output'));
        const idem = { ...JSON_CT, 'idempotency-key': 'w1' };
        await run.send('submit with idempotency key', post('/Signup/u2/run/send', {}, idem));
        await run.send('call with idempotency key', post('/Signup/u2/run', {}, idem));
        await run.send(
          'shared handler with idempotency key',
          post('/Signup/u2/status', undefined, { 'idempotency-key': 'w2' }),
        );
      });

      const result = { user: 'u1', approvedWith: 'yes', req: { email: 'u1@x' } };
      expectStep(runs, 'status before run', ok('unknown'));
      expectStep(runs, 'submit', accepted('Accepted'));
      expectStep(runs, 'submit again', accepted('PreviouslyAccepted'));
      expectStep(runs, 'status waiting', ok('waiting'));
      expectStep(runs, 'output while running', NOT_COMPLETED);
      expectStep(runs, 'POST /restate/output while running', NOT_COMPLETED);
      expectStep(runs, 'approve', ok('approved'));
      expectStep(runs, 'attach while running', ok(result), { attachedWhileRunning: true });
      expectStep(runs, 'output', ok(result, { expires: true }));
      expectStep(runs, 'attach after completion', ok(result, { expires: true }));
      expectStep(runs, 'POST /restate/output', ok(result, { expires: true }));
      expectStep(runs, 'POST /restate/attach', ok(result, { expires: true }));
      expectStep(runs, 'lookup', LOOKUP);
      expectStep(runs, 'status after run', ok('approved'));
      // Completing a completed durable promise: the CompletePromise command fails with 409, which the handler
      // (awaiting resolve()) turns into its own terminal failure.
      expectStep(runs, 'approve again', invocationFailure(409, 'promise was already completed'));
      expectStep(runs, 'call run after completion', invocationFailure(409, 'the workflow method was already invoked'));
      expectStep(runs, 'submit after completion', accepted('PreviouslyAccepted'));
      expectStep(runs, 'output unknown key', NOT_FOUND);
      expectStep(runs, 'attach unknown key', INVOCATION_NOT_FOUND);
      expectStep(runs, 'output not a workflow', NOT_FOUND);
      expectStep(runs, 'submit with idempotency key', ingressError(400, WORKFLOW_IDEMPOTENCY));
      expectStep(runs, 'call with idempotency key', ingressError(400, WORKFLOW_IDEMPOTENCY));
      expectStep(runs, 'shared handler with idempotency key', ok('unknown'));

      expectSameId(
        runs,
        [
          'submit',
          'submit again',
          'attach while running',
          'output',
          'attach after completion',
          'POST /restate/output',
          'POST /restate/attach',
          'call run after completion',
          'submit after completion',
        ],
        SIGNUP_U1,
      );
      expectSameId(runs, ['submit', 'submit again', 'submit after completion', 'lookup'], SIGNUP_U1, bodyId);
      expectSameId(runs, ['attach unknown key'], SIGNUP_NOBODY);
      onEveryRun(runs, (run, soft) => {
        // Shared handlers are invocations of their own on the workflow key's partition.
        const status = run.steps.get('status waiting');
        if (status === undefined) return;
        const context = `${run.target.name}: shared handler id\n${describeExchange(status)}`;
        expectThat(soft)(headerId(status)?.slice(0, 16), context).toBe(SIGNUP_U1.slice(0, 16));
        expectThat(soft)(headerId(status), context).not.toBe(SIGNUP_U1);
      });
    },
  );

  it(
    'awakeables: resolve, resolve again, reject via /restate/a, malformed id, wrong method and op',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const first = idOf(await run.send('send waiter 1', post('/Waiter/wait/send', `awk1-${run.tag}`)));
        const letter1 = await letterFrom(run, 'letter 1', `awk1-${run.tag}`);
        await run.send('GET resolve', get(`/restate/awakeables/${letter1.awakeableId}/resolve`));
        await run.send('unknown op', post(`/restate/awakeables/${letter1.awakeableId}/foo`));
        const attached = run.start('attach resolved', get(`/restate/invocation/${first}/attach`));
        await run.send('resolve', post(`/restate/awakeables/${letter1.awakeableId}/resolve`, { approved: true }));
        await attached;
        await untilCompleted(run, 'output resolved', `/restate/invocation/${first}/output`);
        await run.send(
          'resolve again',
          post(`/restate/awakeables/${letter1.awakeableId}/resolve`, { approved: false }),
        );
        await run.send('output after resolve again', get(`/restate/invocation/${first}/output`));

        const second = idOf(await run.send('send waiter 2', post('/Waiter/wait/send', `awk2-${run.tag}`)));
        const letter2 = await letterFrom(run, 'letter 2', `awk2-${run.tag}`);
        const rejected = run.start('attach rejected', get(`/restate/invocation/${second}/attach`));
        await run.send('reject via /restate/a', {
          method: 'POST',
          path: `/restate/a/${letter2.awakeableId}/reject`,
          headers: { 'content-type': 'text/plain' },
          body: 'nope, rejected',
        });
        await rejected;
        await untilCompleted(run, 'output rejected', `/restate/invocation/${second}/output`);

        await run.send('resolve malformed id', post('/restate/awakeables/prom_garbage/resolve', 1));
      });
      const result = { got: { approved: true } };
      expectStep(runs, 'send waiter 1', accepted('Accepted'));
      expectStep(runs, 'letter 1', LETTER, { body: letterShape });
      expectLetterFrom(runs, 'send waiter 1', 'letter 1');
      expectStep(runs, 'GET resolve', ingressError(405, 'method not allowed'));
      expectStep(runs, 'unknown op', ingressError(404, 'not found'));
      expectStep(runs, 'resolve', EMPTY_202);
      expectStep(runs, 'attach resolved', ok(result), { attachedWhileRunning: true });
      expectStep(runs, 'output resolved', ok(result, { expires: true }));
      expectStep(runs, 'resolve again', EMPTY_202);
      expectStep(runs, 'output after resolve again', ok(result, { expires: true }));
      expectStep(runs, 'send waiter 2', accepted('Accepted'));
      expectStep(runs, 'letter 2', LETTER, { body: letterShape });
      expectStep(runs, 'reject via /restate/a', EMPTY_202);
      expectStep(runs, 'attach rejected', invocationFailure(500, 'nope, rejected'), { attachedWhileRunning: true });
      expectStep(runs, 'output rejected', invocationFailure(500, 'nope, rejected', { expires: true }));
      expectStep(
        runs,
        'resolve malformed id',
        ingressError(400, "bad awakeable id 'prom_garbage': unrecognized codec version"),
      );
      expectSameId(runs, ['send waiter 1', 'attach resolved', 'output resolved', 'output after resolve again']);
      expectSameId(runs, ['send waiter 2', 'attach rejected', 'output rejected']);
    },
  );

  it(
    'cancellation: cancelling a parent through the admin API cancels the child it waits for',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const mailboxKey = `cxl-${run.tag}`;
        const parentId = idOf(await run.send('send parent', post('/Parent/callWaiter/send', mailboxKey)));
        const letter = await letterFrom(run, 'letter', mailboxKey);
        await run.send('child output while waiting', get(`/restate/invocation/${letter.invocationId}/output`));
        const attached = run.start('attach parent', get(`/restate/invocation/${parentId}/attach`));
        await run.admin('cancel', { method: 'PATCH', path: `/invocations/${parentId}/cancel` });
        await attached;
        await untilCompleted(run, 'parent output', `/restate/invocation/${parentId}/output`);
        await untilCompleted(run, 'child output', `/restate/invocation/${letter.invocationId}/output`);
        await run.admin('cancel again', { method: 'PATCH', path: `/invocations/${parentId}/cancel` });
      });
      expectStep(runs, 'send parent', accepted('Accepted'));
      expectStep(runs, 'letter', LETTER, { body: letterShape });
      expectStep(runs, 'child output while waiting', NOT_COMPLETED);
      expectAdmin(runs, 'cancel', { status: 202, 'content-type': null, body: '' });
      expectStep(runs, 'attach parent', invocationFailure(409, 'Cancelled'), { attachedWhileRunning: true });
      expectStep(runs, 'parent output', invocationFailure(409, 'Cancelled', { expires: true }));
      expectStep(runs, 'child output', invocationFailure(409, 'Cancelled', { expires: true }));
      expectAdmin(runs, 'cancel again', {
        status: 409,
        'content-type': 'application/json',
        body: { message: "The invocation '<invocation-id>' was already completed.", restate_code: null },
      });
      expectSameId(runs, ['send parent', 'attach parent', 'parent output']);
      onEveryRun(runs, (run, soft) => {
        const letter = run.steps.get('letter');
        const child = run.steps.get('child output');
        if (letter === undefined || child === undefined) return;
        expectThat(soft)(headerId(child), `${run.target.name}: child id`).toBe(json<Letter>(letter).invocationId);
        expectThat(soft)(headerId(child), `${run.target.name}: child id`).not.toBe(
          headerId(run.steps.get('send parent')!),
        );
      });
    },
  );
});

/** The letter at `letterStep` came from the invocation `sendStep` started (`ctx.request().id`). */
function expectLetterFrom(runs: Runs, sendStep: string, letterStep: string): void {
  onEveryRun(runs, (run, soft) => {
    const sent = run.steps.get(sendStep);
    const letter = run.steps.get(letterStep);
    if (sent === undefined || letter === undefined) return;
    expectThat(soft)(json<Letter>(letter).invocationId, `${run.target.name}: ctx.request().id`).toBe(headerId(sent));
  });
}
