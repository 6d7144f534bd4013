import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, expect } from 'vitest';
import { counter } from '../../support/services/counter.ts';
import { greeter } from '../../support/services/greeter.ts';
import { signup } from '../../support/services/signup.ts';
import { startAdminHarness, type AdminHarness } from './harness.ts';

/*
 * What the registration tests (registration-*.test.ts) share: an admin harness per test file, requests to it, the
 * checks of restate's error bodies, and endpoints closed after the file.
 */

export const configured = restate.service({
  name: 'Configured',
  description: 'A service with options',
  metadata: { team: 'lab' },
  handlers: {
    hello: restate.handlers.handler(
      { ingressPrivate: true, journalRetention: 3_600_000, description: 'says hello', metadata: { a: 'b' } },
      (_ctx: restate.Context) => Promise.resolve('hello'),
    ),
  },
  options: {
    journalRetention: 172_800_000,
    idempotencyRetention: 10_800_000,
    inactivityTimeout: 30_000,
    abortTimeout: 120_000,
    retryPolicy: {
      initialInterval: 100,
      maxInterval: 10_000,
      maxAttempts: 5,
      exponentiationFactor: 2,
      onMaxAttempts: 'pause',
    },
  },
});

export const ALL = [greeter, counter, signup, configured];

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  json: () => Record<string, unknown>;
}

/** The file's admin harness (its own database); set in `beforeAll`. */
export let admin: AdminHarness;

export async function request(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH',
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Answer> {
  const res = await admin.app.inject({
    method,
    url,
    ...(body === undefined
      ? {}
      : {
          payload: typeof body === 'string' ? body : JSON.stringify(body),
          headers: { 'content-type': 'application/json', ...headers },
        }),
    ...(body === undefined && headers !== undefined ? { headers } : {}),
  });
  return {
    status: res.statusCode,
    headers: res.headers,
    text: res.body,
    json: () => JSON.parse(res.body) as Record<string, unknown>,
  };
}

export function register(body: Record<string, unknown>, prefix = ''): Promise<Answer> {
  return request('POST', `${prefix}/deployments`, body);
}

export function expectCoded(answer: Answer, status: number, code: string): string {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json');
  const body = answer.json();
  expect(Object.keys(body)).toEqual(['message', 'restate_code', 'service_code']);
  expect(body['restate_code']).toBe(code);
  expect(body['service_code']).toBe(code);
  const message = String(body['message']);
  expect(message.startsWith(`[${code}] `)).toBe(true);
  return message;
}

const closers: (() => Promise<unknown>)[] = [];
export async function track<T extends { close(): Promise<void> }>(resource: Promise<T>): Promise<T> {
  const r = await resource;
  closers.push(() => r.close());
  return r;
}

/** Starts the admin harness for the calling test file and closes it (and what `track` took) after; call once. */
export function useAdminHarness(): void {
  beforeAll(async () => {
    admin = await startAdminHarness();
  });

  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await admin?.close();
  });
}
