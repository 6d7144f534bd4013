import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { formatBindAddress, type BindAddress } from '../config/bind-address.ts';
import { BindError } from '../errors/config-errors.ts';

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
): Promise<BindAddress> {
  try {
    await app.listen({ host: bind.host, port: bind.port });
  } catch (err) {
    await app.close().catch(() => undefined);
    throw new BindError(formatBindAddress(bind), { listener, cause: err });
  }
  cleanups.push(() => closeDraining(app, listener, logger));
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : bind.port;
  return { host: bind.host, port };
}

/**
 * Stops accepting, lets requests in flight finish (those waiting for results of partitions handed over read them from
 * PostgreSQL), and closes the connections still open after REQUEST_DRAIN_MS.
 */
async function closeDraining(app: FastifyInstance, listener: string, logger: Logger): Promise<void> {
  const started = Date.now();
  const force = setTimeout(() => {
    logger.warn(
      { listener, ms: Date.now() - started },
      'requests still in flight after the drain time; closing their connections',
    );
    app.server.closeAllConnections();
  }, REQUEST_DRAIN_MS);
  force.unref();
  // A keep-alive connection whose request finishes after close() stays open while idle (until the client or the
  // keep-alive timeout ends it), and close() waits for it: idle connections are closed as they become idle.
  const idle = setInterval(() => app.server.closeIdleConnections(), 100);
  idle.unref();
  try {
    app.server.closeIdleConnections();
    await app.close();
  } finally {
    clearTimeout(force);
    clearInterval(idle);
  }
}
