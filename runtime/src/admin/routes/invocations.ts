import type { Engine } from '../../engine/engine.ts';
import { InvocationAlreadyCompletedError, InvocationNotFoundError } from '../../engine/management-errors.ts';
import { InvalidRequestFieldError, RatchetError } from '../../errors/errors.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { InvocationId } from '../../ids/invocation-id.ts';
import type { DeploymentChoice } from '../../engine/types.ts';
import { DeploymentId } from '../../ids/deployment-id.ts';
import { ServiceNotFoundError } from '../../schema/errors.ts';
import { InvalidQueryStringError, JsonBodyShapeError } from '../errors.ts';
import { RestartAsNewInvocationQuery, type InvocationParams } from '../model/invocations.ts';
import type { ModifyServiceStateRequest, ServiceParams } from '../model/services.ts';
import { readJsonBody, readQuery } from '../request.ts';
import { sendJson } from '../reply.ts';
import type { AdminRoutes } from './context.ts';

/*
 * Invocation management: cancel, kill, pause, resume, purge, purge-journal, restart-as-new, and the deprecated
 * `DELETE /invocations/{id}?mode=Cancel|Kill|Purge`, with restate-server 1.7.12's statuses and messages. The engine
 * decides; refusals are the RatchetErrors it throws (engine/management-errors.ts).
 */

/** 400 for a query parameter that is well-formed for the query string but not for its type (restate's JSON style). */
class InvalidQueryParameterError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;
  constructor(name: string, reason: string) {
    super(`The query parameter '${name}' is invalid. Reason: ${reason}`);
  }
}

/**
 * The `deployment` query parameter: `Keep` / `Latest` (any case), a deployment id, restate's own encoding of the
 * object form `deployment[Id]=dp_…`, or the object form as URL-encoded JSON `deployment={"Id":"dp_…"}` (which
 * restate-server refuses; Ratchet accepts it, as its specification asks). Undefined when absent.
 */
export function parseDeploymentChoice(query: Query): DeploymentChoice | undefined {
  const bracketed = single(query, 'deployment[Id]') ?? single(query, 'deployment[id]');
  const raw = bracketed ?? single(query, 'deployment');
  if (raw === undefined) return undefined;
  if (bracketed === undefined) {
    const lower = raw.toLowerCase();
    if (lower === 'keep') return { kind: 'keep' };
    if (lower === 'latest') return { kind: 'latest' };
  }
  let id = raw;
  if (bracketed === undefined && raw.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new InvalidQueryParameterError('deployment', 'bad format');
    }
    const obj = parsed as { Id?: unknown; id?: unknown } | null;
    const value = obj?.Id ?? obj?.id;
    if (typeof value !== 'string') throw new InvalidQueryParameterError('deployment', 'bad format');
    id = value;
  }
  try {
    DeploymentId.parse(id);
  } catch (err) {
    throw new InvalidQueryParameterError('deployment', err instanceof InvalidIdError ? err.reason : 'bad format');
  }
  return { kind: 'id', id };
}

const DELETE_MODES: Record<string, 'cancel' | 'kill' | 'purge'> = {
  Cancel: 'cancel',
  cancel: 'cancel',
  Kill: 'kill',
  kill: 'kill',
  Purge: 'purge',
  purge: 'purge',
};

function unsupportedDeleteMode(mode: string): InvalidQueryStringError {
  const expected = Object.keys(DELETE_MODES)
    .map((m) => `\`${m}\``)
    .join(', ');
  return new InvalidQueryStringError(`mode: unknown variant \`${mode}\`, expected one of ${expected}`);
}

function invocationParam(raw: string): InvocationId {
  try {
    return InvocationId.parse(raw);
  } catch (err) {
    throw new InvalidRequestFieldError('invocation_id', idReason(err));
  }
}

/** restate prints only the codec's reason ("unrecognized codec version", "bad length"). */
function idReason(err: unknown): string {
  if (err instanceof InvalidIdError) return err.reason;
  return err instanceof Error ? err.message : String(err);
}

/** 202 when the handler will see the cancellation, 200 when it was done at once (the invocation had not started). */
async function cancel(engine: Engine, id: InvocationId): Promise<200 | 202> {
  const outcome = await engine.cancel(id);
  if (outcome === 'not_found') throw new InvocationNotFoundError(id);
  if (outcome === 'completed') throw new InvocationAlreadyCompletedError(id);
  return outcome === 'done' ? 200 : 202;
}

class ServiceStateNotModifiableError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;
  constructor(ty: string) {
    super(`Cannot modify state for service type ${ty}`);
  }
}

/**
 * `ModifyServiceStateRequest`: `{object_key, new_state: {key: [byte…]}, version?, scope?}`. Checked by hand, not
 * from the model, because restate words these refusals unlike its other bodies (and `scope` needs RT0024).
 */
function parseModifyState(body: unknown): ModifyServiceStateRequest {
  const shape = (detail: string): JsonBodyShapeError => new JsonBodyShapeError(detail);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw shape('invalid type: expected struct ModifyServiceStateRequest');
  }
  const b = body as Record<string, unknown>;
  if (typeof b.object_key !== 'string') throw shape('missing field `object_key`');
  if (b.version !== undefined && b.version !== null && typeof b.version !== 'string') {
    throw shape('invalid type for `version`: expected a string');
  }
  if (b.scope !== undefined && b.scope !== null) {
    throw new FlowControlDisabledError();
  }
  const state = b.new_state;
  if (typeof state !== 'object' || state === null || Array.isArray(state)) throw shape('missing field `new_state`');
  for (const [k, v] of Object.entries(state as Record<string, unknown>)) {
    if (!Array.isArray(v) || !v.every((n) => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 255)) {
      throw shape(`new_state.${k}: expected an array of bytes (integers 0 to 255)`);
    }
  }
  return b as ModifyServiceStateRequest;
}

/** RT0024: scopes need the experimental flow-control feature, which Ratchet does not have. */
class FlowControlDisabledError extends RatchetError {
  readonly code = 'RT0024';
  readonly status = 400;
  constructor() {
    super('scoped virtual object instances require flow control (vqueues), which is not enabled');
  }
}

type IdParams = { Params: InvocationParams };
/**
 * The raw query string: `deployment` comes in forms a query schema cannot say (see `parseDeploymentChoice`). A
 * parameter given twice arrives as an array.
 */
type Query = Record<string, string | string[] | undefined>;

/** One value of a query parameter; a repeated one is refused as axum refuses it. */
function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw new InvalidQueryStringError(`duplicate field \`${name}\``);
  return value;
}

export function invocationRoutes(engine: Engine): AdminRoutes {
  return (scope, { registry }) => {
    scope.patch<IdParams>('/invocations/:id/cancel', async (req, reply) => {
      return reply.code(await cancel(engine, invocationParam(req.params.id))).send();
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
      await engine.resume(id, parseDeploymentChoice(req.query));
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
      const from = readQuery(RestartAsNewInvocationQuery, req.query).from ?? 0;
      const newId = await engine.restartAsNew(id, from, parseDeploymentChoice(req.query));
      return sendJson(reply, { new_invocation_id: newId });
    });

    scope.post<{ Params: ServiceParams }>('/services/:service/state', async (req, reply) => {
      const service = registry.service(req.params.service);
      if (service === undefined) throw new ServiceNotFoundError(req.params.service);
      if (service.schema.ty === 'Service') throw new ServiceStateNotModifiableError(service.schema.ty);
      const request = parseModifyState(readJsonBody(req.headers['content-type'], req.body as Buffer | undefined));
      const entries = Object.entries(request.new_state).map(([key, value]) => ({
        key: Buffer.from(key, 'utf8'),
        value: Buffer.from(value),
      }));
      await engine.modifyState(service.schema.name, request.object_key, request.version ?? undefined, entries);
      return reply.code(202).send();
    });

    // Deprecated; answers 202 for any well-formed id, whatever the invocation's state (as restate does).
    scope.delete<IdParams & { Querystring: Query }>('/invocations/:id', async (req, reply) => {
      const rawMode = single(req.query, 'mode') ?? 'Cancel';
      const mode = DELETE_MODES[rawMode];
      if (mode === undefined) throw unsupportedDeleteMode(rawMode);
      const id = invocationParam(req.params.id);
      try {
        if (mode === 'cancel') await cancel(engine, id);
        else if (mode === 'kill') await engine.kill(id);
        else await engine.purge(id);
      } catch (err) {
        if (!(err instanceof RatchetError) || err.status >= 500) throw err;
      }
      return reply.code(202).send();
    });
  };
}
