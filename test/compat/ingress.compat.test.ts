import { describe, expect, it } from 'vitest';
import {
  INVOCATION_ID,
  SERVICE_NAMES,
  describeExchange,
  httpRequest,
  normalize,
  selectedTargets,
  useTargets,
  startRatchetTarget,
  startRestateTarget,
  type Exchange,
  type HttpRequest,
  type Normalized,
  type Target,
  type TargetName,
} from './targets.ts';

/**
 * Ingress compatibility: every scenario (taken from the restate-server 1.7.12 transcripts, shared/spec) is sent to
 * the real restate-server and to Ratchet, each with its own SDK endpoint (same services, HTTP/2) registered through its
 * own admin API. The restate-server response is first checked against the transcript's expectation, then Ratchet's
 * normalized response must equal restate-server's. `RATCHET_COMPAT_TARGETS=restate|ratchet` runs one side only.
 */

const VARY = 'origin, access-control-request-method, access-control-request-headers';
const JSON_CT = { 'content-type': 'application/json' };
const BAD_SHAPE = 'bad path, expected either /:service-name/:handler or /:object-name/:object-key/:handler';
const BAD_DELAY = 'bad delay query parameter, must be a ISO8601 duration';

const names = selectedTargets();
const targets = useTargets((n) => (n === 'restate' ? startRestateTarget() : startRatchetTarget()));

// --------------------------------------------------------------------------------------------------------------------
// Helpers

type Results<T> = Map<TargetName, T>;

/** Runs `fn` against every target at once (each target's own steps stay sequential inside `fn`). */
async function onTargets<T>(fn: (t: Target) => Promise<T>): Promise<Results<T>> {
  const list = [...targets.values()];
  const values = await Promise.all(list.map(fn));
  return new Map(list.map((t, i) => [t.name, values[i]!]));
}

async function send(t: Target, request: HttpRequest): Promise<Exchange> {
  return { target: t.name, request, response: await httpRequest(t.ingressUrl, request) };
}

function onEach(build: (t: Target) => HttpRequest): Promise<Results<Exchange>> {
  return onTargets((t) => send(t, build(t)));
}

function dump(results: Results<Exchange>): string {
  return [...results.values()].map(describeExchange).join('\n\n');
}

/**
 * restate-server's normalized response must be `expected` (the transcript), and Ratchet's must equal restate-server's
 * (or `expected` when only Ratchet runs).
 */
function expectCompatible(results: Results<Exchange>, expected: Normalized, body?: (json: unknown) => unknown): void {
  const ref = results.get('restate');
  const refNorm = ref === undefined ? undefined : normalize(ref, targets.get('restate')!.tag, body);
  if (refNorm !== undefined) expect(refNorm, `restate-server vs transcript\n${dump(results)}\n`).toEqual(expected);
  const ratchet = results.get('ratchet');
  if (ratchet !== undefined) {
    const norm = normalize(ratchet, targets.get('ratchet')!.tag, body);
    expect(norm, `Ratchet vs restate-server\n${dump(results)}\n`).toEqual(refNorm ?? expected);
  }
}

const common = { vary: VARY, 'access-control-allow-credentials': 'true' } as const;

function ok(body: unknown): Normalized {
  return {
    status: 200,
    headers: {
      'x-restate-id': '<invocation-id>',
      'x-restate-error-source': null,
      'content-type': 'application/json',
      ...common,
    },
    body,
  };
}

function ingressError(status: number, message: string): Normalized {
  return {
    status,
    headers: {
      'x-restate-id': null,
      'x-restate-error-source': 'ingress',
      'content-type': 'application/json',
      ...common,
    },
    body: { code: status, message, source: 'ingress' },
    keyOrder: ['code', 'message', 'source'],
  };
}

function accepted(withExecutionTime: boolean): Normalized {
  return {
    status: 202,
    headers: {
      'x-restate-id': '<invocation-id>',
      'x-restate-error-source': null,
      'content-type': 'application/json',
      ...common,
    },
    body: withExecutionTime
      ? { invocationId: '<invocation-id>', executionTime: '<timestamp>', status: 'Accepted' }
      : { invocationId: '<invocation-id>', status: 'Accepted' },
    keyOrder: withExecutionTime ? ['invocationId', 'executionTime', 'status'] : ['invocationId', 'status'],
  };
}

function invocationId(x: Exchange): string {
  const id = x.response.headers['x-restate-id'];
  expect(id, describeExchange(x)).toMatch(INVOCATION_ID);
  return id as string;
}

function partitionPrefix(id: string): string {
  return id.slice(0, 16);
}

function post(path: string, json?: unknown, headers: Record<string, string> = JSON_CT): HttpRequest {
  return json === undefined
    ? { method: 'POST', path, headers }
    : { method: 'POST', path, headers, body: JSON.stringify(json) };
}

// --------------------------------------------------------------------------------------------------------------------

describe(`ingress compatibility (${names.join(' vs ')})`, () => {
  describe('calls', () => {
    it('POST /Greeter/greet with a JSON body → 200 with the output', async () => {
      const r = await onEach((t) => post('/Greeter/greet', `Alice-${t.tag}`));
      expectCompatible(r, ok('Hello Alice-<tag>!'));
    });

    it('POST /restate/call/Greeter/greet (1.7 path) → 200', async () => {
      const r = await onEach((t) => post('/restate/call/Greeter/greet', `Bob-${t.tag}`));
      expectCompatible(r, ok('Hello Bob-<tag>!'));
    });

    it('GET /Greeter/greet without a body invokes with empty input', async () => {
      const r = await onEach(() => ({ method: 'GET', path: '/Greeter/greet' }));
      expectCompatible(r, ok('Hello anon!'));
    });

    it('content-type text/plain → 400 input validation error', async () => {
      const r = await onEach((t) => post('/Greeter/greet', `Dan-${t.tag}`, { 'content-type': 'text/plain' }));
      expectCompatible(
        r,
        ingressError(400, "input validation error: Content-type 'text/plain' does not match 'application/json'"),
      );
    });

    it("curl's default application/x-www-form-urlencoded → 400 input validation error", async () => {
      const r = await onEach((t) =>
        post('/Greeter/greet', `Dan-${t.tag}`, { 'content-type': 'application/x-www-form-urlencoded' }),
      );
      expectCompatible(
        r,
        ingressError(
          400,
          "input validation error: Content-type 'application/x-www-form-urlencoded' does not match 'application/json'",
        ),
      );
    });

    it('content-type application/json; charset=utf-8 → 200', async () => {
      const r = await onEach((t) =>
        post('/Greeter/greet', `Eve-${t.tag}`, { 'content-type': 'application/json; charset=utf-8' }),
      );
      expectCompatible(r, ok('Hello Eve-<tag>!'));
    });

    it('a body without any content-type header → 400 "Empty content-type"', async () => {
      const r = await onEach((t) => post('/Greeter/greet', `Fay-${t.tag}`, {}));
      expectCompatible(r, ingressError(400, 'input validation error: Empty content-type'));
    });

    it('PUT → 405 method not allowed', async () => {
      const r = await onEach((t) => ({
        method: 'PUT',
        path: '/Greeter/greet',
        headers: JSON_CT,
        body: JSON.stringify(`x-${t.tag}`),
      }));
      expectCompatible(r, ingressError(405, 'method not allowed'));
    });

    it('a TerminalError with code 418 → 418 {code,message,source:"invocation"}', async () => {
      const r = await onEach(() => post('/Greeter/fail', null));
      expectCompatible(r, {
        status: 418,
        headers: {
          'x-restate-id': '<invocation-id>',
          'x-restate-error-source': 'invocation',
          'content-type': 'application/json',
          ...common,
        },
        body: { code: 418, message: 'this is a terminal failure', source: 'invocation' },
        keyOrder: ['code', 'message', 'source'],
      });
    });

    it('a handler that calls another service and sleeps 100 ms', async () => {
      const r = await onEach((t) => post('/Greeter/relay', `relay-${t.tag}`));
      expectCompatible(r, ok('relay-<tag>! (after 100 ms)'));
      for (const x of r.values()) expect(x.response.elapsedMs, describeExchange(x)).toBeGreaterThanOrEqual(100);
    });
  });

  describe('paths', () => {
    it('unknown service → 404', async () => {
      const r = await onEach(() => post('/Nope/greet', 1));
      expectCompatible(
        r,
        ingressError(404, "service 'Nope' not found, make sure to register the service before calling it."),
      );
    });

    it('unknown handler → 404', async () => {
      const r = await onEach(() => post('/Greeter/nope', 1));
      expectCompatible(
        r,
        ingressError(
          404,
          "the service 'Greeter' exists, but the handler 'nope' was not found, check that the handler exists in the latest registered service version.",
        ),
      );
    });

    it('virtual object without a key (/Counter/add) → 400', async () => {
      const r = await onEach(() => post('/Counter/add', 1));
      expectCompatible(r, ingressError(400, BAD_SHAPE));
    });

    it('service with a key segment (/Greeter/x/greet) → 400', async () => {
      const r = await onEach(() => post('/Greeter/x/greet', 1));
      expectCompatible(r, ingressError(400, BAD_SHAPE));
    });

    it('GET / → 400 "bad path: /"', async () => {
      const r = await onEach(() => ({ method: 'GET', path: '/' }));
      expectCompatible(r, ingressError(400, 'bad path: /'));
    });

    it('GET /restate/health lists the registered services', async () => {
      const r = await onEach(() => ({ method: 'GET', path: '/restate/health' }));
      const sortServices = (j: unknown): unknown => {
        const o = j as { services?: unknown };
        return Array.isArray(o.services) ? { ...o, services: [...(o.services as string[])].sort() } : j;
      };
      expectCompatible(
        r,
        {
          status: 200,
          headers: {
            'x-restate-id': null,
            'x-restate-error-source': null,
            'content-type': 'application/json',
            ...common,
          },
          body: { services: SERVICE_NAMES },
          keyOrder: ['services'],
        },
        sortServices,
      );
    });
  });

  describe('sends', () => {
    function expectIdInBody(r: Results<Exchange>): void {
      for (const x of r.values()) {
        const body = JSON.parse(x.response.text) as { invocationId?: unknown };
        expect(body.invocationId, describeExchange(x)).toBe(x.response.headers['x-restate-id']);
      }
    }

    it('POST /Greeter/greet/send → 202 {invocationId, status:"Accepted"}', async () => {
      const r = await onEach((t) => post('/Greeter/greet/send', `S1-${t.tag}`));
      expectCompatible(r, accepted(false));
      expectIdInBody(r);
    });

    it('POST /restate/send/Greeter/greet (1.7 path) → 202', async () => {
      const r = await onEach((t) => post('/restate/send/Greeter/greet', `S2-${t.tag}`));
      expectCompatible(r, accepted(false));
      expectIdInBody(r);
    });

    it('send?delay=10s → 202 with executionTime (9 fractional digits, invocationId/executionTime/status order)', async () => {
      const before = Date.now();
      const r = await onEach((t) => post('/Greeter/greet/send?delay=10s', `S3-${t.tag}`));
      const after = Date.now();
      expectCompatible(r, accepted(true));
      expectIdInBody(r);
      for (const x of r.values()) {
        const at = Date.parse((JSON.parse(x.response.text) as { executionTime: string }).executionTime);
        expect(at, describeExchange(x)).toBeGreaterThanOrEqual(before + 10_000 - 1);
        expect(at, describeExchange(x)).toBeLessThanOrEqual(after + 10_000 + 1_000);
      }
    });

    it('send?delay=garbage → 400 bad delay query parameter', async () => {
      const r = await onEach((t) => post('/Greeter/greet/send?delay=garbage', `S5-${t.tag}`));
      // The detail after the prefix is the duration parser's own wording (jiff's in restate); only the prefix is
      // compared.
      const prefixOnly = (j: unknown): unknown => {
        const o = j as { message?: unknown };
        return typeof o.message === 'string' && o.message.startsWith(`${BAD_DELAY}: `)
          ? { ...o, message: `${BAD_DELAY}: <detail>` }
          : j;
      };
      expectCompatible(r, ingressError(400, `${BAD_DELAY}: <detail>`), prefixOnly);
    });

    it('greet?delay=10s on a call → 400', async () => {
      const r = await onEach((t) => post('/Greeter/greet?delay=10s', `S6-${t.tag}`));
      expectCompatible(
        r,
        ingressError(400, 'cannot use the delay query parameter with calls. The delay is supported only with sends'),
      );
    });
  });

  describe('virtual objects', () => {
    it('Counter/<key>/add twice → 1 then 2, then get → 2, all on the same partition key', async () => {
      const r = await onTargets(async (t) => [
        await send(t, post(`/Counter/k1-${t.tag}/add`, 1)),
        await send(t, post(`/Counter/k1-${t.tag}/add`, 1)),
        await send(t, { method: 'POST', path: `/Counter/k1-${t.tag}/get` }),
      ]);
      const step = (i: number): Results<Exchange> => new Map([...r].map(([n, xs]) => [n, xs[i]!]));
      expectCompatible(step(0), ok(1));
      expectCompatible(step(1), ok(2));
      expectCompatible(step(2), ok(2));
      for (const xs of r.values()) {
        const prefixes = xs.map((x) => partitionPrefix(invocationId(x)));
        expect(new Set(prefixes).size, xs.map(describeExchange).join('\n\n')).toBe(1);
      }
    });

    it('a URL-encoded key (Counter/k%2F1/add) is decoded', async () => {
      const r = await onTargets(async (t) => [
        await send(t, post(`/Counter/k%2F1-${t.tag}/add`, 1)),
        await send(t, { method: 'POST', path: `/Counter/k%2F1-${t.tag}/whoami` }),
      ]);
      const step = (i: number): Results<Exchange> => new Map([...r].map(([n, xs]) => [n, xs[i]!]));
      expectCompatible(step(0), ok(1));
      expectCompatible(step(1), ok('k/1-<tag>'));
      for (const xs of r.values()) {
        expect(partitionPrefix(invocationId(xs[1]!)), xs.map(describeExchange).join('\n\n')).toBe(
          partitionPrefix(invocationId(xs[0]!)),
        );
      }
    });

    it('the same object key gets the same partition-key id prefix on both targets', async ({ skip }) => {
      if (targets.size < 2) skip('needs both targets');
      const r = await onEach(() => ({ method: 'POST', path: '/Counter/compat%2Fshared-key/get' }));
      expectCompatible(r, ok(0));
      const prefixes = [...r.values()].map((x) => partitionPrefix(invocationId(x)));
      expect(new Set(prefixes).size, dump(r)).toBe(1);
    });
  });
});
