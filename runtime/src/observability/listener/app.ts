import websocket from '@fastify/websocket';
import type { Server as TlsServer } from 'node:tls';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { tlsServerOptions } from '../../listeners/serve.ts';
import type { ListenerTls } from '../../listeners/tls.ts';
import type { Logger } from 'pino';
import { AuthError } from '../../auth/errors.ts';
import { authorize, type Authenticator } from '../../auth/verifier.ts';
import { ObservabilityQueryError, type ApiParams, type ApiResponse } from '../errors.ts';

/** One route of the API: its handler gets the query (and, for POST, form) parameters and the path's parameters. */
export interface ApiRoute {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  handle(request: ApiRequest): Promise<ApiResponse>;
}

/**
 * A route that answers over a WebSocket (Loki's tail): `open` checks the request before the upgrade (throwing a 4xx
 * error refuses it) and returns what starts the stream once the socket is open.
 */
export interface StreamRoute {
  readonly url: string;
  open(request: ApiRequest): StreamStarter;
}

export type StreamStarter = (send: (text: string) => void, fail: (err: unknown) => void) => { stop(): void };

/** WebSocket streams open at once on a node, at most (each polls the store); more are refused with 429. */
const MAX_STREAMS = 64;

export interface ApiRequest {
  readonly params: ApiParams;
  readonly path: Readonly<Record<string, string>>;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface ObservabilityAppDeps {
  /** HTTPS with this certificate; plain HTTP when absent. */
  readonly tls?: ListenerTls | undefined;
  readonly routes: readonly ApiRoute[];
  readonly streams?: readonly StreamRoute[];
  readonly logger: Logger;
  /** Managed mode: a bearer token with the role full, admin or observability on every route. */
  readonly auth?: Authenticator | undefined;
  /** Whether this node answers: `/ready` (Loki's and Tempo's readiness probe). */
  readonly isReady?: () => boolean;
}

/** Query and form parameters, a repeated one as an array (Loki's `match[]`). */
function paramsOf(req: FastifyRequest): ApiParams {
  const out: Record<string, string | string[]> = {};
  const add = (source: unknown): void => {
    if (source === null || typeof source !== 'object') return;
    for (const [k, v] of Object.entries(source as Record<string, unknown>)) {
      const values = (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
      if (values.length === 0) continue;
      const prev = out[k];
      const all = prev === undefined ? values : [...(Array.isArray(prev) ? prev : [prev]), ...values];
      out[k] = all.length === 1 ? all[0]! : all;
    }
  };
  add(req.query);
  add(req.body);
  return out;
}

function requestOf(req: FastifyRequest): ApiRequest {
  return { params: paramsOf(req), path: (req.params ?? {}) as Record<string, string>, headers: req.headers };
}

function send(reply: FastifyReply, res: ApiResponse): FastifyReply {
  reply.code(res.status);
  if (res.contentType !== undefined) reply.type(res.contentType);
  if (typeof res.body === 'string' || Buffer.isBuffer(res.body) || res.body instanceof Uint8Array) {
    if (res.contentType === undefined) reply.type('text/plain; charset=utf-8');
    return reply.send(res.body instanceof Uint8Array && !Buffer.isBuffer(res.body) ? Buffer.from(res.body) : res.body);
  }
  return reply.type(res.contentType ?? 'application/json').send(JSON.stringify(res.body));
}

/**
 * Port 3100: the Loki- and Tempo-compatible API over the cluster's logs and traces. The two path spaces do not
 * collide (Loki under `/loki/api/v1`, Tempo under `/api`); `/ready` serves both. `X-Scope-OrgID` (Loki's tenant,
 * logcli `--org-id`) is accepted and ignored: one tenant per cluster.
 */
export function buildObservabilityApp(deps: ObservabilityAppDeps): FastifyInstance {
  const app = Fastify({
    logger: false,
    ...tlsServerOptions(deps.tls),
  } as FastifyServerOptions) as unknown as FastifyInstance;
  deps.tls?.attach(app.server as unknown as TlsServer);
  const log = deps.logger.child({ component: 'observability' });
  const auth = deps.auth;
  if (auth !== undefined) {
    app.addHook('onRequest', async (req) => {
      authorize(await auth.authenticate(req.headers.authorization), 'observability');
    });
  }
  // Queries are matched in PostgreSQL, whose text cannot hold U+0000: nothing stored can match one.
  app.addHook('onRequest', (req, _reply, done) => {
    if (req.url.includes('%00')) {
      done(new ObservabilityQueryError('the request contains U+0000 (%00), which nothing stored holds'));
      return;
    }
    done();
  });
  // A refused WebSocket upgrade (a tail with a bad query or no token) is answered on a socket the HTTP server no longer
  // tracks: it must end with the answer, or an idle client would hold the listener open at shutdown. The answer says
  // so (`Connection: close`): a keep-alive client would otherwise send its next request on the closing socket and see
  // it hang up (Node's default agent did, one request in two).
  app.addHook('onSend', (req, reply, payload, done) => {
    if (req.headers.upgrade !== undefined && reply.statusCode !== 101) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onResponse', (req, reply, done) => {
    if (req.headers.upgrade !== undefined && reply.statusCode !== 101) req.raw.socket.end();
    done();
  });
  // logcli and Grafana send POST /loki/api/v1/series form-encoded.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    const form: Record<string, string[]> = {};
    for (const [k, v] of new URLSearchParams(body as string)) (form[k] ??= []).push(v);
    done(null, form);
  });

  app.setErrorHandler((err: Error, req, reply) => {
    if (err instanceof AuthError) {
      reply.header('www-authenticate', err.challenge);
      return reply.code(err.status).type('text/plain; charset=utf-8').send(err.message);
    }
    if (err instanceof ObservabilityQueryError) {
      return reply.code(err.status).type('text/plain; charset=utf-8').send(err.message);
    }
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(status).type('text/plain; charset=utf-8').send(err.message);
    }
    // A query PostgreSQL cancelled (statement timeout) or could not run: the query was too heavy, or the database is away.
    log.warn({ err, url: req.url }, 'observability query failed');
    const timeout = (err as { code?: string }).code === '57014';
    return reply
      .code(timeout ? 422 : 503)
      .type('text/plain; charset=utf-8')
      .send(
        timeout
          ? 'the query took too long and was cancelled: narrow its time range or its selector'
          : `the log and trace store is unavailable: ${err.message}`,
      );
  });

  app.get('/ready', async (_req, reply) =>
    (deps.isReady?.() ?? true)
      ? reply.type('text/plain; charset=utf-8').send('ready')
      : reply.code(503).type('text/plain; charset=utf-8').send('not ready'),
  );

  const streams = deps.streams ?? [];
  if (streams.length > 0) {
    void app.register(async (scope) => {
      await scope.register(websocket);
      const starters = new WeakMap<FastifyRequest, StreamStarter>();
      let open = 0;
      for (const route of streams) {
        scope.get(
          route.url,
          {
            websocket: true,
            preValidation: (req, _reply, done) => {
              if (open >= MAX_STREAMS) {
                done(new ObservabilityQueryError(`too many open tails on this node (at most ${MAX_STREAMS})`, 429));
                return;
              }
              try {
                starters.set(req, route.open(requestOf(req)));
                done();
              } catch (err) {
                done(err as Error);
              }
            },
          },
          (socket, req) => {
            const start = starters.get(req);
            if (start === undefined) return socket.close(1011, 'not opened');
            open++;
            const session = start(
              (text) => socket.send(text),
              (err) => {
                log.warn({ err, url: req.url }, 'tail stopped: the log store failed');
                socket.close(1011, 'the log store is unavailable');
              },
            );
            socket.on('close', () => {
              open--;
              session.stop();
            });
          },
        );
      }
    });
  }

  for (const route of deps.routes) {
    app.route({
      method: route.method,
      url: route.url,
      handler: async (req, reply) => send(reply, await route.handle(requestOf(req))),
    });
  }
  return app;
}
