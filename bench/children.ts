import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { captureOutput, exitStatus, hasExited, trackChild, type ExitStatus } from '../test/support/child-process.ts';
import { REPO_ROOT } from '../test/support/runtime-process.ts';
import type { LoadReply, LoadRequest, LoadStats, LoadStop } from './load-generator.ts';
import type { RuntimeName } from './runtimes.ts';
import type { ServiceHostReady } from './service-host.ts';

/** The harness's Node children: the SDK service hosts and the load generator, each a bench/ module with IPC. */

export interface Forked {
  readonly child: ChildProcess;
  readonly what: string;
  readonly output: () => string;
  readonly exited: Promise<ExitStatus>;
  stop(): Promise<void>;
}

/** A TypeScript module of bench/ in its own Node process with an IPC channel and its own process group. */
export async function forkModule(module: string, what: string, env: NodeJS.ProcessEnv = {}): Promise<Forked> {
  const child = fork(join(REPO_ROOT, 'bench', module), [], {
    cwd: REPO_ROOT,
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    // Ctrl-C reaches only the harness, which stops everything in order.
    detached: true,
  });
  trackChild(child);
  const output = captureOutput(child);
  const exited = exitStatus(child);
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  let stopping: Promise<void> | undefined;
  return {
    child,
    what,
    output,
    exited,
    stop() {
      stopping ??= (async () => {
        if (hasExited(child)) return;
        // Both modules exit when the channel closes; a signal only if that does not work.
        if (child.connected) child.disconnect();
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 5000)));
        const first = await Promise.race([exited, timeout]);
        clearTimeout(timer);
        if (first === 'timeout') {
          child.kill('SIGKILL');
          await exited;
        }
      })();
      return stopping;
    },
  };
}

export async function startServiceHost(forRuntime: RuntimeName): Promise<{ forked: Forked; url: string }> {
  const forked = await forkModule('service-host.ts', `SDK service host for ${forRuntime}`, {
    // The SDK logs every invocation at INFO; that would be most of the service's work.
    RESTATE_LOGGING: process.env['RESTATE_LOGGING'] ?? 'ERROR',
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${forked.what} did not report its URL within 30 s`)), 30_000);
    forked.child.once('message', (message: ServiceHostReady) => {
      clearTimeout(timer);
      resolve(message.url);
    });
    void forked.exited.then((status) => {
      clearTimeout(timer);
      reject(
        new Error(
          `${forked.what} exited (${JSON.stringify(status)}) before it was ready:\n${forked.output().slice(-4000)}`,
        ),
      );
    });
  });
  return { forked, url };
}

export class LoadGenerator {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (s: LoadStats) => void; reject: (e: Error) => void }>();

  constructor(readonly forked: Forked) {
    forked.child.on('message', (message: LoadReply) => {
      const waiter = this.pending.get(message.id);
      if (waiter === undefined) return;
      this.pending.delete(message.id);
      if (message.type === 'result') waiter.resolve(message.stats);
      else waiter.reject(new Error(`load generator: ${message.message}`));
    });
    void forked.exited.then((status) => {
      for (const waiter of this.pending.values()) {
        waiter.reject(new Error(`load generator exited (${JSON.stringify(status)}):\n${forked.output().slice(-4000)}`));
      }
      this.pending.clear();
    });
  }

  run(request: Omit<LoadRequest, 'type' | 'id'>): Promise<LoadStats> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const message: LoadRequest = { type: 'run', id, ...request };
      this.forked.child.send(message);
    });
  }

  /** Ends the run in progress early (its result still arrives). */
  stopRun(): void {
    const message: LoadStop = { type: 'stop' };
    if (this.forked.child.connected) this.forked.child.send(message);
  }
}
