import type { Engine } from '../../engine/engine.ts';
import { InvocationAlreadyCompletedError, InvocationNotFoundError } from '../../engine/management-errors.ts';
import { RatchetError } from '../../errors/errors.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { InvocationId } from '../../ids/invocation-id.ts';
import type { DeploymentChoice } from '../../engine/types.ts';
import { DeploymentId } from '../../ids/deployment-id.ts';
import { RequestExtractionError } from '../errors.ts';
import { sendJson } from '../reply.ts';
import type { AdminRoutes } from './context.ts';

/*
 * Invocation management: cancel, kill, pause, resume, purge, purge-journal, restart-as-new, and the deprecated
 * `DELETE /invocations/{id}?mode=Cancel|Kill|Purge`, with restate-server 1.7.12's statuses and messages. The engine
 * decides; refusals are the RatchetErrors it throws (engine/management-errors.ts).
 */

/** 400 for a query string that does not parse, in restate's (axum's) plain-text style. */
class InvalidQueryError extends RequestExtractionError {
  readonly status = 400;
  constructor(detail: string) {
    super(`Failed to deserialize query string: ${detail}`);
  }
}

/**
 * `deployment=Keep|Latest` (any case), `deployment=dp_…`, or the JSON object form `deployment={"Id":"dp_…"}`
 * (URL-encoded). Undefined when absent.
 */
export function parseDeploymentChoice(raw: string | undefined): DeploymentChoice | undefined {
  if (raw === undefined || raw === '') return undefined;
  const lower = raw.toLowerCase();
  if (lower === 'keep') return { kind: 'keep' };
  if (lower === 'latest') return { kind: 'latest' };
  let id = raw;
  if (raw.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new InvalidQueryError(`deployment: expected Keep, Latest, a deployment id or {"Id":"dp_…"}, got ${raw}`);
    }
    const obj = parsed as { Id?: unknown; id?: unknown };
    const value = obj.Id ?? obj.id;
    if (typeof value !== 'string') {
      throw new InvalidQueryError(`deployment: the object form needs a string "Id", got ${raw}`);
    }
    id = value;
  }
  try {
    DeploymentId.parse(id);
  } catch (err) {
    throw new InvalidQueryError(`deployment: '${id}' is not Keep, Latest or a deployment id (${idReason(err)})`);
  }
  return { kind: 'id', id };
}

/** `from`: an unsigned 32-bit integer; default 0. */
export function parseFrom(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 0;
  if (!/^\d+$/.test(raw) || Number(raw) > 0xffffffff) {
    throw new InvalidQueryError(`from: invalid digit found in string or number too large to fit in u32: ${raw}`);
  }
  return Number(raw);
}

class InvalidInvocationIdError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;
  constructor(reason: string) {
    super(`The request field 'invocation_id' is invalid. Reason: ${reason}`);
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
  if (outcome === 'completed') throw new InvocationAlreadyCompletedError(id);
}

type IdParams = { Params: { id: string } };
type Query = Record<string, string | undefined>;

export function invocationRoutes(engine: Engine): AdminRoutes {
  return (scope) => {
    scope.patch<IdParams>('/invocations/:id/cancel', async (req, reply) => {
      await cancel(engine, req.params.id);
      return reply.code(202).send();
    });

    scope.patch<IdParams>('/invocations/:id/kill', async (req, reply) => {
      await engine.kill(invocationParam(req.params.id));
      return reply.code(200).send();
    });

    scope.patch<IdParams>('/invocations/:id/pause', async (req, reply) => {
      const outcome = await engine.pause(invocationParam(req.params.id));
      return reply.code(outcome === 'already_paused' ? 200 : 202).send();
    });

    scope.patch<IdParams & { Querystring: Query }>('/invocations/:id/resume', async (req, reply) => {
      const id = invocationParam(req.params.id);
      await engine.resume(id, parseDeploymentChoice(req.query.deployment));
      return reply.code(200).send();
    });

    scope.patch<IdParams>('/invocations/:id/purge', async (req, reply) => {
      await engine.purge(invocationParam(req.params.id));
      return reply.code(200).send();
    });

    scope.patch<IdParams>('/invocations/:id/purge-journal', async (req, reply) => {
      await engine.purgeJournal(invocationParam(req.params.id));
      return reply.code(200).send();
    });

    scope.patch<IdParams & { Querystring: Query }>('/invocations/:id/restart-as-new', async (req, reply) => {
      const id = invocationParam(req.params.id);
      const from = parseFrom(req.query.from);
      const newId = await engine.restartAsNew(id, from, parseDeploymentChoice(req.query.deployment));
      return sendJson(reply, { new_invocation_id: newId });
    });

    scope.delete<IdParams & { Querystring: Query }>('/invocations/:id', async (req, reply) => {
      const mode = req.query.mode ?? 'Cancel';
      const id = invocationParam(req.params.id);
      switch (mode) {
        case 'Cancel':
          await cancel(engine, id);
          break;
        case 'Kill':
          await engine.kill(id);
          break;
        case 'Purge':
          await engine.purge(id);
          break;
        default:
          throw new UnsupportedDeleteModeError(mode);
      }
      return reply.code(202).send();
    });
  };
}
