import * as restate from '@restatedev/restate-sdk';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../support/ports.ts';
import { startEndpoint } from '../../support/sdk-endpoint.ts';
import { fixedDiscovery, requireAuthorization, sdkHandler, serve, type TestServer } from './harness.ts';
import { admin, expectCoded, register, request, track, useAdminHarness } from './registration-support.ts';

/* Registering deployments through the admin API: discovery errors and conflicts between deployments. */

useAdminHarness();

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
    const firstId =
      admin.registry.deployments().find((d) => d.endpoint.kind === 'http' && d.endpoint.uri === first.url)?.id ?? '';
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
