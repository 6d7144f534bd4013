import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import {
  expectAdminRefusal,
  expectIngressRefusal,
  jwks,
  mint,
  newKey,
  nowSeconds,
  send,
  type Answer,
} from './support.ts';

/**
 * Managed mode on the HTTP listeners: a runtime whose keys file is a JWKS document (Ed25519, P-256 and RSA keys),
 * a real SDK service behind it, and requests with every kind of token: none, broken, forged, for another cluster,
 * expired, not yet valid, without role, and each role on each listener. The metrics/probes listener stays open.
 */

const CLUSTER = 'auth-http';

/** Awakeable id per request name, recorded once per invocation (inside ctx.run). */
const awakeables = new Map<string, string>();

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: async (_ctx: restate.Context, name: string) => `Hello ${name}!`,
  },
});

const approvals = restate.service({
  name: 'Approvals',
  handlers: {
    await: async (ctx: restate.Context, name: string) => {
      const awakeable = ctx.awakeable<unknown>();
      await ctx.run('register', () => {
        awakeables.set(name, awakeable.id);
      });
      return { got: await awakeable.promise };
    },
  },
});

const ed = newKey('ed25519');
const ec = newKey('p256');
const rsa = newKey('rsa');
/** Not in the keys file. */
const stranger = newKey('ed25519');

let dir: string;
let db: TestDatabase;
let endpoint: SdkEndpoint;
let runtime: TestRuntime;
let metricsUrl: string;
const tokens: Record<'full' | 'admin' | 'ingress' | 'awakeables' | 'observability', string> = {
  full: '',
  admin: '',
  ingress: '',
  awakeables: '',
  observability: '',
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ratchet-auth-http-'));
  const keysFile = join(dir, 'jwks.json');
  writeFileSync(keysFile, jwks({ key: ed, kid: 'ed-1' }, { key: ec, kid: 'ec-1' }, { key: rsa, kid: 'rsa-1' }));
  // One role per key type: every algorithm is exercised by some success below.
  tokens.full = await mint(ed, { aud: CLUSTER, role: 'full', iat: nowSeconds() }, 'ed-1');
  tokens.admin = await mint(rsa, { aud: [CLUSTER], role: 'admin', exp: nowSeconds() + 3600 }, 'rsa-1');
  tokens.ingress = await mint(ec, { aud: CLUSTER, role: 'ingress', nbf: nowSeconds() - 10 }, 'ec-1');
  tokens.awakeables = await mint(ed, { aud: CLUSTER, role: 'awakeables' });
  tokens.observability = await mint(ec, { aud: CLUSTER, role: 'observability' }, 'ec-1');

  db = await createTestDatabase();
  endpoint = await startEndpoint({ services: [greeter, approvals], transport: 'h2' });
  runtime = await startTestRuntime(db.url, {
    RATCHET_CLUSTER_NAME: CLUSTER,
    RATCHET_AUTH_KEYS_FILE: keysFile,
    RATCHET_OBSERVABILITY_STORE: 'on',
  });
  metricsUrl = `http://127.0.0.1:${runtime.handle.metrics.port}`;
  const registered = await send('POST', `${runtime.adminUrl}/deployments`, {
    token: tokens.full,
    body: { uri: endpoint.url },
  });
  expect(registered.status, registered.text).toBe(201);
});

afterAll(async () => {
  await runtime?.stop();
  await endpoint?.close();
  await db?.drop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const greet = (token?: string, headers?: Record<string, string>): Promise<Answer> =>
  send('POST', `${runtime.ingressUrl}/Greeter/greet`, {
    body: 'Alice',
    ...(token === undefined ? {} : { token }),
    ...(headers === undefined ? {} : { headers }),
  });
const deployments = (token?: string, headers?: Record<string, string>): Promise<Answer> =>
  send('GET', `${runtime.adminUrl}/deployments`, {
    ...(token === undefined ? {} : { token }),
    ...(headers === undefined ? {} : { headers }),
  });

describe('401: no usable token', () => {
  it('refuses requests without a token on both listeners, whatever the path, with a bare Bearer challenge', async () => {
    for (const res of [
      await greet(),
      await send('GET', `${runtime.ingressUrl}/restate/health`),
      await send('POST', `${runtime.ingressUrl}/NoSuchService/nothing`, { body: 1 }),
    ]) {
      expectIngressRefusal(res, 401, /^missing bearer token: send the header 'Authorization: Bearer <token>'$/);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    }
    for (const res of [
      await deployments(),
      await send('GET', `${runtime.adminUrl}/health`),
      // Not a 404: what exists is not told before authentication.
      await send('GET', `${runtime.adminUrl}/no/such/route`),
      await send('POST', `${runtime.adminUrl}/query`, { body: { query: 'SELECT 1' } }),
    ]) {
      expectAdminRefusal(res, 401, /^missing bearer token/);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    }
  });

  it('says what is wrong with a bad token, never repeating it', async () => {
    const cases: [string, string | { authorization: string }, RegExp][] = [
      ['garbage', 'garbage', /not a well-formed JWT/],
      ['three garbage parts', 'aaa.bbb.ccc', /not a well-formed JWT/],
      ['Basic credentials', { authorization: 'Basic dXNlcjpwYXNz' }, /malformed Authorization header/],
      [
        'an unknown key',
        await mint(stranger, { aud: CLUSTER, role: 'full' }),
        /signature does not verify under any key of this cluster/,
      ],
      [
        // A known kid does not make a foreign signature good.
        'an unknown key claiming a known kid',
        await mint(stranger, { aud: CLUSTER, role: 'full' }, 'ed-1'),
        /signature does not verify/,
      ],
      [
        'another cluster',
        await mint(ed, { aud: 'other-cluster', role: 'full' }),
        new RegExp(`audience \\(aud\\) must be or contain '${CLUSTER}'`),
      ],
      ['no audience', await mint(ed, { role: 'full' }), /audience \(aud\)/],
      ['expiry', await mint(ed, { aud: CLUSTER, role: 'full', exp: nowSeconds() - 3600 }), /has expired/],
      ['a future nbf', await mint(ed, { aud: CLUSTER, role: 'full', nbf: nowSeconds() + 3600 }), /not valid yet/],
      ['no role', await mint(ed, { aud: CLUSTER }), /has no role claim/],
      ['an unknown role', await mint(ed, { aud: CLUSTER, role: 'superuser' }), /role is not one of/],
      ['no signature', new UnsecuredJWT({ aud: CLUSTER, role: 'full' }).encode(), /algorithm none is not accepted/],
    ];
    for (const [what, token, message] of cases) {
      const auth = typeof token === 'string' ? { token } : token;
      const ingress = await send('POST', `${runtime.ingressUrl}/Greeter/greet`, { body: 'Alice', ...auth });
      const admin = await send('GET', `${runtime.adminUrl}/deployments`, auth);
      expectIngressRefusal(ingress, 401, message);
      expectAdminRefusal(admin, 401, message);
      for (const res of [ingress, admin]) {
        expect(res.headers.get('www-authenticate'), what).toBe('Bearer error="invalid_token"');
        if (typeof token === 'string') expect(res.text, what).not.toContain(token.split('.')[0]);
      }
    }
  });
});

describe('403: a valid token whose role does not fit', () => {
  it('keeps each role to its listener', async () => {
    expectIngressRefusal(await greet(tokens.admin), 403, /role 'admin' does not allow this ingress request/);
    expectIngressRefusal(await greet(tokens.awakeables), 403, /role 'awakeables' does not allow this ingress request/);
    expectAdminRefusal(await deployments(tokens.ingress), 403, /role 'ingress' does not allow the admin API/);
    expectAdminRefusal(await deployments(tokens.awakeables), 403, /role 'awakeables' does not allow the admin API/);
    const query = await send('POST', `${runtime.adminUrl}/query`, {
      token: tokens.ingress,
      body: { query: 'SELECT 1' },
    });
    expectAdminRefusal(query, 403, /does not allow the admin API/);
    expect((await greet(tokens.admin)).headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope"');
  });

  it('lets an awakeables token complete awakeables only: no attach, no lookup, no other method', async () => {
    const anyId = 'sign_1' + 'A'.repeat(38);
    const id = 'inv_1' + 'A'.repeat(20);
    for (const [method, path] of [
      ['GET', `/restate/awakeables/${anyId}/resolve`],
      ['GET', `/restate/invocation/${id}/attach`],
      ['GET', `/restate/invocation/${id}/output`],
      ['POST', `/restate/send/Greeter/greet`],
      ['POST', `/restate/lookup`],
      ['POST', `/restate/awakeables`],
    ] as const) {
      const res = await send(method, `${runtime.ingressUrl}${path}`, {
        token: tokens.awakeables,
        ...(method === 'POST' ? { body: 'x' } : {}),
      });
      expectIngressRefusal(res, 403, /role 'awakeables' does not allow this ingress request/);
    }
  });
});

describe('each role where it belongs', () => {
  it('serves invocations with a full or ingress token', async () => {
    for (const token of [tokens.full, tokens.ingress]) {
      const res = await greet(token);
      expect(res.status, res.text).toBe(200);
      expect(res.json).toBe('Hello Alice!');
    }
  });

  it('serves the admin API, POST /query included, with a full or admin token', async () => {
    for (const token of [tokens.full, tokens.admin]) {
      const res = await deployments(token);
      expect(res.status, res.text).toBe(200);
      expect((res.json as { deployments: unknown[] }).deployments).toHaveLength(1);
    }
    const query = await send('POST', `${runtime.adminUrl}/query`, {
      token: tokens.admin,
      body: { query: "SELECT name FROM sys_service WHERE name = 'Greeter'" },
      headers: { accept: 'application/json' },
    });
    expect(query.status, query.text).toBe(200);
    expect(query.json).toEqual({ rows: [{ name: 'Greeter' }] });
  });

  it('completes awakeables with an awakeables token, on /restate/awakeables and on the /restate/a alias', async () => {
    const park = async (name: string): Promise<{ invocationId: string; awakeableId: string }> => {
      const sent = await send('POST', `${runtime.ingressUrl}/Approvals/await/send`, {
        token: tokens.ingress,
        body: name,
      });
      expect(sent.status, sent.text).toBe(202);
      await expect.poll(() => awakeables.get(name), { timeout: 20_000 }).toBeDefined();
      return { invocationId: (sent.json as { invocationId: string }).invocationId, awakeableId: awakeables.get(name)! };
    };
    const first = await park('first');
    const resolved = await send('POST', `${runtime.ingressUrl}/restate/awakeables/${first.awakeableId}/resolve`, {
      token: tokens.awakeables,
      body: { approved: true },
    });
    expect(resolved.status, resolved.text).toBe(202);
    const attached = await send('GET', `${runtime.ingressUrl}/restate/invocation/${first.invocationId}/attach`, {
      token: tokens.ingress,
    });
    expect(attached.status).toBe(200);
    expect(attached.json).toEqual({ got: { approved: true } });

    const second = await park('second');
    const rejected = await send('POST', `${runtime.ingressUrl}/restate/a/${second.awakeableId}/reject`, {
      token: tokens.awakeables,
      text: 'no',
      headers: { 'content-type': 'text/plain' },
    });
    expect(rejected.status, rejected.text).toBe(202);
    const output = await send('GET', `${runtime.ingressUrl}/restate/invocation/${second.invocationId}/attach`, {
      token: tokens.full,
    });
    expect(output.status).toBe(500);
    expect(output.json).toEqual({ code: 500, message: 'no', source: 'invocation' });
  });

  it('answers CORS preflights without a token (browsers never send one), and nothing more', async () => {
    const res = await send('OPTIONS', `${runtime.ingressUrl}/Greeter/greet`, {
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-methods')).toBe('POST');
    expectIngressRefusal(await send('OPTIONS', `${runtime.ingressUrl}/Greeter/greet`), 401, /missing bearer token/);
  });
});

describe('the metrics listener', () => {
  it('stays open: /health, /ready and /metrics need no token', async () => {
    for (const path of ['/health', '/ready', '/metrics']) {
      const res = await send('GET', `${metricsUrl}${path}`);
      expect(res.status, path).toBe(200);
    }
  });
});

describe('the observability listener (3100)', () => {
  const labels = (token?: string, headers?: Record<string, string>): Promise<Answer> =>
    send('GET', `http://127.0.0.1:${runtime.handle.observability!.port}/loki/api/v1/labels`, {
      ...(token === undefined ? {} : { token }),
      ...(headers === undefined ? {} : { headers }),
    });

  it('refuses no token, a bad token and a token for another cluster with 401', async () => {
    const none = await labels();
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(none.text).toMatch(/missing bearer token/);
    const forged = await labels(await mint(stranger, { aud: CLUSTER, role: 'full' }));
    expect(forged.status).toBe(401);
    expect(forged.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    expect((await labels(await mint(ed, { aud: 'other-cluster', role: 'full' }, 'ed-1'))).status).toBe(401);
  });

  it('opens to full, admin and observability, not to ingress or awakeables (403), and ignores X-Scope-OrgID', async () => {
    for (const role of ['full', 'admin', 'observability'] as const) {
      const res = await labels(tokens[role], { 'x-scope-orgid': 'tenant-a' });
      expect(res.status, `${role}: ${res.text}`).toBe(200);
      expect(JSON.parse(res.text)).toMatchObject({ status: 'success' });
    }
    for (const role of ['ingress', 'awakeables'] as const) {
      const res = await labels(tokens[role]);
      expect(res.status).toBe(403);
      expect(res.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope"');
      expect(res.text).toMatch(new RegExp(`role '${role}' does not allow the log and trace API`));
    }
    // The observability role opens nothing else.
    expect((await deployments(tokens.observability)).status).toBe(403);
    expect((await greet(tokens.observability)).status).toBe(403);
  });

  it('asks the tail (WebSocket) for the same token before the upgrade', async () => {
    const url = `ws://127.0.0.1:${runtime.handle.observability!.port}/loki/api/v1/tail?query=${encodeURIComponent('{level="info"}')}`;
    const open = (token?: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const socket = new WebSocket(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
        socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        socket.once('open', () => {
          socket.close();
          resolve(101);
        });
        socket.once('error', reject);
      });
    expect(await open()).toBe(401);
    expect(await open(tokens.ingress)).toBe(403);
    expect(await open(tokens.observability)).toBe(101);
  });
});
