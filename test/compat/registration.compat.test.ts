import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  fixedDiscovery,
  requireAuthorization,
  sdkHandler,
  serve,
  startAdminHarness,
  type AdminHarness,
  type TestServer,
} from '../integration/admin/harness.ts';
import { freePort } from '../support/ports.ts';
import { counter } from '../support/services/counter.ts';
import { flaky } from '../support/services/flaky.ts';
import { labGreeter } from '../support/services/greeter.ts';
import { signup } from '../support/services/signup.ts';
import { startRestateServer, type RestateServer } from '../support/restate-server.ts';
import { httpRequest, selectedTargets, type HttpRequest, type HttpResponse, type TargetName } from './targets.ts';

/**
 * Admin API registration compatibility: the same registration scenarios against the real restate-server 1.7.12 and
 * against Ratchet's admin app. Both register the same SDK endpoints (discovery is stateless, so one endpoint serves
 * both), and each step must give the same status, `restate_code`, and JSON (ids and times reduced to placeholders,
 * arrays of named things sorted by name because restate's order is a hash order). Error messages are compared only
 * where Ratchet deliberately uses restate's text.
 *
 * Known, deliberate differences are not compared here (see the integration tests): Ratchet discovers again on a
 * re-registration without force and answers META0004 when the manifest changed (restate skips discovery), refuses
 * BIDI_STREAM over HTTP/1.1 (META0015), and words transport errors its own way.
 */

// --------------------------------------------------------------------------------------------------------------------
// Services (the same lab services as shared/spec's transcripts, plus one with every option set)

const greeterAsObject = restate.object({
  name: 'Greeter',
  handlers: { greet: (_ctx: restate.ObjectContext, name: string) => Promise.resolve(`Hello ${name}!`) },
});

const configured = restate.service({
  name: 'Configured',
  description: 'A service showing optional manifest fields',
  metadata: { team: 'lab' },
  handlers: {
    hello: restate.handlers.handler(
      { ingressPrivate: true, journalRetention: 3_600_000, description: 'says hello', metadata: { a: 'b' } },
      (_ctx: restate.Context) => Promise.resolve('hello'),
    ),
    tuned: restate.handlers.handler(
      {
        idempotencyRetention: 60_000,
        inactivityTimeout: 90_000,
        abortTimeout: 1_000,
        retryPolicy: { exponentiationFactor: 1.5, maxInterval: 3_600_000 },
      },
      (_ctx: restate.Context) => Promise.resolve('tuned'),
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

const h1Service = restate.service({
  name: 'OverH1',
  handlers: { ping: (_ctx: restate.Context) => Promise.resolve('pong') },
  options: { inactivityTimeout: 30_000 },
});

const guardedService = restate.service({
  name: 'Guarded',
  handlers: { hi: (_ctx: restate.Context) => Promise.resolve('hi') },
});

// --------------------------------------------------------------------------------------------------------------------
// Targets

interface AdminTarget {
  readonly name: TargetName;
  readonly adminUrl: string;
  output(): string;
  stop(): Promise<void>;
}

async function startRestateAdmin(): Promise<AdminTarget> {
  const server: RestateServer = await startRestateServer();
  return { name: 'restate', adminUrl: server.adminUrl, output: () => server.output(), stop: () => server.stop() };
}

async function startRatchetAdmin(): Promise<AdminTarget> {
  const harness: AdminHarness = await startAdminHarness();
  try {
    const adminUrl = await harness.listen();
    return { name: 'ratchet', adminUrl, output: () => '', stop: () => harness.close() };
  } catch (err) {
    await harness.close();
    throw err;
  }
}

const names = selectedTargets();
const targets = new Map<TargetName, AdminTarget>();
const endpoints: Record<'main' | 'objectGreeter' | 'h1' | 'guarded' | 'oldProtocol', TestServer> = {} as never;
const servers: TestServer[] = [];

beforeAll(async () => {
  const start = async (key: keyof typeof endpoints, server: Promise<TestServer>): Promise<void> => {
    endpoints[key] = await server;
    servers.push(endpoints[key]);
  };
  await start('main', serve('h2', sdkHandler([labGreeter, counter, signup, flaky, configured])));
  await start('objectGreeter', serve('h2', sdkHandler([greeterAsObject])));
  await start('h1', serve('h1', sdkHandler([h1Service])));
  await start('guarded', serve('h2', requireAuthorization('Bearer s3cret', sdkHandler([guardedService]))));
  await start(
    'oldProtocol',
    serve(
      'h2',
      fixedDiscovery({
        body: JSON.stringify({
          protocolMode: 'BIDI_STREAM',
          minProtocolVersion: 1,
          maxProtocolVersion: 4,
          services: [{ name: 'Old', ty: 'SERVICE', handlers: [] }],
        }),
      }),
    ),
  );
  const started = await Promise.allSettled(
    names.map((n) => (n === 'restate' ? startRestateAdmin() : startRatchetAdmin())),
  );
  for (const s of started) if (s.status === 'fulfilled') targets.set(s.value.name, s.value);
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
});

afterAll(async () => {
  await Promise.allSettled([...targets.values()].map((t) => t.stop()));
  await Promise.allSettled(servers.map((s) => s.close()));
});

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    const out = targets.get('restate')?.output();
    if (out !== undefined) console.error(`--- restate-server output (last 10 kB) ---\n${out.slice(-10_000)}`);
  });
});

// --------------------------------------------------------------------------------------------------------------------
// Comparison

const JSON_CT = { 'content-type': 'application/json' };
const DEPLOYMENT_ID = /^dp_1[0-9A-Za-z]{22}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;

function normalizeJson(value: unknown): unknown {
  if (typeof value === 'string') {
    if (DEPLOYMENT_ID.test(value)) return '<deployment-id>';
    if (TIMESTAMP.test(value)) return '<timestamp>';
    return value;
  }
  if (Array.isArray(value)) {
    const items = value.map(normalizeJson);
    // restate lists services, handlers and deployments in hash order: compare them sorted by name (or uri).
    for (const key of ['name', 'uri']) {
      const sortKey = (i: unknown): string | undefined =>
        typeof i === 'object' && i !== null ? ((i as Record<string, unknown>)[key] as string | undefined) : undefined;
      if (items.length > 0 && items.every((i) => typeof sortKey(i) === 'string')) {
        return [...items].sort((a, b) => (sortKey(a)! < sortKey(b)! ? -1 : sortKey(a)! > sortKey(b)! ? 1 : 0));
      }
    }
    return items;
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        // Ratchet mirrors restate_code as service_code (the specification's name); restate has only the former.
        .filter(([k]) => k !== 'service_code')
        .map(([k, v]) => [k, normalizeJson(v)]),
    );
  }
  return value;
}

interface Step {
  status: number;
  contentType: string | null;
  /** JSON bodies normalized, in wire key order (compared as text, so key order counts). */
  json: string | undefined;
  text: string;
  restateCode: string | null | undefined;
  location: string | undefined;
  allow: string | undefined;
  raw: HttpResponse;
}

function toStep(res: HttpResponse): Step {
  let parsed: unknown;
  let isJson = false;
  if (res.text !== '' && (res.headers['content-type'] ?? '').startsWith('application/json')) {
    parsed = JSON.parse(res.text);
    isJson = true;
  }
  const location = res.headers['location'];
  return {
    status: res.status,
    contentType: res.headers['content-type'] ?? null,
    json: isJson ? JSON.stringify(normalizeJson(parsed)) : undefined,
    text: res.text,
    restateCode: isJson ? ((parsed as { restate_code?: string | null }).restate_code ?? null) : undefined,
    location: typeof location === 'string' ? location.replace(/dp_1[0-9A-Za-z]{22}$/, '') : undefined,
    allow: typeof res.headers['allow'] === 'string' ? res.headers['allow'] : undefined,
    raw: res,
  };
}

async function onBoth(request: HttpRequest): Promise<Map<TargetName, Step>> {
  const out = new Map<TargetName, Step>();
  // Sequentially: both targets register the same endpoints, which must not see two discoveries at once mid-scenario.
  for (const t of targets.values()) out.set(t.name, toStep(await httpRequest(t.adminUrl, request)));
  return out;
}

function describeSteps(steps: Map<TargetName, Step>): string {
  return [...steps.entries()].map(([n, s]) => `[${n}] ${s.status} ${s.raw.text.slice(0, 3000)}`).join('\n');
}

type Compare = 'json' | 'code' | 'text' | 'text-prefix' | 'status';

/**
 * Checks the expected status on every target, then that the targets agree: `json` = whole normalized body; `code` =
 * restate_code and the key set of the error body; `text` = exact text body; `text-prefix` = the first `prefix`
 * characters of the text body.
 */
function expectAgree(steps: Map<TargetName, Step>, status: number, compare: Compare, prefix = 0): Step[] {
  const list = [...steps.values()];
  for (const s of list) expect(s.status, describeSteps(steps)).toBe(status);
  const [a, b] = list;
  if (a === undefined || b === undefined) return list;
  expect(b.contentType, describeSteps(steps)).toBe(a.contentType);
  expect(b.location).toBe(a.location);
  expect(b.allow).toBe(a.allow);
  switch (compare) {
    case 'json':
      expect(b.json, describeSteps(steps)).toBe(a.json);
      break;
    case 'code': {
      expect(b.restateCode, describeSteps(steps)).toBe(a.restateCode);
      const keys = (s: Step): string[] => Object.keys(JSON.parse(s.json ?? '{}') as object);
      expect(keys(b)).toEqual(keys(a));
      break;
    }
    case 'text':
      expect(b.text).toBe(a.text);
      break;
    case 'text-prefix':
      expect(b.text.slice(0, prefix)).toBe(a.text.slice(0, prefix));
      break;
    case 'status':
      break;
  }
  return list;
}

function post(path: string, body: unknown): HttpRequest {
  return { method: 'POST', path, headers: JSON_CT, body: JSON.stringify(body) };
}

function get(path: string): HttpRequest {
  return { method: 'GET', path };
}

/** Each target's own id for the same deployment. */
function idsOf(steps: Map<TargetName, Step>): Map<TargetName, string> {
  return new Map([...steps.entries()].map(([n, s]) => [n, String((JSON.parse(s.raw.text) as { id: string }).id)]));
}

async function onBothWithIds(
  build: (id: string) => HttpRequest,
  ids: Map<TargetName, string>,
): Promise<Map<TargetName, Step>> {
  const out = new Map<TargetName, Step>();
  for (const t of targets.values())
    out.set(t.name, toStep(await httpRequest(t.adminUrl, build(ids.get(t.name) ?? ''))));
  return out;
}

// --------------------------------------------------------------------------------------------------------------------
// Scenarios (in order: later ones build on the registrations of earlier ones)

describe.sequential('deployment registration, restate-server 1.7.12 vs Ratchet', () => {
  let mainIds = new Map<TargetName, string>();

  it('starts empty', async () => {
    expectAgree(await onBoth(get('/deployments')), 200, 'json');
    expectAgree(await onBoth(get('/services')), 200, 'json');
  });

  it('dry_run: 201 with a would-be id, nothing stored', async () => {
    const steps = expectAgree(
      await onBoth(post('/deployments', { uri: endpoints.main.url, dry_run: true })),
      201,
      'json',
    );
    for (const s of steps) expect(s.location).toBe('deployments/');
    expectAgree(await onBoth(get('/deployments')), 200, 'json');
  });

  it('register: 201, then the same uri again: 200 with the same id', async () => {
    const created = await onBoth(post('/deployments', { uri: endpoints.main.url.replace(/\/$/, '') }));
    expectAgree(created, 201, 'json');
    mainIds = idsOf(created);
    const again = await onBoth(post('/deployments', { uri: endpoints.main.url }));
    expectAgree(again, 200, 'json');
    expect(idsOf(again)).toEqual(mainIds);
  });

  it('force: 200, same id, every revision bumped; /v2 defaults force to true and answers 201', async () => {
    const forced = await onBoth(post('/deployments', { uri: endpoints.main.url, force: true }));
    expectAgree(forced, 200, 'json');
    expect(idsOf(forced)).toEqual(mainIds);
    expect(forced.get([...targets.keys()][0]!)?.json).toContain('"revision":2');
    const v2 = await onBoth(post('/v2/deployments', { uri: endpoints.main.url }));
    expectAgree(v2, 201, 'json');
    expect(v2.get([...targets.keys()][0]!)?.json).toContain('"revision":3');
    expectAgree(await onBoth(post('/v3/deployments', { uri: endpoints.main.url })), 200, 'json');
  });

  it('lists and details deployments, services and handlers in the same shapes', async () => {
    expectAgree(await onBoth(get('/deployments')), 200, 'json');
    expectAgree(await onBothWithIds((id) => get(`/deployments/${id}`), mainIds), 200, 'json');
    expectAgree(await onBoth(get('/services')), 200, 'json');
    for (const name of ['Greeter', 'Counter', 'Signup', 'Flaky', 'Configured']) {
      expectAgree(await onBoth(get(`/services/${name}`)), 200, 'json');
      expectAgree(await onBoth(get(`/v4/services/${name}/handlers`)), 200, 'json');
    }
    expectAgree(await onBoth(get('/services/Counter/handlers/get')), 200, 'json');
    expectAgree(await onBoth(get('/services/Configured/handlers/tuned')), 200, 'json');
  });

  it('answers unknown and malformed references the same way', async () => {
    expectAgree(await onBoth(get('/services/Nope')), 404, 'json');
    expectAgree(await onBoth(get('/services/Nope/handlers')), 404, 'json');
    expectAgree(await onBoth(get('/services/Counter/handlers/nope')), 404, 'json');
    expectAgree(await onBoth(get('/deployments/dp_1404g1SotmpNnp3UCfMcz0R')), 404, 'json');
    expectAgree(await onBoth(get('/deployments/dp_bogus')), 400, 'text');
    expectAgree(await onBoth(get('/deployments/abc')), 400, 'text');
    expectAgree(await onBoth(get('/v1/deployments')), 400, 'text');
    expectAgree(await onBoth(get('/v5/deployments')), 404, 'text');
    expectAgree(await onBoth(get('/nonexistent')), 404, 'text');
    expectAgree(await onBoth({ method: 'PUT', path: '/deployments', headers: JSON_CT, body: '{}' }), 405, 'text');
    expectAgree(await onBoth({ method: 'DELETE', path: '/services' }), 405, 'text');
  });

  it('rejects unreadable registration requests the same way', async () => {
    expectAgree(
      await onBoth({ method: 'POST', path: '/deployments', body: '{"uri":"http://127.0.0.1:1"}' }),
      415,
      'text',
    );
    expectAgree(
      await onBoth({ method: 'POST', path: '/deployments', headers: { 'content-type': 'text/plain' }, body: '{}' }),
      415,
      'text',
    );
    expectAgree(
      await onBoth({ method: 'POST', path: '/deployments', headers: JSON_CT, body: '{"uri":' }),
      400,
      'text-prefix',
      41,
    );
    expectAgree(await onBoth(post('/deployments', {})), 422, 'text-prefix', 131);
    expectAgree(
      await onBoth(post('/deployments', { uri: 'http://127.0.0.1:1', force: 'yes' })),
      422,
      'text-prefix',
      131,
    );
    expectAgree(await onBoth(post('/deployments', { uri: 'nope' })), 400, 'json');
  });

  it('META0003: unreachable endpoint, and an endpoint that needs headers', async () => {
    const port = await freePort();
    expectAgree(await onBoth(post('/deployments', { uri: `http://127.0.0.1:${port}/` })), 500, 'code');
    expectAgree(
      await onBoth(post('/deployments', { uri: `http://127.0.0.1:${port}/`, use_http_11: true })),
      500,
      'code',
    );
    expectAgree(await onBoth(post('/deployments', { uri: endpoints.guarded.url })), 500, 'code');
    const withHeaders = await onBoth(
      post('/deployments', { uri: endpoints.guarded.url, additional_headers: { authorization: 'Bearer s3cret' } }),
    );
    expectAgree(withHeaders, 201, 'json');
    expectAgree(await onBothWithIds((id) => get(`/deployments/${id}`), idsOf(withHeaders)), 200, 'json');
  });

  it('META0006: a service changing type; force accepts it with the next revision', async () => {
    const steps = expectAgree(await onBoth(post('/deployments', { uri: endpoints.objectGreeter.url })), 409, 'json');
    for (const s of steps) expect(s.restateCode).toBe('META0006');
    expectAgree(
      await onBoth(post('/deployments', { uri: endpoints.objectGreeter.url, dry_run: true, force: true })),
      201,
      'json',
    );
    const forced = await onBoth(post('/deployments', { uri: endpoints.objectGreeter.url, force: true }));
    expectAgree(forced, 201, 'json');
    expectAgree(await onBoth(get('/services/Greeter')), 200, 'json');
    // The first deployment still shows the revision it registered.
    expectAgree(await onBothWithIds((id) => get(`/deployments/${id}`), mainIds), 200, 'json');
  });

  it('META0012: no common protocol version', async () => {
    const steps = expectAgree(await onBoth(post('/deployments', { uri: endpoints.oldProtocol.url })), 500, 'code');
    for (const s of steps) expect(s.restateCode).toBe('META0012');
  });

  it('HTTP/1.1 with use_http_11: request/response mode', async () => {
    const h1 = await onBoth(post('/deployments', { uri: endpoints.h1.url, use_http_11: true }));
    expectAgree(h1, 201, 'json');
    expectAgree(await onBothWithIds((id) => get(`/deployments/${id}`), idsOf(h1)), 200, 'json');
    expectAgree(await onBoth(get('/services/OverH1')), 200, 'json');
  });

  it('ends with the same deployments and services', async () => {
    expectAgree(await onBoth(get('/deployments')), 200, 'json');
    expectAgree(await onBoth(get('/services')), 200, 'json');
  });

  it('health and version', async () => {
    expectAgree(await onBoth(get('/health')), 200, 'text');
    const version = expectAgree(await onBoth(get('/version')), 200, 'status');
    for (const v of version) {
      const body = JSON.parse(v.raw.text) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual([
        'version',
        'min_admin_api_version',
        'max_admin_api_version',
        'ingress_endpoint',
        'features',
      ]);
      expect(body).toMatchObject({ min_admin_api_version: 2, max_admin_api_version: 4 });
    }
  });
});
