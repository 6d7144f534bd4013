/*
 * Stored spans as Tempo returns a trace: OTLP ResourceSpans grouped by resource and instrumentation scope, encoded as
 * protobuf (`Accept: application/protobuf`) or as Tempo's JSON (protojson: ids base64, as Tempo's /api/traces JSON
 * has them; Grafana's backend asks for protobuf and hex-encodes ids itself).
 */
import { type JsonObject, create, toBinary, toJson } from '@bufbuild/protobuf';
import type { AttributeValue, SpanRecord } from '../model.ts';
import { TempoTraceSchema, TraceByIDResponseSchema } from './otlp-schema.ts';

type Init = Record<string, unknown>;

function anyValue(v: AttributeValue): Init {
  if (typeof v === 'string') return { value: { case: 'stringValue', value: v } };
  if (typeof v === 'boolean') return { value: { case: 'boolValue', value: v } };
  if (Number.isSafeInteger(v)) return { value: { case: 'intValue', value: BigInt(v) } };
  return { value: { case: 'doubleValue', value: v } };
}

export function keyValues(attrs: Readonly<Record<string, AttributeValue>>): Init[] {
  return Object.entries(attrs).map(([key, v]) => ({ key, value: anyValue(v) }));
}

function idBytes(hex: string): Uint8Array {
  return hex === '' ? new Uint8Array(0) : Uint8Array.from(Buffer.from(hex.length % 2 === 0 ? hex : `0${hex}`, 'hex'));
}

function span(s: SpanRecord): Init {
  return {
    traceId: idBytes(s.traceId),
    spanId: idBytes(s.spanId),
    parentSpanId: idBytes(s.parentSpanId),
    name: s.name,
    kind: s.kind,
    startTimeUnixNano: s.startNs,
    endTimeUnixNano: s.endNs,
    attributes: keyValues(s.attributes),
    events: s.events.map((e) => ({ timeUnixNano: e.timeNs, name: e.name, attributes: keyValues(e.attributes) })),
    links: s.links.map((l) => ({
      traceId: idBytes(l.traceId),
      spanId: idBytes(l.spanId),
      attributes: keyValues(l.attributes),
    })),
    status: { code: s.statusCode, message: s.statusMessage },
  };
}

function sortedEntries(attrs: Readonly<Record<string, AttributeValue>>): string {
  return JSON.stringify(Object.entries(attrs).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** OTLP ResourceSpans for the spans: one per distinct resource, one ScopeSpans per scope, spans by start time. */
export function resourceSpans(spans: readonly SpanRecord[]): Init[] {
  const byResource = new Map<string, { resource: SpanRecord['resource']; scopes: Map<string, SpanRecord[]> }>();
  const ordered = [...spans].sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
  for (const s of ordered) {
    const key = sortedEntries(s.resource);
    let r = byResource.get(key);
    if (r === undefined) {
      r = { resource: s.resource, scopes: new Map() };
      byResource.set(key, r);
    }
    const list = r.scopes.get(s.scope);
    if (list === undefined) r.scopes.set(s.scope, [s]);
    else list.push(s);
  }
  return [...byResource.values()].map((r) => ({
    resource: { attributes: keyValues(r.resource) },
    scopeSpans: [...r.scopes].map(([name, list]) => ({ scope: { name }, spans: list.map(span) })),
  }));
}

function traceMessage(spans: readonly SpanRecord[]) {
  return create(TempoTraceSchema, { resourceSpans: resourceSpans(spans) });
}

/** `tempopb.Trace` bytes: the v1 trace-by-id protobuf answer. */
export function traceProto(spans: readonly SpanRecord[]): Uint8Array {
  return toBinary(TempoTraceSchema, traceMessage(spans));
}

/** The v1 JSON answer: `{"batches":[…]}` (Tempo rewrites `resourceSpans` to `batches` in v1). */
export function traceJsonV1(spans: readonly SpanRecord[]): JsonObject {
  const json = toJson(TempoTraceSchema, traceMessage(spans)) as JsonObject;
  return { batches: json['resourceSpans'] ?? [] };
}

function byIdResponse(spans: readonly SpanRecord[]) {
  return create(TraceByIDResponseSchema, { trace: traceMessage(spans), metrics: {} });
}

/** `tempopb.TraceByIDResponse` bytes: the v2 trace-by-id protobuf answer (what Grafana asks for first). */
export function traceByIdProto(spans: readonly SpanRecord[]): Uint8Array {
  return toBinary(TraceByIDResponseSchema, byIdResponse(spans));
}

/** The v2 JSON answer: `{"trace":{"resourceSpans":[…]},"metrics":{}}`. */
export function traceByIdJson(spans: readonly SpanRecord[]): JsonObject {
  return toJson(TraceByIDResponseSchema, byIdResponse(spans)) as JsonObject;
}
