import type { FastifyReply } from 'fastify';
import type { CompletedInvocation } from '../engine/types.ts';
import type { OutputRules } from '../schema/types.ts';
import type { IngressDeps } from './deps.ts';
import { IngressErrors } from './errors.ts';
import { queryInvocationId, type InvocationQuery } from './ids.ts';
import { expiresAt, jsonBody, sendError, sendOutcome } from './reply.ts';

/**
 * `attach` waits for the invocation and answers like the original call; `output` never waits (470 while it runs).
 * A result that was already retained when the request came carries `idempotency-expires`; one the request had to
 * wait for does not (as restate). A retained result past its retention counts as gone.
 */
export async function attachOrOutput(
  deps: IngressDeps,
  reply: FastifyReply,
  mode: 'attach' | 'output',
  query: InvocationQuery,
): Promise<FastifyReply> {
  const id = queryInvocationId(query);
  const found = await deps.engine.getCompleted(id);
  if (found === undefined || (found.done !== undefined && isExpired(found.done))) return notFound(reply, mode, id);
  const { serviceName, handlerName } = found.row;
  if (found.done !== undefined) return replyWithResult(deps, reply, id, serviceName, handlerName, found.done, true);
  if (mode === 'output') throw IngressErrors.notReady();
  const done = await deps.engine.awaitCompletion(id);
  if (done === undefined) return notFound(reply, mode, id);
  return replyWithResult(deps, reply, id, serviceName, handlerName, done, false);
}

/** `POST /restate/lookup`: the id the target designates, whether or not such an invocation exists. */
export function lookup(reply: FastifyReply, query: InvocationQuery): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'application/json')
    .send(jsonBody({ invocationId: queryInvocationId(query) }));
}

function isExpired(done: CompletedInvocation): boolean {
  const expiry = expiresAt(done);
  return expiry !== undefined && expiry.getTime() <= Date.now();
}

/**
 * Output reports an unknown invocation as an ingress 404. Attach answers with what restate's partition processor
 * says, an invocation-sourced `404 not found` carrying the id it looked for (for unknown ids, idempotency keys and
 * workflow keys alike).
 */
function notFound(reply: FastifyReply, mode: 'attach' | 'output', id: string): FastifyReply {
  if (mode === 'output') throw IngressErrors.invocationNotFound();
  reply.header('x-restate-id', id);
  return sendError(reply, 404, 'not found', 'invocation');
}

function replyWithResult(
  deps: IngressDeps,
  reply: FastifyReply,
  id: string,
  serviceName: string,
  handlerName: string,
  done: CompletedInvocation,
  fromRetained: boolean,
): FastifyReply {
  // The output content-type comes from the handler as registered now; restate answers 404 when it is gone.
  const handler = deps.registry.service(serviceName)?.schema.handlers.find((h) => h.name === handlerName);
  let output: OutputRules | undefined = handler?.output;
  if (output === undefined) {
    if (done.outcome.kind === 'success') throw IngressErrors.notFound();
    output = { setContentTypeIfEmpty: false };
  }
  return sendOutcome(reply, id, output, done, fromRetained);
}
