import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { counter } from '../../support/services/counter.ts';
import { greeter } from '../../support/services/greeter.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { adminRequest, type Method } from './admin-requests.ts';
import {
  RATCHET_TEST_VERSION,
  sdkHandler,
  serve,
  startAdminHarness,
  type AdminHarness,
  type TestServer,
} from './harness.ts';
import { validate } from './json-schema.ts';

/*
 * `GET /openapi`: Ratchet's own admin API document. It must list exactly the routes the app serves (with the
 * invocation routes when an engine is wired in), every `$ref` must resolve, and real responses must conform to the
 * schemas it documents (no undocumented fields).
 */

interface Doc {
  openapi: string;
  info: { version: string; title: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Record<string, unknown>>; responses: Record<string, unknown> };
  tags: { name: string }[];
}

interface Operation {
  operationId: string;
  tags: string[];
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: Record<string, unknown> }> }>;
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> };
}

let admin: AdminHarness;
let server: TestServer;

async function document(app = admin.app): Promise<Doc> {
  const answer = await adminRequest(app, 'GET', '/openapi');
  expect(answer.status).toBe(200);
  expect(answer.headers['content-type']).toBe('application/json');
  return answer.json() as unknown as Doc;
}

function operations(doc: Doc): string[] {
  return Object.entries(doc.paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
}

function refs(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) refs(v, out);
  else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

const SCHEMA_ROUTES = [
  'DELETE /deployments/{deployment}',
  'DELETE /kafka-clusters/{cluster_name}',
  'DELETE /subscriptions/{subscription}',
  'GET /deployments',
  'GET /deployments/{deployment}',
  'GET /health',
  'GET /kafka-clusters',
  'GET /kafka-clusters/{cluster_name}',
  'GET /openapi',
  'GET /services',
  'GET /services/{service}',
  'GET /services/{service}/handlers',
  'GET /services/{service}/handlers/{handler}',
  'GET /services/{service}/openapi',
  'GET /subscriptions',
  'GET /subscriptions/{subscription}',
  'GET /version',
  'PATCH /deployments/{deployment}',
  'PATCH /kafka-clusters/{cluster_name}',
  'PATCH /services/{service}',
  'POST /deployments',
  'POST /kafka-clusters',
  'POST /subscriptions',
  'PUT /deployments/{deployment}',
];

beforeAll(async () => {
  admin = await startAdminHarness();
  server = await serve('h2', sdkHandler([greeter, counter]));
});

afterAll(async () => {
  await server?.close();
  await admin?.close();
});

describe('GET /openapi', () => {
  it("describes exactly the routes served, in Ratchet's version, with every $ref resolving", async () => {
    const doc = await document();
    expect(doc.openapi).toBe('3.1.0');
    // The description's version is the specification's (section 9); Ratchet's own is beside it.
    expect(doc.info).toMatchObject({
      title: 'Ratchet Admin API',
      version: '1.7.8',
      'x-ratchet-version': RATCHET_TEST_VERSION,
    });
    expect(operations(doc)).toEqual(SCHEMA_ROUTES);
    // Every operation is one a route answers (not 404/405) under the root and the versioned prefixes.
    for (const op of operations(doc)) {
      const [method, path] = op.split(' ') as [Method, string];
      const url = path.replace(/\{[^}]+\}/g, 'x');
      for (const prefix of ['', '/v4']) {
        const answer = await adminRequest(admin.app, method, `${prefix}${url}`);
        expect([404, 405].includes(answer.status) && answer.text === '', `${method} ${prefix}${url}`).toBe(false);
      }
    }
    for (const ref of refs(doc)) {
      const [, kind, name] = /^#\/components\/(schemas|responses)\/(.+)$/.exec(ref) ?? [];
      expect(kind, ref).toBeDefined();
      expect(doc.components[kind as 'schemas' | 'responses'][name ?? ''], ref).toBeDefined();
    }
    const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((o) => o.operationId));
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.tags.map((t) => t.name)).toEqual([
      'deployment',
      'subscription',
      'kafka_cluster',
      'service',
      'service_handler',
      'health',
      'version',
      'openapi',
    ]);
    // The versioned prefixes serve the same document.
    expect((await adminRequest(admin.app, 'GET', '/v3/openapi')).json()).toEqual(doc);
  });

  it('documents the invocation routes when the runtime serves them', async () => {
    let db: TestDatabase | undefined;
    let endpoint: SdkEndpoint | undefined;
    let runtime: TestRuntime | undefined;
    try {
      db = await createTestDatabase();
      endpoint = await startEndpoint({ services: [greeter], transport: 'h2' });
      runtime = await startTestRuntime(db.url);
      const res = await fetch(`${runtime.adminUrl}/openapi`);
      const doc = (await res.json()) as Doc;
      const engineOps = operations(doc).filter((op) => !SCHEMA_ROUTES.includes(op));
      expect(engineOps).toContain('PATCH /invocations/{id}/cancel');
      for (const op of engineOps) {
        const [method, path] = op.split(' ') as [string, string];
        const item = doc.paths[path]?.[method.toLowerCase()] as Operation & { description: string };
        // Described from the catalogue, not by the fallback for routes nobody described.
        expect(item.description, op).not.toContain('not described in detail yet');
        if (path.startsWith('/invocations/')) expect(item.tags, op).toEqual(['invocation']);
      }
      expect(operations(doc).filter((op) => SCHEMA_ROUTES.includes(op))).toEqual(SCHEMA_ROUTES);
    } finally {
      await runtime?.stop();
      await endpoint?.close();
      await db?.drop();
    }
  });

  it('responses conform to the documented schemas', async () => {
    const doc = await document();
    const schemas = doc.components.schemas;
    const check = async (
      method: Method,
      url: string,
      path: string,
      body?: unknown,
    ): Promise<Record<string, unknown>> => {
      const answer = await adminRequest(admin.app, method, url, body);
      const op = doc.paths[path]?.[method.toLowerCase()];
      expect(op, `${method} ${path}`).toBeDefined();
      const response = op?.responses[String(answer.status)];
      expect(response, `${method} ${url} answered ${answer.status}: ${answer.text}`).toBeDefined();
      const schema = response?.content?.['application/json']?.schema;
      if (schema !== undefined) {
        const parsed = answer.json();
        expect(validate(parsed, schema, schemas), `${method} ${url}`).toEqual([]);
        return parsed;
      }
      return {};
    };
    const registered = await check('POST', '/deployments', '/deployments', { uri: server.url });
    const id = String(registered['id']);
    await check('GET', '/deployments', '/deployments');
    await check('GET', `/deployments/${id}`, '/deployments/{deployment}');
    await check('PATCH', `/deployments/${id}`, '/deployments/{deployment}', { additional_headers: { 'x-a': 'b' } });
    await check('GET', '/services', '/services');
    await check('GET', '/services/Counter', '/services/{service}');
    await check('PATCH', '/services/Counter', '/services/{service}', { public: false });
    await check('GET', '/services/Counter/handlers', '/services/{service}/handlers');
    await check('GET', '/services/Counter/handlers/add', '/services/{service}/handlers/{handler}');
    await check('GET', '/version', '/version');
    await check('POST', '/kafka-clusters', '/kafka-clusters', {
      name: 'c',
      properties: { 'bootstrap.servers': 'h:1' },
    });
    await check('GET', '/kafka-clusters', '/kafka-clusters');
    await check('PATCH', '/kafka-clusters/c', '/kafka-clusters/{cluster_name}', {
      properties: { 'bootstrap.servers': 'h:2' },
    });
    const sub = await check('POST', '/subscriptions', '/subscriptions', {
      source: 'kafka://c/t',
      sink: 'service://Counter/add',
    });
    await check('GET', '/kafka-clusters/c?include_subscriptions=true', '/kafka-clusters/{cluster_name}');
    await check('GET', '/subscriptions', '/subscriptions');
    await check('GET', `/subscriptions/${String(sub['id'])}`, '/subscriptions/{subscription}');
    // Errors are documented too, and are ErrorDescriptionResponse.
    await check('GET', '/services/Nope', '/services/{service}');
    await check('POST', '/subscriptions', '/subscriptions', {
      source: 'kafka://nope/t',
      sink: 'service://Counter/add',
    });
    await check('DELETE', `/deployments/${id}`, '/deployments/{deployment}');
    await check('DELETE', `/deployments/${id}?force=true`, '/deployments/{deployment}');
  });
});
