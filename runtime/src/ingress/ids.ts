import { parseAwakeableId, type AwakeableId } from '../ids/awakeable-id.ts';
import { ID_SCHEME_VERSION, InvalidIdError, idPayloadOffset, type IdPrefix } from '../ids/id-codec.ts';
import { InvocationId } from '../ids/invocation-id.ts';
import { IngressErrors } from './errors.ts';

/** What an attach / output / lookup request designates. */
export type InvocationQuery =
  | { kind: 'invocation'; id: InvocationId }
  | {
      kind: 'idempotency';
      service: string;
      key: string | undefined;
      handler: string;
      idempotencyKey: string;
      scope?: string | undefined;
    }
  | { kind: 'workflow'; name: string; key: string; scope?: string | undefined };

/** The id a query designates; computed, never looked up (so `/restate/lookup` answers for invocations never made). */
export function queryInvocationId(query: InvocationQuery): InvocationId {
  switch (query.kind) {
    case 'invocation':
      return query.id;
    case 'workflow':
      return InvocationId.forWorkflow(query.name, query.key, query.scope);
    case 'idempotency':
      return InvocationId.forIdempotent(query.service, query.key, query.handler, query.idempotencyKey, query.scope);
  }
}

/** Parses an invocation id from a path or body; a bad one is restate's `400 bad invocation id '…': <reason>`. */
export function parseInvocationIdParam(text: string): InvocationId {
  try {
    return InvocationId.parse(text);
  } catch (err) {
    if (!(err instanceof InvalidIdError)) throw err;
    throw IngressErrors.badInvocationId(text, restateReason(text, 'inv', err.reason));
  }
}

/**
 * Parses `sign_1…` or legacy `prom_1…`. restate tries the signal form first and, when that fails, reports why the
 * text is not a valid legacy awakeable id (so `sign_1<bad payload>` is "id doesn't match the expected type").
 */
export function parseAwakeableIdParam(text: string): AwakeableId {
  try {
    return parseAwakeableId(text);
  } catch (err) {
    if (!(err instanceof InvalidIdError)) throw err;
    throw IngressErrors.badAwakeableId(text, restateReason(text, 'prom', err.reason));
  }
}

/**
 * The reason restate-server gives for a malformed id it expected to be of type `expected`. Its decoder checks, in
 * order: known prefix, non-empty remainder, scheme version, expected type, payload; `idPayloadOffset` checks the type
 * before the remainder and version (so `dp_garbage` would be a type mismatch there, a version error in restate).
 */
function restateReason(input: string, expected: IdPrefix, payloadReason: string): string {
  try {
    idPayloadOffset(input, expected);
  } catch (err) {
    if (!(err instanceof InvalidIdError)) throw err;
    if (err.reason === "id doesn't match the expected type") {
      const sep = input.indexOf('_');
      if (sep + 1 >= input.length) return 'bad length';
      if (input[sep + 1] !== ID_SCHEME_VERSION) return 'unrecognized codec version';
    }
    return err.reason;
  }
  return payloadReason;
}
