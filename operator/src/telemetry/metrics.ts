import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/*
 * Every metric the operator exports, defined once. Names mirror controller-runtime's (`controller_runtime_reconcile_*`,
 * `workqueue_*`) under the `ratchet_operator_` prefix, so existing dashboards and alerts translate by prefix only.
 */

const RECONCILE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const QUEUE_BUCKETS = [0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60];

export interface CreateMetricsOptions {
  /** Node process metrics (`ratchet_operator_process_*`, `ratchet_operator_nodejs_*`); off for throwaway registries in tests. */
  readonly processMetrics?: boolean;
}

export function createOperatorMetrics(options: CreateMetricsOptions = {}) {
  const registry = new Registry();
  if (options.processMetrics === true) collectDefaultMetrics({ register: registry, prefix: 'ratchet_operator_' });
  const registers = [registry];
  return {
    registry,
    reconcileTotal: new Counter({
      name: 'ratchet_operator_reconcile_total',
      help: 'Reconciles by controller and result (success, requeue_after, error).',
      labelNames: ['controller', 'result'] as const,
      registers,
    }),
    reconcileErrors: new Counter({
      name: 'ratchet_operator_reconcile_errors_total',
      help: 'Reconciles that threw, by controller.',
      labelNames: ['controller'] as const,
      registers,
    }),
    reconcileTime: new Histogram({
      name: 'ratchet_operator_reconcile_time_seconds',
      help: 'Duration of one reconcile, in seconds, by controller.',
      labelNames: ['controller'] as const,
      buckets: RECONCILE_BUCKETS,
      registers,
    }),
    workqueueDepth: new Gauge({
      name: 'ratchet_operator_workqueue_depth',
      help: 'Keys waiting in the work queue (not counting delayed ones), by queue name.',
      labelNames: ['name'] as const,
      registers,
    }),
    workqueueAdds: new Counter({
      name: 'ratchet_operator_workqueue_adds_total',
      help: 'Keys added to the work queue, by queue name.',
      labelNames: ['name'] as const,
      registers,
    }),
    workqueueRetries: new Counter({
      name: 'ratchet_operator_workqueue_retries_total',
      help: 'Keys re-added with backoff after a failed reconcile, by queue name.',
      labelNames: ['name'] as const,
      registers,
    }),
    workqueueQueueDuration: new Histogram({
      name: 'ratchet_operator_workqueue_queue_duration_seconds',
      help: 'Time a key waits in the work queue before it is processed, in seconds.',
      labelNames: ['name'] as const,
      buckets: QUEUE_BUCKETS,
      registers,
    }),
    workqueueWorkDuration: new Histogram({
      name: 'ratchet_operator_workqueue_work_duration_seconds',
      help: 'Time processing one key takes, in seconds.',
      labelNames: ['name'] as const,
      buckets: QUEUE_BUCKETS,
      registers,
    }),
    leader: new Gauge({
      name: 'ratchet_operator_leader',
      help: '1 while this instance holds the leader Lease (or runs without leader election), else 0.',
      registers,
    }),
    crdMissing: new Gauge({
      name: 'ratchet_operator_crd_missing',
      help: '1 while a CustomResourceDefinition the operator needs is not installed, by CRD name.',
      labelNames: ['crd'] as const,
      registers,
    }),
    adminApiRequests: new Counter({
      name: 'ratchet_operator_admin_api_requests_total',
      help: 'Requests to runtime admin APIs, by HTTP status code (0 when the runtime was unreachable).',
      labelNames: ['code'] as const,
      registers,
    }),
    deploymentsDraining: new Gauge({
      name: 'ratchet_operator_deployments_draining',
      help: 'Superseded deployment versions still draining, by Deployment resource.',
      labelNames: ['namespace', 'name'] as const,
      registers,
    }),
  };
}

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;

/**
 * The process's metrics. Parts built without an explicit `metrics` option (the admin client, controllers) count here,
 * and `/metrics` serves this registry.
 */
export const operatorMetrics: OperatorMetrics = createOperatorMetrics({ processMetrics: true });

/** Counts one admin API answer (`0` when the runtime could not be reached). For the admin client. */
export function countAdminApiRequest(code: number, metrics: OperatorMetrics = operatorMetrics): void {
  metrics.adminApiRequests.inc({ code: String(code) });
}

/** Sets the number of draining versions of one Deployment resource; 0 removes the series. For its controller. */
export function setDeploymentsDraining(
  namespace: string,
  name: string,
  count: number,
  metrics: OperatorMetrics = operatorMetrics,
): void {
  if (count === 0) metrics.deploymentsDraining.remove({ namespace, name });
  else metrics.deploymentsDraining.set({ namespace, name }, count);
}
