import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { parseDuration } from '../config/units.ts';
import type { Engine } from '../engine/engine.ts';
import type { CompletedInvocation } from '../engine/types.ts';
import type { SchemaRegistry } from '../schema/registry.ts';
import type { HandlerSchema } from '../schema/types.ts';
import { validateInput } from './content-type.ts';
import { IngressError } from './errors.ts';
import { parseIngressPath } from './path.ts';

export interface IngressDeps {
  engine: Engine;
  registry: SchemaRegistry;
  logger: Logger;
  requestSizeLimit: number;
}

const VARY = 'origin, access-control-request-method, access-control-request-headers';
/** Headers that describe the HTTP exchange itself rather than the invocation. */
const DROPPED_HEADERS = new Set([
  'connection',
  'host',
  'idempotency-key',
  'idempotency-expires',
  'content-length',
  'transfer-encoding',
  'keep-alive',
]);

export function buildIngressApp(deps: IngressDeps): FastifyInstance {
  const log = deps.logger.child({ component: 'ingress' });
  const app = Fastify({
    // Per-request logging would cost more than the invocation path itself; errors are logged by the handler below.
    logger: false,
    // Calls wait for their invocation, possibly for long; on shutdown they are cut (clients retry with the
    // idempotency key or re-attach) rather than holding the process open.
    forceCloseConnections: true,
    bodyLimit: deps.requestSizeLimit,
    // Restate paths carry URL-encoded keys; the raw path is parsed by us.
    routerOptions: { ignoreDuplicateSlashes: false },
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.addHook('onSend', async (_req, reply) => {
    reply.header('vary', VARY);
    reply.header('access-control-allow-credentials', 'true');
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    if (err instanceof IngressError) return sendError(reply, err.status, err.message, 'ingress');
    if (err.statusCode === 413) return sendError(reply, 413, 'request body is too large', 'ingress');
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      return sendError(reply, err.statusCode, err.message, 'ingress');
    }
    log.error({ err }, 'ingress request failed');
    return sendError(reply, 503, `the request could not be processed, retrying it is safe: ${err.message}`, 'ingress');
  });

  app.setNotFoundHandler((req, reply) => handle(deps, req, reply));
  return app;
}

async function handle(deps: IngressDeps, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const url = req.raw.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));

  if (req.method === 'OPTIONS') {
    const origin = req.headers.origin;
    if (origin !== undefined) reply.header('access-control-allow-origin', origin);
    const method = req.headers['access-control-request-method'];
    if (typeof method === 'string') reply.header('access-control-allow-methods', method);
    const headers = req.headers['access-control-request-headers'];
    if (typeof headers === 'string') reply.header('access-control-allow-headers', headers);
    return reply.code(200).send();
  }

  const route = parseIngressPath(path, deps.registry);
  if (route.kind === 'health') {
    if (req.method !== 'GET') throw new IngressError(405, 'method not allowed');
    return reply
      .code(200)
      .header('content-type', 'application/json')
      .send(jsonBody({ services: deps.registry.services().map((s) => s.schema.name) }));
  }
  if (req.method !== 'POST' && req.method !== 'GET') throw new IngressError(405, 'method not allowed');
  const { service, handler, key, send } = route;
  const isPublic = service.overrides.public ?? !(service.schema.ingressPrivate ?? false);
  if (!isPublic || handler.ingressPrivate === true) throw new IngressError(400, 'the invoked service is not public');

  let delayMs: number | undefined;
  for (const [name, value] of query) {
    if (name.toLowerCase() !== 'delay') continue;
    if (!send)
      throw new IngressError(
        400,
        'cannot use the delay query parameter with calls. The delay is supported only with sends',
      );
    try {
      delayMs = parseDuration(value);
    } catch (err) {
      throw new IngressError(400, `bad delay query parameter, must be a ISO8601 duration: ${(err as Error).message}`);
    }
  }

  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const contentType = req.headers['content-type'];
  validateInput(handler.input, contentType, body.length);

  const rawIdem = req.headers['idempotency-key'];
  const idempotencyKey = typeof rawIdem === 'string' && rawIdem !== '' ? rawIdem : undefined;
  if (idempotencyKey !== undefined && service.schema.ty === 'Workflow' && handler.ty === 'Workflow') {
    throw new IngressError(
      400,
      'cannot use the idempotency key with workflow handlers. The handler invocation will already be idempotent by the workflow key itself.',
    );
  }

  const headers: [string, string][] = [];
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || DROPPED_HEADERS.has(name)) continue;
    headers.push([name, Array.isArray(value) ? value.join(', ') : value]);
  }
  headers.push(['x-restate-ingress-path', url]);

  const accepted = await deps.engine.accept({
    service: { name: service.schema.name, ty: service.schema.ty },
    handler,
    key,
    body,
    headers,
    delayMs,
    idempotencyKey,
    invokedBy: 'ingress',
  });
  reply.header('x-restate-id', accepted.id);

  if (send) {
    const payload: Record<string, string> = { invocationId: accepted.id };
    if (accepted.executionTime !== undefined) payload.executionTime = formatTimestamp(accepted.executionTime);
    payload.status = accepted.created ? 'Accepted' : 'PreviouslyAccepted';
    return reply.code(202).header('content-type', 'application/json').send(jsonBody(payload));
  }

  if (!accepted.created && service.schema.ty === 'Workflow' && handler.ty === 'Workflow') {
    return sendError(reply, 409, 'the workflow method was already invoked', 'invocation');
  }
  const done = await deps.engine.awaitCompletion(accepted.id);
  if (done === undefined) return sendError(reply, 404, 'invocation not found', 'ingress');
  return sendOutcome(reply, handler, done, idempotencyKey !== undefined && !accepted.created);
}

function sendOutcome(
  reply: FastifyReply,
  handler: HandlerSchema,
  done: CompletedInvocation,
  replay: boolean,
): FastifyReply {
  if (replay && done.completionRetentionMs !== null) {
    reply.header(
      'idempotency-expires',
      formatExpiry(new Date(done.completedAt.getTime() + done.completionRetentionMs)),
    );
  }
  if (done.outcome.kind === 'failure') {
    const f = done.outcome.failure;
    const body: Record<string, unknown> = { code: f.code, message: f.message };
    if (f.metadata !== undefined) body.metadata = f.metadata;
    return sendError(reply, f.code, f.message, 'invocation', body);
  }
  const value = Buffer.from(done.outcome.value);
  const ct = handler.output.contentType;
  if (ct !== undefined && (value.length > 0 || handler.output.setContentTypeIfEmpty)) reply.header('content-type', ct);
  return reply.code(200).send(value);
}

function sendError(
  reply: FastifyReply,
  code: number,
  message: string,
  source: 'ingress' | 'invocation',
  body: Record<string, unknown> = { code, message },
): FastifyReply {
  // Failure codes chosen by handlers may lie outside HTTP's range; the body keeps the real code.
  const status = code >= 400 && code <= 599 ? code : 500;
  return reply
    .code(status)
    .header('x-restate-error-source', source)
    .header('content-type', 'application/json')
    .send(jsonBody({ ...body, source }));
}

/** A Buffer, not a string: fastify would append `; charset=utf-8` to a string body, which restate does not send. */
function jsonBody(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

/** `2026-11-21T20:44:19.539000000Z`, as restate renders times in ingress bodies. */
export function formatTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

/** `2026-11-21T22:44:09.702+00:00`, as restate renders `idempotency-expires`. */
function formatExpiry(d: Date): string {
  return d.toISOString().replace(/Z$/, '+00:00');
}
