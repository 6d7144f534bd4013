import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import { freePort } from '../../support/ports.ts';
import { waitFor } from '../../support/wait.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { counter } from '../../support/services/counter.ts';
import { greeter } from '../../support/services/greeter.ts';
import { signup } from '../../support/services/signup.ts';
import {
  fixedDiscovery,
  requireAuthorization,
  sdkHandler,
  serve,
  startAdminHarness,
  type AdminHarness,
  type TestServer,
} from './harness.ts';

const configured = restate.service({
  name: 'Configured',
  description: 'A service with options',
  metadata: { team: 'lab' },
  handlers: {
    hello: restate.handlers.handler(
      { ingressPrivate: true, journalRetention: 3_600_000, description: 'says hello', metadata: { a: 'b' } },
      (_ctx: restate.Context) => Promise.resolve('hello'),
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

const ALL = [greeter, counter, signup, configured];

interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  json: () => Record<string, unknown>;
}

let admin: AdminHarness;

async function request(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH',
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Answer> {
  const res = await admin.app.inject({
    method,
    url,
    ...(body === undefined
      ? {}
      : {
          payload: typeof body === 'string' ? body : JSON.stringify(body),
          headers: { 'content-type': 'application/json', ...headers },
        }),
    ...(body === undefined && headers !== undefined ? { headers } : {}),
  });
  return {
    status: res.statusCode,
    headers: res.headers,
    text: res.body,
    json: () => JSON.parse(res.body) as Record<string, unknown>,
  };
}

function register(body: Record<string, unknown>, prefix = ''): Promise<Answer> {
  return request('POST', `${prefix}/deployments`, body);
}

function expectCoded(answer: Answer, status: number, code: string): string {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json');
  const body = answer.json();
  expect(Object.keys(body)).toEqual(['message', 'restate_code', 'service_code']);
  expect(body['restate_code']).toBe(code);
  expect(body['service_code']).toBe(code);
  const message = String(body['message']);
  expect(message.startsWith(`[${code}] `)).toBe(true);
  return message;
}

const closers: (() => Promise<unknown>)[] = [];
async function track<T extends { close(): Promise<void> }>(resource: Promise<T>): Promise<T> {
  const r = await resource;
  closers.push(() => r.close());
  return r;
}

beforeAll(async () => {
  admin = await startAdminHarness();
});

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  await admin?.close();
});

describe('registering an HTTP/2 deployment', () => {
  let endpoint: SdkEndpoint;
  let id: string;

  beforeAll(async () => {
    endpoint = await track(startEndpoint({ services: ALL, transport: 'h2' }));
  });

  it('dry_run answers 201 with a would-be id and stores nothing', async () => {
    const answer = await register({ uri: endpoint.url, dry_run: true });
    expect(answer.status, answer.text).toBe(201);
    const body = answer.json();
    expect(body['id']).toMatch(/^dp_1[0-9A-Za-z]{22}$/);
    expect(answer.headers['location']).toBe(`deployments/${String(body['id'])}`);
    expect((await request('GET', '/deployments')).text).toBe('{"deployments":[]}');
    expect((await request('GET', '/services')).text).toBe('{"services":[]}');
    const rows = await admin.pool.query('SELECT count(*)::int AS n FROM ratchet.deployment');
    expect(rows.rows[0]).toEqual({ n: 0 });
  });

  it('registers with 201, renders restate shapes, and answers 200 with the same id when registered again', async () => {
    const first = await register({ uri: endpoint.url.replace(/\/$/, '') });
    expect(first.status, first.text).toBe(201);
    const body = first.json();
    id = String(body['id']);
    expect(first.headers['location']).toBe(`deployments/${id}`);
    expect(Object.keys(body)).toEqual([
      'id',
      'services',
      'min_protocol_version',
      'max_protocol_version',
      'sdk_version',
    ]);
    expect(body['min_protocol_version']).toBe(5);
    expect(body['max_protocol_version']).toBe(7);
    expect(body['sdk_version']).toMatch(/^restate-sdk-typescript\/1\.17\./);

    // Byte-exact service rendering, including `2.0` and the handler retry policy placeholder.
    const counterText =
      `{"name":"Counter","ty":"VirtualObject","handlers":[` +
      `{"name":"add","ty":"Exclusive","public":true,"input_description":"application/json","output_description":"application/json","retry_policy":{"max_attempts":null}},` +
      `{"name":"get","ty":"Shared","public":true,"input_description":"application/json","output_description":"application/json","retry_policy":{"max_attempts":null}}],` +
      `"deployment_id":"${id}","revision":1,"public":true,"idempotency_retention":"1d","journal_retention":"1d",` +
      `"inactivity_timeout":"1m","abort_timeout":"10m","enable_lazy_state":false,"retry_policy":{"initial_interval":"500ms",` +
      `"exponentiation_factor":2.0,"max_attempts":70,"max_interval":"1m","on_max_attempts":"Pause"}}`;
    expect(first.text).toContain(counterText);
    const signupJson = (body['services'] as Record<string, unknown>[]).find((s) => s['name'] === 'Signup');
    expect(signupJson).toMatchObject({ ty: 'Workflow', workflow_completion_retention: '1d' });
    expect((signupJson?.['handlers'] as unknown[]).map((h) => (h as { ty: string }).ty)).toEqual([
      'Workflow',
      'Shared',
    ]);
    const configuredText = first.text.slice(first.text.indexOf('{"name":"Configured"'));
    expect(configuredText).toMatch(
      /^\{"name":"Configured","ty":"Service","handlers":\[\{"name":"hello","documentation":"says hello","metadata":\{"a":"b"\},"journal_retention":"1h","public":false,"input_description":"application\/json","output_description":"application\/json","retry_policy":\{"max_attempts":null\}\}\],"documentation":"A service with options","metadata":\{"team":"lab"\},"deployment_id":"dp_\w+","revision":1,"public":true,"idempotency_retention":"3h","journal_retention":"2d","inactivity_timeout":"30s","abort_timeout":"2m","enable_lazy_state":false,"retry_policy":\{"initial_interval":"100ms","exponentiation_factor":2.0,"max_attempts":5,"max_interval":"10s","on_max_attempts":"Pause"\}\}/,
    );

    const again = await register({ uri: endpoint.url });
    expect(again.status, again.text).toBe(200);
    expect(again.json()['id']).toBe(id);
    expect(again.headers['location']).toBe(`deployments/${id}`);
    expect(admin.registry.deployments()).toHaveLength(1);
  });

  it('lists and details the deployment in restate shapes', async () => {
    const list = await request('GET', '/deployments');
    expect(list.status).toBe(200);
    expect(list.headers['content-type']).toBe('application/json');
    const deployments = list.json()['deployments'] as Record<string, unknown>[];
    expect(deployments).toHaveLength(1);
    const d = deployments[0]!;
    expect(Object.keys(d)).toEqual([
      'id',
      'uri',
      'protocol_type',
      'http_version',
      'created_at',
      'min_protocol_version',
      'max_protocol_version',
      'sdk_version',
      'services',
    ]);
    expect(d).toMatchObject({ id, uri: endpoint.url, protocol_type: 'BidiStream', http_version: 'HTTP/2.0' });
    expect(d['created_at']).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}000000Z$/);
    expect(d['services']).toEqual([
      { name: 'Greeter', revision: 1 },
      { name: 'Counter', revision: 1 },
      { name: 'Signup', revision: 1 },
      { name: 'Configured', revision: 1 },
    ]);

    const detail = await request('GET', `/deployments/${id}`);
    expect(detail.status).toBe(200);
    const detailBody = detail.json();
    expect(Object.keys(detailBody)).toEqual(Object.keys(d));
    expect(
      (detailBody['services'] as { name: string; revision: number; handlers: unknown[] }[]).map((s) => [
        s.name,
        s.revision,
      ]),
    ).toEqual([
      ['Greeter', 1],
      ['Counter', 1],
      ['Signup', 1],
      ['Configured', 1],
    ]);
  });

  it('serves services and handlers', async () => {
    const services = await request('GET', '/services');
    expect((services.json()['services'] as { name: string }[]).map((s) => s.name)).toEqual([
      'Configured',
      'Counter',
      'Greeter',
      'Signup',
    ]);
    const one = await request('GET', '/services/Greeter');
    expect(one.status).toBe(200);
    expect(one.json()).toMatchObject({ name: 'Greeter', ty: 'Service', deployment_id: id, revision: 1, public: true });
    const handlers = await request('GET', '/services/Counter/handlers');
    expect(handlers.text).toBe(
      '{"handlers":[{"name":"add","ty":"Exclusive","public":true,"input_description":"application/json","output_description":"application/json","retry_policy":{"max_attempts":null}},' +
        '{"name":"get","ty":"Shared","public":true,"input_description":"application/json","output_description":"application/json","retry_policy":{"max_attempts":null}}]}',
    );
    const handler = await request('GET', '/services/Counter/handlers/get');
    expect(handler.text).toBe(
      '{"name":"get","ty":"Shared","public":true,"input_description":"application/json","output_description":"application/json","retry_policy":{"max_attempts":null}}',
    );
    const missingService = await request('GET', '/services/Nope');
    expect(missingService.status).toBe(404);
    expect(missingService.text).toBe(
      '{"message":"The requested service \'Nope\' does not exist","restate_code":null,"service_code":null}',
    );
    expect((await request('GET', '/services/Nope/handlers')).status).toBe(404);
    const missingHandler = await request('GET', '/services/Counter/handlers/nope');
    expect(missingHandler.status).toBe(404);
    expect(missingHandler.json()['message']).toBe("The requested handler 'nope' on service 'Counter' does not exist");
  });

  it('force:true overwrites in place and bumps every service revision; a dry run bumps nothing', async () => {
    const dry = await register({ uri: endpoint.url, force: true, dry_run: true });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.json()['id']).toBe(id);
    expect(admin.registry.service('Greeter')?.revision).toBe(1);

    const forced = await register({ uri: endpoint.url, force: true, metadata: { owner: 'me' } });
    expect(forced.status, forced.text).toBe(200);
    expect(forced.json()['id']).toBe(id);
    const revisions = (forced.json()['services'] as { revision: number }[]).map((s) => s.revision);
    expect(revisions).toEqual([2, 2, 2, 2]);
    expect(admin.registry.service('Counter')).toMatchObject({ revision: 2, deploymentId: id });
    const list = (await request('GET', '/deployments')).json()['deployments'] as Record<string, unknown>[];
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ id, metadata: { owner: 'me' } });

    const stored = await admin.pool.query<{ name: string; revision: number }>(
      `SELECT name, revision FROM ratchet.service_revision WHERE name = 'Greeter' ORDER BY revision`,
    );
    expect(stored.rows).toEqual([
      { name: 'Greeter', revision: 1 },
      { name: 'Greeter', revision: 2 },
    ]);
  });

  it('through /v2, force defaults to true and an existing deployment answers 201 (admin API v2 behaviour)', async () => {
    const v2 = await register({ uri: endpoint.url }, '/v2');
    expect(v2.status, v2.text).toBe(201);
    expect(v2.json()['id']).toBe(id);
    expect(admin.registry.service('Greeter')?.revision).toBe(3);
    const v3 = await register({ uri: endpoint.url }, '/v3');
    expect(v3.status).toBe(200);
    expect(admin.registry.service('Greeter')?.revision).toBe(3);
  });

  it('keeps everything across a reload from storage', async () => {
    const config = loadConfig({ env: {} });
    const fresh = new SchemaRegistry(
      admin.registry.store,
      config.serviceDefaults,
      config.defaultRetryPolicy,
      config.invoker,
    );
    await fresh.load();
    expect(fresh.deployments()).toEqual(admin.registry.deployments());
    expect(fresh.services()).toEqual(admin.registry.services());
    const greeterSchema = fresh.service('Configured')?.schema;
    expect(greeterSchema?.retryPolicy).toEqual({
      initialIntervalMs: 100,
      exponentiationFactor: 2,
      maxAttempts: 5,
      maxIntervalMs: 10_000,
      onMaxAttempts: 'Pause',
    });
  });
});

describe('registering an HTTP/1.1 deployment with use_http_11', () => {
  it('discovers over HTTP/1.1 and registers it in request/response mode', async () => {
    const h1 = await track(
      serve(
        'h1',
        sdkHandler([
          restate.service({ name: 'H1Service', handlers: { ping: () => Promise.resolve('pong') } }),
          configuredH1,
        ]),
      ),
    );
    const answer = await register({ uri: h1.url, use_http_11: true });
    expect(answer.status, answer.text).toBe(201);
    const id = String(answer.json()['id']);
    const deployment = (await request('GET', `/deployments/${id}`)).json();
    expect(deployment).toMatchObject({ protocol_type: 'RequestResponse', http_version: 'HTTP/1.1' });
    const service = (await request('GET', '/services/H1Service')).json();
    // A request/response deployment cannot be suspended on inactivity: restate shows 0s.
    expect(service['inactivity_timeout']).toBe('0s');
    const withTimeout = (await request('GET', '/services/ConfiguredH1')).json();
    expect(withTimeout['info']).toEqual([
      {
        code: 'RT0021',
        message:
          'The configured inactivity_timeout 30s will not be applied because the service is exposed in Request/Response mode.',
      },
    ]);
  });
});

const configuredH1 = restate.service({
  name: 'ConfiguredH1',
  handlers: { hello: () => Promise.resolve('hi') },
  options: { inactivityTimeout: 30_000 },
});

describe('discovery errors', () => {
  it('META0003: nothing listens at the uri', async () => {
    const port = await freePort();
    const message = expectCoded(await register({ uri: `http://127.0.0.1:${port}` }), 500, 'META0003');
    expect(message).toContain(`error when calling 'http://127.0.0.1:${port}/'`);
    expect(message).toContain('ECONNREFUSED');
    expectCoded(await register({ uri: `http://127.0.0.1:${port}`, use_http_11: true }), 500, 'META0003');
  });

  it('META0003 without the credentials the endpoint needs; additional_headers are sent and stored', async () => {
    const guarded = await track(
      serve(
        'h2',
        requireAuthorization(
          'Bearer s3cret',
          sdkHandler([restate.service({ name: 'Guarded', handlers: { hi: () => Promise.resolve('hi') } })]),
        ),
      ),
    );
    const refused = expectCoded(await register({ uri: guarded.url }), 500, 'META0003');
    expect(refused).toContain("got status code '401 Unauthorized'");
    expect(refused).toContain('missing or wrong bearer token');
    expect(refused).toContain('additional_headers');

    const accepted = await register({ uri: guarded.url, additional_headers: { Authorization: 'Bearer s3cret' } });
    expect(accepted.status, accepted.text).toBe(201);
    const id = String(accepted.json()['id']);
    const deployment = (await request('GET', `/deployments/${id}`)).json();
    expect(deployment['additional_headers']).toEqual({ authorization: 'Bearer s3cret' });
    expect(admin.registry.deployment(id)?.additionalHeaders).toEqual({ authorization: 'Bearer s3cret' });
  });

  it('META0003 when the endpoint answers discovery with a server error', async () => {
    const failing = await track(serve('h2', fixedDiscovery({ status: 500, body: 'boom' })));
    const message = expectCoded(await register({ uri: failing.url }), 500, 'META0003');
    expect(message).toContain("got status code '500 Internal Server Error'. Body: boom");
  });

  it('META0012: no protocol version in common', async () => {
    const old = await track(
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
    const message = expectCoded(await register({ uri: old.url }), 500, 'META0012');
    expect(message).toContain('unsupported service protocol versions: [1, 4]');
    expect(message).toContain('[5, 7]');
  });

  it('META0013: garbage, a wrong content type, a missing protocol mode, a bad handler name', async () => {
    const garbage = await track(serve('h2', fixedDiscovery({ body: 'this is not json' })));
    expect(expectCoded(await register({ uri: garbage.url }), 500, 'META0013')).toContain('cannot be decoded');

    const wrongType = await track(serve('h2', fixedDiscovery({ contentType: 'application/json', body: '{}' })));
    expect(expectCoded(await register({ uri: wrongType.url }), 500, 'META0013')).toContain(
      "bad content type header 'application/json'",
    );

    const noMode = await track(
      serve(
        'h2',
        fixedDiscovery({ body: JSON.stringify({ minProtocolVersion: 5, maxProtocolVersion: 7, services: [] }) }),
      ),
    );
    expect(expectCoded(await register({ uri: noMode.url }), 500, 'META0013')).toContain('missing protocol mode');

    const badName = await track(
      serve(
        'h2',
        fixedDiscovery({
          body: JSON.stringify({
            protocolMode: 'BIDI_STREAM',
            minProtocolVersion: 5,
            maxProtocolVersion: 7,
            services: [{ name: 'Fine', ty: 'SERVICE', handlers: [{ name: 'ok' }, { name: 'not-ok' }] }],
          }),
        }),
      ),
    );
    expect(expectCoded(await register({ uri: badName.url }), 500, 'META0013')).toContain(
      'services[0].handlers[1].name',
    );

    const badCombination = await track(
      serve(
        'h2',
        fixedDiscovery({
          body: JSON.stringify({
            protocolMode: 'BIDI_STREAM',
            minProtocolVersion: 5,
            maxProtocolVersion: 7,
            services: [{ name: 'Plain', ty: 'SERVICE', handlers: [{ name: 'h', ty: 'EXCLUSIVE' }] }],
          }),
        }),
      ),
    );
    expect(expectCoded(await register({ uri: badCombination.url }), 400, 'META0013')).toContain('(Service, Exclusive)');
    expect(admin.registry.service('Fine')).toBeUndefined();
  });

  it('META0014: HTTP/2 discovery against an HTTP/1.1-only endpoint', async () => {
    const h1Only = await track(
      startEndpoint({
        services: [restate.service({ name: 'OnlyH1', handlers: { x: () => Promise.resolve(1) } })],
        transport: 'h1',
      }),
    );
    const message = expectCoded(await register({ uri: h1Only.url }), 500, 'META0014');
    expect(message).toContain('"use_http_11": true');
    expect((await register({ uri: h1Only.url, use_http_11: true })).status).toBe(201);
  });

  it('META0015: BIDI_STREAM announced over HTTP/1.1', async () => {
    const bidi = await track(
      serve(
        'h1',
        sdkHandler([restate.service({ name: 'ForcedBidi', handlers: { x: () => Promise.resolve(1) } })], {
          bidirectional: true,
        }),
      ),
    );
    const message = expectCoded(await register({ uri: bidi.url, use_http_11: true }), 500, 'META0015');
    expect(message).toContain('BIDI_STREAM');
    expect(admin.registry.service('ForcedBidi')).toBeUndefined();
  });
});

describe('conflicts between deployments', () => {
  it('META0004: same uri, different services, without force; force overwrites', async () => {
    const v1Service = restate.service({ name: 'Evolving', handlers: { a: () => Promise.resolve('a') } });
    const v2Service = restate.service({
      name: 'Evolving',
      handlers: { a: () => Promise.resolve('a'), b: () => Promise.resolve('b') },
    });
    const first: TestServer = await serve('h2', sdkHandler([v1Service]));
    const created = await register({ uri: first.url });
    expect(created.status, created.text).toBe(201);
    const id = String(created.json()['id']);
    await first.close();

    // The same uri now serves a changed service.
    const second = await track(serve('h2', sdkHandler([v2Service]), first.port));
    const message = expectCoded(await register({ uri: second.url }), 409, 'META0004');
    expect(message).toContain(id);
    expect(message).toContain('"force": true');
    expect(admin.registry.service('Evolving')?.schema.handlers.map((h) => h.name)).toEqual(['a']);

    const forced = await register({ uri: second.url, force: true });
    expect(forced.status, forced.text).toBe(200);
    expect(forced.json()['id']).toBe(id);
    expect(admin.registry.service('Evolving')).toMatchObject({ revision: 2, deploymentId: id });
    expect(admin.registry.service('Evolving')?.schema.handlers.map((h) => h.name)).toEqual(['a', 'b']);
  });

  it('META0006: a later deployment changing a service type; force or breaking accept it with revision + 1', async () => {
    const asService = restate.service({ name: 'Shifty', handlers: { go: () => Promise.resolve(1) } });
    const asObject = restate.object({ name: 'Shifty', handlers: { go: () => Promise.resolve(1) } });
    const first = await track(serve('h2', sdkHandler([asService])));
    expect((await register({ uri: first.url })).status).toBe(201);

    const second = await track(serve('h2', sdkHandler([asObject])));
    const message = expectCoded(await register({ uri: second.url }), 409, 'META0006');
    expect(message).toBe(
      "[META0006] detected a new service revision for 'Shifty' changing the service type from previous revision. " +
        'Service type cannot be changed across revisions.',
    );
    expect(admin.registry.service('Shifty')?.schema.ty).toBe('Service');

    const dry = await register({ uri: second.url, breaking: true, dry_run: true });
    expect(dry.status, dry.text).toBe(201);
    expect(admin.registry.service('Shifty')?.schema.ty).toBe('Service');

    const forced = await register({ uri: second.url, force: true });
    expect(forced.status, forced.text).toBe(201);
    const newId = String(forced.json()['id']);
    expect(admin.registry.service('Shifty')).toMatchObject({ revision: 2, deploymentId: newId });
    expect(admin.registry.service('Shifty')?.schema.ty).toBe('VirtualObject');

    // The first deployment still lists the revision it registered.
    const firstId = admin.registry.deployments().find((d) => d.uri === first.url)?.id ?? '';
    const old = (await request('GET', `/deployments/${firstId}`)).json();
    expect(old['services']).toMatchObject([{ name: 'Shifty', ty: 'Service', revision: 1, deployment_id: firstId }]);
  });

  it('a later deployment exposing a service takes it over with revision + 1', async () => {
    const a = restate.service({ name: 'Moving', handlers: { x: () => Promise.resolve(1) } });
    const first = await track(serve('h2', sdkHandler([a])));
    const second = await track(serve('h2', sdkHandler([a])));
    const firstId = String((await register({ uri: first.url })).json()['id']);
    const secondAnswer = await register({ uri: second.url });
    expect(secondAnswer.status).toBe(201);
    const secondId = String(secondAnswer.json()['id']);
    expect(secondId).not.toBe(firstId);
    expect((await request('GET', '/services/Moving')).json()).toMatchObject({ deployment_id: secondId, revision: 2 });
  });

  it('keeps a uri path prefix: discovery goes to {uri}/discover and the uri is stored as given', async () => {
    const paths: string[] = [];
    const inner = sdkHandler([restate.service({ name: 'Prefixed', handlers: { x: () => Promise.resolve(1) } })]);
    const server = await track(
      serve('h2', (req, res) => {
        paths.push(req.url ?? '');
        inner(req, res);
      }),
    );
    const uri = `${server.url}tenant/a`;
    const answer = await register({ uri });
    expect(answer.status, answer.text).toBe(201);
    expect(paths).toEqual(['/tenant/a/discover']);
    const id = String(answer.json()['id']);
    expect((await request('GET', `/deployments/${id}`)).json()['uri']).toBe(uri);
    // The same uri with a trailing slash is another uri (as in restate), but discovers the same path.
    expect((await register({ uri: `${uri}/`, dry_run: true })).status).toBe(201);
    expect(paths).toEqual(['/tenant/a/discover', '/tenant/a/discover']);
  });

  it('force removes the services an overwritten deployment no longer exposes', async () => {
    const keep = restate.service({ name: 'Keep', handlers: { x: () => Promise.resolve(1) } });
    const drop = restate.service({ name: 'Drop', handlers: { x: () => Promise.resolve(1) } });
    const first = await serve('h2', sdkHandler([keep, drop]));
    expect((await register({ uri: first.url })).status).toBe(201);
    await first.close();
    const second = await track(serve('h2', sdkHandler([keep]), first.port));
    expect((await register({ uri: second.url, force: true })).status).toBe(200);
    expect((await request('GET', '/services/Drop')).status).toBe(404);
    expect((await request('GET', '/services/Keep')).json()).toMatchObject({ revision: 2 });
  });
});

describe('other runtime processes', () => {
  it('see registrations through LISTEN/NOTIFY and tell their onChange listeners', async () => {
    const config = loadConfig({ env: {} });
    const other = new SchemaRegistry(
      admin.registry.store,
      config.serviceDefaults,
      config.defaultRetryPolicy,
      config.invoker,
    );
    let changes = 0;
    const unsubscribe = other.onChange(() => {
      changes += 1;
    });
    const errors: unknown[] = [];
    const subscription = await other.watch((err) => errors.push(err));
    try {
      await waitFor(() => expect(changes).toBeGreaterThan(0));
      const before = changes;
      const endpoint = await track(
        serve('h2', sdkHandler([restate.service({ name: 'Watched', handlers: { x: () => Promise.resolve(1) } })])),
      );
      expect((await register({ uri: endpoint.url })).status).toBe(201);
      await waitFor(() => expect(other.service('Watched')).toMatchObject({ revision: 1 }));
      expect(changes).toBeGreaterThan(before);
      expect(errors).toEqual([]);
    } finally {
      unsubscribe();
      await subscription.close();
    }
  });
});

describe('request handling', () => {
  it('serves health and version under every prefix; refuses /v1; 404 and 405 like restate', async () => {
    for (const prefix of ['', '/v2', '/v3', '/v4']) {
      const health = await request('GET', `${prefix}/health`);
      expect(health.status).toBe(200);
      expect(health.text).toBe('');
      const version = await request('GET', `${prefix}/version`);
      expect(version.text).toBe(
        '{"version":"0.0.0-test","min_admin_api_version":2,"max_admin_api_version":4,"ingress_endpoint":"http://127.0.0.1:8080/","features":{}}',
      );
    }
    for (const path of ['/v1/deployments', '/v1/health', '/v1/whatever']) {
      const v1 = await request('GET', path);
      expect(v1.status).toBe(400);
      expect(v1.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(v1.text).toBe('Unsupported Admin API version V1. This server supports versions between V2 and V4.');
    }
    for (const path of ['/v5/deployments', '/nonexistent', '/deployments/', '/v2/v3/health']) {
      const missing = await request('GET', path);
      expect(missing.status, path).toBe(404);
      expect(missing.text).toBe('');
    }
    const wrongMethod = await request('PUT', '/deployments');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers['allow']).toBe('GET,HEAD,POST');
    expect(wrongMethod.text).toBe('');
    const wrongMethod2 = await request('DELETE', '/v4/services');
    expect(wrongMethod2.status).toBe(405);
    expect(wrongMethod2.headers['allow']).toBe('GET,HEAD');
  });

  it('rejects unreadable registration requests with restate texts', async () => {
    const noType = await admin.app.inject({
      method: 'POST',
      url: '/deployments',
      payload: '{"uri":"http://127.0.0.1:1"}',
    });
    expect(noType.statusCode).toBe(415);
    expect(noType.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(noType.body).toBe('Expected request with `Content-Type: application/json`');

    const textType = await admin.app.inject({
      method: 'POST',
      url: '/deployments',
      headers: { 'content-type': 'text/plain' },
      payload: '{"uri":"http://127.0.0.1:1"}',
    });
    expect(textType.statusCode).toBe(415);

    const malformed = await request('POST', '/deployments', '{"uri":');
    expect(malformed.status).toBe(400);
    expect(malformed.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(malformed.text).toBe(
      'Failed to parse the request body as JSON: EOF while parsing a value at line 1 column 7',
    );

    for (const body of [
      '{}',
      '{"uri":5}',
      '[]',
      '{"uri":"http://127.0.0.1:1","force":"yes"}',
      '{"uri":"http://127.0.0.1:1","additional_headers":{"bad header":"1"}}',
    ]) {
      const shape = await request('POST', '/deployments', body);
      expect(shape.status, body).toBe(422);
      expect(shape.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(shape.text).toMatch(
        /^Failed to deserialize the JSON body into the target type: data did not match any variant of untagged enum RegisterDeploymentRequest/,
      );
    }

    const relative = await register({ uri: '/relative' });
    expect(relative.status).toBe(400);
    expect(relative.json()).toEqual({
      message:
        "The request field 'uri' is invalid. Reason: The provided uri /relative is not absolute, only absolute URIs can be used.",
      restate_code: null,
      service_code: null,
    });

    const lambda = await register({ arn: 'arn:aws:lambda:eu-central-1:123456789012:function:f:1' });
    expect(lambda.status).toBe(501);
    expect(String(lambda.json()['message'])).toContain('Lambda deployments are not supported');
  });

  it('parses deployment ids like restate and answers 404 for unknown ones', async () => {
    const bogus = await request('GET', '/deployments/dp_bogus');
    expect(bogus.status).toBe(400);
    expect(bogus.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(bogus.text).toBe('Invalid URL: Cannot parse `deployment` with value `dp_bogus`: unrecognized codec version');
    expect((await request('GET', '/deployments/sub_1abc')).text).toBe(
      "Invalid URL: Cannot parse `deployment` with value `sub_1abc`: id doesn't match the expected type",
    );
    const unknown = await request('GET', '/v4/deployments/dp_1404g1SotmpNnp3UCfMcz0R');
    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe(
      '{"message":"The requested deployment \'dp_1404g1SotmpNnp3UCfMcz0R\' does not exist","restate_code":null,"service_code":null}',
    );
  });

  it('serves the same answers over a real listener', async () => {
    const url = await admin.listen();
    const res = await fetch(`${url}/v3/services/Counter/handlers/get`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.text()).toContain('"name":"get","ty":"Shared"');
  });
});
