import { qualifiedName, type JsonObject } from './types.ts';

/** Failure reasons the fake answers with, as the real server spells them. */
export type StatusReason =
  | 'BadRequest'
  | 'Unauthorized'
  | 'Forbidden'
  | 'NotFound'
  | 'MethodNotAllowed'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Gone'
  | 'Invalid'
  | 'UnsupportedMediaType'
  | 'InternalError'
  | 'ServiceUnavailable'
  | 'TooManyRequests'
  | 'Timeout';

const codes: Record<StatusReason, number> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  AlreadyExists: 409,
  Conflict: 409,
  Gone: 410,
  Invalid: 422,
  UnsupportedMediaType: 415,
  InternalError: 500,
  ServiceUnavailable: 503,
  TooManyRequests: 429,
  Timeout: 504,
};

interface Target {
  readonly group: string;
  readonly plural: string;
  readonly kind?: string;
}

export interface StatusCause {
  readonly type?: string;
  readonly message?: string;
  readonly field?: string;
}

/** An error that becomes a `Status` object at the HTTP edge. */
export class KubeError extends Error {
  readonly code: number;
  constructor(
    readonly reason: StatusReason,
    message: string,
    readonly details: JsonObject = {},
    code?: number,
  ) {
    super(message);
    this.code = code ?? codes[reason];
  }

  toStatus(): JsonObject {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    };
  }
}

function details(target: Target, name: string | undefined, extra: JsonObject = {}): JsonObject {
  return {
    ...(name !== undefined && name !== '' ? { name } : {}),
    ...(target.group !== '' ? { group: target.group } : {}),
    kind: target.plural,
    ...extra,
  };
}

function subject(target: Target, name: string | undefined): string {
  return name !== undefined && name !== '' ? `${qualifiedName(target)} "${name}"` : qualifiedName(target);
}

export function notFound(target: Target, name: string): KubeError {
  return new KubeError('NotFound', `${subject(target, name)} not found`, details(target, name));
}

export function alreadyExists(target: Target, name: string): KubeError {
  return new KubeError('AlreadyExists', `${subject(target, name)} already exists`, details(target, name));
}

export function conflict(target: Target, name: string, why: string): KubeError {
  return new KubeError(
    'Conflict',
    `Operation cannot be fulfilled on ${subject(target, name)}: ${why}`,
    details(target, name),
  );
}

export function staleConflict(target: Target, name: string): KubeError {
  return conflict(
    target,
    name,
    'the object has been modified; please apply your changes to the latest version and try again',
  );
}

export function invalid(target: Target & { kind: string }, name: string, causes: StatusCause[]): KubeError {
  const list = causes.map((c) => `${c.field ?? ''}: ${c.message ?? ''}`).join(', ');
  const summary = causes.length === 1 ? list : `[${list}]`;
  const kind = target.group !== '' ? `${target.kind}.${target.group}` : target.kind;
  return new KubeError('Invalid', `${kind} "${name}" is invalid: ${summary}`, {
    name,
    ...(target.group !== '' ? { group: target.group } : {}),
    kind: target.kind,
    causes: causes.map((c) => ({ reason: c.type ?? 'FieldValueInvalid', message: c.message, field: c.field })),
  });
}

export function forbidden(target: Target, name: string | undefined, why: string): KubeError {
  return new KubeError('Forbidden', `${subject(target, name)} is forbidden: ${why}`, details(target, name));
}

export function badRequest(message: string): KubeError {
  return new KubeError('BadRequest', message);
}

export function methodNotAllowed(message: string): KubeError {
  return new KubeError('MethodNotAllowed', message);
}

export function gone(message: string): KubeError {
  return new KubeError('Gone', message);
}

/** Unknown paths inside a served group/version, as the real server answers them. */
export function noSuchResource(): KubeError {
  return new KubeError('NotFound', 'the server could not find the requested resource');
}
