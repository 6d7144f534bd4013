import type { ActiveService, HandlerSchema, OnMaxAttempts, ServiceDefaults } from './types.ts';

/**
 * The settings an invocation of a handler runs with, resolved in one place for the engine (what an invocation is
 * given) and the admin API (what a service shows). The precedence is restate-server 1.7's
 * (`resolve_latest_invocation_target`, `resolve_invocation_attempt_options`, `resolve_invocation_retry_policy`):
 *
 *   the handler's manifest value → the service's value → the server default
 *
 * where the service's value is the one set through `PATCH /services/{name}` if any, else the manifest's (restate
 * writes the PATCH into the service revision, so it replaces the manifest's service-level value but never a
 * handler's). Field by field:
 *
 * - retentions and timeouts: handler → PATCH → service manifest → `default-*` / invoker setting;
 * - workflow completion retention (workflow services, one value for all their handlers): the manifest's, which it
 *   carries on the run handler (`manifest.ts` copies it onto the service) → PATCH → server default. So a PATCH does
 *   not change what an SDK set, as in restate;
 * - journal retention, whatever its source, is reduced to `max-journal-retention` (RT0022);
 * - retry policy, each field on its own: handler → service manifest → `default-retry-policy` (not patchable);
 * - lazy state: handler → service manifest → off (not patchable);
 * - public: the handler's explicit `ingressPrivate`, else the service's (PATCH → manifest).
 *
 * The inactivity timeout is the one an attempt is given; a deployment in request/response mode cannot be asked to
 * suspend, so it has no effect there (the invoker does not apply it, the admin API shows `0s`, RT0021).
 */

/** A retry policy with every field resolved. */
export interface RetryPolicySettings {
  initialIntervalMs: number;
  exponentiationFactor: number;
  maxAttempts: number;
  maxIntervalMs: number;
  onMaxAttempts: OnMaxAttempts;
}

export interface HandlerSettings {
  /** Whether the ingress accepts calls to it. */
  public: boolean;
  idempotencyRetentionMs: number;
  /** Workflow services only (undefined for the others). */
  workflowCompletionRetentionMs: number | undefined;
  journalRetentionMs: number;
  /** The configured journal retention was above `max-journal-retention` and was reduced to it (RT0022). */
  journalRetentionClamped: boolean;
  inactivityTimeoutMs: number;
  abortTimeoutMs: number;
  enableLazyState: boolean;
  retryPolicy: RetryPolicySettings;
}

/** `value` reduced to `max` when there is one; `clamped` says whether it was above. */
export function clampJournalRetention(
  valueMs: number,
  defaults: Pick<ServiceDefaults, 'maxJournalRetentionMs'>,
): { valueMs: number; clamped: boolean } {
  const max = defaults.maxJournalRetentionMs;
  return max !== undefined && valueMs > max ? { valueMs: max, clamped: true } : { valueMs, clamped: false };
}

/**
 * The settings of `handler` of `service`; without a handler, those of the service as a whole (what the admin API's
 * `ServiceMetadata` shows: the handlers' own values take no part).
 */
export function effectiveHandlerSettings(
  service: ActiveService,
  handler: HandlerSchema | undefined,
  defaults: ServiceDefaults,
): HandlerSettings {
  const { schema, overrides } = service;
  const h: Partial<HandlerSchema> = handler ?? {};
  const servicePublic = overrides.public ?? schema.ingressPrivate !== true;
  const journal = clampJournalRetention(
    h.journalRetentionMs ?? overrides.journalRetentionMs ?? schema.journalRetentionMs ?? defaults.journalRetentionMs,
    defaults,
  );
  const handlerPolicy = h.retryPolicy ?? {};
  const servicePolicy = schema.retryPolicy;
  const defaultPolicy = defaults.retryPolicy;
  return {
    public: h.ingressPrivate === undefined ? servicePublic : !h.ingressPrivate,
    idempotencyRetentionMs:
      h.idempotencyRetentionMs ??
      overrides.idempotencyRetentionMs ??
      schema.idempotencyRetentionMs ??
      defaults.idempotencyRetentionMs,
    workflowCompletionRetentionMs:
      schema.ty === 'Workflow'
        ? (schema.handlers.find((candidate) => candidate.ty === 'Workflow')?.workflowCompletionRetentionMs ??
          schema.workflowCompletionRetentionMs ??
          overrides.workflowCompletionRetentionMs ??
          defaults.workflowCompletionRetentionMs)
        : undefined,
    journalRetentionMs: journal.valueMs,
    journalRetentionClamped: journal.clamped,
    inactivityTimeoutMs:
      h.inactivityTimeoutMs ??
      overrides.inactivityTimeoutMs ??
      schema.inactivityTimeoutMs ??
      defaults.inactivityTimeoutMs,
    abortTimeoutMs: h.abortTimeoutMs ?? overrides.abortTimeoutMs ?? schema.abortTimeoutMs ?? defaults.abortTimeoutMs,
    enableLazyState: h.enableLazyState ?? schema.enableLazyState ?? false,
    retryPolicy: {
      initialIntervalMs:
        handlerPolicy.initialIntervalMs ?? servicePolicy.initialIntervalMs ?? defaultPolicy.initialIntervalMs,
      exponentiationFactor:
        handlerPolicy.exponentiationFactor ?? servicePolicy.exponentiationFactor ?? defaultPolicy.exponentiationFactor,
      maxAttempts: handlerPolicy.maxAttempts ?? servicePolicy.maxAttempts ?? defaultPolicy.maxAttempts,
      maxIntervalMs: handlerPolicy.maxIntervalMs ?? servicePolicy.maxIntervalMs ?? defaultPolicy.maxIntervalMs,
      onMaxAttempts: handlerPolicy.onMaxAttempts ?? servicePolicy.onMaxAttempts ?? defaultPolicy.onMaxAttempts,
    },
  };
}

export interface InvocationRetention {
  /** How long the completed invocation (its status and result) is kept. */
  completionRetentionMs: number;
  /** How long its journal is kept; never longer than the completion. */
  journalRetentionMs: number;
}

/**
 * What a completed invocation keeps, as restate-server 1.7 computes it (`InvocationTargetMetadata::compute_retention`):
 * a workflow run keeps its completion for the workflow completion retention, a call with an idempotency key for the
 * idempotency retention, each with the journal capped to it; any other invocation keeps its completion exactly as
 * long as its journal (the status must outlive the journal), and nothing when the journal retention is 0.
 */
export function invocationRetention(
  settings: Pick<HandlerSettings, 'idempotencyRetentionMs' | 'workflowCompletionRetentionMs' | 'journalRetentionMs'>,
  target: { workflowRun: boolean; idempotencyKey: boolean },
): InvocationRetention {
  if (target.workflowRun || target.idempotencyKey) {
    const completion = target.workflowRun
      ? (settings.workflowCompletionRetentionMs ?? 0)
      : settings.idempotencyRetentionMs;
    return { completionRetentionMs: completion, journalRetentionMs: Math.min(settings.journalRetentionMs, completion) };
  }
  return { completionRetentionMs: settings.journalRetentionMs, journalRetentionMs: settings.journalRetentionMs };
}
