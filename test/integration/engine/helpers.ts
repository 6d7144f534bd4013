import http from 'node:http';
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { LOOPBACK, loopbackUrl } from '../../support/ports.ts';
import '../../support/polyfill.ts';

/** Helpers shared by the engine failure tests: row and journal reads, a fault-injecting proxy, a restartable endpoint. */

export interface InvocationRowView {
  status: string;
  retry_count: number;
  last_failure: string | null;
  last_failure_code: string | null;
  next_retry_at: Date | null;
  modified_at: Date;
  result_kind: string | null;
  failure_code: number | null;
  failure_message: string | null;
  output: Buffer | null;
}

/** One client per test file; reads only. */
export class Db {
  private readonly client: pg.Client;

  private constructor(url: string) {
    this.client = new pg.Client({ connectionString: url });
  }

  static async connect(url: string): Promise<Db> {
    const db = new Db(url);
    await db.client.connect();
    return db;
  }

  async row(id: string): Promise<InvocationRowView | undefined> {
    const res = await this.client.query<InvocationRowView>(
      `SELECT status, retry_count, last_failure, last_failure_code, next_retry_at, modified_at, result_kind, failure_code,
              failure_message, output
         FROM ratchet.invocation WHERE id = $1`,
      [id],
    );
    return res.rows[0];
  }

  /** The invocation ids of a target, oldest first (for invocations started by other invocations). */
  async idsOf(service: string, handler: string): Promise<string[]> {
    const res = await this.client.query<{ id: string }>(
      'SELECT id FROM ratchet.invocation WHERE service_name = $1 AND handler_name = $2 ORDER BY created_at',
      [service, handler],
    );
    return res.rows.map((r) => r.id);
  }

  async journalTypes(id: string): Promise<number[]> {
    const res = await this.client.query<{ entry_type: number }>(
      'SELECT entry_type FROM ratchet.journal WHERE invocation_id = $1 ORDER BY index',
      [id],
    );
    return res.rows.map((r) => r.entry_type);
  }

  async journal(
    id: string,
  ): Promise<{ entry_type: number; signal_idx: number | null; completion_id: number | null }[]> {
    const res = await this.client.query<{
      entry_type: number;
      signal_idx: number | null;
      completion_id: number | null;
    }>('SELECT entry_type, signal_idx, completion_id FROM ratchet.journal WHERE invocation_id = $1 ORDER BY index', [
      id,
    ]);
    return res.rows;
  }

  async state(service: string, key: string): Promise<Record<string, unknown>> {
    const res = await this.client.query<{ key: Buffer; value: Buffer }>(
      'SELECT key, value FROM ratchet.state WHERE service_name = $1 AND service_key = $2 ORDER BY key',
      [service, key],
    );
    return Object.fromEntries(res.rows.map((r) => [r.key.toString('utf8'), JSON.parse(r.value.toString('utf8'))]));
  }

  /** Notifications written for other invocations and not delivered yet. */
  async outboxSize(): Promise<number> {
    const res = await this.client.query<{ n: string }>('SELECT count(*) AS n FROM ratchet.outbox');
    return Number(res.rows[0]?.n ?? 0);
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

/** Journal entry types, as stored (see the service protocol message catalogue). */
export const T = {
  Input: 0x0400,
  Output: 0x0401,
  GetLazyState: 0x0402,
  SetState: 0x0403,
  ClearState: 0x0404,
  ClearAllState: 0x0405,
  GetEagerState: 0x0407,
  GetEagerStateKeys: 0x0408,
  Sleep: 0x040c,
  Call: 0x040d,
  OneWayCall: 0x040e,
  Run: 0x0411,
  CompleteAwakeable: 0x0414,
  SleepCompletion: 0x800c,
  CallCompletion: 0x800d,
  CallInvocationId: 0x800e,
  RunCompletion: 0x8011,
  Signal: 0xfbff,
  // Control messages: never journal entries.
  Suspension: 0x0001,
  Error: 0x0002,
  End: 0x0003,
  ProposeRunCompletion: 0x0005,
  AwaitingOn: 0x0006,
} as const;

/** `/send` the invocation and return its id. */
export async function send(ingressUrl: string, path: string, body: unknown): Promise<string> {
  const res = await fetch(`${ingressUrl}${path}/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { invocationId?: string };
  if (res.status !== 202 || json.invocationId === undefined) {
    throw new Error(`send ${path} answered ${res.status}: ${JSON.stringify(json)}`);
  }
  return json.invocationId;
}

// ---------------------------------------------------------------------------------------------------------------
// fault-injecting HTTP/1.1 proxy

export interface ProxiedRequest {
  /** 1-based count of `/invoke/` requests seen so far, this one included. */
  n: number;
  path: string;
  at: number;
}

/**
 * What to do with an invocation request: forward it; forward it but swallow the End frame of the response and leave
 * the response open (an attempt that stored its Output and then lost its connection); or answer with this status,
 * headers and body instead.
 */
export type ProxyVerdict =
  'forward' | 'forward-without-end' | { status: number; headers?: Record<string, string>; body?: string };

export interface FaultProxy {
  readonly url: string;
  /** Every `/invoke/` request, in arrival order. */
  readonly invocations: ProxiedRequest[];
  close(): Promise<void>;
}

/**
 * An HTTP/1.1 proxy in front of a request/response endpoint. Discovery is always forwarded; each invocation request
 * goes through `decide`, which may await (the test reads the database there while the runtime waits for an answer).
 */
export async function startFaultProxy(
  target: string,
  decide: (req: ProxiedRequest) => ProxyVerdict | Promise<ProxyVerdict>,
): Promise<FaultProxy> {
  const upstream = new URL(target);
  const invocations: ProxiedRequest[] = [];
  const sockets = new Set<Socket>();
  const agent = new http.Agent({ keepAlive: false });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        const path = req.url ?? '/';
        let verdict: ProxyVerdict = 'forward';
        if (path.includes('/invoke/')) {
          const seen: ProxiedRequest = { n: invocations.length + 1, path, at: Date.now() };
          invocations.push(seen);
          verdict = await decide(seen);
        }
        if (typeof verdict === 'object') {
          res.writeHead(verdict.status, { 'content-type': 'text/plain', ...verdict.headers });
          res.end(verdict.body ?? '');
          return;
        }
        const swallowEnd = verdict === 'forward-without-end';
        const headers = { ...req.headers, host: upstream.host, 'content-length': String(body.length) };
        const out = http.request(
          { host: upstream.hostname, port: upstream.port, method: req.method, path, headers, agent },
          (up) => {
            if (!swallowEnd) {
              res.writeHead(up.statusCode ?? 502, up.headers);
              up.pipe(res);
              return;
            }
            const { 'content-length': _length, ...rest } = up.headers;
            res.writeHead(up.statusCode ?? 502, rest);
            let pending = Buffer.alloc(0);
            up.on('data', (chunk: Buffer) => {
              pending = Buffer.concat([pending, chunk]);
              while (pending.length >= 8 && pending.length >= 8 + pending.readUInt32BE(4)) {
                const size = 8 + pending.readUInt32BE(4);
                if (pending.readUInt16BE(0) !== T.End) res.write(pending.subarray(0, size));
                pending = pending.subarray(size);
              }
            });
          },
        );
        out.on('error', () => res.destroy());
        out.end(body);
      })().catch(() => res.destroy());
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  const port = await listen(server, 0);
  return {
    url: `${loopbackUrl(port)}/`,
    invocations,
    close: async () => {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      agent.destroy();
      await closed;
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// an SDK endpoint that can be stopped and started again on the same port

export interface RestartableEndpoint {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startRestartableEndpoint(
  services: restate.NodeEndpointOptions['services'],
  transport: 'h1' | 'h2',
): Promise<RestartableEndpoint> {
  const handler = restate.createEndpointHandler({ services });
  let server: http.Server | http2.Http2Server | undefined;
  let destroy: () => void = () => undefined;
  const open = async (port: number): Promise<number> => {
    if (transport === 'h2') {
      const s = http2.createServer(handler);
      const sessions = new Set<http2.ServerHttp2Session>();
      s.on('session', (session: http2.ServerHttp2Session) => {
        sessions.add(session);
        session.once('close', () => sessions.delete(session));
      });
      destroy = () => sessions.forEach((x) => x.destroy());
      server = s;
    } else {
      const s = http.createServer(handler);
      const sockets = new Set<Socket>();
      s.on('connection', (socket: Socket) => {
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
      });
      destroy = () => sockets.forEach((x) => x.destroy());
      server = s;
    }
    return listen(server, port);
  };
  const port = await open(0);
  return {
    url: `${loopbackUrl(port)}/`,
    port,
    stop: async () => {
      const s = server;
      server = undefined;
      if (s === undefined) return;
      const closed = new Promise<void>((r) => s.close(() => r()));
      destroy();
      await closed;
    },
    start: async () => {
      if (server === undefined) await open(port);
    },
  };
}

function listen(server: http.Server | http2.Http2Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port }, () => {
      server.off('error', reject);
      const address = server.address();
      if (address === null || typeof address === 'string') reject(new Error(`unexpected address ${String(address)}`));
      else resolve(address.port);
    });
  });
}

/** A promise the test resolves by hand: lets a handler block until the test has seen what it wants to see. */
export interface Gate {
  readonly promise: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}
