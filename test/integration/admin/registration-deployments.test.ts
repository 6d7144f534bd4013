import * as restate from '@restatedev/restate-sdk';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import { waitFor } from '../../support/wait.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { sdkHandler, serve } from './harness.ts';
import { admin, ALL, register, request, track, useAdminHarness } from './registration-support.ts';

/*
 * Registering deployments through the admin API: HTTP/2 and HTTP/1.1, what is stored and served, other processes;
 * request handling (over the deployments registered here). Discovery errors and conflicts: registration-errors.test.ts.
 */

useAdminHarness();

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

    // Lambda ARNs are checked before anything is invoked (restate's texts).
    const unqualified = await register({ arn: 'arn:aws:lambda:eu-central-1:123456789012:function:f' });
    expect(unqualified.status).toBe(400);
    expect(unqualified.json()).toEqual({
      message:
        "The request field 'arn' is invalid. Reason: A qualified ARN needs a version or alias suffix. If you want to " +
        "use the unpublished version, provide $LATEST and make sure your shell doesn't treat it as a variable",
      restate_code: null,
      service_code: null,
    });
    const role = await register({ arn: 'arn:aws:lambda:eu-central-1:123456789012:function:f:1', assume_role_arn: 'x' });
    expect(role.status).toBe(400);
    expect(String(role.json()['message'])).toContain("The request field 'assume_role_arn' is invalid");
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
