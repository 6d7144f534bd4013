import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric Ratchet exports, defined once. Names follow `ratchet_<component>_<what>_<unit>`. */
export function createMetrics() {
  const registry = new Registry();
  /** Where the observability counters are read at each scrape (set once the node's store writer exists). */
  const observability: { stats?: () => ObservabilityCounts } = {};
  const reported: ObservabilityCounts = { written: { logs: 0, spans: 0 }, dropped: { logs: 0, spans: 0 } };
  // prom-client's own names already say what they measure (`process_cpu_seconds_total`, `nodejs_heap_size_…`):
  // prefixed with `ratchet_` only, so none reads `ratchet_process_process_…`.
  collectDefaultMetrics({ register: registry, prefix: 'ratchet_' });
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
    ownedPartitions: new Gauge({
      name: 'ratchet_cluster_owned_partitions',
      help: 'Partitions this node serves now.',
      registers: [registry],
    }),
    liveNodes: new Gauge({
      name: 'ratchet_cluster_live_nodes',
      help: 'Runtime nodes with a fresh heartbeat, as this node saw them last.',
      registers: [registry],
    }),
    partitionMoves: new Counter({
      name: 'ratchet_cluster_partition_moves_total',
      help: 'Partitions this node took (acquired), gave up to others (released) or found taken over (lost).',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    partitionRecovery: new Histogram({
      name: 'ratchet_cluster_partition_recovery_seconds',
      help: 'Time to recover partitions from PostgreSQL after taking them (or after a failed write).',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    observability,
    observabilityRecords: new Counter({
      name: 'ratchet_observability_records_total',
      help:
        'Log lines and spans this node wrote to the log and trace store (written), or dropped because its buffer was ' +
        'full while the store was slow or away (dropped), by kind (logs, spans).',
      labelNames: ['kind', 'outcome'] as const,
      registers: [registry],
      collect() {
        const now = observability.stats?.();
        if (now === undefined) return;
        for (const outcome of ['written', 'dropped'] as const) {
          for (const kind of ['logs', 'spans'] as const) {
            const delta = now[outcome][kind] - reported[outcome][kind];
            if (delta > 0) this.labels(kind, outcome).inc(delta);
            reported[outcome][kind] = now[outcome][kind];
          }
        }
      },
    }),
    httpRefused: new Counter({
      name: 'ratchet_http_refused_total',
      help: 'Requests and connections an HTTP listener refused for a limit, by listener and reason.',
      labelNames: ['listener', 'reason'] as const,
      registers: [registry],
    }),
    introspectionRefused: new Counter({
      name: 'ratchet_introspection_sessions_refused_total',
      help: 'SQL sessions refused for a limit (53300), by reason (max_sessions, max_sessions_per_user).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    ingressLimit: new Counter({
      name: 'ratchet_ingress_limit_requests_total',
      help: "Ingress requests counted against the cluster's request budget, by result (admitted or refused with 429).",
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    forwardedRequests: new Counter({
      name: 'ratchet_cluster_forwarded_requests_total',
      help: "Requests this node sent on to the partition's owner, by listener and outcome.",
      labelNames: ['listener', 'result'] as const,
      registers: [registry],
    }),
    kafkaRecords: new Counter({
      name: 'ratchet_kafka_records_total',
      help:
        "Kafka records of a subscription this node's consumer read (consumed), stored as invocations (enqueued) or " +
        'refused (rejected: a keyed sink and a record without a UTF-8 key).',
      labelNames: ['subscription', 'outcome'] as const,
      registers: [registry],
    }),
    kafkaLag: new Gauge({
      name: 'ratchet_kafka_consumer_lag_records',
      help: "Records of a topic partition not yet enqueued (high watermark minus the consumer's next offset).",
      labelNames: ['subscription', 'topic', 'partition'] as const,
      registers: [registry],
    }),
    kafkaInflight: new Gauge({
      name: 'ratchet_kafka_inflight_records',
      help: "Records of a topic partition enqueued by this node's consumer whose invocations have not finished.",
      labelNames: ['subscription', 'topic', 'partition'] as const,
      registers: [registry],
    }),
    kafkaPausedPartitions: new Gauge({
      name: 'ratchet_kafka_paused_partitions',
      help: 'Topic partitions of a subscription paused because too many of their records are unfinished.',
      labelNames: ['subscription'] as const,
      registers: [registry],
    }),
    kafkaConsumerErrors: new Counter({
      name: 'ratchet_kafka_consumer_errors_total',
      help:
        'Failures of a subscription consumer, by kind (settings, connect, consume, enqueue, commit); each is ' +
        'retried with backoff.',
      labelNames: ['subscription', 'kind'] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** What the observability writer counted so far (its `stats()`). */
export interface ObservabilityCounts {
  readonly written: { logs: number; spans: number };
  readonly dropped: { logs: number; spans: number };
}
