import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminClientFactory, createAdminClient } from '../../../../operator/src/admin-client/client.ts';
import { AdminApiError } from '../../../../operator/src/admin-client/types.ts';
import { operatorMetrics } from '../../../../operator/src/telemetry/metrics.ts';
import { freePort, loopbackUrl } from '../../../support/ports.ts';

/*
 * The admin client's transport on a real socket, against a scripted server: what goes on the wire (bearer token,
 * explicit force, Accept of /query, DELETE's force query) and how answers become results or AdminApiErrors (both JSON
 * error styles, text bodies, 404 where the interface allows it, refused connections and timeouts as status 0), and
 * the per-status-code counting for `ratchet_operator_admin_api_requests_total`.
 */

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

type Script = (req: Seen) => { status: number; body?: string; type?: string } | 'hang';

let server: http.Server;
let url: string;
let script: Script = () => ({ status: 200, body: '{}' });
const seen: Seen[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      };
      seen.push(s);
      const answer = script(s);
      if (answer === 'hang') return;
      res.writeHead(answer.status, { 'content-type': answer.type ?? 'application/json' });
      res.end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function adminError(p: Promise<unknown>): Promise<AdminApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AdminApiError) return err;
    throw err;
  }
  throw new Error('expected an AdminApiError');
}

describe('requests', () => {
  it('sends the bearer token, JSON bodies, force always, and the exact Accept /query needs', async () => {
    seen.length = 0;
    script = (req) => {
      if (req.url === '/deployments') return { status: 201, body: JSON.stringify({ id: 'dp_1', services: [] }) };
      if (req.url === '/query') return { status: 200, body: JSON.stringify({ rows: [{ pinned: 1 }] }) };
      return { status: 202 };
    };
    const admin = createAdminClient({ url, token: 's3cret' });
    expect(await admin.registerDeployment({ uri: 'http://svc:9080/', force: undefined as unknown as boolean })).toEqual(
      {
        created: true,
        deployment: { id: 'dp_1', services: [] },
      },
    );
    expect(await admin.query('SELECT 1')).toEqual([{ pinned: 1 }]);
    expect(await admin.deleteDeployment('dp_1', { force: false })).toBe(true);

    const [post, query, del] = seen;
    expect(post?.headers['authorization']).toBe('Bearer s3cret');
    expect(post?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(post?.body ?? '')).toEqual({ uri: 'http://svc:9080/', force: false });
    expect(query?.headers['accept']).toBe('application/json');
    expect(JSON.parse(query?.body ?? '')).toEqual({ query: 'SELECT 1' });
    expect(del).toMatchObject({ method: 'DELETE', url: '/deployments/dp_1?force=false' });
  });

  it('sends no authorization header without a token', async () => {
    seen.length = 0;
    script = () => ({ status: 200, body: JSON.stringify({ services: [] }) });
    expect(await createAdminClient({ url }).listServices()).toEqual([]);
    expect(seen[0]?.headers['authorization']).toBeUndefined();
    expect(seen[0]?.url).toBe('/services');
  });
});

describe('subscription status', () => {
  it('GET /subscriptions/{id}/status, the id as one path segment, lists and nulls filled in', async () => {
    seen.length = 0;
    script = () => ({
      status: 200,
      body: JSON.stringify({ subscription_id: 'sub_1', group_id: 'g', topic: 't', ready: true, reason: null }),
    });
    expect(await createAdminClient({ url }).subscriptionStatus('sub_1/x')).toEqual({
      subscription_id: 'sub_1',
      group_id: 'g',
      topic: 't',
      ready: true,
      reason: null,
      assigned_partitions: [],
      lag: null,
      consumers: [],
      error: null,
    });
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/subscriptions/sub_1%2Fx/status' });
  });
});

describe('answers', () => {
  it('200 on registration is "already registered"', async () => {
    script = () => ({ status: 200, body: JSON.stringify({ id: 'dp_1', services: [] }) });
    expect((await createAdminClient({ url }).registerDeployment({ uri: 'http://x/', force: false })).created).toBe(
      false,
    );
  });

  it('maps both JSON error styles and text bodies to AdminApiError(status, message, code)', async () => {
    const admin = createAdminClient({ url });
    script = () => ({ status: 409, body: JSON.stringify({ message: '[META0004] taken', restate_code: 'META0004' }) });
    expect(await adminError(admin.registerDeployment({ uri: 'http://x/', force: false }))).toMatchObject({
      status: 409,
      message: '[META0004] taken',
      code: 'META0004',
    });
    script = () => ({ status: 400, body: JSON.stringify({ message: 'bad sink', service_code: 'META0009' }) });
    expect(await adminError(admin.createSubscription({ source: 's', sink: 'k', options: {} }))).toMatchObject({
      status: 400,
      code: 'META0009',
    });
    script = () => ({
      status: 415,
      type: 'text/plain',
      body: 'Expected request with `Content-Type: application/json`',
    });
    expect(await adminError(admin.listServices())).toMatchObject({
      status: 415,
      message: 'Expected request with `Content-Type: application/json`',
      code: undefined,
    });
    script = () => ({ status: 501 });
    expect(await adminError(admin.deleteDeployment('dp_1', { force: false }))).toMatchObject({
      status: 501,
      message: 'DELETE /deployments/dp_1 answered 501',
    });
  });

  it('404 is undefined or false where the interface says so, an error elsewhere', async () => {
    const admin = createAdminClient({ url });
    script = () => ({ status: 404, body: JSON.stringify({ message: 'not found', restate_code: null }) });
    expect(await admin.getDeployment('dp_1')).toBeUndefined();
    expect(await admin.getSubscription('sub_1')).toBeUndefined();
    expect(await admin.subscriptionStatus('sub_1')).toBeUndefined();
    expect(await admin.deleteDeployment('dp_1', { force: true })).toBe(false);
    expect(await admin.deleteSubscription('sub_1')).toBe(false);
    expect(await admin.deleteKafkaCluster('k')).toBe(false);
    expect(await adminError(admin.updateDeployment('dp_1', {}))).toMatchObject({ status: 404, message: 'not found' });
  });

  it('a refused connection and a timeout are status 0', async () => {
    const closed = loopbackUrl(await freePort());
    const refused = await adminError(createAdminClient({ url: closed }).version());
    expect(refused.status).toBe(0);
    expect(refused.message).toContain('ECONNREFUSED');

    script = () => 'hang';
    const timedOut = await adminError(adminClientFactory({ timeoutMs: 200 })({ url }).version());
    expect(timedOut.status).toBe(0);
    expect(timedOut.message).toContain('timed out');
  });

  it('counts every answer by status code (0 for no answer), in the operator metric by default', async () => {
    const codes: number[] = [];
    const admin = adminClientFactory({ onResponse: (c) => codes.push(c) })({ url });
    script = () => ({ status: 200, body: JSON.stringify({ deployments: [] }) });
    await admin.listDeployments();
    script = () => ({ status: 503, body: '' });
    await adminError(admin.listDeployments());
    await adminError(
      adminClientFactory({ onResponse: (c) => codes.push(c) })({ url: loopbackUrl(await freePort()) }).version(),
    );
    expect(codes).toEqual([200, 503, 0]);

    const ok = async (): Promise<number> =>
      (await operatorMetrics.adminApiRequests.get()).values.find((x) => x.labels['code'] === '200')?.value ?? 0;
    const before = await ok();
    script = () => ({ status: 200, body: JSON.stringify({ services: [] }) });
    await createAdminClient({ url }).listServices();
    expect(await ok()).toBe(before + 1);
  });
});
