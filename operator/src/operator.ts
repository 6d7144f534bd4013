import type { KubeConfig } from '@kubernetes/client-node';
import { createAdminClient } from './admin-client/client.ts';
import type { AdminClientFactory } from './admin-client/types.ts';
import type { OperatorConfig } from './config.ts';
import { clusterController } from './controllers/cluster/index.ts';
import { deploymentController } from './controllers/deployment/index.ts';
import { subscriptionController } from './controllers/subscription/index.ts';
import { CrdPresence, startHealthServer, type HealthServer } from './health.ts';
import { ClientNodeEventRecorder, ClientNodeKube } from './kube/client-node.ts';
import { LeaderElector } from './reconcile/leader.ts';
import { Manager } from './reconcile/manager.ts';
import type { Controller, ServiceUrlResolver } from './reconcile/types.ts';
import { componentLogger, type Logger } from './telemetry/logger.ts';
import { operatorMetrics } from './telemetry/metrics.ts';

/*
 * One operator instance: kube client → /healthz,/readyz,/metrics → wait for the CRDs → informers → leader election →
 * reconcile while leading. `main.ts` runs one per process; tests run one or two in-process against the fake API
 * server, with Services resolved to loopback.
 */

export const CONTROLLERS: readonly Controller[] = [clusterController, deploymentController, subscriptionController];

export interface OperatorOptions {
  readonly config: OperatorConfig;
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** In-cluster Service URLs by default; tests map them to loopback. */
  readonly serviceUrl?: ServiceUrlResolver;
  readonly admin?: AdminClientFactory;
  readonly controllers?: readonly Controller[];
}

export interface OperatorHandle {
  readonly health: HealthServer;
  /** Whether this instance holds the Lease (or runs without leader election) and reconciles. */
  isLeading(): boolean;
  /** Stops informers, drains in-flight reconciles within `drainMs`, releases the Lease. False if some did not drain. */
  stop(drainMs?: number): Promise<boolean>;
}

export async function startOperator(options: OperatorOptions): Promise<OperatorHandle> {
  const { config, log } = options;
  const kube = new ClientNodeKube(options.kubeConfig);
  const events = new ClientNodeEventRecorder(kube, {
    reportingInstance: config.podName,
    log: componentLogger(log, 'events'),
  });
  const manager = new Manager({
    controllers: options.controllers ?? CONTROLLERS,
    kube,
    events,
    admin: options.admin ?? createAdminClient,
    operatorNamespace: config.namespace,
    sources: (apiVersion, kind, namespace) => kube.listWatchSource(apiVersion, kind, namespace),
    watchNamespaces: config.watchNamespaces,
    resyncPeriodMs: config.resyncPeriodMs,
    maxConcurrentReconciles: config.maxConcurrentReconciles,
    clusterDomain: config.clusterDomain,
    ...(options.serviceUrl === undefined ? {} : { serviceUrl: options.serviceUrl }),
    log: componentLogger(log, 'manager'),
    metrics: operatorMetrics,
  });
  const crds = new CrdPresence({ kube, log: componentLogger(log, 'crds'), metrics: operatorMetrics });
  const health = await startHealthServer({
    host: config.health.host,
    port: config.health.port,
    registry: operatorMetrics.registry,
    log: componentLogger(log, 'health'),
    readiness: {
      problems: () => [
        ...crds.missing().map((crd) => `CRD ${crd} is not installed`),
        ...manager.unsynced().map((informer) => `informer ${informer} has not synced`),
      ],
    },
  });

  let leading = false;
  const elector = config.leaderElection.enabled
    ? new LeaderElector({
        client: kube,
        namespace: config.namespace,
        name: config.leaderElection.leaseName,
        identity: config.podName,
        leaseDurationMs: config.leaderElection.leaseDurationMs,
        renewDeadlineMs: config.leaderElection.renewDeadlineMs,
        retryPeriodMs: config.leaderElection.retryPeriodMs,
        log: componentLogger(log, 'leader-election'),
        onStartedLeading: () => {
          leading = true;
          manager.setLeading(true);
        },
        onStoppedLeading: () => {
          leading = false;
          manager.setLeading(false);
        },
      })
    : undefined;

  const shutdown = new AbortController();
  const started = run(shutdown.signal, crds, manager, elector, log, () => (leading = true));

  return {
    health,
    isLeading: () => leading,
    async stop(drainMs = 20_000) {
      shutdown.abort();
      await started;
      crds.stop();
      const drained = await manager.stop(drainMs);
      await elector?.stop();
      leading = false;
      await health.close();
      kube.close();
      return drained.every((r) => r.drained);
    },
  };
}

/** Startup steps that wait, each cut short by a shutdown. Resolves once leading starts or shutdown is requested. */
async function run(
  signal: AbortSignal,
  crds: CrdPresence,
  manager: Manager,
  elector: LeaderElector | undefined,
  log: Logger,
  leadWithoutElection: () => void,
): Promise<void> {
  if (signal.aborted) return;
  const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  signal.addEventListener('abort', () => crds.stop(), { once: true });
  if (!(await crds.waitUntilPresent()) || signal.aborted) return;
  manager.start();
  await Promise.race([manager.synced(), aborted]);
  if (signal.aborted) return;
  log.info('caches synced');
  if (elector === undefined) {
    leadWithoutElection();
    manager.setLeading(true);
  } else {
    elector.start();
  }
}
