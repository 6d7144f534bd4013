import {
  ROOT_CONTEXT,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Context,
  type SpanContext,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * An invocation's trace context as stored with it (`ratchet.invocation.trace_context`): the W3C `traceparent` of
 * the span its spans are parented to, then, after a space, its `tracestate` when it has one. Every node that runs
 * an attempt of the invocation parents its spans to it, so that one invocation is one trace across nodes and crashes.
 */
const propagator = new W3CTraceContextPropagator();

/** A traceparent of version 00 as Ratchet writes and most clients send it: parsed here without the propagator. */
const SIMPLE_PARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_SPAN = '0000000000000000';

export function serializeContext(span: SpanContext): string {
  if (span.traceState === undefined) {
    // What the propagator writes for a context without a tracestate, without its carrier and checks.
    const flags = span.traceFlags & 0xff;
    return `00-${span.traceId}-${span.spanId}-${flags < 16 ? '0' : ''}${flags.toString(16)}`;
  }
  const carrier: Record<string, string> = {};
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  const parent = carrier.traceparent ?? '';
  return carrier.tracestate === undefined || carrier.tracestate === '' ? parent : `${parent} ${carrier.tracestate}`;
}

/** The ids of the span a stored trace context names, when it is a plain sampled one (version 00, no tracestate). */
export interface PlainParent {
  readonly traceId: string;
  readonly spanId: string;
}

/**
 * The parent a stored trace context gives a new span, for a tracer that records compact spans: undefined when there
 * is none (a new trace), null when it is not a plain sampled traceparent (then the span goes the general way).
 */
export function plainParent(stored: string | null | undefined): PlainParent | undefined | null {
  if (stored === null || stored === undefined || stored === '') return undefined;
  const p = new StoredTraceContext(stored).parent;
  return p === undefined || !p.sampled ? null : p;
}

/** The OpenTelemetry context a stored (or received) trace context stands for; the root context when there is none. */
export function contextOf(stored: string | null | undefined): Context {
  if (stored === null || stored === undefined || stored === '') return ROOT_CONTEXT;
  return new StoredTraceContext(stored);
}

/**
 * A context that holds only a stored trace context, parsed when something asks for it (OpenTelemetry's SDK does, through
 * `trace.getSpanContext`). Ratchet's own tracer (recording-tracer.ts) reads `parent` instead, which costs no parsing
 * and no context objects for the few spans of every invocation.
 */
export class StoredTraceContext implements Context {
  private resolved: Context | undefined;

  constructor(readonly stored: string) {}

  /** The parent of a plain stored traceparent (version 00, no tracestate, valid ids); undefined otherwise. */
  get parent(): { traceId: string; spanId: string; sampled: boolean } | undefined {
    const s = this.stored;
    if (!SIMPLE_PARENT.test(s)) return undefined;
    const traceId = s.slice(3, 35);
    const spanId = s.slice(36, 52);
    if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
    return { traceId, spanId, sampled: (parseInt(s.slice(53, 55), 16) & 1) === 1 };
  }

  getValue(key: symbol): unknown {
    return this.context().getValue(key);
  }

  setValue(key: symbol, value: unknown): Context {
    return this.context().setValue(key, value);
  }

  deleteValue(key: symbol): Context {
    return this.context().deleteValue(key);
  }

  private context(): Context {
    this.resolved ??= parseStored(this.stored);
    return this.resolved;
  }
}

function parseStored(stored: string): Context {
  const simple = SIMPLE_PARENT.exec(stored);
  if (simple !== null) {
    const [, traceId, spanId, flags] = simple;
    if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return ROOT_CONTEXT;
    return trace.setSpanContext(ROOT_CONTEXT, {
      traceId: traceId!,
      spanId: spanId!,
      traceFlags: parseInt(flags!, 16),
      isRemote: true,
    });
  }
  const space = stored.indexOf(' ');
  const carrier =
    space < 0 ? { traceparent: stored } : { traceparent: stored.slice(0, space), tracestate: stored.slice(space + 1) };
  return propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
}

/** The span context of a stored trace context, if it is a valid one. */
export function spanContextOf(stored: string | null | undefined): SpanContext | undefined {
  const sc = trace.getSpanContext(contextOf(stored));
  return sc !== undefined && trace.isSpanContextValid(sc) ? sc : undefined;
}

/** The trace context of incoming W3C headers (`traceparent`, `tracestate`), if they hold a valid one. */
export function fromHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  if (headers.traceparent === undefined) return undefined;
  const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);
  const ctx = propagator.extract(
    ROOT_CONTEXT,
    { traceparent: one(headers.traceparent), tracestate: one(headers.tracestate) },
    {
      get: (c: Record<string, string | undefined>, k: string) => c[k],
      keys: (c: Record<string, string | undefined>) => Object.keys(c),
    },
  );
  const sc = trace.getSpanContext(ctx);
  return sc !== undefined && trace.isSpanContextValid(sc) ? serializeContext(sc) : undefined;
}

/** The W3C headers that carry a stored trace context to a deployment, so that the SDK's spans join the trace. */
export function toHeaders(stored: string | null | undefined): [string, string][] {
  if (stored === null || stored === undefined || stored === '') return [];
  const space = stored.indexOf(' ');
  return space < 0
    ? [['traceparent', stored]]
    : [
        ['traceparent', stored.slice(0, space)],
        ['tracestate', stored.slice(space + 1)],
      ];
}
