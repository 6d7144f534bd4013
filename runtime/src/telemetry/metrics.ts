import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric Ratchet exports, defined once. Names follow `ratchet_<component>_<what>_<unit>`. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'ratchet_process_' });
  return {
    registry,
    invocationsAccepted: new Counter({
      name: 'ratchet_engine_invocations_accepted_total',
      help: 'Invocations stored by the engine, by who invoked them.',
      labelNames: ['invoked_by'] as const,
      registers: [registry],
    }),
    invocationsCompleted: new Counter({
      name: 'ratchet_engine_invocations_completed_total',
      help: 'Invocations that reached a final result, by result (success or failure).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    attemptFailures: new Counter({
      name: 'ratchet_invoker_attempt_failures_total',
      help: 'Invocation attempts that ended in a failure, by error code.',
      labelNames: ['code'] as const,
      registers: [registry],
    }),
    stateCacheReads: new Counter({
      name: 'ratchet_engine_state_cache_reads_total',
      help: "Virtual-object state loaded for an attempt's start, by where it came from (hit: memory, miss: PostgreSQL).",
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    commitBatchSize: new Histogram({
      name: 'ratchet_storage_commit_batch_writes',
      help: 'Writes committed together in one group-commit transaction.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers: [registry],
    }),
    commitDuration: new Histogram({
      name: 'ratchet_storage_commit_duration_seconds',
      help: 'Duration of one group-commit transaction, from BEGIN to COMMIT.',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
