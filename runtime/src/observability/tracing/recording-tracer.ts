import { randomFillSync } from 'node:crypto';
import {
  context as contextApi,
  trace,
  TraceFlags,
  type Attributes,
  type AttributeValue as OtelAttributeValue,
  type Context,
  type Exception,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
} from '@opentelemetry/api';
import type { AttributeValue, CompactSpan, SpanEvent, SpanLink, SpanRecord } from '../model.ts';
import { StoredTraceContext } from './context.ts';
import type { SpanSink } from './store-exporter.ts';

/*
 * A tracer of OpenTelemetry's API that turns each span straight into the store's record when it ends, for a node that
 * stores its spans and exports them nowhere else. The SDK's tracer (tracing.ts, used when an OTLP collector is
 * configured) builds a span object, copies and sanitizes its attributes, runs processors and converts high-resolution
 * times; for the few spans of every invocation that work is most of what tracing costs. This one keeps what the store
 * needs and nothing more: the same span names, attributes, events, links, parents and W3C contexts.
 */

/** The monotonic clock's offset from Unix time, taken once: now = monotonic + offset, one BigInt addition per span. */
const CLOCK_OFFSET_NS =
  BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) - process.hrtime.bigint();

/** Unix time in nanoseconds now. */
export function nowNs(): bigint {
  return process.hrtime.bigint() + CLOCK_OFFSET_NS;
}

function timeNs(t: TimeInput | undefined): bigint {
  if (t === undefined) return nowNs();
  if (typeof t === 'number') {
    const whole = Math.trunc(t);
    return BigInt(whole) * 1_000_000n + BigInt(Math.round((t - whole) * 1e6));
  }
  if (t instanceof Date) return BigInt(t.getTime()) * 1_000_000n;
  return BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);
}

/** Random ids as hex, cut from a pool of random bytes refilled as it runs out (one system call per 256 spans). */
const POOL_BYTES = 4096;
let poolHex = '';
let poolOffset = 0;

export function randomHex(bytes: number): string {
  const chars = bytes * 2;
  for (;;) {
    if (poolOffset + chars > poolHex.length) {
      poolHex = randomFillSync(Buffer.allocUnsafe(POOL_BYTES)).toString('hex');
      poolOffset = 0;
    }
    const hex = poolHex.slice(poolOffset, poolOffset + chars);
    poolOffset += chars;
    // All-zero ids are invalid in W3C trace context; with 2^-64 odds, draw again.
    if (hex !== ZEROS.slice(0, chars)) return hex;
  }
}

const ZEROS = '0'.repeat(32);

function storedValue(v: OtelAttributeValue): AttributeValue {
  return Array.isArray(v) ? JSON.stringify(v) : v;
}

function copyAttributes(into: Record<string, AttributeValue>, attrs: Attributes | undefined): void {
  if (attrs === undefined) return;
  for (const k in attrs) {
    const v = attrs[k];
    if (v !== undefined && v !== null) into[k] = storedValue(v);
  }
}

/** Events and links of the many spans that have none share this (a span copies it before its first). */
const NONE: readonly never[] = Object.freeze([]);

/** Whether every value is one the store keeps as it is (no arrays, no undefined or null to drop). */
function plain(attrs: Attributes): boolean {
  for (const k in attrs) {
    const v = attrs[k];
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') return false;
  }
  return true;
}

const OK_UNSET: SpanStatus = Object.freeze({ code: 0 });

class RecordingSpan implements Span {
  private readonly attributes: Record<string, AttributeValue>;
  private events: SpanEvent[] = NONE as never as SpanEvent[];
  private links: SpanLink[] = NONE as never as SpanLink[];
  private status: SpanStatus = OK_UNSET;
  private ended = false;

  constructor(
    private readonly tracer: RecordingTracer,
    private readonly context: SpanContext,
    private readonly parentSpanId: string,
    private name: string,
    private readonly kind: number,
    private readonly startNs: bigint,
    attributes: Attributes | undefined,
    links: readonly Link[] | undefined,
  ) {
    // The span takes the attributes object its creator passes (a literal made for it, as Ratchet's tracers do)
    // rather than copying it, unless some value needs converting.
    if (attributes === undefined) this.attributes = {};
    else if (plain(attributes)) this.attributes = attributes as Record<string, AttributeValue>;
    else copyAttributes((this.attributes = {}), attributes);
    if (links !== undefined && links.length > 0) this.addLinks(links as Link[]);
  }

  spanContext(): SpanContext {
    return this.context;
  }

  setAttribute(key: string, value: OtelAttributeValue): this {
    if (!this.ended && value !== undefined && value !== null) this.attributes[key] = storedValue(value);
    return this;
  }

  setAttributes(attributes: Attributes): this {
    if (!this.ended) copyAttributes(this.attributes, attributes);
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    const isTime =
      typeof attributesOrTime === 'number' || attributesOrTime instanceof Date || Array.isArray(attributesOrTime);
    const attributes: Record<string, AttributeValue> = {};
    if (!isTime) copyAttributes(attributes, attributesOrTime);
    if (Object.isFrozen(this.events)) this.events = [];
    this.events.push({ timeNs: timeNs(isTime ? attributesOrTime : time), name, attributes });
    return this;
  }

  addLink(link: Link): this {
    const attributes: Record<string, AttributeValue> = {};
    copyAttributes(attributes, link.attributes);
    if (Object.isFrozen(this.links)) this.links = [];
    this.links.push({ traceId: link.context.traceId, spanId: link.context.spanId, attributes });
    return this;
  }

  addLinks(links: Link[]): this {
    for (const l of links) this.addLink(l);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (!this.ended) this.status = status;
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    this.ended = true;
    this.tracer.finished({
      traceId: this.context.traceId,
      spanId: this.context.spanId,
      parentSpanId: this.parentSpanId,
      name: this.name,
      kind: this.kind + 1,
      startNs: this.startNs,
      endNs: timeNs(endTime),
      statusCode: this.status.code,
      statusMessage: this.status.message ?? '',
      attributes: this.attributes,
      events: this.events,
      links: this.links,
      resource: this.tracer.resource,
      scope: this.tracer.scope,
    });
  }

  isRecording(): boolean {
    return !this.ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: Attributes =
      typeof exception === 'string'
        ? { 'exception.message': exception }
        : {
            ...(exception.name === undefined ? {} : { 'exception.type': exception.name }),
            ...(exception.message === undefined ? {} : { 'exception.message': exception.message }),
            ...(exception.stack === undefined ? {} : { 'exception.stacktrace': exception.stack }),
          };
    this.addEvent('exception', attributes, time);
  }
}

/** See the comment at the top of this file. `resource` is the node's (the same for all its spans). */
export class RecordingTracer implements Tracer {
  constructor(
    private readonly sink: SpanSink,
    readonly resource: Readonly<Record<string, AttributeValue>>,
    readonly scope: string,
  ) {}

  startSpan(name: string, options: SpanOptions = {}, ctx: Context = contextApi.active()): Span {
    let parentTrace: string | undefined;
    let parentSpan = '';
    let sampled = true;
    let traceState: SpanContext['traceState'];
    const stored = options.root !== true && ctx instanceof StoredTraceContext ? ctx.parent : undefined;
    if (stored !== undefined) {
      parentTrace = stored.traceId;
      parentSpan = stored.spanId;
      sampled = stored.sampled;
    } else if (options.root !== true) {
      const parent = trace.getSpanContext(ctx);
      if (parent !== undefined && trace.isSpanContextValid(parent)) {
        parentTrace = parent.traceId;
        parentSpan = parent.spanId;
        sampled = (parent.traceFlags & 1) === 1; // TraceFlags.SAMPLED
        traceState = parent.traceState;
      }
    }
    const spanContext: SpanContext = {
      traceId: parentTrace ?? randomHex(16),
      spanId: randomHex(8),
      traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
      ...(traceState === undefined ? {} : { traceState }),
    };
    // A parent that was not sampled: nothing is recorded below it, as OpenTelemetry's default (parent-based) sampler does.
    if (!sampled) return trace.wrapSpanContext(spanContext);
    return new RecordingSpan(
      this,
      spanContext,
      parentSpan,
      name,
      options.kind ?? 0,
      timeNs(options.startTime),
      options.attributes,
      options.links,
    );
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, options: SpanOptions, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    context: Context,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    a: SpanOptions | F,
    b?: Context | F,
    c?: F,
  ): ReturnType<F> {
    const fn = (c ?? (typeof b === 'function' ? b : a)) as F;
    const options = typeof a === 'function' ? {} : a;
    const parent = typeof b === 'object' ? b : contextApi.active();
    const span = this.startSpan(name, options, parent);
    return contextApi.with(trace.setSpan(parent, span), fn as (s: Span) => ReturnType<F>, undefined, span);
  }

  /** @internal A span ended: its record goes to the store's writer. */
  finished(record: SpanRecord): void {
    this.sink.span(record);
  }

  /**
   * An invocation's routine span, ended, straight to the store in its compact form: what the invocation and ingress
   * tracers record for the spans every invocation has, without a span object (see `CompactSpan`).
   */
  emit(c: CompactSpan): void {
    this.sink.compactSpan(c, this.resource, this.scope);
  }

  /**
   * A span that was being kept compact and turned out not to be routine (an event, an error): recording from here on
   * as any span, with the ids and start it had.
   */
  resume(
    ids: { traceId: string; spanId: string; parentSpanId: string },
    name: string,
    startNs: bigint,
    attributes: Record<string, AttributeValue>,
  ): Span {
    const context: SpanContext = { traceId: ids.traceId, spanId: ids.spanId, traceFlags: TraceFlags.SAMPLED };
    return new RecordingSpan(this, context, ids.parentSpanId, name, 0, startNs, attributes, undefined);
  }
}
