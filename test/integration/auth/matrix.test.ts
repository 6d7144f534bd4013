import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { UnsecuredJWT } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLES, type Role } from '../../../runtime/src/auth/roles.ts';
import { DeploymentId, SubscriptionId } from '../../../runtime/src/ids/deployment-id.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { jwks, mint, newKey, nowSeconds, send } from './support.ts';

/**
 * Issue 17, the auth matrix: one managed-mode runtime, and every route of every HTTP listener (the admin API's taken
 * from its own OpenAPI document, so a new route is covered without touching this file) against every kind of
 * credential: none, malformed headers, forged, for another cluster, expired, not yet valid, unsigned, without or with
 * an unknown role, and each role's valid token. The expectation of each cell comes from the contract table of
 * `runtime/src/auth/README.md`, written out again below rather than taken from `roles.ts`, so that a change of the
 * grants shows up here. Then SQL introspection: who may log in, and that a session can read the views only.
 */

const CLUSTER = 'matrix';

/** The README's role table: what each role opens. `awakeables` = only POST /restate/{awakeables,a}/{id}/{resolve,reject}. */
const OPENS: Readonly<
  Record<Role, { admin: boolean; ingress: 'all' | 'awakeables' | 'none'; observability: boolean; sql: boolean }>
> = {
  full: { admin: true, ingress: 'all', observability: true, sql: true },
  admin: { admin: true, ingress: 'none', observability: true, sql: true },
  ingress: { admin: false, ingress: 'all', observability: false, sql: false },
  awakeables: { admin: false, ingress: 'awakeables', observability: false, sql: false },
  observability: { admin: false, ingress: 'none', observability: true, sql: false },
};

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: async (_ctx: restate.Context, name: string) => `Hello ${name}!`,
  },
});

const key = newKey('ed25519');
/** Not in the keys file. */
const stranger = newKey('ed25519');

type Listener = 'admin' | 'ingress' | 'observability' | 'probes';

interface Route {
  readonly listener: Listener;
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
  /** Loki's tail: the answer to the WebSocket upgrade request is what counts. */
  readonly websocket?: boolean;
  /** One of the requests the role `awakeables` may make. */
  readonly awakeableCompletion?: boolean;
  /** Needs no token at all (probes, CORS preflights): 200 whatever the credential. */
  readonly open?: boolean;
}

interface InvalidCredential {
  readonly name: string;
  /** The `Authorization` header, none when undefined. */
  readonly authorization: string | undefined;
  readonly message: RegExp;
}

interface Credential {
  readonly name: string;
  readonly authorization: string | undefined;
  /** A valid token's role; undefined for the invalid credentials. */
  readonly role?: Role;
  readonly message?: RegExp;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

let dir: string;
let db: TestDatabase;
let endpoint: SdkEndpoint;
let runtime: TestRuntime;
let urls: Record<Listener, string>;
let deploymentId: string;
let invocationId: string;
const tokens = {} as Record<Role, string>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ratchet-auth-matrix-'));
  const keysFile = join(dir, 'jwks.json');
  writeFileSync(keysFile, jwks({ key, kid: 'k1' }));
  for (const role of ROLES) tokens[role] = await mint(key, { aud: CLUSTER, role, exp: nowSeconds() + 3600 }, 'k1');

  db = await createTestDatabase();
  endpoint = await startEndpoint({ services: [greeter], transport: 'h2' });
  runtime = await startTestRuntime(db.url, {
    RATCHET_CLUSTER_NAME: CLUSTER,
    RATCHET_AUTH_KEYS_FILE: keysFile,
    RATCHET_OBSERVABILITY_STORE: 'on',
  });
  urls = {
    admin: runtime.adminUrl,
    ingress: runtime.ingressUrl,
    observability: `http://${LOOPBACK}:${runtime.handle.observability!.port}`,
    probes: `http://${LOOPBACK}:${runtime.handle.metrics.port}`,
  };
  const registered = await send('POST', `${urls.admin}/deployments`, {
    token: tokens.full,
    body: { uri: endpoint.url },
  });
  expect(registered.status, registered.text).toBe(201);
  deploymentId = (registered.json as { id: string }).id;
  const sent = await send('POST', `${urls.ingress}/Greeter/greet/send`, { token: tokens.full, body: 'Bob' });
  expect(sent.status, sent.text).toBe(202);
  invocationId = (sent.json as { invocationId: string }).invocationId;
});

afterAll(async () => {
  await runtime?.stop();
  await endpoint?.close();
  await db?.drop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function invalidCredentials(): Promise<InvalidCredential[]> {
  const claims = { aud: CLUSTER, role: 'full' };
  const bearer = async (c: Record<string, unknown>, signer = key): Promise<string> =>
    `Bearer ${await mint(signer, c, 'k1')}`;
  return [
    { name: 'no token', authorization: undefined, message: /^missing bearer token: send the header/ },
    { name: 'bare "Bearer"', authorization: 'Bearer', message: /^malformed Authorization header: expected 'Bearer/ },
    { name: 'Basic credentials', authorization: 'Basic x', message: /^malformed Authorization header/ },
    { name: 'not a JWT', authorization: 'Bearer not.a.jwt', message: /^the bearer token is not a well-formed JWT/ },
    {
      name: 'bad signature',
      authorization: await bearer(claims, stranger),
      message: /signature does not verify under any key of this cluster/,
    },
    {
      name: 'wrong audience',
      authorization: await bearer({ ...claims, aud: 'another-cluster' }),
      message: new RegExp(`audience \\(aud\\) must be or contain '${CLUSTER}'`),
    },
    { name: 'expired', authorization: await bearer({ ...claims, exp: nowSeconds() - 3600 }), message: /has expired/ },
    {
      name: 'not yet valid',
      authorization: await bearer({ ...claims, nbf: nowSeconds() + 3600 }),
      message: /is not valid yet \(nbf\)/,
    },
    {
      name: 'unsigned (alg none)',
      authorization: `Bearer ${new UnsecuredJWT(claims).encode()}`,
      message: /algorithm none is not accepted/,
    },
    { name: 'no role', authorization: await bearer({ aud: CLUSTER }), message: /has no role claim/ },
    {
      name: 'unknown role',
      authorization: await bearer({ aud: CLUSTER, role: 'superuser' }),
      message: /role is not one of/,
    },
  ];
}

/** Well-formed ids of nothing: a request gets past their parsing, to a 404. */
const unknown = {
  deployment: DeploymentId.generate(),
  subscription: SubscriptionId.generate(),
  invocation: InvocationId.generate(42n),
};

/** `/deployments/:deployment` with values that exist for reads, and unknown ones where the request would change something. */
function fillParams(url: string, method: string): string {
  const reads = method === 'GET';
  const values: Record<string, string> = {
    deployment: reads ? deploymentId : unknown.deployment,
    service: reads ? 'Greeter' : 'NoSuchService',
    handler: 'greet',
    id: unknown.invocation,
    cluster_name: 'no-such-kafka-cluster',
    subscription: unknown.subscription,
    // Malformed: refused (400) by an open route, never applied.
    vqueue_id: 'vq_123',
  };
  return url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for the admin path parameter :${name} of ${url}`);
    return value;
  });
}

async function adminRoutes(): Promise<Route[]> {
  const doc = await send('GET', `${urls.admin}/openapi`, { token: tokens.admin });
  expect(doc.status, doc.text).toBe(200);
  const paths = (doc.json as { paths: Record<string, Record<string, unknown>> }).paths;
  const routes: Route[] = [];
  for (const [path, operations] of Object.entries(paths)) {
    for (const method of Object.keys(operations)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const m = method.toUpperCase();
      const url = fillParams(path.replace(/\{([^}]+)\}/g, ':$1'), m);
      // An empty object where a body is read: refused as invalid (400) by an open route, never applied.
      const body = m === 'GET' || m === 'DELETE' ? undefined : url === '/query' ? { query: 'SELECT 1' } : {};
      for (const prefix of ['', '/v4']) {
        routes.push({ listener: 'admin', method: m, path: prefix + url, ...(body === undefined ? {} : { body }) });
      }
    }
  }
  // The document's routes, at least those restate's CLI and the operator use.
  expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(
    expect.arrayContaining([
      'GET /deployments',
      'POST /deployments',
      `GET /deployments/${deploymentId}`,
      'GET /services/Greeter',
      'POST /query',
      'GET /health',
      'GET /version',
      'GET /openapi',
    ]),
  );
  return [
    ...routes,
    { listener: 'admin', method: 'GET', path: '/v1/deployments' },
    { listener: 'admin', method: 'GET', path: '/v2/deployments' },
    { listener: 'admin', method: 'GET', path: '/v3/services' },
    // Neither 404 nor 405 is told before authentication.
    { listener: 'admin', method: 'GET', path: '/no/such/route' },
    { listener: 'admin', method: 'PUT', path: '/health' },
  ];
}

function ingressRoutes(): Route[] {
  const awakeableId = 'sign_1' + 'A'.repeat(38);
  const routes: Route[] = [
    { listener: 'ingress', method: 'POST', path: '/Greeter/greet', body: 'Alice' },
    { listener: 'ingress', method: 'POST', path: '/Greeter/greet/send', body: 'Alice' },
    { listener: 'ingress', method: 'POST', path: '/restate/call/Greeter/greet', body: 'Alice' },
    { listener: 'ingress', method: 'POST', path: '/restate/send/Greeter/greet', body: 'Alice' },
    { listener: 'ingress', method: 'POST', path: '/restate/scope/s1/call/Greeter/greet', body: 'Alice' },
    { listener: 'ingress', method: 'GET', path: `/restate/invocation/${invocationId}/attach` },
    { listener: 'ingress', method: 'GET', path: `/restate/invocation/${invocationId}/output` },
    { listener: 'ingress', method: 'GET', path: `/restate/invocation/${unknown.invocation}/output` },
    { listener: 'ingress', method: 'GET', path: '/restate/invocation/Greeter/greet/some-idempotency-key/attach' },
    { listener: 'ingress', method: 'GET', path: '/restate/workflow/NoSuchWorkflow/k/output' },
    { listener: 'ingress', method: 'POST', path: '/restate/attach', body: { target: 'invocation', invocationId } },
    { listener: 'ingress', method: 'POST', path: '/restate/output', body: { target: 'invocation', invocationId } },
    { listener: 'ingress', method: 'POST', path: '/restate/lookup', body: { target: 'invocation', invocationId } },
    { listener: 'ingress', method: 'GET', path: '/restate/health' },
    { listener: 'ingress', method: 'GET', path: '/openapi' },
    { listener: 'ingress', method: 'POST', path: '/NoSuchService/handler', body: 1 },
    // Not a preflight (no Access-Control-Request-Method): an ordinary request.
    { listener: 'ingress', method: 'OPTIONS', path: '/Greeter/greet' },
    // Awakeable paths the role awakeables may not use: another method, no id.
    { listener: 'ingress', method: 'GET', path: `/restate/awakeables/${awakeableId}/resolve` },
    { listener: 'ingress', method: 'POST', path: '/restate/awakeables', body: 1 },
    {
      listener: 'ingress',
      method: 'OPTIONS',
      path: '/Greeter/greet',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
      open: true,
    },
  ];
  for (const prefix of ['awakeables', 'a']) {
    for (const op of ['resolve', 'reject']) {
      routes.push({
        listener: 'ingress',
        method: 'POST',
        path: `/restate/${prefix}/${awakeableId}/${op}`,
        body: 'done',
        awakeableCompletion: true,
      });
    }
  }
  return routes;
}

function observabilityRoutes(): Route[] {
  const selector = encodeURIComponent('{level="info"}');
  const loki = [
    `/loki/api/v1/query?query=${selector}`,
    `/loki/api/v1/query_range?query=${selector}`,
    '/loki/api/v1/labels',
    '/loki/api/v1/label/level/values',
    `/loki/api/v1/series?match[]=${selector}`,
    `/loki/api/v1/index/stats?query=${selector}`,
    `/loki/api/v1/index/volume?query=${selector}`,
    `/loki/api/v1/index/volume_range?query=${selector}`,
  ];
  const traceId = '0123456789abcdef0123456789abcdef';
  const tempo = [
    `/api/traces/${traceId}`,
    `/api/v2/traces/${traceId}`,
    '/api/search',
    '/api/search/tags',
    '/api/v2/search/tags',
    '/api/search/tag/service.name/values',
    '/api/v2/search/tag/resource.service.name/values',
    '/api/echo',
    '/api/status/buildinfo',
  ];
  return [
    ...loki.flatMap((path) => ['GET', 'POST'].map((method): Route => ({ listener: 'observability', method, path }))),
    { listener: 'observability', method: 'GET', path: '/loki/api/v1/status/buildinfo' },
    { listener: 'observability', method: 'GET', path: `/loki/api/v1/tail?query=${selector}`, websocket: true },
    { listener: 'observability', method: 'GET', path: '/ready' },
    ...tempo.map((path): Route => ({ listener: 'observability', method: 'GET', path })),
    { listener: 'observability', method: 'GET', path: '/no/such/route' },
  ];
}

function probeRoutes(): Route[] {
  return ['/health', '/ready', '/metrics'].map((path) => ({ listener: 'probes', method: 'GET', path, open: true }));
}

async function request(route: Route, authorization: string | undefined): Promise<Answer> {
  const url = urls[route.listener] + route.path;
  const headers: Record<string, string> = { ...route.headers };
  if (authorization !== undefined) headers['authorization'] = authorization;
  if (route.websocket === true) return upgrade(url, headers);
  if (route.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, {
    method: route.method,
    headers,
    ...(route.body === undefined ? {} : { body: JSON.stringify(route.body) }),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The HTTP answer to a WebSocket upgrade request: 101, or the refusal with its headers and body. */
function upgrade(url: string, extra: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      headers: {
        ...extra,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': Buffer.from('auth-matrix-key!').toString('base64'),
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, headers: new Headers(), text: '' });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
        resolve({ status: res.statusCode ?? 0, headers, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function allows(role: Role, route: Route): boolean {
  const opens = OPENS[role];
  switch (route.listener) {
    case 'admin':
      return opens.admin;
    case 'observability':
      return opens.observability;
    case 'ingress':
      return opens.ingress === 'all' || (opens.ingress === 'awakeables' && route.awakeableCompletion === true);
    case 'probes':
      return true;
  }
}

/** How a 403 names what the request asked for. */
function refusedAccess(route: Route): string {
  switch (route.listener) {
    case 'admin':
      return 'the admin API';
    case 'ingress':
      return route.awakeableCompletion === true ? 'completing awakeables' : 'this ingress request';
    case 'observability':
    case 'probes':
      return 'the log and trace API';
  }
}

/** What is wrong with one cell's answer; empty when it is as the contract says. */
function problems(route: Route, credential: Credential, res: Answer): string[] {
  const out: string[] = [];
  const check = (ok: boolean, what: string): void => {
    if (!ok) out.push(what);
  };
  if (route.open === true) {
    check(res.status === 200, `status ${res.status}, expected 200 (no token needed): ${res.text.slice(0, 200)}`);
    return out;
  }
  if (credential.role !== undefined && allows(credential.role, route)) {
    check(res.status !== 401 && res.status !== 403, `refused with ${res.status}: ${res.text.slice(0, 200)}`);
    check(res.headers.get('www-authenticate') === null, 'a WWW-Authenticate header on an accepted request');
    if (route.websocket === true) check(res.status === 101, `upgrade answered ${res.status}: ${res.text}`);
    return out;
  }
  const status = credential.role === undefined ? 401 : 403;
  const message =
    credential.message ??
    new RegExp(`^the token's role '${credential.role}' does not allow ${refusedAccess(route)} \\(it needs the role `);
  const challenge =
    status === 403
      ? 'Bearer error="insufficient_scope"'
      : credential.authorization === undefined
        ? 'Bearer'
        : 'Bearer error="invalid_token"';
  check(res.status === status, `status ${res.status}, expected ${status}: ${res.text.slice(0, 200)}`);
  check(
    res.headers.get('www-authenticate') === challenge,
    `WWW-Authenticate ${res.headers.get('www-authenticate')}, expected ${challenge}`,
  );
  const token = credential.authorization?.replace(/^Bearer /, '');
  const payload = token?.split('.')[1];
  if (payload !== undefined && payload.length > 16) check(!res.text.includes(payload), 'the answer repeats the token');
  let said: string | undefined;
  switch (route.listener) {
    case 'admin': {
      const body = parse(res.text) as Record<string, unknown> | undefined;
      check(res.headers.get('content-type') === 'application/json', `content-type ${res.headers.get('content-type')}`);
      check(
        body !== undefined && body['restate_code'] === null && body['service_code'] === null,
        `not the admin error body: ${res.text}`,
      );
      said = typeof body?.['message'] === 'string' ? body['message'] : undefined;
      break;
    }
    case 'ingress': {
      const body = parse(res.text) as Record<string, unknown> | undefined;
      check(res.headers.get('x-restate-error-source') === 'ingress', 'no x-restate-error-source: ingress');
      check(
        body !== undefined && body['code'] === status && body['source'] === 'ingress',
        `not the ingress error body: ${res.text}`,
      );
      said = typeof body?.['message'] === 'string' ? body['message'] : undefined;
      break;
    }
    case 'observability':
      check(
        res.headers.get('content-type')?.startsWith('text/plain') === true,
        `content-type ${res.headers.get('content-type')}`,
      );
      said = res.text;
      break;
    case 'probes':
      break;
  }
  check(said !== undefined && message.test(said), `message ${JSON.stringify(said)} does not match ${message}`);
  return out;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Runs `tasks` with at most `width` at once. */
async function inBatches<T>(tasks: readonly (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = new Array<T>(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, worker));
  return results;
}

describe('the HTTP listeners', () => {
  it('answer every route × credential as the contract says', async () => {
    // A role added to the runtime must be added to the table above.
    expect([...ROLES].sort()).toEqual(Object.keys(OPENS).sort());
    const credentials: Credential[] = [
      ...(await invalidCredentials()),
      ...ROLES.map((role) => ({ name: `role ${role}`, authorization: `Bearer ${tokens[role]}`, role })),
    ];
    const routes = [...(await adminRoutes()), ...ingressRoutes(), ...observabilityRoutes(), ...probeRoutes()];
    const cells = routes.flatMap((route) => credentials.map((credential) => ({ route, credential })));
    const answers = await inBatches(
      cells.map(
        ({ route, credential }) =>
          () =>
            request(route, credential.authorization),
      ),
      32,
    );
    const failures = cells.flatMap(({ route, credential }, i) =>
      problems(route, credential, answers[i]!).map(
        (p) => `${route.listener} ${route.method} ${route.path} × ${credential.name}: ${p}`,
      ),
    );
    expect(failures).toEqual([]);
    // The matrix changed nothing: the one deployment is still there.
    const after = await send('GET', `${urls.admin}/deployments`, { token: tokens.admin });
    expect((after.json as { deployments: unknown[] }).deployments).toHaveLength(1);
  });
});

/**
 * How PostgreSQL refuses a write in a session of the introspection role: read-only transaction (25006), no privilege
 * (42501), not a table (42809), a view that is not updatable (0A000, 55000).
 */
const REFUSED_WRITE = ['25006', '42501', '42809', '0A000', '55000'];

describe('SQL introspection (9071)', () => {
  const connect = async (password: string, user = CLUSTER): Promise<pg.Client> => {
    const client = new pg.Client({
      host: LOOPBACK,
      port: runtime.handle.sql.port,
      user,
      password,
      database: CLUSTER,
    });
    client.on('error', () => undefined);
    await client.connect();
    return client;
  };
  const refusal = async (password: string, user = CLUSTER): Promise<unknown> => {
    try {
      const client = await connect(password, user);
      await client.end();
      return 'logged in';
    } catch (err) {
      return { code: (err as { code?: string }).code, message: (err as Error).message };
    }
  };

  it('refuses a wrong password, every invalid token, roles without SQL and other users with 28P01', async () => {
    const passwords: [string, string][] = [
      ['wrong password', 'secret'],
      ...(await invalidCredentials())
        .filter((c) => c.authorization?.startsWith('Bearer ') === true)
        .map((c): [string, string] => [c.name, c.authorization!.slice('Bearer '.length)]),
      ...ROLES.filter((role) => !OPENS[role].sql).map((role): [string, string] => [`role ${role}`, tokens[role]]),
    ];
    const answers = await Promise.all(passwords.map(([, password]) => refusal(password)));
    passwords.forEach(([what], i) => {
      expect(answers[i], what).toEqual({
        code: '28P01',
        message: `password authentication failed for user "${CLUSTER}"`,
      });
    });
    expect(await refusal(tokens.full, 'postgres')).toEqual({
      code: '28P01',
      message: 'password authentication failed for user "postgres"',
    });
  });

  it('gives full and admin tokens the views, read-only, and nothing else', async () => {
    const runtimeUser = decodeURIComponent(new URL(db.url).username);
    for (const role of ROLES.filter((r) => OPENS[r].sql)) {
      const client = await connect(tokens[role]);
      try {
        const ok = async (sql: string): Promise<unknown[]> => (await client.query(sql)).rows as unknown[];
        const fails = async (sql: string): Promise<string> => {
          try {
            await client.query(sql);
          } catch (err) {
            return (err as { code?: string }).code ?? 'no code';
          }
          return 'succeeded';
        };
        expect(await ok('SELECT count(*)::int AS n FROM sys_deployment')).toEqual([{ n: 1 }]);
        expect(await ok(`SELECT name FROM sys_service`)).toEqual([{ name: 'Greeter' }]);
        // Every view the session can see answers a SELECT.
        const views = (await ok(
          `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'ratchet_sql'`,
        )) as { name: string }[];
        expect(views.map((v) => v.name)).toEqual(
          expect.arrayContaining(['sys_invocation', 'sys_journal', 'state', 'sys_service', 'sys_deployment']),
        );
        for (const { name } of views) await ok(`SELECT * FROM ${client.escapeIdentifier(name)} LIMIT 1`);

        const writes = [
          `INSERT INTO state (service_name, service_key, key) VALUES ('Greeter', 'k', 'x')`,
          `UPDATE sys_invocation SET status = 'completed'`,
          'DELETE FROM sys_deployment',
          'TRUNCATE sys_journal',
          'CREATE TABLE sneaky (a int)',
          'CREATE TEMP TABLE sneaky (a int)',
          'CREATE VIEW sneaky AS SELECT 1',
          'DROP VIEW sys_invocation',
          'ALTER VIEW sys_invocation RENAME TO gone',
          'INSERT INTO ratchet.meta (key, value) VALUES ($$x$$, $$y$$)',
          'DELETE FROM ratchet.invocation',
        ];
        const raw = [
          'SELECT * FROM ratchet.invocation',
          'SELECT * FROM ratchet.journal',
          'SELECT * FROM ratchet.state',
          // The introspection role's own password is kept here.
          'SELECT * FROM ratchet.meta',
          'SELECT * FROM pg_authid',
          'SELECT * FROM pg_shadow',
          `SELECT pg_read_file('PG_VERSION')`,
          `SET ROLE ${client.escapeIdentifier(runtimeUser)}`,
        ];
        // As the session starts (default_transaction_read_only on), then once the client turned that off.
        for (const setup of [undefined, 'SET default_transaction_read_only = off']) {
          if (setup !== undefined) await ok(setup);
          for (const sql of [...writes, ...views.map((v) => `DELETE FROM ${client.escapeIdentifier(v.name)}`)]) {
            expect(REFUSED_WRITE, `${setup ?? ''} ${sql}`).toContain(await fails(sql));
          }
          for (const sql of raw) expect(await fails(sql), `${setup ?? ''}: ${sql}`).toBe('42501');
        }
        expect(await ok('SELECT count(*)::int AS n FROM sys_deployment')).toEqual([{ n: 1 }]);
      } finally {
        await client.end();
      }
    }
  });
});

describe("the admin API's POST /query", () => {
  it('reads the same views, as the same role: no raw tables, no writes', async () => {
    const query = (sql: string): Promise<{ status: number; text: string }> =>
      send('POST', `${urls.admin}/query`, {
        token: tokens.admin,
        body: { query: sql },
        headers: { accept: 'application/json' },
      });
    const views = await query('SELECT count(*)::int AS n FROM sys_deployment');
    expect(views.status, views.text).toBe(200);
    expect(JSON.parse(views.text)).toEqual({ rows: [{ n: 1 }] });
    const refusals: [string, RegExp][] = [
      ['SELECT * FROM ratchet.meta', /^permission denied for schema ratchet$/],
      ['SELECT * FROM ratchet.invocation', /^permission denied for schema ratchet$/],
      ['SELECT * FROM pg_authid', /^permission denied for table pg_authid$/],
      ['DELETE FROM sys_deployment', /^permission denied for view sys_deployment$/],
      ['CREATE TABLE sneaky (a int)', /read-only transaction/],
      // One statement per request: the read-only setting cannot be turned off in front of a write.
      ['SET default_transaction_read_only = off; CREATE TABLE sneaky (a int)', /^cannot insert multiple commands/],
    ];
    const answers = await Promise.all(refusals.map(([sql]) => query(sql)));
    refusals.forEach(([sql, message], i) => {
      expect(answers[i]!.status, sql).toBe(400);
      expect((JSON.parse(answers[i]!.text) as { message: string }).message, sql).toMatch(message);
    });
  });
});
