import type { Http2Session } from 'node:http2';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { formatBindAddress, type BindAddress } from '../config/bind-address.ts';
import { BindError } from '../errors/config-errors.ts';
import type { HttpLimitsConfig } from '../config/config.ts';
import { applyHttpLimits, type CountRefusal } from './limits.ts';
import type { ListenerTls } from './tls.ts';

/**
 * What the HTTP listeners (ingress, admin, probes) share: binding (a clear error naming the listener when the address
 * is taken) and a graceful close that drains requests in flight.
 */

/** After the shutdown delay, how long in-flight requests may take before their connections are closed. */
const REQUEST_DRAIN_MS = 20_000;

/** Binds `app`; on stop (`cleanups`), it stops accepting and drains (see closeDraining). Returns the bound address. */
export async function listen(
  app: FastifyInstance,
  bind: BindAddress,
  listener: string,
  cleanups: (() => Promise<void>)[],
  logger: Logger,
  limits?: { config: HttpLimitsConfig; count: CountRefusal },
): Promise<BindAddress> {
  if (limits !== undefined) applyHttpLimits(app, listener, limits.config, limits.count);
  // An HTTP/2 server (the ingress over TLS) has no idle-connection reaping: its sessions are closed one by one.
  const sessions = new Set<Http2Session>();
  app.server.on('session', (session: Http2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  try {
    await app.listen({ host: bind.host, port: bind.port });
  } catch (err) {
    await app.close().catch(() => undefined);
    throw new BindError(formatBindAddress(bind), { listener, cause: err });
  }
  cleanups.push(() => closeDraining(app, listener, logger, sessions));
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : bind.port;
  return { host: bind.host, port };
}

/**
 * What fastify takes to serve HTTPS with `tls` (HTTP/1.1), or on the ingress HTTP/2 and HTTP/1.1 chosen by ALPN
 * (`http2`); nothing for plain HTTP. The server's certificate is kept current by `tls.attach(app.server)`.
 */
export function tlsServerOptions(
  tls: ListenerTls | undefined,
  options: { http2?: boolean } = {},
): Record<string, unknown> {
  if (tls === undefined) return {};
  if (options.http2 === true) {
    // Fastify's own HTTP/2 server (session timeouts); connections are drained by closeDraining, not by fastify.
    return { http2: true, https: { allowHTTP1: true, ...tls.options }, forceCloseConnections: false };
  }
  return { https: { ...tls.options } };
}

/**
 * Stops accepting, lets requests in flight finish (those waiting for results of partitions handed over read them from
 * PostgreSQL), and closes the connections still open after REQUEST_DRAIN_MS.
 */
async function closeDraining(
  app: FastifyInstance,
  listener: string,
  logger: Logger,
  sessions: ReadonlySet<Http2Session>,
): Promise<void> {
  const started = Date.now();
  const server = app.server as Partial<Pick<typeof app.server, 'closeAllConnections' | 'closeIdleConnections'>>;
  const force = setTimeout(() => {
    logger.warn(
      { listener, ms: Date.now() - started },
      'requests still in flight after the drain time; closing their connections',
    );
    server.closeAllConnections?.();
    for (const session of sessions) session.destroy();
  }, REQUEST_DRAIN_MS);
  force.unref();
  // A keep-alive connection whose request finishes after close() stays open while idle (until the client or the
  // keep-alive timeout ends it), and close() waits for it: idle connections are closed as they become idle. An
  // HTTP/2 session is told to go away (GOAWAY): its streams in flight finish, then it closes.
  const idle = setInterval(() => server.closeIdleConnections?.(), 100);
  idle.unref();
  try {
    server.closeIdleConnections?.();
    for (const session of sessions) session.close();
    await app.close();
  } finally {
    clearTimeout(force);
    clearInterval(idle);
  }
}
