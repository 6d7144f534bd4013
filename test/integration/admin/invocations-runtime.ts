import { afterAll, beforeAll, expect } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { WAIT_INTERVAL_MS, WAIT_TIMEOUT_MS, waitFor } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import {
  Rows,
  admin,
  boxService,
  flow,
  gates,
  ingressGet,
  locker,
  napping,
  parentService,
  posted,
  refusal,
  sendTo,
  type Answer,
  type Posted,
  RESTATE_INVOCATION_MESSAGES,
} from './invocations-support.ts';

/*
 * What the invocation-management tests (invocations-*.test.ts) share: a runtime per test file with the services of
 * invocations-support.ts registered, helpers that bring an invocation into a given state, and the checks of restate's
 * answers.
 */

export const until = { timeout: WAIT_TIMEOUT_MS, interval: WAIT_INTERVAL_MS };
export const INVOCATION_ID = /^inv_1[0-9A-Za-z]{33}$/;
/** Well-formed, never created (from the transcripts). */
export const UNKNOWN_ID = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';

export const box = boxService('Box', 'h2');
export const tally = boxService('Tally', 'h1');
export const moverA = boxService('Mover', 'A');
export const moverB = boxService('Mover', 'B');

export const msg = RESTATE_INVOCATION_MESSAGES;

/**
 * A JSON refusal: status, content-type and restate's body (plus the `service_code` the spec names). Soft, so a test
 * goes on and reports every refusal that differs, not only the first.
 */
export function expectRefusal(res: Answer, status: number, message: string): void {
  expect.soft({ status: res.status, contentType: res.headers.get('content-type'), body: res.json }, res.text).toEqual({
    status,
    contentType: 'application/json',
    body: refusal(message),
  });
}

/** A success without body (202/200 of cancel, kill, pause, resume, purge…). */
export function expectEmpty(res: Answer, status: number, soft = false): void {
  (soft ? expect.soft : expect)({ status: res.status, text: res.text }).toEqual({ status, text: '' });
}

/** axum's plain-text 400 for a query string it cannot deserialize (soft, like `expectRefusal`). */
export function expectQueryText(res: Answer, text: string): void {
  expect.soft({ status: res.status, contentType: res.headers.get('content-type'), text: res.text }).toEqual({
    status: 400,
    contentType: 'text/plain; charset=utf-8',
    text,
  });
}

export function newIdOf(res: Answer, original: string): string {
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json');
  const body = res.json as { new_invocation_id?: unknown };
  expect(Object.keys(body)).toEqual(['new_invocation_id']);
  const id = body.new_invocation_id as string;
  expect(id).toMatch(INVOCATION_ID);
  expect(id).not.toBe(original);
  // Same partition key: the first 16 characters (`inv_` + the key's half) are equal.
  expect(id.slice(0, 16)).toBe(original.slice(0, 16));
  return id;
}

let database: TestDatabase;
let h2: SdkEndpoint;
let h1: SdkEndpoint;
/** Closed after the file's tests, after the runtime and the two endpoints and before the database is dropped. */
const lateClosers: { close(): Promise<void> }[] = [];

/** The file's runtime (its own database) and a reader of its rows; set in `beforeAll`. */
export let rows: Rows;
export let runtime: TestRuntime;
export let adminUrl: string;
export let ingressUrl: string;

/**
 * Starts the runtime with Box, its parent, Locker, Flow and Mover (A) on an h2 endpoint and Tally on an h1 endpoint,
 * all registered, for the calling test file, and stops it all after; call once, in the file's outer describe.
 */
export function useInvocationRuntime(): void {
  beforeAll(async () => {
    database = await createTestDatabase();
    rows = await Rows.connect(database.url);
    // h2 attempts that wait on an awakeable are closed after 500 ms, so the SDK suspends.
    runtime = await startTestRuntime(database.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '500ms' });
    adminUrl = runtime.adminUrl;
    ingressUrl = runtime.ingressUrl;
    h2 = await startEndpoint({ services: [box, parentService('Box'), locker, flow, moverA], transport: 'h2' });
    h1 = await startEndpoint({ services: [tally], transport: 'h1' });
    await registerEndpoint(runtime, h2);
    await registerEndpoint(runtime, h1);
  });

  afterAll(async () => {
    gates.openAll();
    await rows?.close();
    await runtime?.stop();
    await h2?.close();
    await h1?.close();
    for (const resource of lateClosers) await resource.close();
    await database?.drop();
  });
}

/** Closes `resource` with the runtime, once the file's tests are done (a deployment a test started). */
export function closeAfter<T extends { close(): Promise<void> }>(resource: T): T {
  lateClosers.push(resource);
  return resource;
}

/** PATCH `path` on the admin API. */
export const patch = (path: string): Promise<Answer> => admin(adminUrl, path);
export const output = (id: string): Promise<Answer> => ingressGet(ingressUrl, `/restate/invocation/${id}/output`);

/** Polls the invocation's row (usable in hooks too, unlike expect.poll). */
export async function statusBecomes(id: string, status: string): Promise<void> {
  await waitFor(async () => expect(await rows.status(id)).toBe(status));
}

/** Sends `<service>/wait` and returns once it posted its awakeable and suspended. */
export async function waiting(service: string, key: string): Promise<Posted> {
  await sendTo(ingressUrl, `/${service}/wait`, key);
  const p = await waitFor(() => posted.get(key) ?? Promise.reject(new Error(`no awakeable from ${key} yet`)));
  await statusBecomes(p.invocationId, 'suspended');
  return p;
}

/** Sends `<service>/nap` and returns once it is sleeping (suspended). */
export async function sleeping(service: string, key: string): Promise<string> {
  await sendTo(ingressUrl, `/${service}/nap`, key);
  const id = await waitFor(() => napping.get(key) ?? Promise.reject(new Error(`${key} not napping yet`)));
  await statusBecomes(id, 'suspended');
  return id;
}

/** Sends `<service>/hold` and returns once its attempt is inside the ctx.run waiting at gate `key`. */
export async function holding(path: string, key: string): Promise<string> {
  const id = await sendTo(ingressUrl, path, key);
  await waitFor(() => expect(gates.reached(key)).toBe(true));
  expect(await rows.status(id)).toBe('invoked');
  return id;
}

export async function completed(path: string, body: unknown): Promise<string> {
  const res = await call(ingressUrl, path, body);
  expect(res.status, res.text).toBe(200);
  return res.headers.get('x-restate-id')!;
}

/** Waits for the ingress output of `id` to be final (not 470) and returns it. */
export async function finalOutput(id: string): Promise<Answer> {
  return waitFor(async () => {
    const res = await output(id);
    if (res.status === 470) throw new Error(`${id} has not completed yet`);
    return res;
  });
}

export function expectInvocationFailure(res: Answer, code: number, message: string): void {
  expect({ status: res.status, body: res.json }).toEqual({
    status: code,
    body: { code, message, source: 'invocation' },
  });
}
