import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import { freePort } from '../../support/ports.ts';
import { counter } from '../../support/services/counter.ts';
import { greeter, greeterService, noInput } from '../../support/services/greeter.ts';
import { GREETER_COUNTER_V5_TO_V6 } from '../../support/services/manifests.ts';
import { waitFor } from '../../support/wait.ts';
import { adminRequest, captureLogger, expectError, expectText, type Answer } from './admin-requests.ts';
import {
  fixedDiscovery,
  requireAuthorization,
  sdkHandler,
  serve,
  startAdminHarness,
  type AdminHarness,
  type TestServer,
} from './harness.ts';

/*
 * Changing and removing deployments: `PATCH /deployments/{id}` (in-place update, META0016), `PUT` (admin API v2
 * only), `DELETE ?force=true` (services falling back to older revisions), and META0017 once two deployments share a
 * uri. Real SDK endpoints, except where a manifest the SDK cannot produce is needed (other protocol versions).
 */

function greeterWith(handlers: 'base' | 'extra' | 'missing'): restate.ServiceDefinition<'Greeter', unknown> {
  switch (handlers) {
    case 'base':
      return greeterService({ handlers: { noInput } });
    case 'extra':
      return greeterService({ handlers: { noInput, extra: (_ctx: restate.Context) => Promise.resolve('extra') } });
    case 'missing':
      return greeter;
  }
}

const greeterAsObject = restate.object({
  name: 'Greeter',
  handlers: {
    greet: (_ctx: restate.ObjectContext, name: string) => Promise.resolve(name),
    noInput: (_ctx: restate.ObjectContext) => Promise.resolve('hi'),
  },
});

const reporter = restate.service({
  name: 'Reporter',
  handlers: { report: (_ctx: restate.Context) => Promise.resolve('ok') },
});

type Handler = ReturnType<typeof sdkHandler>;

interface DiscoveryLog {
  headers: Record<string, unknown>[];
}

/** Records every discovery request (its headers) before handing it to the SDK. */
function recording(inner: Handler, log: DiscoveryLog): Handler {
  return (req, res) => {
    if ((req.url ?? '').endsWith('/discover')) log.headers.push({ ...req.headers });
    inner(req, res);
  };
}

let admin: AdminHarness;
const log = captureLogger();
const servers: TestServer[] = [];
const endpoints = {} as Record<
  'base' | 'baseCopy' | 'extra' | 'missingHandler' | 'missingService' | 'typeChange' | 'protocol' | 'guarded' | 'other',
  TestServer
>;
const baseDiscoveries: DiscoveryLog = { headers: [] };
const copyDiscoveries: DiscoveryLog = { headers: [] };

async function start(key: keyof typeof endpoints, server: Promise<TestServer>): Promise<void> {
  endpoints[key] = await server;
  servers.push(endpoints[key]);
}

function request(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown): Promise<Answer> {
  return adminRequest(admin.app, method, url, body);
}

async function register(uri: string, extra: Record<string, unknown> = {}): Promise<string> {
  const answer = await request('POST', '/deployments', { uri, ...extra });
  expect([200, 201], answer.text).toContain(answer.status);
  return String(answer.json()['id']);
}

function handlerNames(service: unknown): string[] {
  return ((service as { handlers: { name: string }[] }).handlers ?? []).map((h) => h.name).sort();
}

beforeAll(async () => {
  admin = await startAdminHarness({ logger: log.logger });
  await start('base', serve('h2', recording(sdkHandler([greeterWith('base'), counter]), baseDiscoveries)));
  await start('baseCopy', serve('h2', recording(sdkHandler([greeterWith('base'), counter]), copyDiscoveries)));
  await start('extra', serve('h2', sdkHandler([greeterWith('extra'), counter])));
  await start('missingHandler', serve('h2', sdkHandler([greeterWith('missing'), counter])));
  await start('missingService', serve('h2', sdkHandler([greeterWith('base')])));
  await start('typeChange', serve('h2', sdkHandler([greeterAsObject, counter])));
  await start('protocol', serve('h2', fixedDiscovery({ body: GREETER_COUNTER_V5_TO_V6 })));
  await start(
    'guarded',
    serve('h2', requireAuthorization('Bearer s3cret', sdkHandler([greeterWith('base'), counter]))),
  );
  await start('other', serve('h2', sdkHandler([reporter])));
});

afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.close()));
  await admin?.close();
});

describe('PATCH /deployments/{id}', () => {
  let id: string;
  let before: Record<string, unknown>;

  beforeAll(async () => {
    id = await register(endpoints.base.url);
    before = (await request('GET', `/deployments/${id}`)).json();
  });

  it('without connection details changes nothing and does not discover', async () => {
    const discoveries = baseDiscoveries.headers.length;
    for (const body of [{}, { foo: 1 }, { dry_run: true }, { additional_headers: null, uri: null }]) {
      const answer = await request('PATCH', `/deployments/${id}`, body);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.json()).toEqual(before);
    }
    expect(baseDiscoveries.headers.length).toBe(discoveries);
  });

  it('replaces the additional headers (lower-cased), discovering with them; id and creation time stay', async () => {
    const answer = await request('PATCH', `/deployments/${id}`, { additional_headers: { 'X-Test': '1' } });
    expect(answer.status, answer.text).toBe(200);
    const body = answer.json();
    expect(body).toEqual({ ...before, additional_headers: { 'x-test': '1' } });
    expect(Object.keys(body)).toEqual([
      'id',
      'uri',
      'protocol_type',
      'http_version',
      'additional_headers',
      'created_at',
      'min_protocol_version',
      'max_protocol_version',
      'sdk_version',
      'services',
    ]);
    expect(baseDiscoveries.headers.at(-1)?.['x-test']).toBe('1');
    expect((await request('GET', `/deployments/${id}`)).json()).toEqual(body);
    // `{}` replaces all headers with none.
    const cleared = await request('PATCH', `/deployments/${id}`, { additional_headers: {} });
    expect(cleared.json()).toEqual(before);
  });

  it('moves the deployment to a new uri, services untouched', async () => {
    const discoveries = copyDiscoveries.headers.length;
    const answer = await request('PATCH', `/deployments/${id}`, { uri: endpoints.baseCopy.url.replace(/\/$/, '') });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toEqual({ ...before, uri: endpoints.baseCopy.url });
    expect(copyDiscoveries.headers.length).toBe(discoveries + 1);
    const greeter = (await request('GET', '/services/Greeter')).json();
    expect(greeter).toMatchObject({ deployment_id: id, revision: 1 });
    // Back where it was, for the next cases.
    expect((await request('PATCH', `/deployments/${id}`, { uri: endpoints.base.url })).json()).toEqual(before);
  });

  it('sends headers an endpoint needs: discovery fails without them (META0003), succeeds with them', async () => {
    const message = expectError(
      await request('PATCH', `/deployments/${id}`, { uri: endpoints.guarded.url }),
      500,
      'META0003',
    );
    expect(message).toContain('401');
    const answer = await request('PATCH', `/deployments/${id}`, {
      uri: endpoints.guarded.url,
      additional_headers: { authorization: 'Bearer s3cret' },
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toMatchObject({
      uri: endpoints.guarded.url,
      additional_headers: { authorization: 'Bearer s3cret' },
    });
    // The headers stay when only the uri changes back.
    const back = await request('PATCH', `/deployments/${id}`, { uri: endpoints.base.url, additional_headers: {} });
    expect(back.json()).toEqual(before);
  });

  it('keeps the registered schemas unless overwrite; overwrite adopts new handlers in the same revision', async () => {
    const kept = await request('PATCH', `/deployments/${id}`, { uri: endpoints.extra.url });
    expect(kept.status, kept.text).toBe(200);
    const keptGreeter = (kept.json()['services'] as { name: string }[]).find((s) => s.name === 'Greeter');
    expect(handlerNames(keptGreeter)).toEqual(['greet', 'noInput']);

    const dryRun = await request('PATCH', `/deployments/${id}`, {
      uri: endpoints.extra.url,
      overwrite: true,
      dry_run: true,
    });
    expect(dryRun.status, dryRun.text).toBe(200);
    const dryGreeter = (dryRun.json()['services'] as { name: string }[]).find((s) => s.name === 'Greeter');
    expect(handlerNames(dryGreeter)).toEqual(['extra', 'greet', 'noInput']);
    expect(handlerNames((await request('GET', '/services/Greeter')).json())).toEqual(['greet', 'noInput']);

    const overwritten = await request('PATCH', `/deployments/${id}`, { uri: endpoints.extra.url, overwrite: true });
    expect(overwritten.status, overwritten.text).toBe(200);
    const service = (await request('GET', '/services/Greeter')).json();
    expect(handlerNames(service)).toEqual(['extra', 'greet', 'noInput']);
    expect(service).toMatchObject({ revision: 1, deployment_id: id });
    expect((await request('GET', '/services/Greeter/handlers/extra')).status).toBe(200);
    expect(log.matching('deployment updated in place').at(-1)).toMatchObject({
      level: 30,
      'service.deployment.id': id,
      overwrite: true,
    });
  });

  it('META0016: a handler, a service or the service type missing, or other protocol versions', async () => {
    const current = (await request('GET', `/deployments/${id}`)).json();
    const cases: [TestServer, string][] = [
      [endpoints.missingHandler, "the service 'Greeter' no longer has the handlers 'extra', 'noInput'"],
      [endpoints.missingService, "the service 'Counter' is missing"],
      [endpoints.typeChange, "the service 'Greeter' changes type from Service to VirtualObject"],
      [endpoints.protocol, 'the update tried to change the supported protocol versions from 5..=7 to 5..=6'],
    ];
    for (const [endpoint, problem] of cases) {
      for (const overwrite of [false, true]) {
        const message = expectError(
          await request('PATCH', `/deployments/${id}`, { uri: endpoint.url, overwrite }),
          400,
          'META0016',
        );
        expect(message).toContain(problem);
      }
    }
    expect((await request('GET', `/deployments/${id}`)).json()).toEqual(current);
  });

  it('refuses unreadable requests and unknown deployments the way restate does', async () => {
    const unknown = 'dp_1404g1SotmpNnp3UCfMcz0R';
    expect(expectError(await request('PATCH', `/deployments/${unknown}`, {}), 404, null)).toBe(
      `The requested deployment '${unknown}' does not exist`,
    );
    expect(expectError(await request('PATCH', `/deployments/${unknown}`, { uri: endpoints.base.url }), 404, null)).toBe(
      `not found in the schema registry: ${unknown}`,
    );
    expect(expectText(await request('PATCH', '/deployments/dp_bogus', {}), 400)).toBe(
      'Invalid URL: Cannot parse `deployment` with value `dp_bogus`: unrecognized codec version',
    );
    expect(
      expectText(
        await adminRequest(admin.app, 'PATCH', `/deployments/${id}`, '{}', { 'content-type': 'text/plain' }),
        415,
      ),
    ).toBe('Expected request with `Content-Type: application/json`');
    expect(expectText(await request('PATCH', `/deployments/${id}`, '{"uri":'), 400)).toMatch(
      /^Failed to parse the request body as JSON: /,
    );
    expect(expectText(await request('PATCH', `/deployments/${id}`, { uri: 5 }), 422)).toContain(
      'data did not match any variant of untagged enum UpdateDeploymentRequest',
    );
    expect(expectText(await request('PATCH', `/deployments/${id}`, { overwrite: 'yes' }), 422)).toContain('overwrite');
    expect(expectError(await request('PATCH', `/deployments/${id}`, { uri: 'nope' }), 400, null)).toBe(
      "The request field 'uri' is invalid. Reason: The provided uri nope is not absolute, only absolute URIs can be used.",
    );
    expect(expectError(await request('PATCH', `/deployments/${id}`, { arn: 'arn:aws:lambda:x' }), 400, null)).toBe(
      'cannot update the deployment, as the deployment type is http while the update options are for type lambda',
    );
    const port = await freePort();
    expectError(await request('PATCH', `/deployments/${id}`, { uri: `http://127.0.0.1:${port}/` }), 500, 'META0003');
  });

  it('reaches other runtime processes (NOTIFY)', async () => {
    const config = loadConfig({ env: {} });
    const other = new SchemaRegistry(
      admin.registry.store,
      config.serviceDefaults,
      config.defaultRetryPolicy,
      config.invoker,
    );
    const watch = await other.watch(() => undefined);
    try {
      await waitFor(() => expect(other.deployment(id)).toBeDefined());
      const answer = await request('PATCH', `/deployments/${id}`, { additional_headers: { 'x-seen': 'yes' } });
      expect(answer.status, answer.text).toBe(200);
      await waitFor(() => expect(other.deployment(id)?.additionalHeaders).toEqual({ 'x-seen': 'yes' }));
    } finally {
      await watch.close();
    }
  });
});

describe('PUT /deployments/{id}', () => {
  let id: string;

  beforeAll(async () => {
    id = await register(endpoints.other.url);
  });

  it('updates like PATCH under /v2 and on the unversioned path (specification 4.3)', async () => {
    const answer = await request('PUT', `/v2/deployments/${id}`, { additional_headers: { 'x-put': '1' } });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toMatchObject({ id, additional_headers: { 'x-put': '1' } });
    const unversioned = await request('PUT', `/deployments/${id}`, { additional_headers: { 'x-put': '2' } });
    expect(unversioned.status, unversioned.text).toBe(200);
    expect(unversioned.json()).toMatchObject({ id, additional_headers: { 'x-put': '2' } });
    expect(expectError(await request('PUT', '/deployments/dp_1404g1SotmpNnp3UCfMcz0R', {}), 404, null)).toContain(
      'dp_1404g1SotmpNnp3UCfMcz0R',
    );
  });

  it('is refused with 405 under /v3 and /v4 (as restate does), after the id and body are read', async () => {
    for (const prefix of ['/v3', '/v4']) {
      const message = expectError(await request('PUT', `${prefix}/deployments/${id}`, {}), 405, null);
      expect(message).toBe('PUT deployment is deprecated, use PATCH instead');
    }
    expect(expectError(await request('PUT', '/v4/deployments/dp_1404g1SotmpNnp3UCfMcz0R', {}), 405, null)).toBe(
      'PUT deployment is deprecated, use PATCH instead',
    );
    expectText(await request('PUT', '/v4/deployments/dp_bogus', {}), 400);
    expectText(await adminRequest(admin.app, 'PUT', `/v4/deployments/${id}`), 415);
    expect((await request('GET', `/deployments/${id}`)).json()).toMatchObject({ additional_headers: { 'x-put': '2' } });
  });
});

describe('DELETE /deployments/{id}', () => {
  it('answers 501 without force=true, 400 for a force that is not a boolean, 404 for an unknown deployment', async () => {
    const id = await register(endpoints.other.url);
    for (const query of ['', '?force=false']) {
      const answer = await request('DELETE', `/deployments/${id}${query}`);
      expect(answer.status).toBe(501);
      expect(answer.text).toBe('');
    }
    for (const value of ['banana', 'TRUE', '']) {
      expect(expectText(await request('DELETE', `/deployments/${id}?force=${value}`), 400)).toBe(
        'Failed to deserialize query string: force: provided string was not `true` or `false`',
      );
    }
    const unknown = 'dp_1404g1SotmpNnp3UCfMcz0R';
    expect(expectError(await request('DELETE', `/deployments/${unknown}?force=true`), 404, null)).toBe(
      `not found in the schema registry: deployment with id '${unknown}'`,
    );
    expectText(await request('DELETE', '/deployments/dp_bogus?force=true'), 400);
    expect((await request('GET', `/deployments/${id}`)).status).toBe(200);
  });

  it('falls services back to the highest revision left, and removes them with the last deployment', async () => {
    const older = await register(endpoints.baseCopy.url, { force: true });
    const newer = await register(`${endpoints.extra.url}?copy`);
    const latest = (await request('GET', '/services/Greeter')).json();
    expect(latest).toMatchObject({ deployment_id: newer });
    const olderRevision = (
      (await request('GET', `/deployments/${older}`)).json()['services'] as { name: string; revision: number }[]
    ).find((s) => s.name === 'Greeter')?.revision;
    expect(olderRevision).toBeLessThan(Number(latest['revision']));
    // Settings changed on the latest revision do not survive it.
    expect((await request('PATCH', '/services/Greeter', { public: false })).json()).toMatchObject({ public: false });

    const deleted = await request('DELETE', `/deployments/${newer}?force=true`);
    expect(deleted.status).toBe(202);
    expect(deleted.text).toBe('');
    expect(deleted.headers['x-ratchet-pinned-invocations']).toBe('0');
    expect(deleted.headers['warning']).toBeUndefined();
    expect((await request('GET', `/deployments/${newer}`)).status).toBe(404);
    const fallback = (await request('GET', '/services/Greeter')).json();
    expect(fallback).toMatchObject({ deployment_id: older, revision: olderRevision, public: true });
    expect(handlerNames(fallback)).toEqual(['greet', 'noInput']);
    expect(log.matching('deployment deleted').at(-1)).toMatchObject({ 'service.deployment.id': newer });

    expect(expectError(await request('DELETE', `/deployments/${newer}?force=true`), 404, null)).toContain(newer);
  });
});

describe('a forced registration that drops a service', () => {
  it('falls the service back to the revision another deployment still registers', async () => {
    let current = sdkHandler([reporter, counter]);
    const switchable = await serve('h2', (req, res) => current(req, res));
    servers.push(switchable);
    const older = await register(endpoints.base.url, { force: true });
    const newer = await register(switchable.url);
    expect((await request('GET', '/services/Counter')).json()).toMatchObject({ deployment_id: newer });

    current = sdkHandler([reporter]);
    const forced = await request('POST', '/deployments', { uri: switchable.url, force: true });
    expect(forced.status, forced.text).toBe(200);
    const counterNow = (await request('GET', '/services/Counter')).json();
    expect(counterNow).toMatchObject({ deployment_id: older });
    const olderServices = (await request('GET', `/deployments/${older}`)).json()['services'] as {
      name: string;
      revision: number;
    }[];
    expect(counterNow['revision']).toBe(olderServices.find((s) => s.name === 'Counter')?.revision);
  });
});

describe('META0017: two deployments at one uri', () => {
  it('a forced registration cannot pick one; the plain one answers with the first; deleting one unblocks', async () => {
    const first = await register(endpoints.missingHandler.url, { force: true });
    const second = await register(`${endpoints.missingHandler.url}?copy`);
    const moved = await request('PATCH', `/deployments/${second}`, { uri: endpoints.missingHandler.url });
    expect(moved.status, moved.text).toBe(200);

    const message = expectError(
      await request('POST', '/deployments', { uri: endpoints.missingHandler.url, force: true }),
      409,
      'META0017',
    );
    expect(message).toContain(first);
    expect(message).toContain(second);
    const plain = await request('POST', '/deployments', { uri: endpoints.missingHandler.url });
    expect(plain.status, plain.text).toBe(200);
    expect(plain.json()['id']).toBe(first);

    expect((await request('DELETE', `/deployments/${second}?force=true`)).status).toBe(202);
    const forced = await request('POST', '/deployments', { uri: endpoints.missingHandler.url, force: true });
    expect(forced.status, forced.text).toBe(200);
    expect(forced.json()['id']).toBe(first);
  });
});
