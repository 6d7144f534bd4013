import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Db } from './helpers.ts';

/**
 * Flow control (scopes and limit keys) is an experimental restate feature Ratchet does not enable. A call from a
 * handler that uses one fails its attempt with RT0024 and a message that says what to change, as restate-server does
 * without the feature (retryable, until the retry policy gives up); the ingress refuses scoped requests with 400.
 */
const target = restate.service({ name: 'Target', handlers: { hi: async () => 'hi' } });
const caller = restate.service({
  name: 'Caller',
  handlers: {
    scoped: async (ctx: restate.Context) => ctx.scope('tenant-1').serviceClient(target).hi(),
    limited: async (ctx: restate.Context) =>
      ctx
        .scope('tenant-1')
        .serviceClient(target)
        .hi(restate.rpc.opts({ limitKey: 'user42' })),
    plain: async (ctx: restate.Context) => ctx.serviceClient(target).hi(),
  },
});

describe('flow-control identifiers', () => {
  let db: TestDatabase;
  let reader: Db;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    reader = await Db.connect(db.url);
    runtime = await startTestRuntime(db.url, {
      RATCHET_RETRY_INITIAL_INTERVAL: '20ms',
      RATCHET_RETRY_MAX_ATTEMPTS: '2',
      RATCHET_RETRY_ON_MAX_ATTEMPTS: 'kill',
    });
    endpoint = await startEndpoint({ services: [target, caller], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await reader?.close();
    await db?.drop();
  });

  it.each(['scoped', 'limited'])('fails a %s call from a handler with RT0024', async (handler) => {
    const res = await call(runtime.ingressUrl, `/Caller/${handler}`);
    expect(res.status).toBe(500);
    expect((res.json as { message: string }).message).toMatch(
      /scoped invocations require flow control experimental feature to be enabled/,
    );
    const row = await reader.row(res.headers.get('x-restate-id')!);
    expect(row?.last_failure_code).toBe('RT0024');
    expect(row?.retry_count).toBe(2);
  });

  it('runs the same call without a scope', async () => {
    expect((await call(runtime.ingressUrl, '/Caller/plain')).json).toBe('hi');
  });

  it('refuses scoped ingress requests and limit keys without a scope', async () => {
    const scoped = await call(runtime.ingressUrl, '/restate/scope/tenant-1/call/Target/hi');
    expect(scoped.status).toBe(400);
    expect(scoped.json).toEqual({
      code: 400,
      message: 'scoped invocations require vqueues to be enabled',
      source: 'ingress',
    });
    const limited = await call(runtime.ingressUrl, '/Target/hi', undefined, { 'x-restate-limit-key': 'user42' });
    expect(limited.status).toBe(400);
    expect(limited.json).toMatchObject({ message: 'limit-key requires a scope to be set' });
  });
});
