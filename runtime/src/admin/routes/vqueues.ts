import type { Engine } from '../../engine/engine.ts';
import { InvalidRequestFieldError } from '../../errors/errors.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { parseVQueueId } from '../../ids/vqueue-id.ts';
import type { VQueueParams } from '../model/limits.ts';
import type { AdminRoutes } from './context.ts';

/**
 * `POST /vqueues/{vqueue_id}/pause|resume` (flow control): 202 once the change is stored by the owner of the queue's
 * partition (the id names it; requests for other partitions are sent to their owner). Any well-formed id is accepted,
 * known or not, and repeating either is harmless, as with restate-server 1.7.12.
 */
export function vqueueRoutes(engine: Engine): AdminRoutes {
  const route =
    (paused: boolean) =>
    async (req: { params: VQueueParams }, reply: { code(n: number): { send(): unknown } }): Promise<unknown> => {
      let partitionKey: bigint;
      try {
        partitionKey = parseVQueueId(req.params.vqueue_id);
      } catch (err) {
        if (err instanceof InvalidIdError) throw new InvalidRequestFieldError('vqueue_id', err.reason);
        throw err;
      }
      await engine.setVQueuePaused(partitionKey, req.params.vqueue_id, paused);
      return reply.code(202).send();
    };
  return (scope) => {
    scope.post<{ Params: VQueueParams }>('/vqueues/:vqueue_id/pause', route(true));
    scope.post<{ Params: VQueueParams }>('/vqueues/:vqueue_id/resume', route(false));
  };
}
