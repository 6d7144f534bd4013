import http from 'node:http';
import * as clients from '@restatedev/restate-sdk-clients';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { counter } from '../../support/services/counter.ts';
import { fail, greeterService } from '../../support/services/greeter.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * Attach / output / lookup at the ingress, against restate-server 1.7.12's behaviour (shared/spec/http-api.md §B.4-B.6
 * and the "Idempotency", "Attach / output" and "Workflows" transcripts). Invocations that must still be running are
 * parked on an awakeable ("gate") that the test opens through the ingress, so nothing depends on timing.
 */

/** Awakeable id per gate name, recorded by the handler (inside ctx.run, so once per invocation). */
const gates = new Map<string, string>();

async function gate(ctx: restate.Context, name: string): Promise<string> {
  const awakeable = ctx.awakeable<string>();
  await ctx.run('register gate', () => {
    gates.set(name, awakeable.id);
  });
  return awakeable.promise;
}

const greeter = greeterService({
  handlers: {
    fail,
    gated: async (ctx: restate.Context, name: string) => `opened ${name} with ${await gate(ctx, name)}`,
    headers: async (ctx: restate.Context) => [...ctx.request().headers.entries()],
  },
});

const signup = restate.workflow({
  name: 'Signup',
  handlers: {
    run: async (ctx: restate.WorkflowContext, req: { email: string }) => {
      const approvedWith = await gate(ctx, `wf:${ctx.key}`);
      return { user: ctx.key, approvedWith, req };
    },
    status: async () => 'waiting',
  },
});

const shortLived = restate.service({
  name: 'ShortLived',
  handlers: { echo: async (_ctx: restate.Context, s: string) => s },
  options: { idempotencyRetention: { seconds: 1 } },
});

const SERVICES = [greeter, counter, signup, shortLived];

interface Response {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

const NOT_READY = { code: 470, message: 'the invocation exists but has not completed yet', source: 'ingress' };
const INVOCATION_NOT_FOUND = { code: 404, message: 'invocation not found', source: 'ingress' };
const ATTACH_NOT_FOUND = { code: 404, message: 'not found', source: 'invocation' };
const METHOD_NOT_ALLOWED = { code: 405, message: 'method not allowed', source: 'ingress' };
const EXPIRES = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?\+00:00$/;
const DAY_MS = 24 * 60 * 60 * 1000;

describe('ingress attach, output and lookup', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let sql: pg.Client;
  let ingress: clients.Ingress;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url);
    endpoint = await startEndpoint({ services: SERVICES, transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    ingress = clients.connect({ url: runtime.ingressUrl });
  });

  afterAll(async () => {
    await sql?.end();
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  async function request(method: string, path: string, body?: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${runtime.ingressUrl}${path}`, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body }),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json } satisfies Response;
  }

  const get = (path: string) => request('GET', path);
  const post = (path: string, body?: unknown, headers: Record<string, string> = {}) =>
    request('POST', path, body === undefined ? undefined : JSON.stringify(body), headers);

  /**
   * A request whose bytes are known to be written (`sent`) before its answer (`response`) comes: fetch gives no such
   * moment, and a test about requests that must wait needs them to reach the server first.
   */
  function send(method: string, path: string, body?: string): { sent: Promise<void>; response: Promise<Response> } {
    let onSent!: () => void;
    const sent = new Promise<void>((resolve) => (onSent = resolve));
    const response = new Promise<Response>((resolve, reject) => {
      const req = http.request(
        `${runtime.ingressUrl}${path}`,
        { method, headers: body === undefined ? {} : { 'content-type': 'application/json' } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            const headers = new Headers();
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
            resolve({
              status: res.statusCode!,
              headers,
              text,
              json: text === '' ? undefined : (JSON.parse(text) as unknown),
            });
          });
        },
      );
      req.on('finish', onSent);
      req.on('error', reject);
      req.end(body);
    });
    return { sent, response };
  }

  /** The status line as sent, which fetch does not expose. */
  function statusLine(path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      http
        .get(`${runtime.ingressUrl}${path}`, (res) => {
          res.resume();
          res.on('end', () => resolve(`HTTP/${res.httpVersion} ${res.statusCode} ${res.statusMessage}`));
        })
        .on('error', reject);
    });
  }

  async function openGate(name: string, value: string): Promise<void> {
    await expect.poll(() => gates.get(name), { timeout: 20_000 }).toBeDefined();
    await ingress.resolveAwakeable(gates.get(name)!, value);
  }

  async function row(id: string) {
    const res = await sql.query<{
      idempotency_key: string | null;
      completed_at: Date | null;
      completion_retention_ms: string | null;
    }>('SELECT idempotency_key, completed_at, completion_retention_ms::text FROM ratchet.invocation WHERE id = $1', [
      id,
    ]);
    return res.rows[0];
  }

  /** `idempotency-expires` must be the completion time plus the retention, rendered as restate does. */
  async function expectExpires(res: Response, id: string): Promise<void> {
    const header = res.headers.get('idempotency-expires');
    expect(header).toMatch(EXPIRES);
    const r = await row(id);
    expect(Date.parse(header!)).toBe(r!.completed_at!.getTime() + Number(r!.completion_retention_ms));
  }

  function expectIngressError(res: Response, status: number, message: string): void {
    expect(res.status).toBe(status);
    expect(res.json).toEqual({ code: status, message, source: 'ingress' });
    expect(res.text).toBe(JSON.stringify({ code: status, message, source: 'ingress' }));
    expect(res.headers.get('x-restate-error-source')).toBe('ingress');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-restate-id')).toBeNull();
  }

  it('replays an idempotent call from the retained result and serves it by id and by idempotency key', async () => {
    const first = await post('/Greeter/greet', 'Idem', { 'idempotency-key': 'idem-1' });
    expect(first.status).toBe(200);
    // The id is restate's for (Greeter, greet, idem-1): shared/spec/http-api.md §D.
    const id = 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4';
    expect(first.headers.get('x-restate-id')).toBe(id);
    expect(first.headers.get('idempotency-expires')).toBeNull();
    expect((await row(id))?.idempotency_key).toBe('idem-1');

    // A different body with the same key gets the stored result, marked with its expiry.
    const repeat = await post('/Greeter/greet', 'Other', { 'idempotency-key': 'idem-1' });
    expect(repeat.status).toBe(200);
    expect(repeat.text).toBe('"Hello Idem!"');
    expect(repeat.headers.get('x-restate-id')).toBe(id);
    await expectExpires(repeat, id);
    expect(Number((await row(id))!.completion_retention_ms)).toBe(DAY_MS);

    const sendAgain = await post('/Greeter/greet/send', 'Idem', { 'idempotency-key': 'idem-1' });
    expect(sendAgain.status).toBe(202);
    expect(sendAgain.json).toEqual({ invocationId: id, status: 'PreviouslyAccepted' });

    const reads = [
      get(`/restate/invocation/${id}/output`),
      get(`/restate/invocation/${id}/attach`),
      get(`/restate/output/${id}`),
      get(`/restate/attach/${id}`),
      get('/restate/invocation/Greeter/greet/idem-1/output'),
      get('/restate/invocation/Greeter/greet/idem-1/attach'),
      post('/restate/output', { target: 'invocation', invocationId: id }),
      post('/restate/attach', {
        target: 'idempotentInvocation',
        service: 'Greeter',
        handler: 'greet',
        idempotencyKey: 'idem-1',
      }),
    ];
    for (const res of await Promise.all(reads)) {
      expect(res.status).toBe(200);
      expect(res.text).toBe('"Hello Idem!"');
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(res.headers.get('x-restate-id')).toBe(id);
      expect(res.headers.get('idempotency-expires')).toBe(repeat.headers.get('idempotency-expires'));
    }
  });

  it('addresses a virtual object idempotent call with its key, URL-decoded in the path', async () => {
    const first = await post('/Counter/k%203/add', 10, { 'idempotency-key': 'c-1' });
    expect(first.status).toBe(200);
    expect(first.text).toBe('10');
    const id = first.headers.get('x-restate-id')!;
    const lookup = await post('/restate/lookup', {
      target: 'idempotentInvocation',
      service: 'Counter',
      key: 'k 3',
      handler: 'add',
      idempotencyKey: 'c-1',
    });
    expect(lookup.status).toBe(200);
    expect(lookup.text).toBe(JSON.stringify({ invocationId: id }));
    expect(lookup.headers.get('x-restate-id')).toBeNull();

    const byKey = await get('/restate/invocation/Counter/k%203/add/c-1/output');
    expect(byKey.status).toBe(200);
    expect(byKey.text).toBe('10');
    await expectExpires(byKey, id);
    const byBody = await post('/restate/attach', {
      target: 'idempotentInvocation',
      service: 'Counter',
      key: 'k 3',
      handler: 'add',
      idempotencyKey: 'c-1',
    });
    expect(byBody.text).toBe('10');
    expect(byBody.headers.get('x-restate-id')).toBe(id);
  });

  it('gives every service and object call a generated idempotency key, so its output is retained', async () => {
    const a = await post('/Greeter/greet', 'A');
    const b = await post('/Greeter/greet', 'A');
    const c = await post('/Counter/k1/add', 1);
    const ids = [a, b, c].map((r) => r.headers.get('x-restate-id')!);
    expect(new Set(ids).size).toBe(3);
    for (const res of [a, b, c]) expect(res.headers.get('idempotency-expires')).toBeNull();
    for (const id of ids) {
      // A ULID in Crockford base32, as restate injects it.
      expect((await row(id))?.idempotency_key).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    }
    const out = await get(`/restate/invocation/${ids[2]}/output`);
    expect(out.status).toBe(200);
    expect(out.text).toBe('1');
    await expectExpires(out, ids[2]!);
  });

  it('forwards request headers as restate does: normalized ingress path first, each header once', async () => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        `${runtime.ingressUrl}//Greeter/headers/?a=1`,
        {
          method: 'POST',
          headers: { 'x-dup': ['first', 'second'], 'idempotency-key': 'hdr-1', 'x-custom': 'v' },
        },
        (r) => {
          let body = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (body += c));
          r.on('end', () => resolve({ status: r.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(res.status).toBe(200);
    const headers = JSON.parse(res.body) as [string, string][];
    expect(headers[0]).toEqual(['x-restate-ingress-path', '/Greeter/headers?a=1']);
    const names = headers.map(([n]) => n);
    expect(names).not.toContain('host');
    expect(names).not.toContain('connection');
    expect(names).not.toContain('idempotency-key');
    expect(headers).toContainEqual(['x-dup', 'first']);
    expect(names.filter((n) => n === 'x-dup')).toHaveLength(1);
    expect(headers).toContainEqual(['x-custom', 'v']);
    expect(headers).toContainEqual(['content-length', '0']);
  });

  it('answers output of a running invocation with 470, attach waits, and only the later output has an expiry', async () => {
    const sent = await post('/Greeter/gated/send', 'g470');
    expect(sent.status).toBe(202);
    const id = (sent.json as { invocationId: string }).invocationId;
    await expect.poll(() => gates.get('g470'), { timeout: 20_000 }).toBeDefined();

    const running = await get(`/restate/invocation/${id}/output`);
    expect(running.status).toBe(470);
    expect(running.text).toBe(JSON.stringify(NOT_READY));
    expect(running.headers.get('x-restate-error-source')).toBe('ingress');
    expect(running.headers.get('x-restate-id')).toBeNull();
    expect(await statusLine(`/restate/output/${id}`)).toBe('HTTP/1.1 470 <none>');
    expect((await post('/restate/output', { target: 'invocation', invocationId: id })).status).toBe(470);

    const attaching = send('GET', `/restate/invocation/${id}/attach`);
    const attachingByBody = send('POST', '/restate/attach', JSON.stringify({ target: 'invocation', invocationId: id }));
    let answered = 0;
    for (const a of [attaching, attachingByBody]) void a.response.then(() => answered++);
    await Promise.all([attaching.sent, attachingByBody.sent]);
    // Both attach requests wait in the engine (not answered from a stored result) before the gate opens.
    await expect.poll(() => runtime.handle.engine.completionWaiters(id), { timeout: 20_000 }).toBe(2);
    expect((await get(`/restate/output/${id}`)).status).toBe(470);
    expect(answered).toBe(0);

    await openGate('g470', 'yes');
    for (const res of [await attaching.response, await attachingByBody.response]) {
      expect(res.status).toBe(200);
      expect(res.text).toBe('"opened g470 with yes"');
      expect(res.headers.get('x-restate-id')).toBe(id);
      expect(res.headers.get('idempotency-expires')).toBeNull();
    }
    const after = await get(`/restate/output/${id}`);
    expect(after.status).toBe(200);
    expect(after.text).toBe('"opened g470 with yes"');
    await expectExpires(after, id);
  });

  it('serves a failed invocation as the failure, sourced from the invocation, with its expiry', async () => {
    const call = await post('/Greeter/fail');
    expect(call.status).toBe(418);
    const id = call.headers.get('x-restate-id')!;
    for (const res of [await get(`/restate/invocation/${id}/output`), await get(`/restate/attach/${id}`)]) {
      expect(res.status).toBe(418);
      expect(res.text).toBe('{"code":418,"message":"this is a terminal failure","source":"invocation"}');
      expect(res.headers.get('x-restate-error-source')).toBe('invocation');
      expect(res.headers.get('x-restate-id')).toBe(id);
      await expectExpires(res, id);
    }
  });

  it('reports unknown invocations: output as an ingress 404, attach as restate does (404 from the invocation)', async () => {
    const unknownId = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';
    expectIngressError(await get(`/restate/invocation/${unknownId}/output`), 404, 'invocation not found');
    expectIngressError(await get('/restate/invocation/Greeter/greet/unknown-key/output'), 404, 'invocation not found');
    expectIngressError(await get('/restate/workflow/Signup/nobody/output'), 404, 'invocation not found');
    expectIngressError(await get('/restate/workflow/Greeter/x/output'), 404, 'invocation not found');
    expect(
      (await post('/restate/output', { target: 'workflow', workflowName: 'Signup', workflowKey: 'nobody' })).json,
    ).toEqual(INVOCATION_NOT_FOUND);

    const attaches: [Response, unknown][] = [
      [await get(`/restate/invocation/${unknownId}/attach`), { target: 'invocation', invocationId: unknownId }],
      [
        await get('/restate/invocation/Greeter/greet/unknown-key/attach'),
        { target: 'idempotentInvocation', service: 'Greeter', handler: 'greet', idempotencyKey: 'unknown-key' },
      ],
      [
        await get('/restate/workflow/Signup/nobody/attach'),
        { target: 'workflow', workflowName: 'Signup', workflowKey: 'nobody' },
      ],
      [
        await post('/restate/attach', { target: 'workflow', workflowName: 'Signup', workflowKey: 'nobody' }),
        { target: 'workflow', workflowName: 'Signup', workflowKey: 'nobody' },
      ],
    ];
    for (const [res, target] of attaches) {
      expect(res.status).toBe(404);
      expect(res.text).toBe(JSON.stringify(ATTACH_NOT_FOUND));
      expect(res.headers.get('x-restate-error-source')).toBe('invocation');
      const lookup = await post('/restate/lookup', target);
      expect(res.headers.get('x-restate-id')).toBe((lookup.json as { invocationId: string }).invocationId);
    }
    // The ids restate computes (captured from restate-server 1.7.12).
    expect(attaches[1]![0].headers.get('x-restate-id')).toBe('inv_12tGYk7ETSeH19n5X9FYxrICM8sV24zQ2T');
    expect(attaches[2]![0].headers.get('x-restate-id')).toBe('inv_1bzZJ2k11PoS2GPAumgziyf88jlZgvYsYz');
  });

  it('treats a result past its retention as gone', async () => {
    const call = await post('/ShortLived/echo', 'brief');
    expect(call.status).toBe(200);
    const id = call.headers.get('x-restate-id')!;
    expect(Number((await row(id))?.completion_retention_ms)).toBe(1000);
    await expect.poll(async () => (await get(`/restate/output/${id}`)).status, { timeout: 10_000 }).toBe(404);
    expectIngressError(await get(`/restate/output/${id}`), 404, 'invocation not found');
    expect((await get(`/restate/attach/${id}`)).json).toEqual(ATTACH_NOT_FOUND);
  });

  it('refuses malformed ids, wrong methods and unreadable bodies with restate statuses and messages', async () => {
    const id = 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4';
    expectIngressError(
      await get('/restate/invocation/inv_garbage/output'),
      400,
      "bad invocation id 'inv_garbage': unrecognized codec version",
    );
    expectIngressError(await get('/restate/attach/inv_1abc'), 400, "bad invocation id 'inv_1abc': bad length");
    expectIngressError(
      await post('/restate/attach', { target: 'invocation', invocationId: 'dp_garbage' }),
      400,
      "bad invocation id 'dp_garbage': unrecognized codec version",
    );
    for (const res of [
      await post(`/restate/invocation/${id}/output`),
      await request('PUT', `/restate/invocation/${id}/attach`),
      await post('/restate/workflow/Signup/u1/attach'),
      await post('/restate/invocation/Greeter/greet/idem-1/output'),
      await post(`/restate/attach/${id}`),
      await get('/restate/lookup'),
      await get('/restate/attach'),
      await request('PUT', '/restate/output', '{}'),
    ]) {
      expect(res.status).toBe(405);
      expect(res.json).toEqual(METHOD_NOT_ALLOWED);
    }
    expectIngressError(
      await request('POST', '/restate/lookup', '{"x":1}'),
      500,
      'cannot read body: invalid lookup body: missing field `target` at line 1 column 7',
    );
    expectIngressError(
      await request('POST', '/restate/output', 'garbage'),
      500,
      'cannot read body: invalid request body: expected value at line 1 column 1',
    );
    expectIngressError(
      await get('/restate/invocation/Nope/greet/k/output'),
      404,
      "service 'Nope' not found, make sure to register the service before calling it.",
    );
    expectIngressError(await get(`/restate/invocation/${id}/status`), 404, 'not found');
    expectIngressError(
      await get('/restate/workflow/Signup/k%FF/output'),
      400,
      'bad path, cannot decode key: FromUtf8Error { bytes: [107, 255], error: Utf8Error { valid_up_to: 1, error_len: Some(1) } }',
    );
  });

  it('runs a workflow through the typed client: submit, output not ready, attach, output, then 409 on a second run', async () => {
    const wf = ingress.workflowClient(signup, 'u1');
    const submitted = await wf.workflowSubmit({ email: 'u1@x' });
    expect(submitted.status).toBe('Accepted');
    // Deterministic from (Signup, u1): shared/spec/http-api.md §D.
    expect(submitted.invocationId).toBe('inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa');
    expect((await wf.workflowSubmit({ email: 'again' })).status).toBe('PreviouslyAccepted');
    await expect.poll(() => gates.get('wf:u1'), { timeout: 20_000 }).toBeDefined();

    // The client maps 470 to "not ready" (its `result` getter then throws).
    expect((await wf.workflowOutput()).ready).toBe(false);
    expect(await statusLine('/restate/workflow/Signup/u1/output')).toBe('HTTP/1.1 470 <none>');
    expect(await wf.status()).toBe('waiting');

    const attaching = wf.workflowAttach();
    await openGate('wf:u1', 'yes');
    const expected = { user: 'u1', approvedWith: 'yes', req: { email: 'u1@x' } };
    expect(await attaching).toEqual(expected);
    const ready = await wf.workflowOutput();
    expect(ready.ready).toBe(true);
    expect(ready.result).toEqual(expected);

    const out = await get('/restate/workflow/Signup/u1/output');
    expect(out.status).toBe(200);
    expect(out.json).toEqual(expected);
    await expectExpires(out, submitted.invocationId);
    const byBody = await post('/restate/output', { target: 'workflow', workflowName: 'Signup', workflowKey: 'u1' });
    expect(byBody.json).toEqual(expected);
    expect(byBody.headers.get('x-restate-id')).toBe(submitted.invocationId);

    const again = await post('/Signup/u1/run', { email: 'again' });
    expect(again.status).toBe(409);
    expect(again.text).toBe('{"code":409,"message":"the workflow method was already invoked","source":"invocation"}');
    expect(again.headers.get('x-restate-id')).toBe(submitted.invocationId);

    // Neither the run nor a shared handler gets a generated idempotency key; the shared call's result is retained.
    expect((await row(submitted.invocationId))?.idempotency_key).toBeNull();
    const status = await post('/Signup/u1/status');
    const statusId = status.headers.get('x-restate-id')!;
    expect(statusId.slice(0, 16)).toBe(submitted.invocationId.slice(0, 16));
    expect((await row(statusId))?.idempotency_key).toBeNull();
    expect((await get(`/restate/output/${statusId}`)).text).toBe('"waiting"');

    const lookup = await post('/restate/lookup', { target: 'workflow', workflowName: 'Signup', workflowKey: 'u1' });
    expect(lookup.json).toEqual({ invocationId: submitted.invocationId });
  });

  it('attaches to an idempotent send with the typed client (result(send))', async () => {
    const send = await ingress
      .serviceSendClient(greeter)
      .gated('via-client', clients.rpc.sendOpts({ idempotencyKey: 'send-1' }));
    expect(send.attachable).toBe(true);
    expect(send.status).toBe('Accepted');
    const result = ingress.result(send);
    await openGate('via-client', 'client');
    expect(await result).toBe('opened via-client with client');

    // An idempotent call with the same key is answered from the retained result.
    const call = await ingress.serviceClient(greeter).gated('ignored', clients.rpc.opts({ idempotencyKey: 'send-1' }));
    expect(call).toBe('opened via-client with client');
  });
});
