import { SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { InvocationObserver, LifecycleEvent, ObservedInvocation, TraceRequest } from '../../engine/observer.ts';
import { contextOf, plainParent, serializeContext, spanContextOf } from './context.ts';
import { nowNs, randomHex, RecordingTracer } from './recording-tracer.ts';
import { endWithError } from './tracing.ts';

/** Attempt spans kept open at most; beyond, the oldest are ended (an invocation dropped from memory never ends its). */
const MAX_OPEN_ATTEMPTS = 100_000;

/** Restate's span names put a placeholder where the key is: `counter/{key}/add`; the key is in the target attribute. */
function spanTarget(inv: { service: string; handler: string; key: string | null }): string {
  return inv.key === null ? `${inv.service}/${inv.handler}` : `${inv.service}/{key}/${inv.handler}`;
}

function common(inv: ObservedInvocation | TraceRequest): Attributes {
  return {
    'restate.invocation.id': inv.id,
    'restate.invocation.target': inv.target,
    'rpc.service': inv.service,
    'rpc.method': inv.handler,
  };
}

function attemptAttributes(inv: ObservedInvocation, protocolVersion: number): Attributes {
  const attributes: Attributes = {
    'restate.invocation.id': inv.id,
    'restate.invocation.target': inv.target,
    'rpc.service': inv.service,
    'rpc.method': inv.handler,
    'rpc.system': 'restate',
    'restate.invocation.attempt': inv.attempt,
    'restate.deployment.service_protocol_version': protocolVersion,
  };
  if (inv.deploymentId !== null) attributes['restate.deployment.id'] = inv.deploymentId;
  return attributes;
}

/**
 * An attempt whose span is kept compact while nothing but its start has happened (with Ratchet's own tracer): it goes
 * to the store as a compact span if it ends as usual, and becomes a span like any other if anything else happens.
 */
interface CompactAttempt {
  readonly compact: true;
  readonly inv: ObservedInvocation;
  readonly protocolVersion: number;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly startNs: bigint;
}

/**
 * The spans of invocations, in Restate 1.7's vocabulary: `invocation-start <target>` when it is admitted (the span
 * its other spans are parented to: its context is stored with the invocation), `invocation-attempt <target>` for
 * each attempt, with the lifecycle as span events and a failed attempt's error as its status, and
 * `invocation-end <target>` when it completes. An invocation called by another starts a trace of its own, linked
 * to its caller's.
 */
export class InvocationTracer implements InvocationObserver {
  private readonly attempts = new Map<string, Span | CompactAttempt>();
  /**
   * Ratchet's own tracer (the store is the only place spans go): the spans every invocation has are then recorded in
   * the store's compact form, without span objects (they were most of what tracing cost an invocation).
   */
  private readonly compact: RecordingTracer | undefined;

  constructor(private readonly tracer: Tracer) {
    this.compact = tracer instanceof RecordingTracer ? tracer : undefined;
  }

  newTrace(req: TraceRequest): string {
    const compact = this.compact;
    if (compact !== undefined && (req.caller === null || req.caller === undefined || req.caller === '')) {
      const parent = plainParent(req.parent);
      if (parent !== null) {
        const traceId = parent?.traceId ?? randomHex(16);
        const spanId = randomHex(8);
        const now = nowNs();
        compact.emit({
          kind: 's',
          traceId,
          spanId,
          parentSpanId: parent?.spanId ?? '',
          startNs: now,
          endNs: now,
          id: req.id,
          target: req.target,
          service: req.service,
          handler: req.handler,
        });
        return `00-${traceId}-${spanId}-01`;
      }
    }
    const parent = contextOf(req.parent);
    const caller = spanContextOf(req.caller);
    const span = this.tracer.startSpan(
      `invocation-start ${spanTarget(req)}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: common(req),
        ...(caller === undefined ? {} : { links: [{ context: caller, attributes: { 'restate.link': 'caller' } }] }),
      },
      parent,
    );
    span.end();
    return serializeContext(span.spanContext());
  }

  event(inv: ObservedInvocation, e: LifecycleEvent): void {
    switch (e.kind) {
      case 'started': {
        this.endAttempt(inv.id);
        if (this.attempts.size >= MAX_OPEN_ATTEMPTS) {
          const [oldest] = this.attempts.keys();
          if (oldest !== undefined) this.endAttempt(oldest);
        }
        const parent =
          this.compact === undefined || !Number.isSafeInteger(inv.attempt) || !Number.isSafeInteger(e.protocolVersion)
            ? null
            : plainParent(inv.traceContext);
        if (parent !== null && parent !== undefined) {
          this.attempts.set(inv.id, {
            compact: true,
            inv,
            protocolVersion: e.protocolVersion,
            traceId: parent.traceId,
            spanId: randomHex(8),
            parentSpanId: parent.spanId,
            startNs: nowNs(),
          });
          return;
        }
        const span = this.tracer.startSpan(
          `invocation-attempt ${spanTarget(inv)}`,
          { kind: SpanKind.INTERNAL, attributes: attemptAttributes(inv, e.protocolVersion) },
          contextOf(inv.traceContext),
        );
        this.attempts.set(inv.id, span);
        return;
      }
      case 'replayed':
        this.span(inv.id)?.addEvent('restate.invocation.lifecycle.replayed', { 'restate.journal.length': e.entries });
        return;
      case 'suspended':
        this.span(inv.id)?.addEvent('restate.invocation.lifecycle.suspended');
        this.endAttempt(inv.id);
        return;
      case 'retrying': {
        const span = this.take(inv.id);
        if (span === undefined) return;
        if (e.stacktrace !== undefined) {
          span.addEvent('exception', { 'exception.message': e.message, 'exception.stacktrace': e.stacktrace });
        }
        endWithError(span, e.code, e.message, {
          'restate.invocation.error.code': e.code,
          ...(e.stacktrace === undefined ? {} : { 'restate.invocation.error.stacktrace': e.stacktrace }),
          'restate.invocation.retry_delay_ms': e.delayMs,
        });
        return;
      }
      case 'paused': {
        const span = this.take(inv.id);
        if (span === undefined) return;
        span.addEvent('restate.invocation.lifecycle.paused', { by: e.by });
        if (e.code !== undefined) endWithError(span, e.code, e.message ?? '');
        else span.end();
        return;
      }
      case 'cancelled':
        this.span(inv.id)?.addEvent('restate.invocation.lifecycle.cancelled');
        return;
      case 'killed':
        this.span(inv.id)?.addEvent('restate.invocation.lifecycle.killed');
        this.endAttempt(inv.id);
        return;
      case 'completed': {
        this.endAttempt(inv.id);
        if (this.compact !== undefined && e.outcome === 'success' && e.code === undefined) {
          const parent = plainParent(inv.traceContext);
          if (parent !== null && parent !== undefined) {
            const now = nowNs();
            this.compact.emit({
              kind: 'e',
              traceId: parent.traceId,
              spanId: randomHex(8),
              parentSpanId: parent.spanId,
              startNs: now,
              endNs: now,
              id: inv.id,
              target: inv.target,
              service: inv.service,
              handler: inv.handler,
            });
            return;
          }
        }
        const span = this.tracer.startSpan(
          `invocation-end ${spanTarget(inv)}`,
          {
            kind: SpanKind.INTERNAL,
            attributes: {
              ...common(inv),
              'restate.invocation.result': e.outcome,
              ...(e.code === undefined ? {} : { 'restate.invocation.error.code': e.code }),
            },
          },
          contextOf(inv.traceContext),
        );
        if (e.outcome === 'failure') span.setStatus({ code: SpanStatusCode.ERROR, message: e.message ?? '' });
        span.end();
        return;
      }
      case 'restarted-as-new': {
        const span = this.tracer.startSpan(
          `restart-as-new ${spanTarget(inv)}`,
          {
            kind: SpanKind.INTERNAL,
            attributes: { ...common(inv), 'restate.invocation.restart_as_new.new_invocation_id': e.newId },
          },
          contextOf(inv.traceContext),
        );
        span.end();
        return;
      }
      case 'accepted':
      case 'scheduled':
      case 'inboxed':
      case 'resumed':
        return;
    }
  }

  /** The open attempt span of an invocation, made a span like any other if it was kept compact. */
  private span(id: string): Span | undefined {
    const a = this.attempts.get(id);
    if (a === undefined || !('compact' in a)) return a;
    const span = this.compact!.resume(
      a,
      `invocation-attempt ${spanTarget(a.inv)}`,
      a.startNs,
      attemptAttributes(a.inv, a.protocolVersion) as Record<string, string | number>,
    );
    this.attempts.set(id, span);
    return span;
  }

  private take(id: string): Span | undefined {
    const span = this.span(id);
    this.attempts.delete(id);
    return span;
  }

  /** Ends the open attempt span of an invocation as usual (a compact one goes to the store as it is). */
  private endAttempt(id: string): void {
    const a = this.attempts.get(id);
    if (a === undefined) return;
    this.attempts.delete(id);
    if (!('compact' in a)) {
      a.end();
      return;
    }
    this.compact!.emit({
      kind: 'a',
      traceId: a.traceId,
      spanId: a.spanId,
      parentSpanId: a.parentSpanId,
      startNs: a.startNs,
      endNs: nowNs(),
      id: a.inv.id,
      target: a.inv.target,
      service: a.inv.service,
      handler: a.inv.handler,
      attempt: a.inv.attempt,
      protocol: a.protocolVersion,
      deployment: a.inv.deploymentId ?? undefined,
    });
  }
}

export { trace };
