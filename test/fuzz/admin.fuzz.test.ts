import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../runtime/src/admin/app.ts';
import { DeleteDeploymentQuery } from '../../runtime/src/admin/model/deployments.ts';
import { RestartAsNewInvocationQuery } from '../../runtime/src/admin/model/invocations.ts';
import { DeleteKafkaClusterQuery, GetKafkaClusterQuery } from '../../runtime/src/admin/model/kafka-clusters.ts';
import { ListSubscriptionsQuery } from '../../runtime/src/admin/model/subscriptions.ts';
import {
  parseCreateKafkaClusterRequest,
  parseCreateSubscriptionRequest,
  parseModifyServiceRequest,
  parseRegisterDeploymentRequest,
  parseUpdateDeploymentRequest,
  parseUpdateKafkaClusterRequest,
  readJsonBody,
  readQuery,
} from '../../runtime/src/admin/request.ts';
import { loadConfig } from '../../runtime/src/config/config.ts';
import { RatchetError } from '../../runtime/src/errors/errors.ts';
import { PgIntrospectionQueries } from '../../runtime/src/introspection/query.ts';
import { createSchemaOperations } from '../../runtime/src/schema/operations.ts';
import type { Discover } from '../../runtime/src/schema/operation-deps.ts';
import { createRegistration, registrationTarget } from '../../runtime/src/schema/register.ts';
import { SchemaRegistry } from '../../runtime/src/schema/registry.ts';
import { migrate } from '../../runtime/src/storage/pg/migrate.ts';
import { createPool, type Pool } from '../../runtime/src/storage/pg/pool.ts';
import { PgSchemaStore } from '../../runtime/src/storage/pg/tables/schema.ts';
import { prepareIntrospection } from '../integration/pgwire/support.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { anyJson, mutatedString, nastyFragment, nastyString, sometimes } from './support/arbitraries.ts';
import { startFuzzEngine, type FuzzEngine } from './support/engine.ts';
import { PARSER_TIMEOUT, expectOwnError, fuzz, fuzzAsync, timeoutFor, watchProcessErrors } from './support/fuzz.ts';
import { anyId, deploymentId, invocationId, subscriptionId } from './support/ids.ts';

/**
 * The admin API (9070) against arbitrary request bodies, query strings and paths: the request readers on their own,
 * then whole requests through the app as the runtime wires it (schema registry and operations over PostgreSQL,
 * invocation management over an in-memory engine, SQL over the read-only role), with discovery answered in memory so
 * that registrations succeed without a network. A malformed request is a 4xx that says why; the 5xx restate itself
 * answers for requests it does not implement are listed in RESTATE_5XX.
 */

const SURFACE = 'admin';
const CLUSTER = 'admin-fuzz';
const processErrors = watchProcessErrors();

// ---- inputs ---------------------------------------------------------------------------------------------------------

const text = fc.oneof(fc.string({ maxLength: 12 }), nastyString(12));
const DURATIONS = ['1h', '10s', '5m 30s', 'P1D', 'PT1H', '0s', '1 day', '', '-1s', '1y', '1000000000h', '1e3s', 'h'];
const duration = fc.oneof(fc.constantFrom(...DURATIONS), mutatedString(fc.constantFrom(...DURATIONS)));
const HEADER_NAMES = ['authorization', 'x-api-key', 'X-Custom', '', 'bad name', 'a:b', 'é'];
const headersMap = fc.dictionary(
  fc.oneof(fc.constantFrom(...HEADER_NAMES), text),
  sometimes(fc.oneof(fc.constantFrom('Bearer x', '', 'a\r\nb', 'ü'), text)),
  { maxKeys: 3 },
);
const URIS = [
  'http://127.0.0.1:9080/',
  'https://svc.example.com/prefix',
  'http://[::1]:9080',
  'ftp://x/',
  'relative/path',
];
const uri = fc.oneof(fc.constantFrom(...URIS), mutatedString(fc.constantFrom(...URIS)));
const ARNS = [
  'arn:aws:lambda:eu-central-1:123456789012:function:greeter:1',
  'arn:aws:lambda:us-east-1:123456789012:function:f:$LATEST',
  'arn:aws:iam::123456789012:role/invoker',
];
const arn = fc.oneof(fc.constantFrom(...ARNS), mutatedString(fc.constantFrom(...ARNS)));
const CLUSTERS = ['c1', 'my-cluster.prod', 'a', '-x', 'x_', ''];
const clusterName = fc.oneof(fc.constantFrom(...CLUSTERS), mutatedString(fc.constantFrom(...CLUSTERS)));
const kafkaProperties = fc.dictionary(
  fc.oneof(fc.constantFrom('bootstrap.servers', 'metadata.broker.list', 'group.id', 'security.protocol'), text),
  sometimes(fc.oneof(fc.constantFrom('localhost:9092', 'PLAINTEXT'), text)),
  { maxKeys: 3 },
);
const SOURCES = ['kafka://c1/orders', 'kafka://c1/', 'kafka:///t', 'http://c1/t', 'kafka://unknown/t'];
const SINKS = ['service://Greeter/greet', 'service://Counter/add', 'service://Greeter', 'service://Nope/x', 'x'];

const bodies = {
  register: fc.record(
    {
      uri: sometimes(uri),
      arn: sometimes(arn),
      assume_role_arn: sometimes(fc.option(arn)),
      additional_headers: sometimes(fc.option(headersMap)),
      metadata: sometimes(fc.option(headersMap)),
      use_http_11: sometimes(fc.boolean()),
      force: sometimes(fc.option(fc.boolean())),
      breaking: sometimes(fc.boolean()),
      dry_run: sometimes(fc.boolean()),
      auth: sometimes(fc.constant(null)),
    },
    { requiredKeys: [] },
  ),
  update: fc.record(
    {
      uri: sometimes(fc.option(uri)),
      arn: sometimes(fc.option(arn)),
      assume_role_arn: sometimes(fc.option(arn)),
      use_http_11: sometimes(fc.option(fc.boolean())),
      additional_headers: sometimes(fc.option(headersMap)),
      overwrite: sometimes(fc.boolean()),
      dry_run: sometimes(fc.boolean()),
    },
    { requiredKeys: [] },
  ),
  service: fc.record(
    {
      public: sometimes(fc.option(fc.boolean())),
      idempotency_retention: sometimes(fc.option(duration)),
      workflow_completion_retention: sometimes(fc.option(duration)),
      journal_retention: sometimes(fc.option(duration)),
      inactivity_timeout: sometimes(fc.option(duration)),
      abort_timeout: sometimes(fc.option(duration)),
      retry_policy: anyJson,
    },
    { requiredKeys: [] },
  ),
  kafkaCluster: fc.record(
    { name: sometimes(clusterName), properties: sometimes(kafkaProperties) },
    { requiredKeys: [] },
  ),
  kafkaUpdate: fc.record({ properties: sometimes(kafkaProperties) }, { requiredKeys: [] }),
  subscription: fc.record(
    {
      source: sometimes(fc.oneof(fc.constantFrom(...SOURCES), mutatedString(fc.constantFrom(...SOURCES)))),
      sink: sometimes(fc.oneof(fc.constantFrom(...SINKS), mutatedString(fc.constantFrom(...SINKS)))),
      options: sometimes(fc.option(kafkaProperties)),
    },
    { requiredKeys: [] },
  ),
  state: fc.record(
    {
      object_key: sometimes(text),
      new_state: sometimes(
        fc.dictionary(text, sometimes(fc.array(fc.integer({ min: -1, max: 256 }), { maxLength: 4 })), { maxKeys: 2 }),
      ),
      version: sometimes(fc.option(text)),
      scope: sometimes(fc.option(text)),
    },
    { requiredKeys: [] },
  ),
  query: fc.record(
    {
      query: sometimes(
        fc.oneof(
          fc.constantFrom('SELECT 1', 'SELECT id FROM sys_invocation LIMIT 1', 'SELECT * FROM state', 'SHOW ALL'),
          mutatedString(fc.constantFrom('SELECT * FROM sys_deployment', 'SELECT count(*) FROM sys_journal')),
        ),
      ),
    },
    { requiredKeys: [] },
  ),
};
type BodyKind = keyof typeof bodies | 'none';

/** A body of its kind as JSON text: well-formed, with damage to the text, or any JSON, or not JSON at all. */
function bodyText(kind: BodyKind): fc.Arbitrary<string> {
  const shaped = kind === 'none' ? anyJson : (bodies[kind] as fc.Arbitrary<unknown>);
  return fc.oneof(
    { weight: 4, arbitrary: shaped.map((b) => JSON.stringify(b) ?? '') },
    {
      weight: 2,
      arbitrary: mutatedString(
        shaped.map((b) => JSON.stringify(b) ?? ''),
        fc.oneof(nastyFragment, fc.constantFrom('"', ',', '{', '}', ':', 'null')),
      ),
    },
    { weight: 1, arbitrary: anyJson.map((b) => JSON.stringify(b) ?? '') },
    { weight: 1, arbitrary: nastyString() },
  );
}

const CONTENT_TYPES = [
  'application/json',
  'application/merge-patch+json',
  'application/json; charset=utf-8',
  'text/plain',
  '',
];
const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
  { weight: 1, arbitrary: mutatedString(fc.constantFrom(...CONTENT_TYPES)) },
);

/** Query parameters the admin routes read, with good and bad values, sometimes repeated. */
const queryString: fc.Arbitrary<string> = fc
  .uniqueArray(
    fc.tuple(
      fc.oneof(
        fc.constantFrom(
          'force',
          'include_subscriptions',
          'from',
          'deployment',
          'deployment[Id]',
          'mode',
          'sink',
          'source',
        ),
        text,
      ),
      fc.oneof(
        fc.constantFrom(
          'true',
          'false',
          'True',
          '1',
          '',
          '0',
          '+7',
          '4294967296',
          'Keep',
          'latest',
          'Cancel',
          'kill',
          'Purge',
        ),
        deploymentId,
        fc.constant('{"Id":"dp_11111111111111111111111111"}'),
        text,
      ),
    ),
    { maxLength: 4, selector: ([k]) => k },
  )
  .chain((pairs) =>
    // A parameter given twice arrives as an array: repeat one sometimes.
    fc.boolean().map((repeat) => (repeat && pairs.length > 0 ? [...pairs, pairs[0]!] : pairs)),
  )
  .map((pairs) =>
    pairs.length === 0
      ? ''
      : `?${pairs.map(([k, v]) => `${encodeURIComponent(wellFormed(k))}=${encodeURIComponent(wellFormed(v))}`).join('&')}`,
  );

function wellFormed(s: string): string {
  return Buffer.from(s, 'utf8').toString('utf8');
}

/** Path parameters: known names, ids of every kind (valid, damaged), any text, percent-encoded. */
const serviceName = fc.oneof(fc.constantFrom('Greeter', 'Counter', 'Signup', 'Unknown'), text);
const pathParam = (known: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc
    .oneof({ weight: 3, arbitrary: known }, { weight: 1, arbitrary: anyId }, { weight: 1, arbitrary: text })
    .map((s) => encodeURIComponent(wellFormed(s)));

interface Route {
  readonly method: string;
  readonly path: fc.Arbitrary<string>;
  readonly body: BodyKind;
}

/** Deployment ids registered in beforeAll (paths that name them reach the operations). */
const registered: string[] = [];
const deployment = pathParam(
  fc.oneof(
    deploymentId,
    fc.nat().map((i) => registered[i % registered.length] ?? ''),
  ),
);
const service = pathParam(serviceName);
const INVOCATION_OPS = ['cancel', 'kill', 'pause', 'resume', 'purge', 'purge-journal', 'restart-as-new'];
const ROUTES: Route[] = [
  {
    method: 'GET',
    path: fc.constantFrom('/health', '/version', '/openapi', '/deployments', '/services'),
    body: 'none',
  },
  { method: 'GET', path: fc.constantFrom('/kafka-clusters', '/subscriptions', '/', '/v1/deployments'), body: 'none' },
  { method: 'POST', path: fc.constant('/deployments'), body: 'register' },
  { method: 'GET', path: deployment.map((d) => `/deployments/${d}`), body: 'none' },
  { method: 'PATCH', path: deployment.map((d) => `/deployments/${d}`), body: 'update' },
  { method: 'PUT', path: deployment.map((d) => `/deployments/${d}`), body: 'update' },
  { method: 'DELETE', path: deployment.map((d) => `/deployments/${d}`), body: 'none' },
  { method: 'GET', path: service.map((s) => `/services/${s}`), body: 'none' },
  { method: 'PATCH', path: service.map((s) => `/services/${s}`), body: 'service' },
  {
    method: 'GET',
    path: fc
      .tuple(service, fc.constantFrom('/openapi', '/handlers', '/handlers/greet', '/handlers/x'))
      .map(([s, rest]) => `/services/${s}${rest}`),
    body: 'none',
  },
  { method: 'POST', path: service.map((s) => `/services/${s}/state`), body: 'state' },
  { method: 'POST', path: fc.constant('/kafka-clusters'), body: 'kafkaCluster' },
  { method: 'GET', path: pathParam(clusterName).map((c) => `/kafka-clusters/${c}`), body: 'none' },
  { method: 'PATCH', path: pathParam(clusterName).map((c) => `/kafka-clusters/${c}`), body: 'kafkaUpdate' },
  { method: 'DELETE', path: pathParam(clusterName).map((c) => `/kafka-clusters/${c}`), body: 'none' },
  { method: 'POST', path: fc.constant('/subscriptions'), body: 'subscription' },
  {
    method: 'GET',
    path: fc
      .tuple(pathParam(subscriptionId), fc.constantFrom('', '/status'))
      .map(([id, rest]) => `/subscriptions/${id}${rest}`),
    body: 'none',
  },
  { method: 'DELETE', path: pathParam(subscriptionId).map((id) => `/subscriptions/${id}`), body: 'none' },
  {
    method: 'PATCH',
    path: fc
      .tuple(pathParam(invocationId), fc.constantFrom(...INVOCATION_OPS))
      .map(([id, op]) => `/invocations/${id}/${op}`),
    body: 'none',
  },
  { method: 'DELETE', path: pathParam(invocationId).map((id) => `/invocations/${id}`), body: 'none' },
  {
    method: 'GET',
    path: fc
      .tuple(
        pathParam(invocationId),
        fc.constantFrom('logs', 'trace'),
        fc.constantFrom('', '?since=2026-11-28T10:00:00Z', '?since=1', '?limit=10', '?limit=x', '?since=&limit=9999'),
      )
      .map(([id, what, q]) => `/invocations/${id}/${what}${q}`),
    body: 'none',
  },
  { method: 'POST', path: fc.constant('/query'), body: 'query' },
];

const VERSION_PREFIXES = ['', '', '/v2', '/v3', '/v4', '/v1', '/v5'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'];

interface AdminRequest {
  readonly method: string;
  readonly url: string;
  readonly contentType: string;
  readonly body: string;
}

const adminRequest: fc.Arbitrary<AdminRequest> = fc
  .constantFrom(...ROUTES)
  .chain((route) =>
    fc.record({
      method: fc.oneof(
        { weight: 8, arbitrary: fc.constant(route.method) },
        { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
      ),
      prefix: fc.constantFrom(...VERSION_PREFIXES),
      path: fc.oneof({ weight: 6, arbitrary: route.path }, { weight: 1, arbitrary: mutatedString(route.path) }),
      query: queryString,
      contentType,
      body: bodyText(route.body),
    }),
  )
  .map((r) => ({ method: r.method, url: `${r.prefix}${r.path}${r.query}`, contentType: r.contentType, body: r.body }));

// ---- the app --------------------------------------------------------------------------------------------------------

const MANIFEST = {
  protocolMode: 'BIDI_STREAM',
  minProtocolVersion: 5,
  maxProtocolVersion: 6,
  services: [
    { name: 'Greeter', ty: 'SERVICE', handlers: [{ name: 'greet' }] },
    {
      name: 'Counter',
      ty: 'VIRTUAL_OBJECT',
      handlers: [
        { name: 'add', ty: 'EXCLUSIVE' },
        { name: 'get', ty: 'SHARED' },
      ],
    },
  ],
};

/** Discovery without a network: every endpoint serves MANIFEST. */
const discover: Discover = () =>
  Promise.resolve({
    manifest: MANIFEST,
    contentType: 'application/vnd.restate.endpointmanifest.v3+json',
    manifestVersion: 3,
    transport: 'HTTP/2.0',
    sdkVersion: 'fuzz/0.0.0',
  });

let db: TestDatabase;
let pool: Pool;
let queries: PgIntrospectionQueries;
let fuzzEngine: FuzzEngine;
let app: FastifyInstance;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createPool({ url: db.url, max: 4, applicationName: 'ratchet admin fuzz' });
  const client = await pool.connect();
  try {
    await migrate(client);
  } finally {
    client.release();
  }
  const config = loadConfig({ env: { RATCHET_CLUSTER_NAME: CLUSTER } });
  const logger = pino({ level: 'silent' });
  const registry = new SchemaRegistry(
    new PgSchemaStore(pool),
    config.serviceDefaults,
    config.defaultRetryPolicy,
    config.invoker,
    config.kafka,
  );
  await registry.load();
  const options = { registry, clusterName: CLUSTER, logger, discover, discoveryTimeoutMs: 1_000 };
  queries = new PgIntrospectionQueries(
    await prepareIntrospection(db.url),
    { statementTimeoutMs: 2_000, rowLimit: config.introspection.rowLimit, poolSize: 2 },
    logger,
  );
  fuzzEngine = await startFuzzEngine();
  app = buildAdminApp({
    registry,
    register: createRegistration(options),
    operations: createSchemaOperations(options),
    version: '0.0.0-fuzz',
    ingressEndpoint: 'http://127.0.0.1:8080/',
    clusterName: CLUSTER,
    logger,
    engine: fuzzEngine.engine,
    queries,
    subscriptionStatus: () => Promise.resolve(undefined),
  });
  await app.ready();
  // Something to find: a deployment (with services) and a Kafka cluster.
  const json = { 'content-type': 'application/json' };
  const dp = await app.inject({
    method: 'POST',
    url: '/deployments',
    headers: json,
    payload: { uri: 'http://127.0.0.1:9080/' },
  });
  expect(dp.statusCode).toBe(201);
  registered.push((JSON.parse(dp.body) as { id: string }).id);
  const kc = await app.inject({
    method: 'POST',
    url: '/kafka-clusters',
    headers: json,
    payload: { name: 'c1', properties: { 'bootstrap.servers': 'localhost:9092' } },
  });
  expect(kc.statusCode).toBe(201);
}, 120_000);

afterAll(async () => {
  await app?.close();
  await fuzzEngine?.stop();
  await queries?.close();
  await pool?.end();
  await db?.drop();
});

// ---- checks ---------------------------------------------------------------------------------------------------------

/**
 * The 5xx restate-server itself answers to requests it does not serve, kept for compatibility (each a 501 "not
 * implemented", not a failure): per-deployment `auth` in a registration, and `DELETE /deployments/{id}` without
 * `force=true`.
 */
function restate5xx(r: AdminRequest, status: number): boolean {
  if (status !== 501) return false;
  const path = r.url.split('?')[0]!;
  return (
    (r.method === 'POST' && /^(\/v\d+)?\/deployments$/.test(path)) ||
    (r.method === 'DELETE' && /\/deployments\/[^/]+$/.test(path))
  );
}

function messageOf(body: string, type: string | undefined): string {
  if (type?.startsWith('application/json') === true) {
    const json = JSON.parse(body) as { message?: unknown };
    return typeof json.message === 'string' ? json.message : '';
  }
  return body;
}

function expectRefusal(err: unknown): void {
  expectOwnError(err, [RatchetError]);
  const status = (err as RatchetError).status;
  if (status >= 500 && status !== 501) throw new Error(`status ${status}: ${(err as Error).message}`, { cause: err });
}

// ---- properties -----------------------------------------------------------------------------------------------------

describe('admin request readers', () => {
  it(
    'reads every request body or refuses it with a RatchetError of status 4xx',
    () => {
      const readers: Record<Exclude<BodyKind, 'none' | 'state' | 'query'>, (b: unknown) => unknown> = {
        register: (b) => registrationTarget(parseRegisterDeploymentRequest(b, 3)),
        update: (b) => parseUpdateDeploymentRequest(b),
        service: (b) => parseModifyServiceRequest(b),
        kafkaCluster: (b) => parseCreateKafkaClusterRequest(b),
        kafkaUpdate: (b) => parseUpdateKafkaClusterRequest(b),
        subscription: (b) => parseCreateSubscriptionRequest(b),
      };
      const kinds = Object.keys(readers) as (keyof typeof readers)[];
      fuzz(
        SURFACE,
        'request-readers',
        fc.property(
          fc.constantFrom(...kinds).chain((kind) => fc.tuple(fc.constant(kind), bodyText(kind), contentType)),
          ([kind, body, type]) => {
            try {
              readers[kind](readJsonBody(type, Buffer.from(body)));
            } catch (err) {
              expectRefusal(err);
            }
          },
        ),
        { runs: 4000 },
      );
    },
    PARSER_TIMEOUT,
  );

  it(
    'reads every query string or refuses it with a 400',
    () => {
      const schemas = [
        DeleteDeploymentQuery,
        RestartAsNewInvocationQuery,
        GetKafkaClusterQuery,
        DeleteKafkaClusterQuery,
        ListSubscriptionsQuery,
      ];
      fuzz(
        SURFACE,
        'readQuery',
        fc.property(
          fc.constantFrom(...schemas),
          fc.dictionary(
            fc.constantFrom('force', 'from', 'include_subscriptions', 'sink', 'source', 'x'),
            fc.oneof(text, fc.array(text, { minLength: 2, maxLength: 3 }), anyJson),
            { maxKeys: 3 },
          ),
          (schema, query) => {
            try {
              readQuery(schema, query);
            } catch (err) {
              expectRefusal(err);
              expect((err as RatchetError).status).toBe(400);
            }
          },
        ),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('admin requests', () => {
  it("answers an invocation's logs and trace with 404 and the reason on a node without the store", async () => {
    const id = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';
    for (const what of ['logs', 'trace']) {
      const res = await app.inject({ method: 'GET', url: `/invocations/${id}/${what}` });
      expect(res.statusCode).toBe(404);
      expect((JSON.parse(res.body) as { message: string }).message).toContain('RATCHET_OBSERVABILITY_STORE=off');
    }
  });

  it(
    'answers every request (fastify inject) with a 2xx or a 4xx that says why',
    async () => {
      await fuzzAsync(
        SURFACE,
        'inject',
        fc.asyncProperty(adminRequest, async (r) => {
          // What inject cannot send (it parses the URL with `new URL` first): not a request the server could see.
          if (!r.url.startsWith('/') || !URL.canParse(r.url, 'http://localhost')) return;
          const res = await app.inject({
            method: r.method as 'GET',
            url: r.url,
            headers: r.contentType === '' ? {} : { 'content-type': r.contentType },
            ...(r.method === 'GET' || r.method === 'HEAD' ? {} : { payload: r.body }),
          });
          const status = res.statusCode;
          if (status >= 500 && !restate5xx(r, status)) {
            throw new Error(
              `${r.method} ${r.url} (${r.contentType}) ${JSON.stringify(r.body)} answered ${status}: ${res.body}`,
            );
          }
          // Route and method refusals (404, 405) have no body, as restate's; every other refusal says why.
          if (status >= 400 && status !== 404 && status !== 405 && status !== 501 && r.method !== 'HEAD') {
            expect(
              messageOf(res.body, String(res.headers['content-type'] ?? '')).trim(),
              `${status} ${res.body}`,
            ).not.toBe('');
          }
          await processErrors.check();
        }),
        { runs: 800, weight: 0.2 },
      );
    },
    timeoutFor(800, 0.2, 10),
  );
});
