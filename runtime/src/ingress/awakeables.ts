import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EngineResult } from '../engine/codec.ts';
import type { IngressDeps } from './deps.ts';
import { IngressErrors } from './errors.ts';
import { parseAwakeableIdParam } from './ids.ts';

/** restate's failure code for a rejected awakeable (`codes::INTERNAL`). */
const REJECTED_CODE = 500;

/**
 * `POST /restate/awakeables/{id}/resolve|reject` (or `/restate/a/…`). The body of a resolve is the value as sent (its
 * content-type is not checked); the body of a reject is the failure message. Both are delivered as a signal with the
 * id's index: `sign_1` ids carry the signal index; legacy `prom_1` ids (journal entry index, protocol ≤ v3) are
 * delivered to the signal with the same index, since only V5+ SDKs talk to Ratchet. 202 once the signal is durable,
 * also when the awakeable was already completed or its invocation is gone.
 */
export async function completeAwakeable(
  deps: IngressDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  op: 'resolve' | 'reject',
  awakeableId: string,
): Promise<FastifyReply> {
  if (req.method !== 'POST') throw IngressErrors.methodNotAllowed();
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const id = parseAwakeableIdParam(awakeableId);
  const result: EngineResult =
    op === 'resolve'
      ? { kind: 'value', value: body }
      : { kind: 'failure', failure: { code: REJECTED_CODE, message: body.toString('utf8') } };
  await deps.engine.signal(id.invocationId, { idx: id.index }, result);
  return reply.code(202).send();
}
