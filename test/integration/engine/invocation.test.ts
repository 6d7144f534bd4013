import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/** Side effects observed by the services; a ctx.run closure that ran twice shows up here. */
const effects = new Map<string, number>();
const bump = (k: string): number => {
  const n = (effects.get(k) ?? 0) + 1;
  effects.set(k, n);
  return n;
};
const flakyAttempts = new Map<string, number>();

const counter = restate.service({
  name: 'Counter',
  handlers: {
    add: async (_ctx: restate.Context, n: number) => n + 1,
  },
});

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: async (ctx: restate.Context, name: string) => {
      const greeting = await ctx.run('make-greeting', () => {
        bump(`greet:${name}`);
        return `Hello ${name}`;
      });
      await ctx.sleep(50);
      const n = await ctx.serviceClient(counter).add(1);
      return `${greeting} #${n}`;
    },
    fail: async () => {
      throw new restate.TerminalError('this is a terminal failure', { errorCode: 418 });
    },
    flaky: async (ctx: restate.Context, key: string) => {
      const n = await ctx.run('count', () => bump(`flaky-run:${key}`));
      const attempts = (flakyAttempts.get(key) ?? 0) + 1;
      flakyAttempts.set(key, attempts);
      if (attempts < 3) throw new Error(`transient failure ${attempts}`);
      return `ok after ${attempts} attempts, run executed ${n} time(s)`;
    },
    record: async (ctx: restate.Context, key: string) => {
      await ctx.run('record', () => bump(`record:${key}`));
      return key;
    },
    fanout: async (ctx: restate.Context, key: string) => {
      ctx.serviceSendClient(greeterRef).record(`${key}-now`);
      ctx.serviceSendClient(greeterRef).record(`${key}-later`, restate.rpc.sendOpts({ delay: 300 }));
      return 'sent';
    },
  },
});
const greeterRef = { name: 'Greeter' } as typeof greeter;

describe.each([
  ['h2', 7],
  ['h1', 7],
  ['h2', 6],
  ['h1', 5],
] as const)('invocations over %s, protocol V%i', (transport, protocol) => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
      RATCHET_RETRY_MAX_INTERVAL: '200ms',
      RATCHET_INVOKER_MAX_PROTOCOL_VERSION: String(protocol),
    });
    endpoint = await startEndpoint({ services: [greeter, counter], transport });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('runs ctx.run, a durable sleep and a call, and journals every step', async () => {
    const res = await call(runtime.ingressUrl, '/Greeter/greet', `Alice-${transport}-${protocol}`);
    expect(res.status).toBe(200);
    expect(res.json).toBe(`Hello Alice-${transport}-${protocol} #2`);
    const id = res.headers.get('x-restate-id');
    expect(id).toMatch(/^inv_1[0-9a-zA-Z]{33}$/);
    expect(effects.get(`greet:Alice-${transport}-${protocol}`)).toBe(1);

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const rows = await client.query<{ entry_type: number }>(
        'SELECT entry_type FROM ratchet.journal WHERE invocation_id = $1 ORDER BY index',
        [id],
      );
      // Input, Run, RunCompletion, Sleep, SleepCompletion, Call, CallInvocationId, CallCompletion, Output
      expect(rows.rows.map((r) => r.entry_type)).toEqual([
        0x0400, 0x0411, 0x8011, 0x040c, 0x800c, 0x040d, 0x800e, 0x800d, 0x0401,
      ]);
      const status = await client.query<{ status: string; protocol_version: number }>(
        'SELECT status, protocol_version FROM ratchet.invocation WHERE id = $1',
        [id],
      );
      expect(status.rows[0]).toEqual({ status: 'completed', protocol_version: protocol });
    } finally {
      await client.end();
    }
  });

  it('gives a terminal failure its code at the ingress', async () => {
    const res = await call(runtime.ingressUrl, '/Greeter/fail', null);
    expect(res.status).toBe(418);
    expect(res.headers.get('x-restate-error-source')).toBe('invocation');
    expect(res.json).toEqual({ code: 418, message: 'this is a terminal failure', source: 'invocation' });
  });

  it('retries a failing handler and replays acked ctx.run results instead of running them again', async () => {
    const key = `flaky-${transport}-${protocol}`;
    const res = await call(runtime.ingressUrl, '/Greeter/flaky', key);
    expect(res.status).toBe(200);
    expect(res.json).toBe('ok after 3 attempts, run executed 1 time(s)');
    expect(effects.get(`flaky-run:${key}`)).toBe(1);
  });

  it('sends one-way and delayed invocations, from the ingress and from handlers', async () => {
    const sent = await call(runtime.ingressUrl, `/Greeter/record/send?delay=200ms`, `direct-${transport}-${protocol}`);
    expect(sent.status).toBe(202);
    const body = sent.json as { invocationId: string; status: string; executionTime: string };
    expect(body.status).toBe('Accepted');
    expect(body.executionTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
    expect(sent.headers.get('x-restate-id')).toBe(body.invocationId);

    const fan = await call(runtime.ingressUrl, '/Greeter/fanout', `fan-${transport}-${protocol}`);
    expect(fan.json).toBe('sent');
    await expect.poll(() => effects.get(`record:direct-${transport}-${protocol}`), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => effects.get(`record:fan-${transport}-${protocol}-now`), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => effects.get(`record:fan-${transport}-${protocol}-later`), { timeout: 10_000 }).toBe(1);
  });

  it('answers ingress errors like restate', async () => {
    const unknown = await call(runtime.ingressUrl, '/Nope/greet', 1);
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual({
      code: 404,
      message: "service 'Nope' not found, make sure to register the service before calling it.",
      source: 'ingress',
    });
    const badHandler = await call(runtime.ingressUrl, '/Greeter/nope', 1);
    expect(badHandler.status).toBe(404);
    const wrongType = await fetch(`${runtime.ingressUrl}/Greeter/greet`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: '"x"',
    });
    expect(wrongType.status).toBe(400);
    expect(await wrongType.json()).toEqual({
      code: 400,
      message: "input validation error: Content-type 'text/plain' does not match 'application/json'",
      source: 'ingress',
    });
    const delayOnCall = await call(runtime.ingressUrl, '/Greeter/greet?delay=1s', 'x');
    expect(delayOnCall.status).toBe(400);
    const put = await fetch(`${runtime.ingressUrl}/Greeter/greet`, { method: 'PUT' });
    expect(put.status).toBe(405);
  });
});
