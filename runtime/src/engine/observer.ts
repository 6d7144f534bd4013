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
}
