import type { Attributes } from '@opentelemetry/api';
import { hrTimeToNanoseconds } from '@opentelemetry/core';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { AttributeValue, CompactSpan, SpanRecord } from '../model.ts';

/** Where finished spans go: the node's observability writer. */
export interface SpanSink {
  span(span: SpanRecord): void;
  /** An invocation's routine span in the store's compact form (see `CompactSpan`). */
  compactSpan(c: CompactSpan, resource: Readonly<Record<string, AttributeValue>>, scope: string): void;
}

function attributes(attrs: Attributes): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const [k, v] of Object.entries(attrs)) {
    const value = v;
    if (value === undefined || value === null) continue;
    out[k] = Array.isArray(value) ? JSON.stringify(value) : value;
  }
  return out;
}

/** Resource attributes as records, once per resource (a node has one). */
const resources = new WeakMap<object, Record<string, AttributeValue>>();

function resourceOf(span: ReadableSpan): Record<string, AttributeValue> {
  let r = resources.get(span.resource);
  if (r === undefined) {
    r = attributes(span.resource.attributes);
    resources.set(span.resource, r);
  }
  return r;
}

/** A finished span as the store keeps it (OTLP's numbering of span kinds: the API's plus one). */
export function toSpanRecord(span: ReadableSpan): SpanRecord {
  const sc = span.spanContext();
  return {
    traceId: sc.traceId,
    spanId: sc.spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? '',
    name: span.name,
    kind: span.kind + 1,
    startNs: BigInt(hrTimeToNanoseconds(span.startTime)),
    endNs: BigInt(hrTimeToNanoseconds(span.endTime)),
    statusCode: span.status.code,
    statusMessage: span.status.message ?? '',
    attributes: attributes(span.attributes),
    events: span.events.map((e) => ({
      timeNs: BigInt(hrTimeToNanoseconds(e.time)),
      name: e.name,
      attributes: attributes(e.attributes ?? {}),
    })),
    links: span.links.map((l) => ({
      traceId: l.context.traceId,
      spanId: l.context.spanId,
      attributes: attributes(l.attributes ?? {}),
    })),
    resource: resourceOf(span),
    scope: span.instrumentationScope.name,
  };
}

/** Hands every finished span to the store's writer (which batches; nothing here waits). */
export class StoreSpanProcessor implements SpanProcessor {
  constructor(private readonly sink: SpanSink) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    this.sink.span(toSpanRecord(span));
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
