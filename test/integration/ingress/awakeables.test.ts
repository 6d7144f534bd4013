import * as clients from '@restatedev/restate-sdk-clients';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAwakeableId, parseAwakeableId } from '../../../runtime/src/ids/awakeable-id.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * Completing awakeables through the ingress (shared/spec/http-api.md §B.7 and the "Awakeables" transcripts):
 * `POST /restate/awakeables/{id}/resolve|reject` and the `/restate/a/` alias the typed client uses.
 */

/** Awakeable id per request name, recorded once per invocation (inside ctx.run). */
const awakeables = new Map<string, string>();

const approvals = restate.service({
  name: 'Approvals',
  handlers: {
    /** Waits for a JSON value and returns it. */
    await: async (ctx: restate.Context, name: string) => {
      const awakeable = ctx.awakeable<unknown>();
      await ctx.run('register', () => {
        awakeables.set(name, awakeable.id);
      });
      return { got: await awakeable.promise };
    },
    /** Waits for raw bytes and returns them as hex, to show the body arrives untouched. */
    awaitBytes: async (ctx: restate.Context, name: string) => {
      const awakeable = ctx.awakeable(restate.serde.binary);
      await ctx.run('register', () => {
        awakeables.set(name, awakeable.id);
      });
      return Buffer.from(await awakeable.promise).toString('hex');
    },
  },
});

interface Response {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

describe('ingress awakeables', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let ingress: clients.Ingress;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url);
    endpoint = await startEndpoint({ services: [approvals], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    ingress = clients.connect({ url: runtime.ingressUrl });
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  async function request(
    method: string,
    path: string,
    body?: string | Uint8Array,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const res = await fetch(`${runtime.ingressUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  /** Starts `handler` with `name` (a send) and returns its invocation id and awakeable id once registered. */
  async function park(
    handler: 'await' | 'awaitBytes',
    name: string,
  ): Promise<{ invocationId: string; awakeableId: string }> {
    const sent = await request('POST', `/Approvals/${handler}/send`, JSON.stringify(name), {
      'content-type': 'application/json',
    });
    expect(sent.status).toBe(202);
    await expect.poll(() => awakeables.get(name), { timeout: 20_000 }).toBeDefined();
    return { invocationId: (sent.json as { invocationId: string }).invocationId, awakeableId: awakeables.get(name)! };
  }

  function expect202(res: Response): void {
    expect(res.status).toBe(202);
    expect(res.text).toBe('');
    expect(res.headers.get('content-type')).toBeNull();
    expect(res.headers.get('content-length')).toBe('0');
  }

  function expectIngressError(res: Response, status: number, message: string): void {
    expect(res.status).toBe(status);
    expect(res.text).toBe(JSON.stringify({ code: status, message, source: 'ingress' }));
    expect(res.headers.get('x-restate-error-source')).toBe('ingress');
    expect(res.headers.get('content-type')).toBe('application/json');
  }

  it('resolves with the JSON body, answers 202 with an empty body, and ignores a second completion', async () => {
    const { invocationId, awakeableId } = await park('await', 'json');
    expect(awakeableId).toMatch(/^sign_1[A-Za-z0-9_-]{38}$/);
    expect(parseAwakeableId(awakeableId).invocationId).toBe(invocationId);

    const resolved = await request('POST', `/restate/awakeables/${awakeableId}/resolve`, '{"approved":true}', {
      'content-type': 'application/json',
    });
    expect202(resolved);
    const attached = await request('GET', `/restate/invocation/${invocationId}/attach`);
    expect(attached.status).toBe(200);
    expect(attached.text).toBe('{"got":{"approved":true}}');

    expect202(
      await request('POST', `/restate/awakeables/${awakeableId}/resolve`, '{"approved":false}', {
        'content-type': 'application/json',
      }),
    );
    const output = await request('GET', `/restate/output/${invocationId}`);
    expect(output.text).toBe('{"got":{"approved":true}}');
  });

  it('rejects with the text body as a failure of code 500', async () => {
    const { invocationId, awakeableId } = await park('await', 'reject');
    expect202(
      await request('POST', `/restate/awakeables/${awakeableId}/reject`, 'nope, rejected ✗', {
        'content-type': 'text/plain',
      }),
    );
    const out = await request('GET', `/restate/invocation/${invocationId}/attach`);
    expect(out.status).toBe(500);
    expect(out.text).toBe('{"code":500,"message":"nope, rejected ✗","source":"invocation"}');
    expect(out.headers.get('x-restate-error-source')).toBe('invocation');
  });

  it('works through the typed client (/restate/a/…)', async () => {
    const yes = await park('await', 'client-resolve');
    await ingress.resolveAwakeable(yes.awakeableId, { v: 1 });
    expect((await request('GET', `/restate/attach/${yes.invocationId}`)).json).toEqual({ got: { v: 1 } });

    const no = await park('await', 'client-reject');
    await ingress.rejectAwakeable(no.awakeableId, 'client says no');
    const out = await request('GET', `/restate/attach/${no.invocationId}`);
    expect(out.status).toBe(500);
    expect(out.json).toEqual({ code: 500, message: 'client says no', source: 'invocation' });
  });

  it('passes the body through as bytes whatever its content-type', async () => {
    const { invocationId, awakeableId } = await park('awaitBytes', 'bytes');
    expect202(
      await request('POST', `/restate/a/${awakeableId}/resolve`, Uint8Array.from([0xff, 0x00, 0x7b]), {
        'content-type': 'text/plain',
      }),
    );
    expect((await request('GET', `/restate/attach/${invocationId}`)).json).toBe('ff007b');
  });

  it('accepts the legacy prom_1 form of the same awakeable', async () => {
    const { invocationId, awakeableId } = await park('await', 'legacy');
    const { index } = parseAwakeableId(awakeableId);
    const legacy = formatAwakeableId('legacy', InvocationId.parse(invocationId), index);
    expect(legacy.startsWith('prom_1')).toBe(true);
    expect202(await request('POST', `/restate/awakeables/${legacy}/resolve`, '"old"'));
    expect((await request('GET', `/restate/attach/${invocationId}`)).json).toEqual({ got: 'old' });
  });

  it('answers 202 for an awakeable of an unknown invocation, as restate does', async () => {
    const unknown = formatAwakeableId('signal', InvocationId.parse('inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz'), 17);
    expect202(await request('POST', `/restate/a/${unknown}/resolve`, '1'));
    expect202(await request('POST', `/restate/a/${unknown}/reject`, 'x'));
  });

  it('refuses wrong methods, unknown operations, bad paths and malformed ids', async () => {
    const id = 'sign_1gg1ruIHcguA29jyO16--lh6IXunSC8seAAAAEQ';
    expectIngressError(await request('GET', `/restate/awakeables/${id}/resolve`), 405, 'method not allowed');
    expectIngressError(await request('PUT', `/restate/a/${id}/reject`, 'x'), 405, 'method not allowed');
    // The method is checked before the id, as in restate.
    expectIngressError(await request('GET', '/restate/a/prom_garbage/resolve'), 405, 'method not allowed');
    expectIngressError(await request('POST', `/restate/awakeables/${id}/foo`), 404, 'not found');
    expectIngressError(
      await request('POST', '/restate/a/x'),
      400,
      'bad path, expected either /restate/awakeables/:id/resolve or /restate/awakeables/:id/reject',
    );
    expectIngressError(
      await request('POST', '/restate/awakeables/prom_garbage/resolve', '1', { 'content-type': 'application/json' }),
      400,
      "bad awakeable id 'prom_garbage': unrecognized codec version",
    );
    expectIngressError(
      await request('POST', `/restate/a/${id}x/resolve`, '1'),
      400,
      `bad awakeable id '${id}x': id doesn't match the expected type`,
    );
    expectIngressError(
      await request('POST', '/restate/a/inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz/reject', 'x'),
      400,
      "bad awakeable id 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz': id doesn't match the expected type",
    );
  });
});
