import type { AttributeValue, CompactSpan, SpanRecord } from './model.ts';
import { COMPACT, FS, literalRecord, type ChunkDict } from './store-format.ts';

/**
 * A finished span encoded into the record the store keeps (one record of a `ratchet.span_chunk` row; the view
 * `ratchet.span` names its fields), with what its chunk needs to know of it. The writer copies it into the chunk being
 * filled as the span ends (chunks.ts).
 */
export interface EncodedSpan {
  readonly traceId: string;
  readonly startNs: bigint;
  /** Its `restate.invocation.id` attribute, if any. */
  readonly invocationId: string | undefined;
  readonly record: string;
}

const INVOCATION_ID = 'restate.invocation.id';

export function encodeSpan(s: SpanRecord, dict: ChunkDict): EncodedSpan {
  const id = s.attributes[INVOCATION_ID];
  return {
    traceId: s.traceId,
    startNs: s.startNs,
    invocationId: typeof id === 'string' ? id : undefined,
    record: compactSpan(s, dict) ?? literalRecord(spanJson(s), true),
  };
}

/** The span's JSON object, as `ratchet.span` reads it. */
export function spanJson(s: SpanRecord): string {
  const events =
    s.events.length === 0
      ? '[]'
      : JSON.stringify(s.events.map((e) => ({ timeNs: e.timeNs.toString(), name: e.name, attributes: e.attributes })));
  const links = s.links.length === 0 ? '[]' : JSON.stringify(s.links);
  return (
    `{"trace_id":${JSON.stringify(s.traceId)},"span_id":${JSON.stringify(s.spanId)},` +
    `"parent_span_id":${JSON.stringify(s.parentSpanId)},` +
    `"name":${JSON.stringify(s.name)},"kind":${s.kind},"start_ns":${s.startNs},"end_ns":${s.endNs},` +
    `"status_code":${s.statusCode},"status_message":${JSON.stringify(s.statusMessage)},` +
    `"attributes":${JSON.stringify(s.attributes)},"events":${events},"links":${links}}`
  );
}

/*
 * The spans every invocation has, when they went as usual (no events, links or error), are stored compactly: their
 * kind, ids, times and the few values of their own; the invocation's ids and names once per chunk (migration 0012,
 * where PostgreSQL renders them back into exactly the object `spanJson` writes). Any other span is stored in full.
 */

const HEX_ID = /^[0-9a-f]{16}$/;
const TRACE_ID = /^[0-9a-f]{32}$/;

function isCount(v: AttributeValue | undefined): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Whether `name` is `prefix` then the target as span names show it (`{key}` for the key, see migration 0012). */
function namedAs(name: string, prefix: string, target: string, service: string, handler: string): boolean {
  const keyed = !(
    target.length === service.length + 1 + handler.length &&
    target.startsWith(service) &&
    target.charCodeAt(service.length) === 0x2f &&
    target.endsWith(handler)
  );
  const middle = keyed ? '/{key}/' : '/';
  return (
    name.length === prefix.length + service.length + middle.length + handler.length &&
    name.startsWith(prefix) &&
    name.startsWith(service, prefix.length) &&
    name.startsWith(middle, prefix.length + service.length) &&
    name.endsWith(handler)
  );
}

/**
 * A compact span's record (migration 0012). Its ids must be lower-case hex of their lengths and its numbers safe
 * non-negative integers: Ratchet's tracers make them so, and `asCompact` checks a span from elsewhere.
 */
export function encodeCompactSpan(c: CompactSpan, dict: ChunkDict): string {
  let extra: string;
  switch (c.kind) {
    case 'a':
      extra = `${FS}${c.attempt}${FS}${c.protocol}${FS}${c.deployment === undefined ? '' : dict.value(c.deployment)}`;
      break;
    case 'i':
      extra = `${FS}${c.address === undefined ? '' : dict.value(c.address)}${FS}${c.port ?? ''}${FS}${c.status}`;
      break;
    case 's':
    case 'e':
      extra = '';
  }
  const header = dict.spanHeader(c.id, c.target, c.service, c.handler, c.traceId);
  return `${COMPACT}${header}${FS}${c.kind}${FS}${c.spanId}${FS}${c.parentSpanId}${FS}${c.startNs}${FS}${c.endNs}${extra}`;
}

function compactSpan(s: SpanRecord, dict: ChunkDict): string | undefined {
  const c = asCompact(s);
  return c === undefined ? undefined : encodeCompactSpan(c, dict);
}

/** A span recorded in full that is one of the compact kinds, as a compact span; undefined for any other. */
export function asCompact(s: SpanRecord): CompactSpan | undefined {
  if (s.kind !== 1 || s.statusCode !== 0 || s.statusMessage !== '' || s.events.length > 0 || s.links.length > 0) {
    return undefined;
  }
  const a = s.attributes;
  const id = a['restate.invocation.id'];
  const target = a['restate.invocation.target'];
  const service = a['rpc.service'];
  const handler = a['rpc.method'];
  if (typeof id !== 'string' || typeof target !== 'string' || typeof service !== 'string') return undefined;
  if (typeof handler !== 'string') return undefined;
  if (!TRACE_ID.test(s.traceId) || !HEX_ID.test(s.spanId) || !(s.parentSpanId === '' || HEX_ID.test(s.parentSpanId))) {
    return undefined;
  }
  const common = {
    traceId: s.traceId,
    spanId: s.spanId,
    parentSpanId: s.parentSpanId,
    startNs: s.startNs,
    endNs: s.endNs,
    id,
    target,
    service,
    handler,
  };
  // The attributes a kind has: the four above and its own; counted, so that a span with any other is stored in full.
  let expected = 4;
  let c: CompactSpan;
  if (namedAs(s.name, 'invocation-attempt ', target, service, handler)) {
    const attempt = a['restate.invocation.attempt'];
    const protocol = a['restate.deployment.service_protocol_version'];
    const deployment = a['restate.deployment.id'];
    if (a['rpc.system'] !== 'restate' || !isCount(attempt) || !isCount(protocol)) return undefined;
    if (deployment !== undefined && typeof deployment !== 'string') return undefined;
    expected += deployment === undefined ? 3 : 4;
    c = { ...common, kind: 'a', attempt, protocol, deployment };
  } else if (namedAs(s.name, 'invocation-start ', target, service, handler)) {
    c = { ...common, kind: 's' };
  } else if (namedAs(s.name, 'invocation-end ', target, service, handler)) {
    if (a['restate.invocation.result'] !== 'success') return undefined;
    expected += 1;
    c = { ...common, kind: 'e' };
  } else if (namedAs(s.name, 'ingress ', target, service, handler)) {
    const address = a['client.socket.address'];
    const port = a['client.socket.port'];
    const status = a['http.response.status_code'];
    if (address !== undefined && typeof address !== 'string') return undefined;
    if ((port !== undefined && !isCount(port)) || !isCount(status)) return undefined;
    expected += 1 + (address === undefined ? 0 : 1) + (port === undefined ? 0 : 1);
    c = { ...common, kind: 'i', address, port, status };
  } else {
    return undefined;
  }
  let count = 0;
  for (const _ in a) count++;
  return count === expected ? c : undefined;
}

const PREFIX: Readonly<Record<CompactSpan['kind'], string>> = {
  s: 'invocation-start ',
  a: 'invocation-attempt ',
  e: 'invocation-end ',
  i: 'ingress ',
};

/**
 * A compact span as the span it stands for: what `ratchet.render_span` (migration 0012) makes of its record, for a
 * sink that is not the store (tests, tools).
 */
export function expandCompactSpan(
  c: CompactSpan,
  resource: Readonly<Record<string, AttributeValue>>,
  scope: string,
): SpanRecord {
  const keyed = c.target !== `${c.service}/${c.handler}`;
  const attributes: Record<string, AttributeValue> = {
    'restate.invocation.id': c.id,
    'restate.invocation.target': c.target,
    'rpc.service': c.service,
    'rpc.method': c.handler,
  };
  if (c.kind === 'a') {
    attributes['rpc.system'] = 'restate';
    attributes['restate.invocation.attempt'] = c.attempt!;
    attributes['restate.deployment.service_protocol_version'] = c.protocol!;
    if (c.deployment !== undefined) attributes['restate.deployment.id'] = c.deployment;
  } else if (c.kind === 'e') {
    attributes['restate.invocation.result'] = 'success';
  } else if (c.kind === 'i') {
    if (c.address !== undefined) attributes['client.socket.address'] = c.address;
    if (c.port !== undefined) attributes['client.socket.port'] = c.port;
    attributes['http.response.status_code'] = c.status!;
  }
  return {
    traceId: c.traceId,
    spanId: c.spanId,
    parentSpanId: c.parentSpanId,
    name: `${PREFIX[c.kind]}${c.service}${keyed ? '/{key}/' : '/'}${c.handler}`,
    kind: 1,
    startNs: c.startNs,
    endNs: c.endNs,
    statusCode: 0,
    statusMessage: '',
    attributes,
    events: [],
    links: [],
    resource,
    scope,
  };
}
