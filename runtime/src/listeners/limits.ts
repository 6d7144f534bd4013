import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { HttpLimitsConfig } from '../config/config.ts';
import { formatDuration, formatSize } from '../config/units.ts';

/**
 * What every HTTP listener refuses, and how: a request head over `maxHeaderBytes` (431), a client too slow to send
 * its head or its whole request (408), more connections than `maxConnections` (closed at once), a body over the
 * listener's body limit (413, answered by the listener itself). Each refusal says which setting it hit, and is
 * counted in `ratchet_http_refused_total{listener, reason}`.
 */

export type RefusalReason = 'header_too_large' | 'timeout' | 'bad_request' | 'too_many_connections' | 'body_too_large';

export type CountRefusal = (listener: string, reason: RefusalReason) => void;

function answer(socket: Socket, status: number, reason: string, message: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ code: status, message });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `connection: close\r\n\r\n${body}`,
  );
}

/** Applies `limits` to the app's server (before it listens); `listener` names it in messages and metrics. */
export function applyHttpLimits(
  app: FastifyInstance,
  listener: string,
  limits: HttpLimitsConfig,
  count: CountRefusal,
): void {
  const server = app.server as FastifyInstance['server'] & {
    maxHeaderSize?: number;
    connectionsCheckingInterval?: number;
  };
  // Read by the HTTP/1.1 parser of each new connection.
  server.maxHeaderSize = limits.maxHeaderBytes;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  // How often slow connections are looked for (Node's default, 30 s, would let a 1 s timeout last 30 s).
  server.connectionsCheckingInterval = Math.max(50, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)));
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => count(listener, 'too_many_connections'));
  // Replaces fastify's generic answers with ones that name the limit.
  server.removeAllListeners('clientError');
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      count(listener, 'header_too_large');
      answer(
        socket,
        431,
        'Request Header Fields Too Large',
        `the request line and headers are larger than ${formatSize(limits.maxHeaderBytes)} ` +
          '(RATCHET_HTTP_MAX_HEADER_SIZE): send fewer or shorter headers',
      );
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      count(listener, 'timeout');
      answer(
        socket,
        408,
        'Request Timeout',
        `the request was not received in time: its headers within ${formatDuration(limits.headersTimeoutMs)} ` +
          `(RATCHET_HTTP_HEADERS_TIMEOUT), all of it within ${formatDuration(limits.requestTimeoutMs)} ` +
          '(RATCHET_HTTP_REQUEST_TIMEOUT)',
      );
    } else {
      count(listener, 'bad_request');
      answer(socket, 400, 'Bad Request', `malformed HTTP request: ${err.message}`);
    }
  });
  app.addHook('onError', async (_req, _reply, err: Error & { code?: string }) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') count(listener, 'body_too_large');
  });
}
