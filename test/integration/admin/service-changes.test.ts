import { readFileSync } from 'node:fs';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { counterObject } from '../../support/services/counter.ts';
import { flaky } from '../../support/services/flaky.ts';
import { fail, greeterService, noInput } from '../../support/services/greeter.ts';
import { signupWorkflow, statusOr } from '../../support/services/signup.ts';
import { typedService } from '../../support/services/typed.ts';
import { adminRequest, captureLogger, expectError, expectText, type Answer, type Method } from './admin-requests.ts';
import { sdkHandler, serve, startAdminHarness, type AdminHarness, type TestServer } from './harness.ts';

/*
 * `PATCH /services/{name}` (settings of the latest revision, with restate's statuses and phrases), and
 * `GET /services/{name}/openapi` against the documents restate-server 1.7.12 produced for the same services
 * (shared/spec/restate-1.7.12-service-openapi).
 */

const SPEC_DIR = new URL('../../../../shared/spec/restate-1.7.12-service-openapi/', import.meta.url);

// The lab services of the captured documents: same names, handlers and documentation.
const greeter = greeterService({
  description: 'A greeter service',
  handlers: {
    greetJson: (_ctx: restate.Context, p: { name: string }) => Promise.resolve(p),
    noInput,
    sleep: (_ctx: restate.Context, _secs: number) => Promise.resolve('slept'),
    busy: (_ctx: restate.Context, _secs: number) => Promise.resolve('busy'),
    fail,
    awk: (_ctx: restate.Context, _tag: string) => Promise.resolve('awk'),
  },
});
const counter = counterObject({ handlers: { hold: (_ctx: restate.ObjectContext) => Promise.resolve('held') } });
const signup = signupWorkflow({ handlers: { status: statusOr('waiting') } });
const typed = typedService({ greetDescription: 'greets a person' });

const overH1 = restate.service({
  name: 'OverH1',
  handlers: { ping: (_ctx: restate.Context) => Promise.resolve('pong') },
});

let admin: AdminHarness;
const log = captureLogger();
const servers: TestServer[] = [];

function request(method: Method, url: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
  return adminRequest(admin.app, method, url, body, headers);
}

beforeAll(async () => {
  admin = await startAdminHarness({ logger: log.logger, env: { RATCHET_MAX_JOURNAL_RETENTION: '30d' } });
  const main = await serve('h2', sdkHandler([greeter, counter, signup, flaky, typed]));
  const h1 = await serve('h1', sdkHandler([overH1]));
  servers.push(main, h1);
  for (const body of [{ uri: main.url }, { uri: main.url, force: true }, { uri: h1.url, use_http_11: true }]) {
    const answer = await request('POST', '/deployments', body);
    expect([200, 201]).toContain(answer.status);
  }
});

afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.close()));
  await admin?.close();
});

describe('PATCH /services/{name}', () => {
  it('changes public, retentions and timeouts, and GET shows them', async () => {
    const before = (await request('GET', '/services/Greeter')).json();
    const answer = await request('PATCH', '/services/Greeter', {
      public: false,
      idempotency_retention: '2h',
      journal_retention: 'PT30M',
      inactivity_timeout: '90s',
      abort_timeout: '1.5h',
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers['content-type']).toBe('application/json');
    const expected = {
      ...before,
      public: false,
      idempotency_retention: '2h',
      journal_retention: '30m',
      inactivity_timeout: '1m 30s',
      abort_timeout: '1h 30m',
      handlers: (before['handlers'] as Record<string, unknown>[]).map((h) => ({ ...h, public: false })),
    };
    expect(answer.json()).toEqual(expected);
    expect(Object.keys(answer.json())).toEqual(Object.keys(before));
    expect((await request('GET', '/services/Greeter')).json()).toEqual(expected);
    expect((await request('GET', '/services/Greeter/handlers/greet')).json()).toMatchObject({ public: false });
    expect(log.matching('service settings changed').at(-1)).toMatchObject({ 'rpc.service': 'Greeter' });
  });

  it('leaves what is absent or null unchanged, and ignores unknown fields and retry_policy', async () => {
    const before = (await request('GET', '/services/Greeter')).json();
    for (const body of [
      {},
      { foo: 1 },
      { public: null, idempotency_retention: null, abort_timeout: null },
      { retry_policy: { max_attempts: 5, initial_interval: '1s', on_max_attempts: 'Kill' } },
    ]) {
      const answer = await request('PATCH', '/services/Greeter', body);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.json()).toEqual(before);
    }
    const reopened = await request('PATCH', '/services/Greeter', { public: true });
    expect(reopened.json()).toMatchObject({ public: true });
  });

  it('workflow_completion_retention: workflows only', async () => {
    const answer = await request('PATCH', '/services/Signup', { workflow_completion_retention: '2d' });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toMatchObject({ workflow_completion_retention: '2d' });
    for (const [service, ty] of [
      ['Greeter', 'Service'],
      ['Counter', 'VirtualObject'],
    ]) {
      expect(
        expectError(
          await request('PATCH', `/services/${service}`, { public: false, workflow_completion_retention: '2d' }),
          400,
          null,
        ),
      ).toBe(`modifying retention time for service type ${ty} is unsupported`);
    }
    // Nothing of the refused request was applied.
    expect((await request('GET', '/services/Greeter')).json()).toMatchObject({ public: true });
  });

  it('clamps journal_retention to the maximum (RT0022, logged)', async () => {
    const answer = await request('PATCH', '/services/Counter', { journal_retention: '400d' });
    expect(answer.json()).toMatchObject({ journal_retention: '30d' });
    expect(log.matching('[RT0022]').at(-1)).toMatchObject({
      level: 40,
      'error.code': 'RT0022',
      'rpc.service': 'Counter',
    });
  });

  it('stores inactivity_timeout of a request/response service, which has no effect there (RT0021, logged)', async () => {
    const answer = await request('PATCH', '/services/OverH1', { inactivity_timeout: '5s' });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toMatchObject({
      inactivity_timeout: '0s',
      info: [
        {
          code: 'RT0021',
          message:
            'The configured inactivity_timeout 5s will not be applied because the service is exposed in Request/Response mode.',
        },
      ],
    });
    expect(log.matching('[RT0021]').at(-1)).toMatchObject({
      level: 40,
      'error.code': 'RT0021',
      'rpc.service': 'OverH1',
    });
    // A bidirectional service takes it without a warning.
    const warnings = log.matching('[RT0021]').length;
    expect((await request('PATCH', '/services/Counter', { inactivity_timeout: '5s' })).json()).toMatchObject({
      inactivity_timeout: '5s',
    });
    expect(log.matching('[RT0021]').length).toBe(warnings);
  });

  it('refuses bad values with 422 text naming the field, and unknown services with 404', async () => {
    const cases: [unknown, string][] = [
      [{ public: 'yes' }, 'public: invalid type: string "yes", expected a boolean'],
      [{ idempotency_retention: 'banana' }, "idempotency_retention: invalid duration 'banana'"],
      [{ journal_retention: '' }, "journal_retention: invalid duration ''"],
      [{ abort_timeout: 5 }, 'abort_timeout: invalid type: integer `5`, expected a human-friendly duration string'],
      [{ inactivity_timeout: '-1h' }, 'inactivity_timeout: invalid duration'],
      [{ idempotency_retention: '100y' }, 'idempotency_retention: invalid duration'],
      [null, 'invalid type: null, expected struct ModifyServiceRequest'],
      [[], 'invalid type: sequence, expected struct ModifyServiceRequest'],
    ];
    for (const [body, detail] of cases) {
      const text = expectText(await request('PATCH', '/services/Greeter', body ?? 'null'), 422);
      expect(text).toContain(`Failed to deserialize the JSON body into the target type: ${detail}`);
    }
    expectText(await request('PATCH', '/services/Greeter', '{"public":'), 400);
    expectText(await request('PATCH', '/services/Greeter', '{}', { 'content-type': 'text/plain' }), 415);
    expect(expectError(await request('PATCH', '/services/Nope', { public: true }), 404, null)).toBe(
      "not found in the schema registry: service with name 'Nope'",
    );
  });
});

describe('GET /services/{name}/openapi', () => {
  function spec(name: string): unknown {
    return JSON.parse(readFileSync(new URL(`${name}.json`, SPEC_DIR), 'utf8'));
  }

  it('generates the documents restate-server 1.7.12 generated for the same services', async () => {
    for (const name of ['Greeter', 'Counter', 'Signup', 'Flaky']) {
      const answer = await request('GET', `/services/${name}/openapi`);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.headers['content-type']).toBe('application/json');
      // The captured services were at revision 2, like ours after the forced re-registration.
      expect(answer.json(), name).toEqual(spec(name));
      // Keys are sorted at every level, as restate writes them.
      expect(Object.keys(answer.json())).toEqual(['components', 'info', 'openapi', 'paths', 'servers', 'tags']);
    }
  });

  it('describes JSON schemas, other content types, no input/output, metadata, and skips private handlers', async () => {
    const doc = (await request('GET', '/services/Typed/openapi')).json() as {
      info: Record<string, unknown>;
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.info).toEqual({
      description: 'typed things',
      title: 'Typed',
      version: '2',
      'x-restate-extensions': { team: 'lab' },
    });
    expect(Object.keys(doc.paths).filter((p) => p.includes('hidden'))).toEqual([]);
    expect(Object.keys(doc.components.schemas)).toEqual(['RestateError', 'greetRequest', 'greetResponse']);
    expect(doc.components.schemas['greetRequest']).toEqual({
      $defs: { Friend: { properties: { n: { type: 'string' } }, type: 'object' } },
      properties: { friend: { $ref: '#/components/schemas/greetRequest/$defs/Friend' }, name: { type: 'string' } },
      required: ['name'],
      title: 'Person',
      type: 'object',
    });
    const greet = doc.paths['/restate/call/Typed/greet']?.['post'];
    expect(greet).toMatchObject({
      description: 'greets a person',
      'x-restate-extensions': { k: 'v' },
      requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/greetRequest' } } } },
      responses: {
        '200': { content: { 'application/json': { schema: { $ref: '#/components/schemas/greetResponse' } } } },
      },
    });
    expect(doc.paths['/restate/call/Typed/bin']?.['post']?.['requestBody']).toEqual({
      content: { 'application/octet-stream': {} },
      required: false,
    });
    const nothing = doc.paths['/restate/call/Typed/nothing']?.['post'];
    expect(nothing?.['requestBody']).toBeUndefined();
    expect(nothing?.['responses']).toMatchObject({ '200': { description: 'Empty' } });
    expect(String(doc.paths['/restate/invocation/Typed/greet/{idempotencyKey}/attach']?.['get']?.['description'])).toBe(
      'Deprecated: use POST /restate/lookup with idempotency information to obtain an invocation id, then GET ' +
        '/restate/attach/{invocationId}. greets a person',
    );
  });

  it('answers 404 for an unknown service', async () => {
    expect(expectError(await request('GET', '/services/Nope/openapi'), 404, null)).toBe(
      "The requested service 'Nope' does not exist",
    );
  });
});
