/**
 * What the engine tells whoever watches invocations (the observability module: lifecycle log lines now, spans
 * next): one call per lifecycle event, after the change it reports is durable. An observer never blocks or fails
 * the invocation path: it is called synchronously and must only queue.
 */

/** The invocation an event is about. */
export interface ObservedInvocation {
  readonly id: string;
  /** `Service/handler` or `Service/key/handler`. */
  readonly target: string;
  readonly service: string;
  readonly handler: string;
  readonly key: string | null;
  readonly deploymentId: string | null;
  /** Attempts so far that failed (the next attempt's number, counting from 0). */
  readonly attempt: number;
  readonly partition: number;
  /** The trace context its spans are parented to (see `newTrace`), null for one admitted without an observer. */
  readonly traceContext: string | null;
}

/** A new invocation about to be stored, for which the observer starts its trace. */
export interface TraceRequest {
  readonly id: string;
  readonly target: string;
  readonly service: string;
  readonly handler: string;
  readonly key: string | null;
  /** The trace context it came with (the ingress span, parented to the client's `traceparent`). */
  readonly parent: string | undefined;
  /** The trace context of the invocation that called it (or that it was restarted from): linked, not parented. */
  readonly caller: string | null | undefined;
}

export type LifecycleEvent =
  | { readonly kind: 'accepted'; readonly idempotencyKey: string | null }
  | { readonly kind: 'scheduled'; readonly at: Date }
  | { readonly kind: 'inboxed' }
  | { readonly kind: 'started'; readonly protocolVersion: number }
  /** An attempt started with journal entries to replay (a retry or a resumption). */
  | { readonly kind: 'replayed'; readonly entries: number }
  | { readonly kind: 'suspended' }
  | { readonly kind: 'resumed'; readonly by: 'notification' | 'admin' }
  | {
      readonly kind: 'retrying';
      readonly code: string;
      readonly message: string;
      readonly stacktrace: string | undefined;
      readonly delayMs: number;
    }
  | {
      readonly kind: 'paused';
      readonly by: 'admin' | 'failure';
      readonly code: string | undefined;
      readonly message: string | undefined;
    }
  | { readonly kind: 'cancelled' }
  | { readonly kind: 'killed' }
  | {
      readonly kind: 'completed';
      readonly outcome: 'success' | 'failure';
      readonly code: number | undefined;
      readonly message: string | undefined;
    }
  | { readonly kind: 'restarted-as-new'; readonly newId: string };

export interface InvocationObserver {
  event(inv: ObservedInvocation, e: LifecycleEvent): void;
  /**
   * Starts the trace of a new invocation and returns its context, stored with the invocation so that every node
   * running it later parents its spans to it.
   */
  newTrace?(req: TraceRequest): string | undefined;
}

/** Several observers as one (logs and traces). */
export function observers(...all: InvocationObserver[]): InvocationObserver {
  return {
    event(inv, e) {
      for (const o of all) o.event(inv, e);
    },
    newTrace(req) {
      for (const o of all) {
        const ctx = o.newTrace?.(req);
        if (ctx !== undefined) return ctx;
      }
      return undefined;
    },
  };
}
