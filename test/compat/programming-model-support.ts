import * as restate from '@restatedev/restate-sdk';
import { expect } from 'vitest';
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

/*
 * What the programming-model compatibility tests (programming-model-*.compat.test.ts) share: the services both
 * targets serve, a scenario run per target, the comparison of their answers, the answers the transcripts expect, and
 * the spec's test vectors.
 */

// --------------------------------------------------------------------------------------------------------------------
// Services

export interface Letter {
  awakeableId: string;
  invocationId: string;
}

/** Where a waiting invocation leaves its awakeable id and its own invocation id for the test to pick up. */
export const mailbox = restate.object({
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

export const waiter = restate.service({
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

export const parent = restate.service({
  name: 'Parent',
  handlers: {
    /** A request-response call to a child blocked on an awakeable: cancelling the parent must cancel the child. */
    callWaiter: async (ctx: restate.Context, mailboxKey: string) => ctx.serviceClient(waiter).wait(mailboxKey),
  },
});

export const signup = signupWorkflow({ handlers: { status: statusOr('unknown') } });

export const SERVICES: ServiceSet = [counter, greeter, helper, mailbox, parent, signup, waiter];

// --------------------------------------------------------------------------------------------------------------------
// Targets

/** The compat targets of this run (`RATCHET_COMPAT_TARGETS`). */
export const names = selectedTargets();

// --------------------------------------------------------------------------------------------------------------------
// Scenario runs

/** A request that may block (attach) gives up after this; nothing in these scenarios takes nearly as long. */
export const REQUEST_TIMEOUT_MS = 20_000;
export const SCENARIO_TIMEOUT_MS = 120_000;

/** One target's run of a scenario: each step's exchange (a poll keeps its last), and what stopped the run early. */
export class Run extends RecordedRun {
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

export type Runs = Map<TargetName, Run>;

export type Play = (script: (run: Run) => Promise<void>) => Promise<Runs>;

/**
 * Starts the targets, each with its own SDK endpoint serving SERVICES, for the calling test file (stopped after it),
 * and returns `play`: it plays `script` on every target at once (each target's steps in order). restate-server must
 * get through it; a Ratchet run that stops early is reported at every step it did not reach. Call once, at the top
 * level of the test file.
 */
export function useScenarioTargets(): Play {
  const targets = useTargets((n) =>
    n === 'restate' ? startRestateTargetServing(SERVICES) : startRatchetTargetServing(SERVICES),
  );
  return (script) =>
    playRuns(
      [...targets.values()].map((t) => new Run(t, REQUEST_TIMEOUT_MS)),
      script,
    );
}

// --------------------------------------------------------------------------------------------------------------------
// Comparison

/** `2026-11-21T22:44:09.702+00:00`: completion time + retention, RFC 3339 with milliseconds. */
export const EXPIRES = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?\+00:00$/;
/** `sign_1` + base64url(raw invocation id ‖ u32 signal index): 44 characters. */
export const AWAKEABLE_ID = /^sign_1[0-9A-Za-z_-]{38}$/;

export interface Observed extends Omit<Normalized, 'headers'> {
  headers: Normalized['headers'] & { 'idempotency-expires': string | null };
}

export interface StepOptions {
  /** Reduces the parsed JSON body before comparison (after ids, times and the tag are replaced). */
  readonly body?: (json: unknown) => unknown;
  /**
   * The step attached while the invocation was running. Whether the answer carries `idempotency-expires` depends on
   * whether the invocation completed before the server registered the attach (then it answers from the stored
   * result), a race the test cannot order, so that header is not compared.
   */
  readonly attachedWhileRunning?: boolean;
}

export const NOT_COMPARED = '<not compared>';

export function observe(x: Exchange, tag: string, options: StepOptions = {}): Observed {
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

export function stopped(run: Run, step: string): string {
  const why = run.error === undefined ? 'the script skipped it' : run.error.message;
  return `Ratchet did not reach '${step}': ${why}`;
}

/**
 * restate-server's answer at `step` must be `expected`; Ratchet's must equal restate-server's (or `expected` when
 * only Ratchet runs).
 */
export function expectStep(runs: Runs, step: string, expected: Observed, options: StepOptions = {}): void {
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

export interface AdminObserved {
  status: number;
  'content-type': string | null;
  body: unknown;
}

/** Admin answers: status, content-type and body, invocation ids anywhere in the body reduced to `<invocation-id>`. */
export function observeAdmin(x: Exchange): AdminObserved {
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

export function expectAdmin(runs: Runs, step: string, expected: AdminObserved): void {
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

export type IdSource = (x: Exchange) => string | undefined;

export const headerId: IdSource = (x) => {
  const id = x.response.headers['x-restate-id'];
  return typeof id === 'string' ? id : undefined;
};

/** The invocation id a later step of the script needs; a run without one cannot go on. */
export function idOf(x: Exchange): string {
  const id = headerId(x);
  if (id === undefined) throw new Error(`no x-restate-id\n${describeExchange(x)}`);
  return id;
}

export const bodyId: IdSource = (x) => {
  try {
    const id = (JSON.parse(x.response.text) as { invocationId?: unknown }).invocationId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
};

/** Asserts on the restate-server run, softly on Ratchet's. */
export function onEveryRun(runs: Runs, check: (run: Run, soft: boolean) => void): void {
  for (const run of runs.values()) check(run, run.target.name === 'ratchet');
}

export function expectThat(soft: boolean): typeof expect {
  return soft ? (expect.soft as typeof expect) : expect;
}

/** On every target, the invocation id at each of `steps` is the same, and equal to `expected` when given. */
export function expectSameId(runs: Runs, steps: string[], expected?: string, source: IdSource = headerId): void {
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
export function expectIdAgrees(runs: Runs, step: string, source: IdSource = headerId): void {
  const ref = runs.get('restate')?.steps.get(step);
  const ratchet = runs.get('ratchet');
  if (ref === undefined || ratchet === undefined) return;
  const x = ratchet.steps.get(step);
  const id = x === undefined ? stopped(ratchet, step) : source(x);
  expect.soft(id, `Ratchet's id vs restate-server's at '${step}'`).toBe(source(ref));
}

// --------------------------------------------------------------------------------------------------------------------
// Expected answers

export const JSON_CT = { 'content-type': 'application/json' };
export const common = {
  vary: 'origin, access-control-request-method, access-control-request-headers',
  'access-control-allow-credentials': 'true',
} as const;

export interface Retained {
  /** `idempotency-expires` is present (the result is retained and this answer came from the stored result). */
  readonly expires?: boolean;
}

export function ok(body: unknown, { expires = false }: Retained = {}): Observed {
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

export function invocationFailure(status: number, message: string, { expires = false }: Retained = {}): Observed {
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

export function ingressError(status: number, message: string): Observed {
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

export function accepted(status: 'Accepted' | 'PreviouslyAccepted', { executionTime = false } = {}): Observed {
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
export const EMPTY_202: Observed = {
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

export const NOT_COMPLETED = ingressError(470, 'the invocation exists but has not completed yet');
export const NOT_FOUND = ingressError(404, 'invocation not found');
export const INVOCATION_NOT_FOUND = invocationFailure(404, 'not found');

/** The 1.7 lookup answer: the id in the body, no `x-restate-id` header. */
export const LOOKUP: Observed = {
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

export function post(path: string, json?: unknown, headers: Record<string, string> = JSON_CT): HttpRequest {
  return json === undefined
    ? { method: 'POST', path, headers }
    : { method: 'POST', path, headers, body: JSON.stringify(json) };
}

export function get(path: string): HttpRequest {
  return { method: 'GET', path };
}

export function json<T>(x: Exchange): T {
  return JSON.parse(x.response.text) as T;
}

/** Polls `Mailbox/<key>/read` until the waiting invocation has posted its letter. */
export async function letterFrom(run: Run, step: string, key: string): Promise<Letter> {
  const x = await run.until(
    step,
    post(`/Mailbox/${key}/read`),
    (r) => r.response.status === 200 && r.response.text !== 'null',
  );
  return json<Letter>(x);
}

export const BASE62 = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** Little-endian bytes of a fixed-width base62 field: ids encode the byte-swapped integer (http-api.md §D). */
export function base62Bytes(field: string, width: number): Buffer | undefined {
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
export function rawInvocationId(id: string): Buffer | undefined {
  if (!INVOCATION_ID.test(id)) return undefined;
  const pk = base62Bytes(id.slice(5, 16), 8);
  const uuid = base62Bytes(id.slice(16), 16);
  return pk === undefined || uuid === undefined ? undefined : Buffer.concat([pk, uuid]);
}

/**
 * A letter's awakeable id reduced to what is deterministic: that it names the invocation that created it, and its
 * signal index (`sign_1` + base64url(raw invocation id ‖ u32be index)).
 */
export function letterShape(j: unknown): unknown {
  const letter = j as Partial<Letter> | null;
  if (letter === null || typeof letter.awakeableId !== 'string' || typeof letter.invocationId !== 'string') return j;
  if (!AWAKEABLE_ID.test(letter.awakeableId)) return j;
  const payload = Buffer.from(letter.awakeableId.slice('sign_1'.length), 'base64url');
  const raw = rawInvocationId(letter.invocationId);
  const owner = raw !== undefined && payload.subarray(0, 24).equals(raw) ? 'invocationId' : 'another invocation';
  return { ...letter, awakeableId: `<awakeable of ${owner}, signal ${payload.readUInt32BE(24)}>` };
}

/** SDK 1.17 numbers awakeable signals from 17 (lower indexes are reserved, 1 is cancellation). */
export const LETTER = ok({ awakeableId: '<awakeable of invocationId, signal 17>', invocationId: '<invocation-id>' });

// --------------------------------------------------------------------------------------------------------------------
// Test vectors (shared/spec/http-api.md §D and the transcripts): ids restate-server 1.7.12 returned for these inputs.

export const GREETER_IDEM_1 = 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4';
export const GREETER_IDEM_2 = 'inv_17wAacjsoPkD5tKsm6HE96vzUyGoZiUxTi';
export const GREETER_UNKNOWN_KEY = 'inv_12tGYk7ETSeH19n5X9FYxrICM8sV24zQ2T';
export const COUNTER_K3_C1 = 'inv_1ceQMii6q8iL7yDzWEbdirQIjEtELrlgv5';
export const SIGNUP_U1 = 'inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa';
export const SIGNUP_NOBODY = 'inv_1bzZJ2k11PoS2GPAumgziyf88jlZgvYsYz';
export const SIGNUP_NEVER = 'inv_1fw5nUK6lrrS12ky4vkEtXxSgSRuvnKR8c';
export const GREETER_EMPTY_KEY = 'inv_1kgQAJVeTJB627TCZF2y375rzjzqyt2J2U';
export const WELL_FORMED_UNKNOWN = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';

export const WORKFLOW_IDEMPOTENCY =
  'cannot use the idempotency key with workflow handlers. The handler invocation will already be idempotent by the workflow key itself.';

// --------------------------------------------------------------------------------------------------------------------

/** Polls an invocation's output until it is no longer 470 (still running). */
export function untilCompleted(run: Run, step: string, path: string): Promise<Exchange> {
  return run.until(step, get(path), (x) => x.response.status !== 470);
}

/** The letter at `letterStep` came from the invocation `sendStep` started (`ctx.request().id`). */
export function expectLetterFrom(runs: Runs, sendStep: string, letterStep: string): void {
  onEveryRun(runs, (run, soft) => {
    const sent = run.steps.get(sendStep);
    const letter = run.steps.get(letterStep);
    if (sent === undefined || letter === undefined) return;
    expectThat(soft)(json<Letter>(letter).invocationId, `${run.target.name}: ctx.request().id`).toBe(headerId(sent));
  });
}
