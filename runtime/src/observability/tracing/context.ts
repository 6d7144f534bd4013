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

export function serializeContext(span: SpanContext): string {
  const carrier: Record<string, string> = {};
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  const parent = carrier.traceparent ?? '';
  return carrier.tracestate === undefined || carrier.tracestate === '' ? parent : `${parent} ${carrier.tracestate}`;
}

/** The OpenTelemetry context a stored (or received) trace context stands for; the root context when there is none. */
export function contextOf(stored: string | null | undefined): Context {
  if (stored === null || stored === undefined || stored === '') return ROOT_CONTEXT;
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
