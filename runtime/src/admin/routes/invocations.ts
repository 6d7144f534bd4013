import type { Engine } from '../../engine/engine.ts';
import { RatchetError } from '../../errors/errors.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { InvocationId } from '../../ids/invocation-id.ts';
import type { AdminRoutes } from './context.ts';

/*
 * Invocation management. So far: cancellation (`PATCH /invocations/{id}/cancel` and the deprecated
 * `DELETE /invocations/{id}`, whose default mode is cancel), with restate-server 1.7.12's statuses and messages.
 */

class InvalidInvocationIdError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;
  constructor(reason: string) {
    super(`The request field 'invocation_id' is invalid. Reason: ${reason}`);
  }
}

class InvocationNotFoundError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;
  constructor(id: string) {
    super(`The requested invocation '${id}' does not exist`);
  }
}

class InvocationCompletedError extends RatchetError {
  readonly code = undefined;
  readonly status = 409;
  constructor(id: string) {
    super(`The invocation '${id}' was already completed.`);
  }
}

class UnsupportedDeleteModeError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;
  constructor(mode: string) {
    super(
      `The request field 'mode' is invalid. Reason: unknown variant \`${mode}\`, expected one of \`Cancel\`, \`Kill\`, \`Purge\``,
    );
  }
}

function invocationParam(raw: string): InvocationId {
  try {
    return InvocationId.parse(raw);
  } catch (err) {
    throw new InvalidInvocationIdError(idReason(err));
  }
}

/** restate prints only the codec's reason ("unrecognized codec version", "bad length"). */
function idReason(err: unknown): string {
  if (err instanceof InvalidIdError) return err.reason;
  return err instanceof Error ? err.message : String(err);
}

async function cancel(engine: Engine, raw: string): Promise<void> {
  const id = invocationParam(raw);
  const outcome = await engine.cancel(id);
  if (outcome === 'not_found') throw new InvocationNotFoundError(id);
  if (outcome === 'completed') throw new InvocationCompletedError(id);
}

export function invocationRoutes(engine: Engine): AdminRoutes {
  return (scope) => {
    scope.patch<{ Params: { id: string } }>('/invocations/:id/cancel', async (req, reply) => {
      await cancel(engine, req.params.id);
      return reply.code(202).send();
    });

    scope.delete<{ Params: { id: string }; Querystring: { mode?: string } }>('/invocations/:id', async (req, reply) => {
      const mode = req.query.mode ?? 'Cancel';
      if (mode !== 'Cancel') throw new UnsupportedDeleteModeError(mode);
      await cancel(engine, req.params.id);
      return reply.code(202).send();
    });
  };
}
