import { SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { InvocationObserver, LifecycleEvent, ObservedInvocation, TraceRequest } from '../../engine/observer.ts';
import { contextOf, serializeContext, spanContextOf } from './context.ts';
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

/**
 * The spans of invocations, in Restate 1.7's vocabulary: `invocation-start <target>` when it is admitted (the span
 * its other spans are parented to: its context is stored with the invocation), `invocation-attempt <target>` for
 * each attempt, with the lifecycle as span events and a failed attempt's error as its status, and
 * `invocation-end <target>` when it completes. An invocation called by another starts a trace of its own, linked
 * to its caller's.
 */
export class InvocationTracer implements InvocationObserver {
  private readonly attempts = new Map<string, Span>();

  constructor(private readonly tracer: Tracer) {}

  newTrace(req: TraceRequest): string {
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
        const span = this.tracer.startSpan(
          `invocation-attempt ${spanTarget(inv)}`,
          {
            kind: SpanKind.INTERNAL,
            attributes: {
              ...common(inv),
              'rpc.system': 'restate',
              'restate.invocation.attempt': inv.attempt,
              'restate.deployment.service_protocol_version': e.protocolVersion,
              ...(inv.deploymentId === null ? {} : { 'restate.deployment.id': inv.deploymentId }),
            },
          },
          contextOf(inv.traceContext),
        );
        if (this.attempts.size >= MAX_OPEN_ATTEMPTS) {
          const [oldest] = this.attempts.keys();
          if (oldest !== undefined) this.endAttempt(oldest);
        }
        this.attempts.set(inv.id, span);
        return;
      }
      case 'replayed':
        this.attempts
          .get(inv.id)
          ?.addEvent('restate.invocation.lifecycle.replayed', { 'restate.journal.length': e.entries });
        return;
      case 'suspended':
        this.attempts.get(inv.id)?.addEvent('restate.invocation.lifecycle.suspended');
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
        this.attempts.get(inv.id)?.addEvent('restate.invocation.lifecycle.cancelled');
        return;
      case 'killed':
        this.attempts.get(inv.id)?.addEvent('restate.invocation.lifecycle.killed');
        this.endAttempt(inv.id);
        return;
      case 'completed': {
        this.endAttempt(inv.id);
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

  private take(id: string): Span | undefined {
    const span = this.attempts.get(id);
    this.attempts.delete(id);
    return span;
  }

  private endAttempt(id: string): void {
    this.take(id)?.end();
  }
}

export { trace };
