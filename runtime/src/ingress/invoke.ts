import type { FastifyReply, FastifyRequest } from 'fastify';
import { FORWARDED_BY_HEADER, FORWARDED_PROOF_HEADER } from '../cluster/forward.ts';
import { parseDuration } from '../config/units.ts';
import { newUlidString } from '../ids/ulid.ts';
import { deprecatedProtocolMessage, MIN_PROTOCOL_VERSION } from '../protocol/version.ts';
import { effectiveHandlerSettings } from '../schema/handler-settings.ts';
import { validateInput } from './content-type.ts';
import type { IngressDeps } from './deps.ts';
import { IngressErrors } from './errors.ts';
import type { InvokeRoute } from './path.ts';
import type { AcceptRequest } from '../engine/types.ts';
import { checkScope } from './scope.ts';
import { formatLimitKey, LimitKeyError, parseLimitKey } from '../flow-control/names.ts';
import { formatTimestamp, jsonBody, sendError, sendOutcome } from './reply.ts';

/** Request headers restate does not forward to the handler. */
const DROPPED_HEADERS = new Set([
  'connection',
  'host',
  'idempotency-key',
  'idempotency-expires',
  FORWARDED_BY_HEADER,
  FORWARDED_PROOF_HEADER,
]);

/**
 * A call (waits for the result) or a send (202 once accepted). The checks run in restate's order: public, idempotency
 * key on a workflow run, scope, method, input, delay, limit key, delay on a call.
 */
export async function invoke(
  deps: IngressDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  route: InvokeRoute,
  ingressPath: string,
  query: URLSearchParams,
): Promise<FastifyReply> {
  const { service, handler, key, send } = route;
  if (!effectiveHandlerSettings(service, handler, deps.registry.defaults).public) throw IngressErrors.privateService();
  const deployment = deps.registry.deployment(service.deploymentId);
  if (deployment !== undefined) {
    const deprecated = deprecatedProtocolMessage(
      service.schema.name,
      deployment,
      deps.minProtocolVersion ?? MIN_PROTOCOL_VERSION,
    );
    if (deprecated !== undefined) throw IngressErrors.deprecatedProtocol(deprecated);
  }

  const isWorkflowRun = service.schema.ty === 'Workflow' && handler.ty === 'Workflow';
  const rawIdem = req.headers['idempotency-key'];
  // An empty header is the key "" (restate derives the id from it and replays like any other key).
  const userIdempotencyKey = typeof rawIdem === 'string' ? rawIdem : undefined;
  if (userIdempotencyKey !== undefined && isWorkflowRun) throw IngressErrors.idempotencyKeyOnWorkflow();
  if (route.scope !== undefined) {
    checkScope(route.scope);
    if (!deps.engine.flowControl) throw IngressErrors.scopeRequiresVQueues();
    if (service.schema.ty !== 'Service') throw IngressErrors.scopeOnKeyedTarget(service.schema.ty);
  }
  if (req.method !== 'POST' && req.method !== 'GET') throw IngressErrors.methodNotAllowed();

  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  validateInput(handler.input, req.headers['content-type'], body.length);

  let delayMs: number | undefined;
  for (const [name, value] of query) {
    if (name.toLowerCase() !== 'delay') continue;
    try {
      delayMs = parseDuration(value);
    } catch (err) {
      throw IngressErrors.badDelay((err as Error).message);
    }
    break;
  }
  const limitKey = limitKeyOf(req.headers['x-restate-limit-key'], query);
  if (limitKey !== undefined && route.scope === undefined) throw IngressErrors.limitKeyWithoutScope();
  if (limitKey !== undefined) {
    try {
      parseLimitKey(limitKey);
    } catch (err) {
      if (err instanceof LimitKeyError) throw IngressErrors.badLimitKey(err.message);
      throw err;
    }
  }
  if (!send && delayMs !== undefined) throw IngressErrors.delayOnCall();

  // As restate: the (normalized) path and query first, then each header once, with its first value.
  const headers: [string, string][] = [['x-restate-ingress-path', ingressPath]];
  const seen = new Set<string>();
  const raw = req.raw.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    // HTTP/2 pseudo-headers (`:path`, …) are not request headers.
    if (seen.has(name) || DROPPED_HEADERS.has(name) || name.startsWith(':')) continue;
    seen.add(name);
    headers.push([name, raw[i + 1]!]);
  }

  // Controlled idempotent sharding (restate 1.7): every service and virtual-object invocation gets an idempotency
  // key, a fresh ULID when the client gave none, so its result is retained and `/output` works for it. Workflow
  // handlers keep theirs (the run is keyed by the workflow key; shared handlers are retained without a key).
  const idempotencyKey = userIdempotencyKey ?? (service.schema.ty === 'Workflow' ? undefined : newUlidString());

  const span = deps.tracer?.start({
    service: service.schema.name,
    handler: handler.name,
    key,
    headers: req.headers,
    remoteAddress: req.socket.remoteAddress,
    remotePort: req.socket.remotePort,
  });
  let invocationId: string | undefined;
  try {
    const answered = await acceptAndAnswer(
      deps,
      reply,
      route,
      {
        service: { name: service.schema.name, ty: service.schema.ty },
        handler,
        key,
        body,
        headers,
        delayMs,
        idempotencyKey,
        idempotencyKeyGenerated: userIdempotencyKey === undefined && idempotencyKey !== undefined,
        invokedBy: 'ingress',
        traceContext: span?.traceContext,
        scope: route.scope,
        limitKey: limitKey === undefined ? undefined : formatLimitKey(parseLimitKey(limitKey)),
      },
      userIdempotencyKey,
      (id) => (invocationId = id),
    );
    span?.end(invocationId, reply.statusCode);
    return answered;
  } catch (err) {
    span?.end(invocationId, (err as { status?: number }).status ?? 500);
    throw err;
  }
}

/** The limit key of a request (`x-restate-limit-key`, else `?limit-key=`); an empty one is none. */
function limitKeyOf(header: string | string[] | undefined, query: URLSearchParams): string | undefined {
  const fromHeader = Array.isArray(header) ? header[0] : header;
  if (fromHeader !== undefined && fromHeader !== '') return fromHeader;
  const fromQuery = query.get('limit-key');
  return fromQuery === null || fromQuery === '' ? undefined : fromQuery;
}

/** Stores the invocation; a send is answered at once, a call once the invocation completed. */
async function acceptAndAnswer(
  deps: IngressDeps,
  reply: FastifyReply,
  route: InvokeRoute,
  request: AcceptRequest,
  userIdempotencyKey: string | undefined,
  onId: (id: string) => void,
): Promise<FastifyReply> {
  const { handler, send } = route;
  const isWorkflowRun = request.service.ty === 'Workflow' && handler.ty === 'Workflow';
  const accepted = await deps.engine.accept(request);
  onId(accepted.id);

  if (send) {
    const payload: Record<string, string> = { invocationId: accepted.id };
    if (accepted.executionTime !== undefined) payload.executionTime = formatTimestamp(accepted.executionTime);
    payload.status = accepted.created ? 'Accepted' : 'PreviouslyAccepted';
    return reply
      .code(202)
      .header('content-type', 'application/json')
      .header('x-restate-id', accepted.id)
      .send(jsonBody(payload));
  }

  if (!accepted.created && isWorkflowRun) {
    reply.header('x-restate-id', accepted.id);
    return sendError(reply, 409, 'the workflow method was already invoked', 'invocation');
  }
  // A repeated request with the client's own idempotency key is answered from the retained result when there is
  // one already (with `idempotency-expires`); otherwise it waits like the first request.
  if (!accepted.created && userIdempotencyKey !== undefined) {
    const found = await deps.engine.getCompleted(accepted.id);
    if (found?.done !== undefined) return sendOutcome(reply, accepted.id, handler.output, found.done, true);
  }
  const done = await deps.engine.awaitCompletion(accepted.id);
  if (done === undefined) throw IngressErrors.invocationNotFound();
  return sendOutcome(reply, accepted.id, handler.output, done, false);
}
