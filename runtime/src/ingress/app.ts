import type { Server as TlsServer } from 'node:tls';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { formatSize } from '../config/units.ts';
import { tlsServerOptions } from '../listeners/serve.ts';
import { IngressLimitError } from './limit-hook.ts';
import { AuthError } from '../auth/errors.ts';
import { attachOrOutput, lookup } from './attach.ts';
import { ingressAuthHook } from './auth.ts';
import { completeAwakeable } from './awakeables.ts';
import type { IngressDeps } from './deps.ts';
import { PartitionNotServedError } from '../engine/management-errors.ts';
import { isDatabaseUnavailable } from '../storage/pg/unavailable.ts';
import { IngressError, IngressErrors } from './errors.ts';
import { invoke } from './invoke.ts';
import { normalizePath, parseIngressPath } from './path.ts';
import { jsonBody, sendError } from './reply.ts';
import { parseTargetBody } from './target-body.ts';

const VARY = 'origin, access-control-request-method, access-control-request-headers';

export function buildIngressApp(deps: IngressDeps): FastifyInstance {
  const log = deps.logger.child({ component: 'ingress' });
  const app = Fastify({
    // Per-request logging would cost more than the invocation path itself; errors are logged by the handler below.
    logger: false,
    // Calls wait for their invocation, possibly for long: on shutdown idle connections close at once, and calls in
    // flight get a bounded time to finish (runtime.ts), after which they are cut (clients retry with the idempotency
    // key or re-attach) rather than holding the process open.
    forceCloseConnections: 'idle',
    bodyLimit: deps.requestSizeLimit,
    // Restate paths carry URL-encoded keys and are parsed by us from the original URL. Routing every request as `/`
    // keeps fastify's router from decoding them first: it would refuse a key like `%FF` that restate answers itself.
    rewriteUrl: () => '/',
    ...tlsServerOptions(deps.tls, { http2: true }),
  } as FastifyServerOptions) as unknown as FastifyInstance;
  deps.tls?.attach(app.server as unknown as TlsServer);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // Before the body is read: a refused request costs no parsing.
  if (deps.auth !== undefined) app.addHook('onRequest', ingressAuthHook(deps.auth, deps.registry));
  // After authentication: the cluster's request budget (managed mode, or RATCHET_INGRESS_RATE_LIMIT).
  if (deps.limit !== undefined) app.addHook('onRequest', deps.limit);

  app.addHook('onSend', async (_req, reply) => {
    reply.header('vary', VARY);
    reply.header('access-control-allow-credentials', 'true');
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    if (err instanceof PartitionNotServedError && deps.router !== undefined) {
      // Refused before anything was written: the partition's owner serves it (or the next one, once there is one).
      return deps.router
        .serve('ingress', req, reply, err.partition)
        .catch((e: Error) => sendError(reply, 503, e.message, 'ingress'));
    }
    if (err instanceof IngressLimitError) reply.header('retry-after', String(err.retryAfterSeconds));
    if (err instanceof IngressError) return sendError(reply, err.status, err.message, 'ingress');
    if (err instanceof AuthError) {
      reply.header('www-authenticate', err.challenge);
      return sendError(reply, err.status, err.message, 'ingress');
    }
    if (err.statusCode === 413) {
      return sendError(
        reply,
        413,
        `request body is too large: the ingress reads at most ${formatSize(deps.requestSizeLimit)} ` +
          '(RATCHET_INGRESS_MAX_BODY_SIZE)',
        'ingress',
      );
    }
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      return sendError(reply, err.statusCode, err.message, 'ingress');
    }
    if (isDatabaseUnavailable(err)) {
      log.warn({ err }, 'ingress request failed: PostgreSQL is unavailable');
      return sendError(
        reply,
        503,
        `PostgreSQL is unavailable (${err.message}); retry the request (with an idempotency key, a retry never runs it twice)`,
        'ingress',
      );
    }
    log.error({ err }, 'ingress request failed');
    return sendError(reply, 503, `the request could not be processed, retrying it is safe: ${err.message}`, 'ingress');
  });

  app.setNotFoundHandler((req, reply) => route(deps, req, reply));
  return app;
}

/** Only routes: each request kind is served by its own module. */
async function route(deps: IngressDeps, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const url = req.originalUrl;
  const q = url.indexOf('?');
  const path = normalizePath(q < 0 ? url : url.slice(0, q));
  // Keys, ids and names end up in PostgreSQL text, which cannot hold U+0000: no path with one names anything.
  if (/%00/.test(path)) throw IngressErrors.nulInPath();

  if (req.method === 'OPTIONS') return preflight(req, reply);

  const r = parseIngressPath(path, deps.registry);
  switch (r.kind) {
    case 'health':
      if (req.method !== 'GET') throw IngressErrors.methodNotAllowed();
      return reply
        .code(200)
        .header('content-type', 'application/json')
        .send(jsonBody({ services: deps.registry.services().map((s) => s.schema.name) }));
    case 'openapi':
      throw IngressErrors.notFound();
    case 'invoke':
      return invoke(
        deps,
        req,
        reply,
        r,
        q < 0 ? path : path + url.slice(q),
        new URLSearchParams(q < 0 ? '' : url.slice(q + 1)),
      );
    case 'attach':
    case 'output':
      if (req.method !== 'GET') throw IngressErrors.methodNotAllowed();
      return attachOrOutput(deps, reply, r.kind, r.query);
    case 'attachByTarget':
    case 'outputByTarget':
    case 'lookup': {
      if (req.method !== 'POST') throw IngressErrors.methodNotAllowed();
      const query = parseTargetBody(bodyOf(req), r.kind === 'lookup' ? 'lookup' : 'request');
      if (r.kind === 'lookup') return lookup(reply, query);
      return attachOrOutput(deps, reply, r.kind === 'attachByTarget' ? 'attach' : 'output', query);
    }
    case 'awakeable':
      return completeAwakeable(deps, req, reply, r.op, r.awakeableId);
  }
}

function preflight(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const origin = req.headers.origin;
  if (origin !== undefined) reply.header('access-control-allow-origin', origin);
  const method = req.headers['access-control-request-method'];
  if (typeof method === 'string') reply.header('access-control-allow-methods', method);
  const headers = req.headers['access-control-request-headers'];
  if (typeof headers === 'string') reply.header('access-control-allow-headers', headers);
  return reply.code(200).send();
}

function bodyOf(req: FastifyRequest): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}
