import http2 from 'node:http2';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loopbackUrl } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { registerDeployment } from '../../support/registration.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import {
  Db,
  T,
  gate,
  send,
  startFaultProxy,
  startRestartableEndpoint,
  type FaultProxy,
  type InvocationRowView,
  type RestartableEndpoint,
} from './helpers.ts';

/**
 * Attempts that fail below the protocol: what the deployment (or whatever stands in front of it) answers at the HTTP
 * level, oversized messages, a deployment that goes silent, and one that is down. Each is recorded with its RT code
 * in the invocation row, and the invocation completes once the cause is gone.
 */

const counts = new Map<string, number>();
const bump = (k: string): number => {
  const n = (counts.get(k) ?? 0) + 1;
  counts.set(k, n);
  return n;
};

const throttled = restate.service({
  name: 'Throttled',
  handlers: { hello: async (_ctx: restate.Context, name: string) => `hello ${name} #${bump(`throttled:${name}`)}` },
});

const limited = restate.service({
  name: 'Limited',
  handlers: { hello: async (_ctx: restate.Context, name: string) => `hello ${name} #${bump(`limited:${name}`)}` },
});

const big = restate.service({
  name: 'Big',
  handlers: {
    huge: restate.handlers.handler(
      { retryPolicy: { maxAttempts: 3, initialInterval: 50, onMaxAttempts: 'pause' } },
      async (_ctx: restate.Context, key: string): Promise<string> => {
        bump(`huge:${key}`);
        return 'x'.repeat(70 * 1024);
      },
    ),
    small: async (_ctx: restate.Context, key: string): Promise<string> => `small ${key}`,
  },
});

const release = gate();
const hanging = restate.service({
  name: 'Hanging',
  handlers: {
    hang: async (ctx: restate.Context, key: string): Promise<string> => {
      return ctx.run('wait-for-the-test', async () => {
        bump(`hang:${key}`);
        await release.promise;
        return `released ${key}`;
      });
    },
  },
});

const downstream = restate.service({
  name: 'Downstream',
  handlers: { ping: async (_ctx: restate.Context, key: string) => `pong ${key} #${bump(`ping:${key}`)}` },
});
const downstreamH1 = restate.service({
  name: 'DownstreamH1',
  handlers: { ping: async (_ctx: restate.Context, key: string) => `pong ${key} #${bump(`ping-h1:${key}`)}` },
});

const refused = restate.service({
  name: 'Refused',
  handlers: { hello: async (_ctx: restate.Context, name: string) => `hello ${name} #${bump(`refused:${name}`)}` },
});

describe('transport-level attempt failures', () => {
  let database: TestDatabase;
  let db: Db;
  let runtime: TestRuntime;
  const endpoints: SdkEndpoint[] = [];
  const proxies: FaultProxy[] = [];
  const restartable: RestartableEndpoint[] = [];

  const register = async (uri: string, h1: boolean): Promise<void> => {
    const reg = await registerDeployment(runtime.adminUrl, uri, { use_http_11: h1 });
    expect(reg.status).toBe(201);
  };
  const endpoint = async (
    services: restate.NodeEndpointOptions['services'],
    transport: 'h1' | 'h2',
  ): Promise<SdkEndpoint> => {
    const e = await startEndpoint({ services, transport });
    endpoints.push(e);
    return e;
  };
  const onlyId = async (service: string, handler: string): Promise<string> => {
    const ids = await db.idsOf(service, handler);
    expect(ids).toHaveLength(1);
    return ids[0]!;
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await Db.connect(database.url);
    runtime = await startTestRuntime(database.url, {
      RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
      RATCHET_RETRY_MAX_INTERVAL: '200ms',
      RATCHET_INVOKER_MESSAGE_SIZE_LIMIT: '64 KiB',
      RATCHET_INVOKER_ABORT_TIMEOUT: '500ms',
    });
  });

  afterAll(async () => {
    release.open();
    await db?.close();
    await runtime?.stop();
    for (const p of proxies) await p.close();
    for (const e of endpoints) await e.close();
    for (const e of restartable) await e.stop();
    await database?.drop();
  });

  it('honours Retry-After when the deployment answers 503 (RT0023), then succeeds', async () => {
    const upstream = await endpoint([throttled], 'h1');
    let atRetry: InvocationRowView | undefined;
    const proxy = await startFaultProxy(upstream.url, async (req) => {
      if (req.n === 1) return { status: 503, headers: { 'retry-after': '1' }, body: 'overloaded' };
      // The runtime is waiting for this answer: what it recorded about the first attempt is in the row now.
      if (req.n === 2) atRetry = await db.row(await onlyId('Throttled', 'hello'));
      return 'forward';
    });
    proxies.push(proxy);
    await register(proxy.url, true);

    const res = await call(runtime.ingressUrl, '/Throttled/hello', 'Ann');
    expect(res.status).toBe(200);
    expect(res.json).toBe('hello Ann #1');
    expect(atRetry).toMatchObject({ status: 'invoked', retry_count: 1, last_failure_code: 'RT0023' });
    expect(atRetry?.last_failure).toContain('503');
    const [first, second] = proxy.invocations;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000);
  });

  it('records 413 Payload Too Large from the deployment as RT0019, then succeeds', async () => {
    const upstream = await endpoint([limited], 'h1');
    let atRetry: InvocationRowView | undefined;
    const proxy = await startFaultProxy(upstream.url, async (req) => {
      if (req.n === 1) return { status: 413, body: 'request entity too large' };
      if (req.n === 2) atRetry = await db.row(await onlyId('Limited', 'hello'));
      return 'forward';
    });
    proxies.push(proxy);
    await register(proxy.url, true);

    const res = await call(runtime.ingressUrl, '/Limited/hello', 'Bo');
    expect(res.status).toBe(200);
    expect(res.json).toBe('hello Bo #1');
    expect(atRetry).toMatchObject({ retry_count: 1, last_failure_code: 'RT0019' });
    expect(atRetry?.last_failure).toContain('413');
  });

  it.each(['h2', 'h1'] as const)(
    'fails an attempt whose message exceeds the message size limit (RT0003) over %s, and pauses per policy',
    async (transport) => {
      const e = await endpoint([big], transport);
      // Same services on another endpoint: register each transport's copy under its own deployment, in turn.
      await register(e.url, transport === 'h1');
      const key = `huge-${transport}`;
      const id = await send(runtime.ingressUrl, '/Big/huge', key);
      await expect.poll(async () => (await db.row(id))?.status, { timeout: 10_000 }).toBe('paused');
      const row = await db.row(id);
      expect(row).toMatchObject({ retry_count: 3, last_failure_code: 'RT0003' });
      expect(row?.last_failure).toContain(String(64 * 1024));
      expect(counts.get(`huge:${key}`)).toBe(3);
      expect(await db.journalTypes(id)).toEqual([T.Input]);
      // Small messages from the same deployment are fine.
      const ok = await call(runtime.ingressUrl, '/Big/small', key);
      expect(ok.json).toBe(`small ${key}`);
    },
  );

  it('aborts a request/response attempt that sends nothing for the abort timeout (RT0001), then completes', async () => {
    const e = await endpoint([hanging], 'h1');
    await register(e.url, true);
    const pending = call(runtime.ingressUrl, '/Hanging/hang', 'h');
    await expect
      .poll(async () => (await db.row(await onlyId('Hanging', 'hang')))?.last_failure_code ?? null, { timeout: 10_000 })
      .toBe('RT0001');
    expect((await db.row(await onlyId('Hanging', 'hang')))?.status).toBe('invoked');
    release.open();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.json).toBe('released h');
    // Every aborted attempt ran the closure again (its result was never stored); at least the first one was aborted.
    expect(counts.get('hang:h')).toBeGreaterThanOrEqual(2);
  });

  it('retries a bidi attempt the deployment refused with an error status before the stream started (RT0006)', async () => {
    // The SDK answers some errors before the stream starts (404, 415, 500) with a plain HTTP response while the
    // runtime's request body is still open. Here the first invocation request gets a 500 that way.
    const handler = restate.createEndpointHandler({ services: [refused] });
    let invokes = 0;
    const server = http2.createServer((req, res) => {
      if (req.url.includes('/invoke/') && ++invokes === 1) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'not today' }));
        return;
      }
      handler(req, res);
    });
    const sessions = new Set<http2.ServerHttp2Session>();
    server.on('session', (session: http2.ServerHttp2Session) => sessions.add(session));
    await new Promise<void>((r) => server.listen({ host: '127.0.0.1', port: 0 }, r));
    const { port } = server.address() as { port: number };
    try {
      await register(`${loopbackUrl(port)}/`, false);
      const res = await call(runtime.ingressUrl, '/Refused/hello', 'Cy');
      expect(res.json).toBe('hello Cy #1');
      const row = await db.row(res.headers.get('x-restate-id')!);
      expect(row).toMatchObject({ retry_count: 1, last_failure_code: 'RT0006' });
      expect(row?.last_failure).toContain('not today');
    } finally {
      server.close();
      // The runtime keeps its session open for later attempts; the test is done with it.
      for (const session of sessions) session.destroy();
    }
  });

  it.each([
    ['h2', downstream],
    ['h1', downstreamH1],
  ] as const)(
    'records a deployment that is down as RT0010 (%s) and completes once it is back',
    async (transport, svc) => {
      const e = await startRestartableEndpoint([svc], transport);
      restartable.push(e);
      await register(e.url, transport === 'h1');
      await e.stop();
      const id = await send(runtime.ingressUrl, `/${svc.name}/ping`, 'k');
      await expect.poll(async () => (await db.row(id))?.last_failure_code ?? null, { timeout: 10_000 }).toBe('RT0010');
      expect((await db.row(id))?.retry_count).toBeGreaterThanOrEqual(1);
      await e.start();
      await expect.poll(async () => (await db.row(id))?.status, { timeout: 10_000 }).toBe('completed');
      const row = await db.row(id);
      expect(row?.result_kind).toBe('success');
      expect(JSON.parse(row!.output!.toString('utf8'))).toBe('pong k #1');
    },
  );
});

const finisher = restate.service({
  name: 'Finisher',
  handlers: {
    finish: async (ctx: restate.Context, key: string): Promise<string> => {
      await ctx.run('work', () => bump(`finish:${key}`));
      return `finished ${key}`;
    },
  },
});

describe('an Output stored by an attempt that never ended', () => {
  let database: TestDatabase;
  let db: Db;
  let runtime: TestRuntime | undefined;
  let endpoint: SdkEndpoint;
  let proxy: FaultProxy;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await Db.connect(database.url);
    endpoint = await startEndpoint({ services: [finisher], transport: 'h1' });
  });

  afterAll(async () => {
    await db?.close();
    await runtime?.stop();
    await proxy?.close();
    await endpoint?.close();
    await database?.drop();
  });

  it('completes with the journaled Output after a restart, when the SDK replays it and sends only End', async () => {
    // Request/response: attempt 1 journals the Run, attempt 2 sends Output + End; the proxy loses that End and keeps
    // the exchange open, and the runtime is restarted before the attempt ends. The next attempt replays the Output,
    // so the SDK sends End alone: the result must come from the journal.
    proxy = await startFaultProxy(endpoint.url, (req) => (req.n === 2 ? 'forward-without-end' : 'forward'));
    runtime = await startTestRuntime(database.url);
    expect((await registerDeployment(runtime.adminUrl, proxy.url, { use_http_11: true })).status).toBe(201);
    const id = await send(runtime.ingressUrl, '/Finisher/finish', 'f');
    await expect.poll(() => db.journalTypes(id), { timeout: 10_000 }).toContain(T.Output);
    await runtime.stop();

    runtime = await startTestRuntime(database.url);
    await expect.poll(async () => (await db.row(id))?.status, { timeout: 10_000 }).toBe('completed');
    const row = await db.row(id);
    expect(row).toMatchObject({ result_kind: 'success' });
    expect(JSON.parse(row!.output!.toString('utf8'))).toBe('finished f');
    expect(await db.journalTypes(id)).toEqual([T.Input, T.Run, T.RunCompletion, T.Output]);
    expect(counts.get('finish:f')).toBe(1);
  });
});
