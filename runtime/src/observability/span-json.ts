import type { AttributeValue, SpanRecord } from './model.ts';

/**
 * A finished span encoded into the JSON the store keeps (one element of a `ratchet.span_chunk` row's array; the view
 * `ratchet.span` names its fields), with what its chunk needs to know of it. The writer copies it into the chunk being
 * filled as the span ends (chunks.ts).
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
  return {
    traceId: s.traceId,
    startNs: s.startNs,
    invocationId: typeof id === 'string' ? id : undefined,
    resource: s.resource,
    scope: s.scope,
    json,
  };
}
