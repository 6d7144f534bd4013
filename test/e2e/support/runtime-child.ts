import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { onTestFailed } from 'vitest';
import {
  answers200,
  captureOutput,
  exitStatus,
  hasExited,
  trackChild,
  waitUntilReady,
  type ExitStatus,
} from '../../support/child-process.ts';
import { bindAddr, freePort, loopbackUrl } from '../../support/ports.ts';
import { REPO_ROOT, type RuntimePorts } from '../../support/runtime-process.ts';

/**
 * The runtime as the user starts it, for tests of the process itself: unlike `startRuntimeProcess` it does not require
 * `RATCHET_DATABASE_URL` (dev mode), does not wait for readiness (startup failures are what some tests want), and
 * passes no `RATCHET_*` variable of the test run's environment through.
 */

export const START_TIMEOUT_MS = 60_000;

export interface RuntimeChild {
  readonly pid: number;
  readonly child: ChildProcess;
  readonly ports: RuntimePorts;
  readonly adminUrl: string;
  readonly ingressUrl: string;
  readonly metricsUrl: string;
  readonly exited: Promise<ExitStatus>;
  output(): string;
  /** Resolves once `GET /health` on the admin listener answers 200; returns how long that took. */
  ready(timeoutMs?: number): Promise<number>;
  /** Waits for the exit; fails (after a SIGKILL) if it does not come within `timeoutMs`. */
  exit(timeoutMs?: number): Promise<ExitStatus>;
}

export async function allPorts(): Promise<RuntimePorts> {
  return {
    ingress: await freePort(),
    admin: await freePort(),
    introspection: await freePort(),
    observability: await freePort(),
    metrics: await freePort(),
  };
}

export function bindEnv(ports: RuntimePorts): Record<string, string> {
  return {
    RATCHET_INGRESS_BIND: bindAddr(ports.ingress),
    RATCHET_ADMIN_BIND: bindAddr(ports.admin),
    RATCHET_INTROSPECTION_BIND: bindAddr(ports.introspection),
    RATCHET_OBSERVABILITY_BIND: bindAddr(ports.observability),
    RATCHET_METRICS_BIND: bindAddr(ports.metrics),
  };
}

export interface SpawnRuntimeOptions {
  /** `RATCHET_*` settings; binds default to the given (or fresh) ports, `RATCHET_LOG_LEVEL` to `info`. */
  readonly env?: Record<string, string>;
  readonly ports?: RuntimePorts;
  /** Command and arguments; default `node --import tsx runtime/src/main.ts` (the runtime is the child itself). */
  readonly command?: readonly [string, ...string[]];
  /** Own process group, so a test can signal the whole group like a terminal's Ctrl-C does. */
  readonly processGroup?: boolean;
}

const children = new Set<RuntimeChild>();

/** Call inside a test: the runtime's output is printed if that test fails. */
export async function spawnRuntime(options: SpawnRuntimeOptions = {}): Promise<RuntimeChild> {
  const ports = options.ports ?? (await allPorts());
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('RATCHET_')));
  const [command, ...args] = options.command ?? [process.execPath, '--import', 'tsx', 'runtime/src/main.ts'];
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    env: { ...inherited, RATCHET_LOG_LEVEL: 'info', ...bindEnv(ports), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.processGroup === true,
  });
  trackChild(child);
  const output = captureOutput(child);
  const exited = exitStatus(child);
  const pid = await new Promise<number>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid ?? -1));
    child.once('error', reject);
  });
  const adminUrl = loopbackUrl(ports.admin);
  const runtime: RuntimeChild = {
    pid,
    child,
    ports,
    adminUrl,
    ingressUrl: loopbackUrl(ports.ingress),
    metricsUrl: loopbackUrl(ports.metrics),
    exited,
    output,
    async ready(timeoutMs = START_TIMEOUT_MS) {
      const started = Date.now();
      await waitUntilReady({
        what: `ratchet runtime (pid ${pid})`,
        probe: () => answers200(`${adminUrl}/health`),
        child,
        timeoutMs,
        output,
      });
      return Date.now() - started;
    },
    async exit(timeoutMs = 30_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      });
      const result = await Promise.race([exited, timeout]);
      clearTimeout(timer);
      if (result !== 'timeout') return result;
      child.kill('SIGKILL');
      await exited;
      throw new Error(
        `ratchet runtime (pid ${pid}) did not exit within ${timeoutMs} ms. Output:\n${output().slice(-8000)}`,
      );
    },
  };
  children.add(runtime);
  // The runtime's output is what explains a failed assertion about it.
  onTestFailed(() => {
    process.stderr.write(`\n--- output of ratchet runtime pid ${pid} ---\n${output().slice(-8000)}\n--- end ---\n`);
  });
  return runtime;
}

/** SIGTERM (graceful) to every runtime still running, SIGKILL after 15 s. For afterAll/afterEach. */
export async function stopAllRuntimes(): Promise<void> {
  await Promise.all(
    [...children].map(async (rt) => {
      children.delete(rt);
      if (hasExited(rt.child)) return;
      rt.child.kill('SIGTERM');
      await rt.exit(15_000).catch(() => undefined); // exit() already escalated to SIGKILL
    }),
  );
}

/** Whether `pid` is a live process; a zombie (exited, not yet reaped) counts as gone. */
export async function isRunning(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
}

/** The PostgreSQL server's PID from `<dataDir>/pg/postmaster.pid`, undefined when there is no such file. */
export async function postmasterPid(dataDir: string): Promise<number | undefined> {
  try {
    const pid = Number((await readFile(join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A fresh data directory under /tmp, open for traversal (0755): as root, the embedded PostgreSQL runs as the
 * `postgres` system user, which must reach it.
 */
export async function tempDataDir(): Promise<string> {
  const dir = await mkdtemp('/tmp/ratchet-e2e-');
  await chmod(dir, 0o755);
  return dir;
}

/**
 * Removes a data directory after stopping a PostgreSQL still running on it (one a test orphaned on purpose, or one a
 * failed test left behind). Only that server, by the PID in its postmaster.pid and after checking its command line.
 */
export async function removeDataDir(dataDir: string): Promise<void> {
  const pid = await postmasterPid(dataDir);
  if (pid !== undefined && (await isRunning(pid))) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').join(' ').includes(join(dataDir, 'pg'))) {
      process.kill(pid, 'SIGQUIT');
      const deadline = Date.now() + 10_000;
      while ((await isRunning(pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      if (await isRunning(pid)) process.kill(pid, 'SIGKILL');
    }
  }
  await rm(dataDir, { recursive: true, force: true });
}
