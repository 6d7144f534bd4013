import http from 'node:http';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';

/**
 * Loki's `/loki/api/v1/tail` over WebSocket, with the `ws` client as logcli's and Grafana's live view connect: the
 * backlog first, then each invocation's lines as they are stored, each line once; a bad query is refused before the
 * upgrade with Loki's 400.
 */
const echo = restate.service({
  name: 'TailEcho',
  handlers: { run: async (_ctx: restate.Context, s: string) => Promise.resolve(s) },
});

interface TailMessage {
  streams: { stream: Record<string, string>; values: [string, string][] }[];
  dropped_entries: unknown[];
}

describe('Loki tail over WebSocket', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess;

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [echo], transport: 'h2' });
    runtime = await startRuntimeProcess({
      databaseUrl: db.url,
      env: { RATCHET_OBSERVABILITY_LOG_LEVEL: 'debug', RATCHET_NODE_NAME: 'tail-node' },
    });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  const invoke = async (): Promise<string> => {
    const res = await fetch(`${runtime.ingressUrl}/TailEcho/run/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '"hi"',
    });
    return ((await res.json()) as { invocationId: string }).invocationId;
  };

  const tailUrl = (params: Record<string, string>): string =>
    `${runtime.observabilityUrl.replace(/^http/, 'ws')}/loki/api/v1/tail?${new URLSearchParams(params).toString()}`;

  it('sends the backlog, then every new line once, oldest first', async () => {
    const before = await invoke();
    const socket = new WebSocket(tailUrl({ query: '{service_name="TailEcho"} | json', limit: '1000' }), {
      headers: { 'x-scope-orgid': 'ignored' },
    });
    const messages: TailMessage[] = [];
    socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString()) as TailMessage));
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    const after = await invoke();
    const lines = (): { ts: bigint; fields: Record<string, string | number> }[] =>
      messages.flatMap((m) =>
        m.streams.flatMap((s) =>
          s.values.map(([ts, line]) => ({
            ts: BigInt(ts),
            fields: (JSON.parse(line) as { fields: Record<string, string | number> }).fields,
          })),
        ),
      );
    const eventsOf = (id: string): (string | number | undefined)[] =>
      lines()
        .filter((l) => l.fields['restate.invocation.id'] === id)
        .map((l) => l.fields['restate.invocation.event']);
    await waitFor(() => {
      expect(eventsOf(before)).toContain('completed');
      expect(eventsOf(after)).toContain('completed');
    }, 20_000);
    // Give the tail two more polls: nothing may come twice.
    await new Promise((r) => setTimeout(r, 2_500));
    socket.close();
    for (const id of [before, after]) {
      const events = eventsOf(id);
      expect(events).toEqual(['accepted', 'started', 'completed']);
    }
    // Each message holds whole streams with the stream labels and `| json`'s extracted labels.
    const stream = messages[0]!.streams[0]!.stream;
    expect(stream).toMatchObject({ service_name: 'TailEcho', node: 'tail-node', component: 'invocation' });
    expect(messages.every((m) => Array.isArray(m.dropped_entries))).toBe(true);
    // Oldest first: within each stream, and from one message to the next (a message groups its lines by stream).
    const times = messages.map((m) => m.streams.flatMap((s) => s.values.map(([t]) => BigInt(t))));
    for (const m of messages) {
      for (const s of m.streams) {
        const t = s.values.map(([x]) => BigInt(x));
        expect([...t].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(t);
      }
    }
    for (let i = 1; i < times.length; i++) {
      const prevMax = times[i - 1]!.reduce((a, b) => (a > b ? a : b));
      const min = times[i]!.reduce((a, b) => (a < b ? a : b));
      expect(prevMax < min).toBe(true);
    }
  });

  it('counts the lines and spans it wrote in /metrics', async () => {
    await invoke();
    await waitFor(async () => {
      const text = await (await fetch(`${runtime.metricsUrl}/metrics`)).text();
      const value = (kind: string, outcome: string): number =>
        Number(
          new RegExp(`^ratchet_observability_records_total\\{kind="${kind}",outcome="${outcome}"\\} (\\d+)`, 'm').exec(
            text,
          )?.[1] ?? 0,
        );
      expect(value('logs', 'written')).toBeGreaterThan(0);
      expect(value('spans', 'written')).toBeGreaterThan(0);
      expect(value('spans', 'dropped')).toBe(0);
    }, 10_000);
  });

  it('refuses a metric query, a malformed one and a limit over the maximum before the upgrade', async () => {
    const refusal = (params: Record<string, string>): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const socket = new WebSocket(tailUrl(params));
        socket.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        socket.once('open', () => reject(new Error('the tail was opened')));
      });
    const metric = await refusal({ query: 'rate({service_name="TailEcho"}[1m])' });
    expect(metric.status).toBe(400);
    expect(metric.body).toMatch(/tail requires a log query/);
    const malformed = await refusal({ query: '{service_name=' });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatch(/parse error/);
    const limit = await refusal({ query: '{service_name="TailEcho"}', limit: '100000' });
    expect(limit.status).toBe(400);
    expect(limit.body).toMatch(/max entries limit/);
    const delay = await refusal({ query: '{service_name="TailEcho"}', delay_for: '60' });
    expect(delay.status).toBe(400);
    expect(delay.body).toMatch(/delay_for/);
  });

  it('closes the connection of a refused upgrade and says so, so that a keep-alive client does not reuse it', async () => {
    // Node's default agent keeps connections alive: before the refusal said `Connection: close`, every second request
    // went out on the socket the listener was closing and failed with "socket hang up" (the auth matrix saw it in CI).
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const url = `${runtime.observabilityUrl}/loki/api/v1/tail?${new URLSearchParams({ query: '{service_name=' }).toString()}`;
    const refused = (): Promise<{ status: number; connection: string | undefined }> =>
      new Promise((resolve, reject) => {
        const req = http.request(url, {
          agent,
          headers: {
            connection: 'Upgrade',
            upgrade: 'websocket',
            'sec-websocket-version': '13',
            'sec-websocket-key': Buffer.from('keep-alive-tail!').toString('base64'),
          },
        });
        req.on('upgrade', () => reject(new Error('the tail was opened')));
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      for (let i = 0; i < 20; i++) {
        expect(await refused()).toEqual({ status: 400, connection: 'close' });
        // Also a plain request after it, on the same agent.
        const ready = await new Promise<number>((resolve, reject) => {
          http
            .get(`${runtime.observabilityUrl}/ready`, { agent }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            })
            .on('error', reject);
        });
        expect(ready).toBe(200);
      }
    } finally {
      agent.destroy();
    }
  });
});
