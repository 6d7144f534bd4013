import http from 'node:http';
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import * as restate from '@restatedev/restate-sdk';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { buildAdminApp } from '../../../runtime/src/admin/app.ts';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { createSchema } from '../../../runtime/src/runtime.ts';
import { type SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createPool, type Pool } from '../../../runtime/src/storage/pg/pool.ts';
import '../../support/polyfill.ts';
import { LOOPBACK, loopbackUrl } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * The admin API as the runtime wires it (registry + registration + app) against a fresh database, without the rest
 * of the runtime; plus the small HTTP servers the registration tests need (SDK handlers behind a header check, fake
 * manifests, a restart on the same port).
 */

export const RATCHET_TEST_VERSION = '0.0.0-test';

export interface AdminHarness {
  readonly app: FastifyInstance;
  readonly registry: SchemaRegistry;
  readonly pool: Pool;
  readonly db: TestDatabase;
  /** Set once `listen()` ran: `http://127.0.0.1:<port>`. */
  url(): string;
  listen(): Promise<string>;
  close(): Promise<void>;
}

export interface AdminHarnessOptions {
  clusterName?: string;
  /** More `RATCHET_*` settings, e.g. `RATCHET_MAX_JOURNAL_RETENTION` or `RATCHET_KAFKA_CLUSTERS`. */
  env?: Record<string, string>;
  /** The admin app's logger (default: silent unless RATCHET_TEST_LOG_LEVEL). */
  logger?: Logger;
}

export async function startAdminHarness(options: AdminHarnessOptions = {}): Promise<AdminHarness> {
  const db = await createTestDatabase();
  const pool = createPool({ url: db.url, max: 4, applicationName: 'ratchet admin test' });
  const client = await pool.connect();
  try {
    await migrate(client);
  } finally {
    client.release();
  }
  const config = loadConfig({ env: { RATCHET_CLUSTER_NAME: options.clusterName ?? 'admin-test', ...options.env } });
  const logger = options.logger ?? pino({ level: process.env['RATCHET_TEST_LOG_LEVEL'] ?? 'silent' });
  // The node's own wiring of the schema side (createSchema), with a shorter discovery timeout for the tests.
  const { registry, register, operations, lambda } = await createSchema(pool, config, logger, {
    discoveryTimeoutMs: 5_000,
  });
  const app = buildAdminApp({
    registry,
    register,
    operations,
    version: RATCHET_TEST_VERSION,
    ingressEndpoint: 'http://127.0.0.1:8080/',
    clusterName: config.clusterName,
    logger,
  });
  await app.ready();
  let listening: string | undefined;
  return {
    app,
    registry,
    pool,
    db,
    url() {
      if (listening === undefined) throw new Error('the admin harness is not listening');
      return listening;
    },
    async listen() {
      await app.listen({ host: LOOPBACK, port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('unexpected admin address');
      listening = loopbackUrl(address.port);
      return listening;
    },
    async close() {
      await app.close();
      lambda.close();
      await pool.end();
      await db.drop();
    },
  };
}

export type Transport = 'h2' | 'h1';
type Handler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface TestServer {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** An HTTP/2 cleartext (prior knowledge) or HTTP/1.1 server on 127.0.0.1; `port` 0 lets the kernel pick. */
export async function serve(transport: Transport, handler: Handler, port = 0): Promise<TestServer> {
  const server =
    transport === 'h2'
      ? http2.createServer(handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void)
      : http.createServer(handler as (req: http.IncomingMessage, res: http.ServerResponse) => void);
  const sockets = new Set<Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('session', (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  const bound = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') reject(new Error('unexpected address'));
      else resolve(address.port);
    });
  });
  let closing: Promise<void> | undefined;
  return {
    url: `${loopbackUrl(bound)}/`,
    port: bound,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) s.destroy();
        for (const s of sockets) s.destroy();
      });
      return closing;
    },
  };
}

/** SDK services through `createEndpointHandler` (per-request mode: HTTP/2 → BIDI_STREAM, HTTP/1.1 → REQUEST_RESPONSE). */
export function sdkHandler(
  services: restate.NodeEndpointOptions['services'],
  options: Omit<restate.NodeEndpointOptions, 'services'> = {},
): Handler {
  return restate.createEndpointHandler({ ...options, services }) as Handler;
}

/** Answers 401 unless the request carries `authorization: <expected>`; otherwise passes it to `inner`. */
export function requireAuthorization(expected: string, inner: Handler): Handler {
  return (req, res) => {
    if (req.headers['authorization'] !== expected) {
      res.writeHead(401, { 'content-type': 'text/plain' });
      res.end('missing or wrong bearer token');
      return;
    }
    inner(req, res);
  };
}

/** Serves a fixed discovery answer (any path), as a deployment with a broken or unusual SDK would. */
export function fixedDiscovery(answer: { status?: number; contentType?: string; body: string }): Handler {
  return (_req, res) => {
    res.writeHead(answer.status ?? 200, {
      'content-type': answer.contentType ?? 'application/vnd.restate.endpointmanifest.v4+json',
      'x-restate-server': 'fake-sdk/0.0.1',
    });
    res.end(answer.body);
  };
}
