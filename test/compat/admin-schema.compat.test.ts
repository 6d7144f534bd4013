import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fixedDiscovery, sdkHandler, serve, startAdminHarness, type TestServer } from '../integration/admin/harness.ts';
import { startRestateServer } from '../support/restate-server.ts';
import { counter } from '../support/services/counter.ts';
import { greeterService, labGreeter } from '../support/services/greeter.ts';
import { GREETER_COUNTER_V5_TO_V6 } from '../support/services/manifests.ts';
import { signup } from '../support/services/signup.ts';
import { typedService } from '../support/services/typed.ts';
import { httpRequest, selectedTargets, type HttpRequest, type HttpResponse, type TargetName } from './targets.ts';

/**
 * Admin API schema changes, restate-server 1.7.12 vs Ratchet: the same request sequences against both (deployment
 * update and deletion, service settings, per-service OpenAPI, Kafka clusters, subscriptions), comparing status,
 * content type, `restate_code`, `location`, and the JSON bodies with ids, times and the ingress URL reduced to
 * placeholders (and restate's hash-ordered lists and maps sorted). Where Ratchet deliberately answers differently
 * (the specification wins over restate, or restate's answer is a trap), the difference is listed in `DIFFERENCES`
 * and asserted as such, so a change on either side shows up here.
 *
 * Both targets have the Kafka cluster `cfg-cluster` in their configuration file; nothing connects to a broker.
 */

// --------------------------------------------------------------------------------------------------------------------
// Services (the lab services of shared/spec's transcripts)

const greeterSmaller = greeterService({ description: 'A greeter service' });
const typed = typedService();
const MAIN = [labGreeter, counter, signup, typed];

// --------------------------------------------------------------------------------------------------------------------
// Targets

interface AdminTarget {
  readonly name: TargetName;
  readonly adminUrl: string;
  output(): string;
  stop(): Promise<void>;
}

const STATIC_CLUSTER = { name: 'cfg-cluster', brokers: ['127.0.0.1:9'] };

async function startRestateAdmin(): Promise<AdminTarget> {
  const server = await startRestateServer({
    enableProtocolV7: true,
    config: { ingress: { 'kafka-clusters': [STATIC_CLUSTER] } },
  });
  return { name: 'restate', adminUrl: server.adminUrl, output: () => server.output(), stop: () => server.stop() };
}

async function startRatchetAdmin(): Promise<AdminTarget> {
  const harness = await startAdminHarness({ env: { RATCHET_KAFKA_CLUSTERS: JSON.stringify([STATIC_CLUSTER]) } });
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
const servers: TestServer[] = [];
const endpoints = {} as Record<'main' | 'copy' | 'smaller' | 'protocol', TestServer>;

beforeAll(async () => {
  const start = async (key: keyof typeof endpoints, server: Promise<TestServer>): Promise<void> => {
    endpoints[key] = await server;
    servers.push(endpoints[key]);
  };
  await start('main', serve('h2', sdkHandler(MAIN)));
  await start('copy', serve('h2', sdkHandler(MAIN)));
  await start('smaller', serve('h2', sdkHandler([greeterSmaller, counter, signup, typed])));
  await start('protocol', serve('h2', fixedDiscovery({ body: GREETER_COUNTER_V5_TO_V6 })));
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
const DEPLOYMENT_ID = /dp_1[0-9A-Za-z]{22}/g;
const SUBSCRIPTION_ID = /sub_1[0-9A-Za-z]{22}/g;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{9})?Z$/;
/** Maps whose order restate does not keep (HashMap): compared with sorted keys. */
const UNORDERED_MAPS = new Set(['properties', 'options']);

function normalizeString(value: string): string {
  if (TIMESTAMP.test(value) && value !== '1970-01-01T00:00:00Z') return '<timestamp>';
  return value.replace(DEPLOYMENT_ID, '<deployment-id>').replace(SUBSCRIPTION_ID, '<subscription-id>');
}

function normalizeJson(value: unknown, key?: string): unknown {
  if (typeof value === 'string') return normalizeString(value);
  if (Array.isArray(value)) {
    const items = value.map((v) => normalizeJson(v));
    // restate lists services, handlers, clusters and subscriptions in hash order: compare them sorted.
    const sortKey = (i: unknown): string | undefined => {
      if (typeof i !== 'object' || i === null) return undefined;
      const o = i as Record<string, unknown>;
      return (o['name'] ?? o['uri'] ?? JSON.stringify(o)) as string;
    };
    if (items.length > 0 && items.every((i) => sortKey(i) !== undefined)) {
      return [...items].sort((a, b) => (sortKey(a)! < sortKey(b)! ? -1 : sortKey(a)! > sortKey(b)! ? 1 : 0));
    }
    return items;
  }
  if (typeof value === 'object' && value !== null) {
    let entries = Object.entries(value)
      // Ratchet mirrors restate_code as service_code (the specification's name); restate has only the former.
      .filter(([k]) => k !== 'service_code')
      .map(([k, v]) => [k, normalizeJson(v, k)] as const);
    if (key !== undefined && UNORDERED_MAPS.has(key)) entries = [...entries].sort(([a], [b]) => (a < b ? -1 : 1));
    return Object.fromEntries(entries);
  }
  return value;
}

interface Step {
  status: number;
  contentType: string | null;
  json: string | undefined;
  text: string;
  restateCode: string | null | undefined;
  location: string | undefined;
  raw: HttpResponse;
}

function toStep(res: HttpResponse, adjust: (json: unknown) => unknown = (j) => j): Step {
  const isJson = res.text !== '' && (res.headers['content-type'] ?? '').startsWith('application/json');
  const parsed: unknown = isJson ? JSON.parse(res.text) : undefined;
  const location = res.headers['location'];
  return {
    status: res.status,
    contentType: res.headers['content-type'] ?? null,
    json: isJson ? JSON.stringify(normalizeJson(adjust(parsed))) : undefined,
    text: res.text,
    restateCode: isJson ? ((parsed as { restate_code?: string | null }).restate_code ?? null) : undefined,
    location: typeof location === 'string' ? normalizeString(location) : undefined,
    raw: res,
  };
}

type Steps = Map<TargetName, Step>;

async function onBoth(
  build: HttpRequest | ((t: TargetName) => HttpRequest),
  adjust?: (json: unknown) => unknown,
): Promise<Steps> {
  const out: Steps = new Map();
  // One target after the other: both discover the same endpoints.
  for (const t of targets.values()) {
    const request = typeof build === 'function' ? build(t.name) : build;
    out.set(t.name, toStep(await httpRequest(t.adminUrl, request), adjust));
  }
  return out;
}

function describeSteps(steps: Steps): string {
  return [...steps.entries()].map(([n, s]) => `[${n}] ${s.status} ${s.raw.text.slice(0, 2000)}`).join('\n');
}

type Compare = 'json' | 'code' | 'text' | 'text-prefix' | 'status';

function expectAgree(steps: Steps, status: number, compare: Compare, prefix = 0): Step[] {
  const list = [...steps.values()];
  for (const s of list) expect(s.status, describeSteps(steps)).toBe(status);
  const [a, b] = list;
  if (a === undefined || b === undefined) return list;
  expect(b.contentType, describeSteps(steps)).toBe(a.contentType);
  expect(b.location, describeSteps(steps)).toBe(a.location);
  switch (compare) {
    case 'json':
      expect(b.json, describeSteps(steps)).toBe(a.json);
      break;
    case 'code':
      expect(b.restateCode, describeSteps(steps)).toBe(a.restateCode);
      break;
    case 'text':
      expect(b.text, describeSteps(steps)).toBe(a.text);
      break;
    case 'text-prefix':
      expect(b.text.slice(0, prefix), describeSteps(steps)).toBe(a.text.slice(0, prefix));
      break;
    case 'status':
      break;
  }
  return list;
}

function req(method: string, path: string, body?: unknown): HttpRequest {
  return body === undefined ? { method, path } : { method, path, headers: JSON_CT, body: JSON.stringify(body) };
}

/** Each target's id from a creation answer. */
function idsOf(steps: Steps): Map<TargetName, string> {
  return new Map([...steps.entries()].map(([n, s]) => [n, String((JSON.parse(s.raw.text) as { id: string }).id)]));
}

// --------------------------------------------------------------------------------------------------------------------
// Deliberate differences: each is checked on both targets (restate's answer, then Ratchet's).

interface Difference {
  what: string;
  why: string;
  request: (ids: Map<TargetName, string>, t: TargetName) => HttpRequest;
  restate: { status: number; code?: string | null };
  ratchet: { status: number; code?: string | null };
}

const DIFFERENCES: Difference[] = [
  {
    what: 'PUT /deployments/{id} on the unversioned path',
    why: 'specification 4.3: PUT updates a deployment in place; restate 1.7.12 refuses it outside /v2 (405)',
    request: (ids, t) => req('PUT', `/deployments/${ids.get(t) ?? ''}`, {}),
    restate: { status: 405, code: null },
    ratchet: { status: 200 },
  },
  {
    what: 'PATCH /deployments/{id} to an endpoint lacking a handler the deployment registered',
    why: 'specification (META0016): an in-place update keeps every handler; restate only compares protocol versions',
    request: (ids, t) =>
      req('PATCH', `/deployments/${ids.get(t) ?? ''}`, { uri: endpoints.smaller.url, dry_run: true }),
    restate: { status: 200 },
    ratchet: { status: 400, code: 'META0016' },
  },
  {
    what: 'PATCH /deployments/{id} with a uri that is not a string',
    why: 'restate matches the Lambda variant of its untagged request and ignores the field: a silent no-op',
    request: (ids, t) => req('PATCH', `/deployments/${ids.get(t) ?? ''}`, { uri: 1 }),
    restate: { status: 200 },
    ratchet: { status: 422 },
  },
  {
    what: 'POST /subscriptions with an unknown Kafka cluster',
    why: 'specification: an unconfigured cluster is META0009; restate sends the same 400 without a code',
    request: () =>
      req('POST', '/subscriptions', { source: 'kafka://bogus-cluster/t', sink: 'service://Greeter/greet' }),
    restate: { status: 400, code: null },
    ratchet: { status: 400, code: 'META0009' },
  },
  {
    what: 'POST /subscriptions with a source that is not a URI with an authority (kafka:/x)',
    why: 'specification: a bad source format is META0009; restate rejects it while reading the body (422 text)',
    request: () => req('POST', '/subscriptions', { source: 'kafka:/x', sink: 'service://Greeter/greet' }),
    restate: { status: 422 },
    ratchet: { status: 400, code: 'META0009' },
  },
  {
    what: 'POST /subscriptions without a topic (kafka://cfg-cluster)',
    why: 'specification: the source is kafka://<CLUSTER_NAME>/<TOPIC_NAME>; restate accepts an empty topic',
    request: () => req('POST', '/subscriptions', { source: 'kafka://cfg-cluster', sink: 'service://Greeter/greet' }),
    restate: { status: 201 },
    ratchet: { status: 400, code: 'META0009' },
  },
  {
    what: 'POST /kafka-clusters with a name that is not hostname-like (My_Cluster!)',
    why: 'the name is the authority of kafka:// URIs; restate documents "hostname" but does not check it',
    request: () => req('POST', '/kafka-clusters', { name: 'My_Cluster!', properties: { 'bootstrap.servers': 'h:1' } }),
    restate: { status: 201 },
    ratchet: { status: 422 },
  },
];

// Not replayed here because they need state the other scenarios would disturb (covered by the integration tests):
// - META0017: restate force-registers over the newest of two deployments sharing a uri; Ratchet refuses (409), as
//   the specification says.
// - Clusters of the configuration file: restate notes them as deprecated in `info`; for Ratchet they are a
//   supported configuration, and the note (and the 409 message of PATCH/DELETE) say so.
// - DELETE /deployments/{id}?force=true answers the same 202 with an empty body; Ratchet adds the header
//   `x-ratchet-pinned-invocations` (and `warning` when invocations were pinned).

// --------------------------------------------------------------------------------------------------------------------
// Scenarios (in order: later ones build on earlier ones)

describe.sequential('admin schema changes, restate-server 1.7.12 vs Ratchet', () => {
  let mainIds = new Map<TargetName, string>();
  const byId =
    (path: (id: string) => string) =>
    (t: TargetName): HttpRequest =>
      req('GET', path(mainIds.get(t) ?? ''));

  it('registers the same deployment', async () => {
    const created = await onBoth(req('POST', '/deployments', { uri: endpoints.main.url }));
    mainIds = idsOf(created);
    expectAgree(created, 201, 'json');
  });

  it('PATCH /services: settings, bad durations, unknown fields, workflows only, unknown services', async () => {
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', { public: false })), 200, 'json');
    expectAgree(await onBoth(req('GET', '/services/Greeter/handlers')), 200, 'json');
    const settings = {
      public: true,
      idempotency_retention: '2h',
      journal_retention: '30m',
      inactivity_timeout: '90s',
      abort_timeout: '5m',
    };
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', settings)), 200, 'json');
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', { foo: 1, public: null })), 200, 'json');
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', { retry_policy: { max_attempts: 5 } })), 200, 'json');
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', { journal_retention: 'PT1M' })), 200, 'json');
    expectAgree(await onBoth(req('PATCH', '/services/Signup', { workflow_completion_retention: '2d' })), 200, 'json');
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', { workflow_completion_retention: '2d' })), 400, 'json');
    // The field is named, then each side words the duration problem its own way.
    const prefix = 'Failed to deserialize the JSON body into the target type: idempotency_retention: '.length;
    expectAgree(
      await onBoth(req('PATCH', '/services/Greeter', { idempotency_retention: 'banana' })),
      422,
      'text-prefix',
      prefix,
    );
    expectAgree(await onBoth(req('PATCH', '/services/Greeter', { public: 'yes' })), 422, 'text-prefix', 70);
    expectAgree(await onBoth(req('PATCH', '/services/Nope', { public: true })), 404, 'json');
    expectAgree(await onBoth({ method: 'PATCH', path: '/services/Greeter', body: '{}' }), 415, 'text');
    expectAgree(await onBoth(req('GET', '/services')), 200, 'json');
  });

  it('GET /services/{name}/openapi: the same documents', async () => {
    const ingress = (json: unknown): unknown => {
      const doc = json as { servers?: { url: string }[] };
      if (Array.isArray(doc.servers)) for (const s of doc.servers) s.url = '<ingress-url>';
      return doc;
    };
    for (const name of ['Greeter', 'Counter', 'Signup', 'Typed']) {
      expectAgree(await onBoth(req('GET', `/services/${name}/openapi`), ingress), 200, 'json');
    }
    expectAgree(await onBoth(req('GET', '/services/Nope/openapi')), 404, 'json');
  });

  it('PATCH /deployments/{id}: no change, headers, dry-run moves, META0016, unknown and malformed ids', async () => {
    const patch =
      (body: unknown) =>
      (t: TargetName): HttpRequest =>
        req('PATCH', `/deployments/${mainIds.get(t) ?? ''}`, body);
    expectAgree(await onBoth(patch({})), 200, 'json');
    expectAgree(await onBoth(patch({ additional_headers: { 'X-Test': '1' } })), 200, 'json');
    expectAgree(await onBoth(patch({ additional_headers: null })), 200, 'json');
    expectAgree(await onBoth(patch({ uri: endpoints.copy.url, dry_run: true })), 200, 'json');
    expectAgree(await onBoth(patch({ uri: endpoints.copy.url })), 200, 'json');
    expectAgree(await onBoth(patch({ uri: endpoints.main.url, additional_headers: {} })), 200, 'json');
    expectAgree(await onBoth(byId((id) => `/deployments/${id}`)), 200, 'json');
    const steps = expectAgree(await onBoth(patch({ uri: endpoints.protocol.url })), 400, 'code');
    for (const s of steps) expect(s.restateCode).toBe('META0016');
    expectAgree(await onBoth(patch({ uri: 'nope' })), 400, 'json');
    const unknown = 'dp_1404g1SotmpNnp3UCfMcz0R';
    expectAgree(await onBoth(req('PATCH', `/deployments/${unknown}`, {})), 404, 'json');
    expectAgree(await onBoth(req('PATCH', `/deployments/${unknown}`, { additional_headers: { a: 'b' } })), 404, 'json');
    expectAgree(await onBoth(req('PATCH', '/deployments/dp_bogus', {})), 400, 'text');
    expectAgree(await onBoth({ method: 'PATCH', path: `/deployments/${unknown}`, body: '{}' }), 415, 'text');
  });

  it('PUT /deployments/{id}: under /v2; refused under /v3 and /v4', async () => {
    const put =
      (prefix: string, body: unknown) =>
      (t: TargetName): HttpRequest =>
        req('PUT', `${prefix}/deployments/${mainIds.get(t) ?? ''}`, body);
    expectAgree(await onBoth(put('/v2', { additional_headers: { 'x-put': '1' } })), 200, 'json');
    for (const prefix of ['/v3', '/v4']) expectAgree(await onBoth(put(prefix, {})), 405, 'json');
    expectAgree(await onBoth(req('PUT', '/deployments/dp_bogus', {})), 400, 'text');
  });

  it('Kafka clusters: static, registered, redacted, conflicts and validation', async () => {
    const staticInfo = (json: unknown): unknown => {
      // The note on configuration-file clusters is worded differently on purpose (see above); its shape is the same.
      const visit = (c: Record<string, unknown>): void => {
        if (Array.isArray(c['info'])) c['info'] = c['info'].map(() => ({ message: '<static cluster note>' }));
      };
      const body = json as Record<string, unknown>;
      if (Array.isArray(body['clusters'])) for (const c of body['clusters']) visit(c as Record<string, unknown>);
      else visit(body);
      return body;
    };
    expectAgree(await onBoth(req('GET', '/kafka-clusters'), staticInfo), 200, 'json');
    expectAgree(await onBoth(req('GET', '/kafka-clusters/cfg-cluster'), staticInfo), 200, 'json');
    const properties = {
      'bootstrap.servers': '127.0.0.1:1',
      'sasl.password': 'p',
      'sasl.username': 'u',
      'ssl.key.pem': 'k',
      'client.id': 'c',
    };
    expectAgree(await onBoth(req('POST', '/kafka-clusters', { name: 'my-cluster', properties })), 201, 'json');
    expectAgree(await onBoth(req('POST', '/kafka-clusters', { name: 'my-cluster', properties })), 409, 'json');
    expectAgree(await onBoth(req('POST', '/kafka-clusters', { name: 'cfg-cluster', properties })), 409, 'json');
    expectAgree(
      await onBoth(req('POST', '/kafka-clusters', { name: 'other', properties: { foo: 'bar' } })),
      400,
      'json',
    );
    expectAgree(await onBoth(req('POST', '/kafka-clusters', { name: 'x' })), 422, 'text-prefix', 84);
    expectAgree(await onBoth(req('POST', '/kafka-clusters', { name: '', properties })), 422, 'text-prefix', 75);
    expectAgree(await onBoth(req('GET', '/kafka-clusters/my-cluster')), 200, 'json');
    expectAgree(await onBoth(req('GET', '/kafka-clusters/nope')), 404, 'json');
    const update = { properties: { 'bootstrap.servers': '127.0.0.1:2' } };
    expectAgree(await onBoth(req('PATCH', '/kafka-clusters/my-cluster', update)), 200, 'json');
    expectAgree(await onBoth(req('PATCH', '/kafka-clusters/my-cluster', { properties: { foo: 'bar' } })), 400, 'json');
    expectAgree(await onBoth(req('PATCH', '/kafka-clusters/nope', update)), 404, 'json');
    expectAgree(await onBoth(req('PATCH', '/kafka-clusters/cfg-cluster', update)), 409, 'code');
    expectAgree(await onBoth(req('DELETE', '/kafka-clusters/cfg-cluster')), 409, 'code');
    expectAgree(await onBoth(req('DELETE', '/kafka-clusters/nope')), 404, 'json');
    expectAgree(await onBoth(req('DELETE', '/kafka-clusters/my-cluster?force=banana')), 400, 'text');
    expectAgree(await onBoth(req('GET', '/kafka-clusters')), 200, 'status');
  });

  it('subscriptions: create, list, filter, errors, delete', async () => {
    expectAgree(await onBoth(req('GET', '/subscriptions')), 200, 'json');
    const created = await onBoth(
      req('POST', '/subscriptions', {
        source: 'kafka://my-cluster/orders',
        sink: 'service://Greeter/greet',
        options: { 'auto.offset.reset': 'earliest' },
      }),
    );
    expectAgree(created, 201, 'json');
    const subIds = idsOf(created);
    expectAgree(
      await onBoth(
        req('POST', '/subscriptions', {
          source: 'kafka://cfg-cluster/signups',
          sink: 'service://Signup/run',
          options: null,
        }),
      ),
      201,
      'json',
    );
    expectAgree(await onBoth(req('GET', '/subscriptions')), 200, 'json');
    expectAgree(await onBoth(req('GET', '/subscriptions?sink=service://Greeter/greet')), 200, 'json');
    expectAgree(await onBoth(req('GET', '/subscriptions?source=kafka://nope/x')), 200, 'json');
    expectAgree(await onBoth((t) => req('GET', `/subscriptions/${subIds.get(t) ?? ''}`)), 200, 'json');
    expectAgree(await onBoth(req('GET', '/kafka-clusters/my-cluster?include_subscriptions=true')), 200, 'json');

    const refused: [unknown, number, Compare, number?][] = [
      [{ source: 'foo://bar/baz', sink: 'service://Greeter/greet' }, 400, 'json'],
      [{ source: 'kafka://cfg-cluster/t', sink: 'foo://Greeter/greet' }, 400, 'json'],
      [{ source: 'kafka://cfg-cluster/t', sink: 'service://Nope/greet' }, 400, 'json'],
      [{ source: 'kafka://cfg-cluster/t', sink: 'service://Greeter/nope' }, 400, 'json'],
      [{ source: 'kafka://cfg-cluster/t' }, 422, 'text-prefix', 78],
      [{ source: 1, sink: 'service://Greeter/greet' }, 422, 'text-prefix', 80],
    ];
    for (const [body, status, compare, prefix] of refused) {
      expectAgree(await onBoth(req('POST', '/subscriptions', body)), status, compare, prefix);
    }
    expectAgree(await onBoth(req('GET', '/subscriptions/sub_bogus')), 400, 'text');
    const unknown = 'sub_11XHoawrCyWbcyaE8QnyBpm';
    expectAgree(await onBoth(req('GET', `/subscriptions/${unknown}`)), 404, 'json');
    expectAgree(await onBoth(req('DELETE', `/subscriptions/${unknown}`)), 404, 'json');

    expectAgree(await onBoth(req('DELETE', '/kafka-clusters/my-cluster')), 409, 'json');
    const deleted = expectAgree(
      await onBoth((t) => req('DELETE', `/subscriptions/${subIds.get(t) ?? ''}`)),
      202,
      'text',
    );
    for (const s of deleted) expect(s.text).toBe('');
    expectAgree(await onBoth(req('DELETE', '/kafka-clusters/my-cluster')), 202, 'text');
    expectAgree(await onBoth(req('GET', '/kafka-clusters/my-cluster')), 404, 'json');
  });

  it('deliberate differences hold on both sides', async () => {
    for (const d of DIFFERENCES) {
      for (const t of targets.values()) {
        const expected = d[t.name];
        const step = toStep(await httpRequest(t.adminUrl, d.request(mainIds, t.name)));
        expect(step.status, `[${t.name}] ${d.what} (${d.why}): ${step.text}`).toBe(expected.status);
        if (expected.code !== undefined) expect(step.restateCode, `[${t.name}] ${d.what}`).toBe(expected.code);
      }
    }
  });

  it('DELETE /deployments/{id}: 501 without force, 400 for a bad force, 202 and gone with it, 404 after', async () => {
    const del =
      (query: string) =>
      (t: TargetName): HttpRequest =>
        req('DELETE', `/deployments/${mainIds.get(t) ?? ''}${query}`);
    expectAgree(await onBoth(del('')), 501, 'text');
    expectAgree(await onBoth(del('?force=false')), 501, 'text');
    expectAgree(await onBoth(del('?force=banana')), 400, 'text');
    expectAgree(await onBoth(req('DELETE', '/deployments/dp_1404g1SotmpNnp3UCfMcz0R?force=true')), 404, 'json');
    expectAgree(await onBoth(req('DELETE', '/deployments/dp_bogus?force=true')), 400, 'text');
    const deleted = expectAgree(await onBoth(del('?force=true')), 202, 'text');
    for (const s of deleted) expect(s.text).toBe('');
    expectAgree(await onBoth(del('?force=true')), 404, 'json');
    expectAgree(await onBoth(req('GET', '/deployments')), 200, 'json');
    expectAgree(await onBoth(req('GET', '/services')), 200, 'json');
  });
});
