import { KubeConfig } from '@kubernetes/client-node';
import { loadConfig, OperatorConfigError, type OperatorConfig } from './config.ts';
import { startOperator } from './operator.ts';
import { createLogger } from './telemetry/logger.ts';

/*
 * The operator process. SIGTERM/SIGINT: stop informers, drain in-flight reconciles (bounded), release the Lease,
 * exit 0. Kubernetes' default grace period is 30 s, so the drain gets 20 s of it.
 */

const DRAIN_DEADLINE_MS = 20_000;

async function main(): Promise<void> {
  let config: OperatorConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (!(err instanceof OperatorConfigError)) throw err;
    createLogger('info').fatal({ variable: err.variable }, err.message);
    process.exitCode = 1;
    return;
  }
  const log = createLogger(config.logLevel, { base: { pod: config.podName } });
  log.info(
    {
      namespace: config.namespace,
      watchNamespaces: config.watchNamespaces.length === 0 ? 'all' : config.watchNamespaces,
      leaderElection: config.leaderElection.enabled,
    },
    'starting the Ratchet operator',
  );

  const shutdown = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (shutdown.signal.aborted) {
      log.warn({ signal }, 'second signal during shutdown: exiting now');
      process.exit(1);
    }
    log.info({ signal }, 'shutting down');
    shutdown.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const operator = await startOperator({ config, kubeConfig, log });
  if (!shutdown.signal.aborted) {
    await new Promise<void>((resolve) => shutdown.signal.addEventListener('abort', () => resolve(), { once: true }));
  }
  if (!(await operator.stop(DRAIN_DEADLINE_MS))) log.warn('exiting with reconciles still in flight');
  log.info('stopped');
  process.exit(0);
}

main().catch((err: unknown) => {
  createLogger('info').fatal({ err }, 'the operator failed');
  process.exit(1);
});
