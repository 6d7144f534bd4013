import type { ActiveService, HandlerSchema } from '../schema/types.ts';
import { IngressErrors } from './errors.ts';
import { parseInvocationIdParam, type InvocationQuery } from './ids.ts';

/** What path parsing needs from the schema registry: service types decide whether a key segment follows. */
export interface ServiceLookup {
  service(name: string): ActiveService | undefined;
}

export type InvokeRoute = {
  kind: 'invoke';
  service: ActiveService;
  handler: HandlerSchema;
  key: string | undefined;
  send: boolean;
  /** From `/restate/scope/{scope}/…`; refused while vqueues do not exist. */
  scope: string | undefined;
};

export type IngressRoute =
  | { kind: 'health' }
  | { kind: 'openapi' }
  | InvokeRoute
  /** GET by id, idempotency key or workflow key, from the path. */
  | { kind: 'attach' | 'output'; query: InvocationQuery }
  /** POST with a target body (`/restate/attach|output|lookup`). */
  | { kind: 'attachByTarget' | 'outputByTarget' | 'lookup' }
  | { kind: 'awakeable'; op: 'resolve' | 'reject'; awakeableId: string };

/**
 * restate-server 1.7's ingress path rules (`path_parsing.rs`): 2 to 7 slashes; `/restate/…` is the Restate API,
 * anything else a service call whose shape depends on the service type (only virtual objects and workflows take a
 * key segment). Object and workflow keys are URL-decoded; names, handler names and idempotency keys are not. Segments
 * are consumed left to right and trailing ones are ignored wherever restate ignores them.
 */
export function parseIngressPath(rawPath: string, services: ServiceLookup): IngressRoute {
  let slashes = 0;
  for (let i = 0; i < rawPath.length; i++) if (rawPath.charCodeAt(i) === 0x2f) slashes++;
  if (slashes < 2 || slashes > 7) throw IngressErrors.badPath(rawPath);

  const segments = new Segments(rawPath.split('/').slice(1));
  const first = segments.next()!;
  if (first === 'openapi') return { kind: 'openapi' };
  if (first !== 'restate') return legacyServiceRoute(first, segments, services);

  const verb = segments.next()!;
  switch (verb) {
    case 'health':
      return { kind: 'health' };
    case 'awakeables':
    case 'a':
      return awakeableRoute(segments);
    case 'invocation':
      return invocationRoute(segments, services);
    case 'workflow':
      return workflowRoute(segments);
    case 'call':
    case 'send':
      return callOrSendRoute(verb, undefined, segments, services);
    case 'scope': {
      const scope = decodeKey(segments.required(IngressErrors.badRestateApiPath));
      const inner = segments.required(IngressErrors.badRestateApiPath);
      return callOrSendRoute(inner, scope, segments, services);
    }
    case 'attach':
    case 'output': {
      const id = segments.next();
      if (id === undefined) return { kind: verb === 'attach' ? 'attachByTarget' : 'outputByTarget' };
      if (segments.next() !== undefined) throw IngressErrors.badRestateApiPath();
      return { kind: verb, query: { kind: 'invocation', id: parseInvocationIdParam(id) } };
    }
    case 'lookup':
      if (segments.next() !== undefined) throw IngressErrors.badRestateApiPath();
      return { kind: 'lookup' };
    default:
      throw IngressErrors.notFound();
  }
}

/**
 * restate's ingress sits behind tower-http's trailing-slash normalization: a path that ends with `/` or starts with
 * `//` loses all its leading and trailing slashes (`/Greeter/greet/` is `/Greeter/greet`, `/Greeter/` is `/Greeter`).
 */
export function normalizePath(path: string): string {
  if (!path.endsWith('/') && !path.startsWith('//')) return path;
  let start = 0;
  let end = path.length;
  while (start < end && path.charCodeAt(start) === 0x2f) start++;
  while (end > start && path.charCodeAt(end - 1) === 0x2f) end--;
  return `/${path.slice(start, end)}`;
}

class Segments {
  private i = 0;
  constructor(private readonly parts: string[]) {}
  next(): string | undefined {
    return this.parts[this.i++];
  }
  required(error: () => Error): string {
    const s = this.next();
    if (s === undefined) throw error();
    return s;
  }
}

function lookupService(name: string, services: ServiceLookup): ActiveService {
  const service = services.service(name);
  if (service === undefined) throw IngressErrors.serviceNotFound(name);
  return service;
}

function isKeyed(service: ActiveService): boolean {
  return service.schema.ty !== 'Service';
}

function findHandler(service: ActiveService, name: string): HandlerSchema {
  const handler = service.schema.handlers.find((h) => h.name === name);
  if (handler === undefined) throw IngressErrors.handlerNotFound(service.schema.name, name);
  return handler;
}

/** `/{svc}/{handler}[/send]`, `/{obj}/{key}/{handler}[/send]`. */
function legacyServiceRoute(name: string, segments: Segments, services: ServiceLookup): InvokeRoute {
  const service = lookupService(name, services);
  const key = isKeyed(service) ? decodeKey(segments.required(IngressErrors.badServicePath)) : undefined;
  const handlerName = segments.required(IngressErrors.badServicePath);
  const last = segments.next();
  if (last !== undefined && last !== 'send') throw IngressErrors.badServicePath();
  if (segments.next() !== undefined) throw IngressErrors.badServicePath();
  return {
    kind: 'invoke',
    service,
    handler: findHandler(service, handlerName),
    key,
    send: last === 'send',
    scope: undefined,
  };
}

/** `/restate/{call|send}/{svc}[/{key}]/{handler}`, also behind `/restate/scope/{scope}`. */
function callOrSendRoute(
  verb: string,
  scope: string | undefined,
  segments: Segments,
  services: ServiceLookup,
): InvokeRoute {
  if (verb !== 'call' && verb !== 'send') throw IngressErrors.badRestateApiPath();
  const service = lookupService(segments.required(IngressErrors.badRestateApiPath), services);
  const key = isKeyed(service) ? decodeKey(segments.required(IngressErrors.badRestateApiPath)) : undefined;
  const handlerName = segments.required(IngressErrors.badRestateApiPath);
  if (segments.next() !== undefined) throw IngressErrors.badRestateApiPath();
  return { kind: 'invoke', service, handler: findHandler(service, handlerName), key, send: verb === 'send', scope };
}

/** `/restate/awakeables/{id}/{resolve|reject}`; the id is parsed only after the method check, as restate does. */
function awakeableRoute(segments: Segments): IngressRoute {
  const awakeableId = segments.required(IngressErrors.badAwakeablesPath);
  const op = segments.required(IngressErrors.badAwakeablesPath);
  if (op !== 'resolve' && op !== 'reject') throw IngressErrors.notFound();
  return { kind: 'awakeable', op, awakeableId };
}

/**
 * `/restate/invocation/{id}/{attach|output}` or `/restate/invocation/{svc}[/{key}]/{handler}/{idempotencyKey}/…`:
 * a third segment means the idempotency form, whose service type decides whether a key segment is present.
 */
function invocationRoute(segments: Segments, services: ServiceLookup): IngressRoute {
  const first = segments.required(IngressErrors.badInvocationPath);
  const second = segments.required(IngressErrors.badInvocationPath);
  const third = segments.next();
  let query: InvocationQuery;
  let op: string;
  if (third === undefined) {
    op = second;
    query = { kind: 'invocation', id: parseInvocationIdParam(first) };
  } else {
    const service = lookupService(first, services);
    let handler: string;
    let idempotencyKey: string;
    let key: string | undefined;
    if (isKeyed(service)) {
      key = decodeKey(second);
      handler = third;
      idempotencyKey = segments.required(IngressErrors.badInvocationPath);
    } else {
      handler = second;
      idempotencyKey = third;
    }
    op = segments.required(IngressErrors.badInvocationPath);
    query = { kind: 'idempotency', service: first, key, handler, idempotencyKey };
  }
  if (op !== 'attach' && op !== 'output') throw IngressErrors.notFound();
  return { kind: op, query };
}

/** `/restate/workflow/{wf}/{key}/{attach|output}`. */
function workflowRoute(segments: Segments): IngressRoute {
  const name = segments.required(IngressErrors.badWorkflowPath);
  const key = decodeKey(segments.required(IngressErrors.badWorkflowPath));
  const op = segments.required(IngressErrors.badWorkflowPath);
  if (op !== 'attach' && op !== 'output') throw IngressErrors.notFound();
  return { kind: op, query: { kind: 'workflow', name, key } };
}

/**
 * Percent-decodes a key segment the way restate's `urlencoding::decode` does: a `%` not followed by two hex digits
 * stays as it is, `+` is not a space, and the decoded bytes must be UTF-8 (else restate's 400 with the Rust error).
 */
export function decodeKey(segment: string): string {
  if (!segment.includes('%')) return segment;
  const input = Buffer.from(segment, 'utf8');
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const b = input[i]!;
    if (b === 0x25 && i + 2 < input.length && isHex(input[i + 1]!) && isHex(input[i + 2]!)) {
      out[n++] = (hexValue(input[i + 1]!) << 4) | hexValue(input[i + 2]!);
      i += 2;
    } else {
      out[n++] = b;
    }
  }
  const bytes = out.subarray(0, n);
  const error = utf8Error(bytes);
  if (error !== undefined) {
    const len = error.errorLen === undefined ? 'None' : `Some(${error.errorLen})`;
    throw IngressErrors.keyNotUtf8(
      `FromUtf8Error { bytes: [${[...bytes].join(', ')}], error: Utf8Error { valid_up_to: ${error.validUpTo}, error_len: ${len} } }`,
    );
  }
  return bytes.toString('utf8');
}

function isHex(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
}

function hexValue(b: number): number {
  return b <= 0x39 ? b - 0x30 : (b | 0x20) - 0x61 + 10;
}

/**
 * The first UTF-8 error as Rust's `Utf8Error` describes it: `validUpTo` bytes are valid, then either `errorLen`
 * (1-3) bytes that can never start a valid sequence, or (undefined) a sequence cut short by the end of the input.
 */
export function utf8Error(bytes: Uint8Array): { validUpTo: number; errorLen: number | undefined } | undefined {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    let width: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) width = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      width = 3;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      width = 4;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f;
    } else return { validUpTo: i, errorLen: 1 };
    for (let k = 1; k < width; k++) {
      if (i + k >= bytes.length) return { validUpTo: i, errorLen: undefined };
      const c = bytes[i + k]!;
      const [min, max] = k === 1 ? [lo, hi] : [0x80, 0xbf];
      if (c < min || c > max) return { validUpTo: i, errorLen: k };
    }
    i += width;
  }
  return undefined;
}
