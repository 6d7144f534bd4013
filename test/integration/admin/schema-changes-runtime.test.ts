import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { createNode, type RuntimeHandle } from '../../../runtime/src/runtime.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { greeter } from '../../support/services/greeter.ts';
import { waitFor } from '../../support/wait.ts';
import { call } from '../support/runtime.ts';
import { captureLogger } from './admin-requests.ts';

/*
 * Schema changes seen from the rest of a real runtime: service settings changed through the admin API reach the
 * ingress (and a second runtime process sharing the database), and deleting a deployment that invocations are still
 * pinned to reports them (header, warning header, log) instead of hiding them.
 */

const waiter = restate.service({
  name: 'Waiter',
  handlers: {
    // Never completes on its own: stays pinned to the deployment it started on.
    wait: async (ctx: restate.Context) => {
      await ctx.awakeable<string>().promise;
      return 'done';
    },
  },
});

/** The awakeable a `Repairable` invocation waits on, published by the first attempt (a journaled side effect). */
let published: ((id: string) => void) | undefined;

function repairable(from: string): restate.ServiceDefinition<'Repairable', unknown> {
  return restate.service({
    name: 'Repairable',
    handlers: {
      run: async (ctx: restate.Context) => {
        const awakeable = ctx.awakeable<string>();
        await ctx.run('publish', () => published?.(awakeable.id));
        return `${await awakeable.promise} by ${from}`;
      },
    },
  });
}

const log = captureLogger();
let db: TestDatabase;
let endpoint: SdkEndpoint;
let runtime: RuntimeHandle;
let second: RuntimeHandle;
let adminUrl: string;
let ingressUrl: string;
let secondIngressUrl: string;
let client: pg.Client;

async function start(logger = log.logger, name = 'a'): Promise<RuntimeHandle> {
  const config = loadConfig({
    env: {
      RATCHET_INGRESS_BIND: '127.0.0.1:0',
      RATCHET_ADMIN_BIND: '127.0.0.1:0',
      RATCHET_METRICS_BIND: '127.0.0.1:0',
      RATCHET_INTROSPECTION_BIND: '127.0.0.1:0',
      RATCHET_OBSERVABILITY_BIND: '127.0.0.1:0',
      RATCHET_NODE_NAME: `schema-changes-${name}-${process.pid}`,
      RATCHET_MAX_JOURNAL_RETENTION: '7d',
    },
  });
  return createNode(config, { databaseUrl: db.url, logger });
}

async function admin(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: () => Record<string, unknown>; text: string }> {
  const res = await fetch(`${adminUrl}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

async function refusedAsPrivate(url: string): Promise<boolean> {
  const answer = await call(url, '/Greeter/greet/send', 'a');
  return answer.status === 400 && (answer.json as { message?: string }).message === 'the invoked service is not public';
}

beforeAll(async () => {
  db = await createTestDatabase();
  endpoint = await startEndpoint({ services: [greeter, waiter], transport: 'h2' });
  runtime = await start();
  second = await start(captureLogger('silent').logger, 'b');
  adminUrl = `http://127.0.0.1:${runtime.admin.port}`;
  ingressUrl = `http://127.0.0.1:${runtime.ingress.port}`;
  secondIngressUrl = `http://127.0.0.1:${second.ingress.port}`;
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await second?.stop();
  await runtime?.stop();
  await endpoint?.close();
  await db?.drop();
});

describe('service settings reach the ingress of every runtime process', () => {
  it('public: false closes the service to the ingress everywhere; public: true opens it again', async () => {
    await registerEndpoint({ adminUrl, ingressUrl }, endpoint);
    // The second process only has to route the call: the check for `public` comes before anything is invoked.
    await waitFor(async () => expect(await refusedAsPrivate(secondIngressUrl)).toBe(false));

    const closed = await admin('PATCH', '/services/Greeter', { public: false });
    expect(closed.status, closed.text).toBe(200);
    expect(closed.json()).toMatchObject({ public: false });
    const here = await call(ingressUrl, '/Greeter/greet', 'a');
    expect(here.status).toBe(400);
    expect(here.json).toMatchObject({ message: 'the invoked service is not public' });
    // The other process learns it through NOTIFY.
    await waitFor(async () => expect(await refusedAsPrivate(secondIngressUrl)).toBe(true));

    expect((await admin('PATCH', '/services/Greeter', { public: true })).status).toBe(200);
    expect((await call(ingressUrl, '/Greeter/greet', 'b')).text).toBe('"Hello b!"');
    await waitFor(async () => expect(await refusedAsPrivate(secondIngressUrl)).toBe(false));
  });

  it('clamps journal_retention to RATCHET_MAX_JOURNAL_RETENTION with an RT0022 warning', async () => {
    const answer = await admin('PATCH', '/services/Greeter', { journal_retention: '30d' });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toMatchObject({ journal_retention: '7d' });
    const warning = log.matching('[RT0022]').at(-1);
    expect(warning).toMatchObject({ level: 40, 'error.code': 'RT0022', 'rpc.service': 'Greeter' });
    expect(String(warning?.['msg'])).toContain('30d');
    // Within the maximum: taken as is, nothing logged.
    const warnings = log.matching('[RT0022]').length;
    expect((await admin('PATCH', '/services/Greeter', { journal_retention: '2d' })).json()).toMatchObject({
      journal_retention: '2d',
    });
    expect(log.matching('[RT0022]').length).toBe(warnings);
  });
});

describe('repairing a deployment in place', () => {
  it('an invocation pinned to a deployment whose endpoint died finishes on the new uri after PATCH', async () => {
    const first = await startEndpoint({ services: [repairable('first')], transport: 'h2' });
    const replacement = await startEndpoint({ services: [repairable('replacement')], transport: 'h2' });
    try {
      const { id: deploymentId } = await registerEndpoint({ adminUrl, ingressUrl }, first);
      const awakeableId = new Promise<string>((resolve) => (published = resolve));
      const sent = await fetch(`${ingressUrl}/Repairable/run/send`, { method: 'POST' });
      expect(sent.status).toBe(202);
      const { invocationId } = (await sent.json()) as { invocationId: string };
      const awakeable = await awakeableId;

      // The endpoint it is pinned to goes away; attempts now fail and are retried.
      await first.close();
      const patched = await admin('PATCH', `/deployments/${deploymentId}`, { uri: replacement.url });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.json()).toMatchObject({ id: deploymentId, uri: replacement.url });

      const resolved = await fetch(`${ingressUrl}/restate/a/${awakeable}/resolve`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify('resolved'),
      });
      expect(resolved.status).toBe(202);
      await waitFor(async () => {
        const output = await fetch(`${ingressUrl}/restate/invocation/${invocationId}/output`);
        expect(output.status).toBe(200);
        expect(await output.json()).toBe('resolved by replacement');
      });
    } finally {
      published = undefined;
      await first.close();
      await replacement.close();
    }
  });
});

describe('deleting a deployment invocations are pinned to', () => {
  it('deletes it, and reports the pinned invocations in headers and the log', async () => {
    const res = await fetch(`${ingressUrl}/Waiter/wait/send`, { method: 'POST' });
    expect(res.status).toBe(202);
    const { invocationId } = (await res.json()) as { invocationId: string };
    const deploymentId = await waitFor(async () => {
      const row = await client.query<{ deployment_id: string | null }>(
        'SELECT deployment_id FROM ratchet.invocation WHERE id = $1',
        [invocationId],
      );
      const pinned = row.rows[0]?.deployment_id;
      expect(pinned).toBeTruthy();
      return pinned as string;
    });

    const deleted = await admin('DELETE', `/deployments/${deploymentId}?force=true`);
    expect(deleted.status).toBe(202);
    expect(deleted.text).toBe('');
    expect(deleted.headers.get('x-ratchet-pinned-invocations')).toBe('1');
    expect(deleted.headers.get('warning')).toContain('1 invocation(s) not completed yet were pinned');
    const warning = log.matching('deployment deleted while').at(-1);
    expect(warning).toMatchObject({
      level: 40,
      'service.deployment.id': deploymentId,
      pinnedInvocations: 1,
      sample: [invocationId],
    });
    const services = (await admin('GET', '/services')).json()['services'] as { name: string }[];
    expect(services.map((svc) => svc.name)).toEqual(['Repairable']);
    expect((await call(ingressUrl, '/Greeter/greet', 'x')).status).toBe(404);
  });
});
