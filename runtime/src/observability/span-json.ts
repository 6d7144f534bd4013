import type { AttributeValue, SpanRecord } from './model.ts';
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

function compactSpan(s: SpanRecord, dict: ChunkDict): string | undefined {
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
  // The attributes a kind has: the four above and its own; counted, so that a span with any other is stored in full.
  let expected = 4;
  let kind: string;
  let extra: string;
  const c = s.name.charCodeAt(0);
  if (c === 0x69 /* i */ && s.name.startsWith('invocation-')) {
    const attempt = a['restate.invocation.attempt'];
    const protocol = a['restate.deployment.service_protocol_version'];
    if (namedAs(s.name, 'invocation-attempt ', target, service, handler)) {
      const dp = a['restate.deployment.id'];
      if (a['rpc.system'] !== 'restate' || !isCount(attempt) || !isCount(protocol)) return undefined;
      if (dp !== undefined && typeof dp !== 'string') return undefined;
      expected += dp === undefined ? 3 : 4;
      kind = 'a';
      extra = `${FS}${attempt}${FS}${protocol}${FS}${dp === undefined ? '' : dict.value(dp)}`;
    } else if (namedAs(s.name, 'invocation-start ', target, service, handler)) {
      kind = 's';
      extra = '';
    } else if (namedAs(s.name, 'invocation-end ', target, service, handler)) {
      if (a['restate.invocation.result'] !== 'success') return undefined;
      expected += 1;
      kind = 'e';
      extra = '';
    } else {
      return undefined;
    }
  } else if (c === 0x69 && namedAs(s.name, 'ingress ', target, service, handler)) {
    const address = a['client.socket.address'];
    const port = a['client.socket.port'];
    const status = a['http.response.status_code'];
    if (address !== undefined && typeof address !== 'string') return undefined;
    if ((port !== undefined && !isCount(port)) || !isCount(status)) return undefined;
    expected += 1 + (address === undefined ? 0 : 1) + (port === undefined ? 0 : 1);
    kind = 'i';
    extra = `${FS}${address === undefined ? '' : dict.value(address)}${FS}${port ?? ''}${FS}${status}`;
  } else {
    return undefined;
  }
  let count = 0;
  for (const _ in a) count++;
  if (count !== expected) return undefined;
  if (!TRACE_ID.test(s.traceId) || !HEX_ID.test(s.spanId) || !(s.parentSpanId === '' || HEX_ID.test(s.parentSpanId))) {
    return undefined;
  }
  const header = dict.spanHeader(id, target, service, handler, s.traceId);
  return `${COMPACT}${header}${FS}${kind}${FS}${s.spanId}${FS}${s.parentSpanId}${FS}${s.startNs}${FS}${s.endNs}${extra}`;
}
