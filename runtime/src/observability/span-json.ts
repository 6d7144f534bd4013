import type { AttributeValue, SpanRecord } from './model.ts';

/**
 * A finished span as the writer buffers it until the next flush: encoded when it ends, into the JSON the store keeps
 * (one element of a `ratchet.span_chunk` row's array; the view `ratchet.span` names its fields). Encoding at once lets
 * the span's objects die young; only this flat string waits for the flush.
 */
export interface EncodedSpan {
  readonly traceId: string;
  readonly startNs: bigint;
  /** Its `restate.invocation.id` attribute, if any. */
  readonly invocationId: string | undefined;
  readonly resource: Readonly<Record<string, AttributeValue>>;
  readonly scope: string;
  readonly json: string;
}

const INVOCATION_ID = 'restate.invocation.id';

export function encodeSpan(s: SpanRecord): EncodedSpan {
  const events =
    s.events.length === 0
      ? '[]'
      : JSON.stringify(s.events.map((e) => ({ timeNs: e.timeNs.toString(), name: e.name, attributes: e.attributes })));
  const links = s.links.length === 0 ? '[]' : JSON.stringify(s.links);
  const id = s.attributes[INVOCATION_ID];
  const json =
    `{"trace_id":${JSON.stringify(s.traceId)},"span_id":${JSON.stringify(s.spanId)},` +
    `"parent_span_id":${JSON.stringify(s.parentSpanId)},` +
    `"name":${JSON.stringify(s.name)},"kind":${s.kind},"start_ns":${s.startNs},"end_ns":${s.endNs},` +
    `"status_code":${s.statusCode},"status_message":${JSON.stringify(s.statusMessage)},` +
    `"attributes":${JSON.stringify(s.attributes)},"events":${events},"links":${links}}`;
  // The text waits in the writer's buffer until the next flush. As built it is a tree of the pieces above; reading it
  // as a number makes V8 flatten it into one string now, while the pieces are young, so that the pieces die here
  // instead of being promoted with it (measured: a few per cent of throughput with the store on).
  Number(json);
  return {
    traceId: s.traceId,
    startNs: s.startNs,
    invocationId: typeof id === 'string' ? id : undefined,
    resource: s.resource,
    scope: s.scope,
    json,
  };
}
