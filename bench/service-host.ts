import { startEndpoint } from '../test/support/sdk-endpoint.ts';
import { SERVICES } from './workloads.ts';

/**
 * A child process (forked by `run.ts` with an IPC channel) that serves the benchmark's SDK services over h2c on a free
 * loopback port and reports its URL. One per runtime, so each runtime has its own instance and neither shares a CPU
 * budget with the load generator's process. It exits when its parent disconnects (or dies) or on SIGTERM.
 */

export interface ServiceHostReady {
  readonly type: 'ready';
  readonly url: string;
}

async function main(): Promise<void> {
  if (process.send === undefined) throw new Error('bench/service-host.ts must be started by bench/run.ts (IPC)');
  const endpoint = await startEndpoint({ services: SERVICES, transport: 'h2' });
  const stop = (): void => {
    void endpoint.close().finally(() => process.exit(0));
  };
  process.once('disconnect', stop);
  process.once('SIGTERM', stop);
  const ready: ServiceHostReady = { type: 'ready', url: endpoint.url };
  process.send(ready);
}

main().catch((err: unknown) => {
  process.stderr.write(`service host failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
