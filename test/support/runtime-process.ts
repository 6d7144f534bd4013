import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  answers200,
  captureOutput,
  exitStatus,
  signalAndWait,
  terminate,
  trackChild,
  waitUntilReady,
  type ExitStatus,
} from './child-process.ts';
import { bindAddr, freePort, loopbackUrl } from './ports.ts';

/** The Ratchet runtime (`runtime/src/main.ts`) as a child process, for restart and SIGKILL tests. */

export const REPO_ROOT: string = fileURLToPath(new URL('../../', import.meta.url));

export interface RuntimePorts {
  readonly ingress: number;
  readonly admin: number;
  readonly introspection: number;
  readonly observability: number;
  readonly metrics: number;
}

export interface StartRuntimeProcessOptions {
  readonly databaseUrl: string;
  /** Extra or overriding environment (e.g. `RATCHET_LOG_LEVEL: 'debug'`). */
  readonly env?: Record<string, string>;
  /** Reuse ports, e.g. to restart a killed runtime where clients expect it. Missing ones are picked free. */
  readonly ports?: Partial<RuntimePorts>;
  /** Script to run, relative to the repo root. Default `runtime/src/main.ts`; tests of this harness pass a fake. */
  readonly entry?: string;
  /** How long to wait for `GET /health` on the admin listener to answer 200. Default 60 s. */
  readonly startTimeoutMs?: number;
  /** Whether the runtime is up; default: the admin listener's `/health` over plain HTTP answers 200. */
  readonly probe?: (ports: RuntimePorts) => Promise<boolean>;
}

export interface RuntimeProcess {
  readonly pid: number;
  /** `http://127.0.0.1:<port>` without trailing slash, likewise for the others. */
  readonly ingressUrl: string;
  readonly adminUrl: string;
  readonly introspectionUrl: string;
  readonly observabilityUrl: string;
  readonly metricsUrl: string;
  readonly ports: RuntimePorts;
  /** Everything the process wrote to stdout and stderr so far (last ~2 MB); print it when a test fails. */
  output(): string;
  /** Sends `signal` (default SIGKILL: a crash, no graceful shutdown) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Graceful stop: SIGTERM, wait, SIGKILL after 10 s. */
  stop(): Promise<void>;
  readonly exited: Promise<ExitStatus>;
}

const STOP_GRACE_MS = 10_000;

async function pickPorts(given: Partial<RuntimePorts> = {}): Promise<RuntimePorts> {
  return {
    ingress: given.ingress ?? (await freePort()),
    admin: given.admin ?? (await freePort()),
    introspection: given.introspection ?? (await freePort()),
    observability: given.observability ?? (await freePort()),
    metrics: given.metrics ?? (await freePort()),
  };
}

/** Starts on the ports given, or on free ones; picked ports another process took meanwhile are picked again. */
export async function startRuntimeProcess(options: StartRuntimeProcessOptions): Promise<RuntimeProcess> {
  for (let attempt = 1; ; attempt++) {
    const ports = await pickPorts(options.ports);
    try {
      return await startOnce(options, ports);
    } catch (err) {
      // A port picked free a moment ago can be taken before the runtime binds it (an outgoing connection's local
      // port comes from the same range): with ports of our own choosing, try others.
      const picked = Object.keys(ports).some((k) => options.ports?.[k as keyof RuntimePorts] === undefined);
      if (attempt >= 3 || !picked || !String((err as Error).message).includes('EADDRINUSE')) throw err;
    }
  }
}

async function startOnce(options: StartRuntimeProcessOptions, ports: RuntimePorts): Promise<RuntimeProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    RATCHET_DATABASE_URL: options.databaseUrl,
    RATCHET_INGRESS_BIND: bindAddr(ports.ingress),
    RATCHET_ADMIN_BIND: bindAddr(ports.admin),
    RATCHET_INTROSPECTION_BIND: bindAddr(ports.introspection),
    RATCHET_OBSERVABILITY_BIND: bindAddr(ports.observability),
    RATCHET_METRICS_BIND: bindAddr(ports.metrics),
    RATCHET_LOG_LEVEL: 'warn',
    ...options.env,
  };

  // `node --import tsx` keeps the runtime in this one process (the tsx CLI would add a parent), so `pid` is the
  // runtime itself and a SIGKILL really is a crash of it.
  const child = spawn(process.execPath, ['--import', 'tsx', options.entry ?? 'runtime/src/main.ts'], {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  const output = captureOutput(child);
  const exited = exitStatus(child);
  const spawned = await new Promise<number>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid ?? -1));
    child.once('error', reject);
  });

  const adminUrl = loopbackUrl(ports.admin);
  try {
    await waitUntilReady({
      what: `ratchet runtime (pid ${spawned})`,
      probe: options.probe === undefined ? () => answers200(`${adminUrl}/health`) : () => options.probe!(ports),
      child,
      timeoutMs: options.startTimeoutMs ?? 60_000,
      output,
    });
  } catch (err) {
    await signalAndWait(child, exited, 'SIGKILL');
    throw err;
  }

  return {
    pid: spawned,
    ingressUrl: loopbackUrl(ports.ingress),
    adminUrl,
    introspectionUrl: loopbackUrl(ports.introspection),
    observabilityUrl: loopbackUrl(ports.observability),
    metricsUrl: loopbackUrl(ports.metrics),
    ports,
    output,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      await signalAndWait(child, exited, signal);
    },
    async stop() {
      await terminate(child, exited, STOP_GRACE_MS);
    },
    exited,
  };
}
