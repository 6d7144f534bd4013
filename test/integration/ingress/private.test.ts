import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

const hidden = restate.service({
  name: 'Hidden',
  handlers: { ping: async () => 'pong' },
  options: { ingressPrivate: true },
});

const front = restate.service({
  name: 'Front',
  handlers: {
    viaCall: async (ctx: restate.Context) => ctx.serviceClient(hidden).ping(),
    secret: restate.handlers.handler({ ingressPrivate: true }, async () => 'secret'),
  },
});

describe('private services and handlers', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url);
    endpoint = await startEndpoint({ services: [hidden, front], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('refuses ingress calls to a private service or handler with 400, but other services can call them', async () => {
    const direct = await call(runtime.ingressUrl, '/Hidden/ping');
    expect(direct.status).toBe(400);
    expect(direct.json).toEqual({ code: 400, message: 'the invoked service is not public', source: 'ingress' });
    expect(direct.headers.get('x-restate-error-source')).toBe('ingress');
    const secret = await call(runtime.ingressUrl, '/Front/secret');
    expect(secret.status).toBe(400);
    const viaCall = await call(runtime.ingressUrl, '/Front/viaCall');
    expect(viaCall.status).toBe(200);
    expect(viaCall.json).toBe('pong');
  });
});
