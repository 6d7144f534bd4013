import http from 'node:http';
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import * as restate from '@restatedev/restate-sdk';
import { LOOPBACK, loopbackUrl } from './ports.ts';
import './polyfill.ts';

/**
 * Real SDK service endpoints served from the test process on a free loopback port.
 * - `h2`: HTTP/2 cleartext with prior knowledge; the SDK answers discovery with `BIDI_STREAM`.
 * - `h1`: HTTP/1.1; the SDK answers with `REQUEST_RESPONSE` (a runtime registers it with `use_http_11`).
 */

export type EndpointTransport = 'h2' | 'h1';

export interface StartEndpointOptions {
  readonly services: restate.NodeEndpointOptions['services'];
  readonly transport: EndpointTransport;
  /** Anything else `createEndpointHandler` takes (logger, identity keys, default service options, …). */
  readonly endpointOptions?: Omit<restate.NodeEndpointOptions, 'services'>;
}

export interface SdkEndpoint {
  /** `http://127.0.0.1:<port>/`, the URI to register as a deployment. */
  readonly url: string;
  readonly port: number;
  readonly transport: EndpointTransport;
  /** The names of the services it serves, in the order given. */
  readonly services: readonly string[];
  /** Stops listening and destroys open sessions and sockets, so in-flight invocations end at once. */
  close(): Promise<void>;
}

function listen(server: http.Server | http2.Http2Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    // Port 0: the kernel picks a free port and we read it back, so there is no race with other processes.
    server.listen({ host: LOOPBACK, port: 0 }, () => {
      server.off('error', reject);
      const address = server.address();
      if (address === null || typeof address === 'string') reject(new Error(`unexpected address ${String(address)}`));
      else resolve(address.port);
    });
  });
}

function closeServer(server: http.Server | http2.Http2Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => {
      // Already closed is fine: close() is meant to be idempotent.
      if (err && (err as NodeJS.ErrnoException).code !== 'ERR_SERVER_NOT_RUNNING') reject(err);
      else resolve();
    });
  });
}

export async function startEndpoint(options: StartEndpointOptions): Promise<SdkEndpoint> {
  const handler = restate.createEndpointHandler({ ...options.endpointOptions, services: options.services });

  let server: http.Server | http2.Http2Server;
  let destroyConnections: () => void;
  if (options.transport === 'h2') {
    const h2 = http2.createServer(handler);
    const sessions = new Set<http2.ServerHttp2Session>();
    h2.on('session', (session: http2.ServerHttp2Session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    });
    destroyConnections = () => {
      for (const session of sessions) session.destroy();
    };
    server = h2;
  } else {
    const h1 = http.createServer(handler);
    const sockets = new Set<Socket>();
    h1.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    destroyConnections = () => {
      for (const socket of sockets) socket.destroy();
    };
    server = h1;
  }

  const port = await listen(server);
  let closing: Promise<void> | undefined;
  return {
    url: `${loopbackUrl(port)}/`,
    port,
    transport: options.transport,
    services: options.services.map((s) => s.name),
    close() {
      closing ??= (async () => {
        const closed = closeServer(server);
        destroyConnections();
        await closed;
      })();
      return closing;
    },
  };
}
