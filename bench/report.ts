import type { LoadStats } from './load-generator.ts';
import type { PostgresCost } from './postgres.ts';
import type { RuntimeCounters, RuntimeName } from './runtimes.ts';
import type { LoadGeneratorName } from './settings.ts';
import type { Workload } from './workloads.ts';

/** Aggregation of the measured runs, the Ratchet/restate ratios and the targets; the printed tables are report-tables.ts. */

export interface RunRecord {
  readonly round: number;
  readonly workload: Workload;
  readonly concurrency: number;
  readonly runtime: RuntimeName;
  readonly loadGenerator: LoadGeneratorName;
  readonly stats: LoadStats;
  /** CPU seconds used during the run (a window of `windowS` seconds around it), by process. */
  readonly cpu: {
    readonly windowS: number;
    readonly runtime: number;
    readonly postgres: number;
    /** The SDK service host of this runtime. */
    readonly service: number;
    readonly loadGenerator: number;
    /** The harness's own process (sampling, bookkeeping). */
    readonly harness: number;
    /** All processes of the machine, summed over its cores (ours included). */
    readonly machineBusy: number;
    /** Time the hypervisor gave to other guests. */
    readonly steal: number;
  };
  /** The runtime's own counters over the run (Ratchet's group commit); empty for restate-server. */
  readonly counters: RuntimeCounters;
  /** Largest sample during the run, bytes. */
  readonly peakRuntimeRss: number;
  readonly peakPostgresPss: number;
  /** Cluster mode: what PostgreSQL did during the run. */
  readonly postgres?: PostgresCost;
}

export interface Summary {
  readonly workload: Workload;
  readonly concurrency: number;
  readonly runtime: RuntimeName;
  readonly loadGenerator: LoadGeneratorName;
  readonly rounds: number;
  readonly requests: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly rps: number;
  /** Means over the rounds of each round's percentile, ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /**
   * CPU seconds per 1 000 invocations (= ms per invocation) while this workload ran: `total` is the runtime's process
   * plus PostgreSQL's; the SDK service and the load generator are what the same invocations cost outside it.
   */
  readonly cpuPer1k: {
    readonly runtime: number;
    readonly postgres: number;
    readonly total: number;
    readonly service: number;
    readonly loadGenerator: number;
  };
  /** Cores busy on average during the runs: everything, and processes not the benchmark's (noise). */
  readonly busyCores: number;
  readonly otherCores: number;
  readonly peakRuntimeRssMiB: number;
  readonly peakPostgresPssMiB: number;
  /** Ratchet's group commit over the runs, when its metrics could be read. */
  readonly groupCommit?: {
    readonly commitsPerInvocation: number;
    readonly writesPerCommit: number;
    readonly meanCommitMs: number;
    /** Seconds spent inside commits ÷ wall-clock seconds: near 1 means the committer never rests. */
    readonly committerBusy: number;
  };
  /** Cluster mode: PostgreSQL's work per invocation. */
  readonly postgresPerInvocation?: {
    /** Committed and rolled-back transactions (read-only ones included), and those that wrote (took an xid). */
    readonly transactions: number;
    readonly writeTransactions: number;
    /** Round trips the runtime made (bench/pg-probe.ts), statements PostgreSQL ran (pg_stat_statements). */
    readonly roundTrips: number | undefined;
    readonly statements: number;
    readonly statementExecMs: number;
    readonly walBytes: number;
    readonly walRecords: number;
    readonly walFpi: number;
    readonly walWrites: number;
    readonly walSyncs: number;
    readonly dataPageWrites: number;
  };
  /** Cluster mode: requests sent on between nodes, and where the invocations ran. */
  readonly cluster?: {
    readonly forwardedPerInvocation: number;
    /** Totals over the runs (see `RuntimeCounters`). */
    readonly forwardMisdirected: number;
    readonly forwardFailed: number;
    readonly forwardNoOwner: number;
    readonly partitionMoves: number;
    /** Share of the invocations each node stored (the owners of their partitions), in node order. */
    readonly invocationShareByNode: readonly number[];
  };
}

export interface Ratio {
  readonly workload: Workload;
  readonly concurrency: number;
  readonly loadGenerator: LoadGeneratorName;
  /** Ratchet ÷ restate-server. */
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  /** Ratchet's runtime + PostgreSQL CPU per invocation ÷ restate-server's. */
  readonly cpuPerInvocation: number;
}

/** CPU over the whole measured part of the benchmark (warm-up, runs and the idle gaps between them). */
export interface CpuTotal {
  readonly runtime: RuntimeName;
  readonly invocations: number;
  readonly cpuSeconds: { readonly runtime: number; readonly postgres: number };
  /** Milliseconds of CPU per invocation, runtime + PostgreSQL. */
  readonly msPerInvocation: number;
  /** VmHWM of the runtime's process at the end: its peak RSS since it started. */
  readonly peakRssMiB: number;
}

export interface Target {
  readonly name: string;
  /** The generator the target was measured with; absent for the CPU and memory targets (all runs). */
  readonly loadGenerator?: LoadGeneratorName;
  readonly verdict: 'PASS' | 'MISS' | 'n/a';
  readonly detail: string;
}

export const MiB = 1024 * 1024;

export function summarize(records: readonly RunRecord[]): Summary[] {
  const groups = new Map<string, RunRecord[]>();
  for (const r of records) {
    const key = `${r.workload}/${r.concurrency}/${r.runtime}/${r.loadGenerator}`;
    const list = groups.get(key);
    if (list === undefined) groups.set(key, [r]);
    else list.push(r);
  }
  const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
  return [...groups.values()].map((runs) => {
    const first = runs[0]!;
    const requests = runs.reduce((a, r) => a + r.stats.ok, 0);
    const elapsed = runs.reduce((a, r) => a + r.stats.elapsedS, 0);
    const sum = (pick: (r: RunRecord) => number): number => runs.reduce((a, r) => a + pick(r), 0);
    const cpuRuntime = sum((r) => r.cpu.runtime);
    const cpuPostgres = sum((r) => r.cpu.postgres);
    const window = sum((r) => r.cpu.windowS);
    const busy = sum((r) => r.cpu.machineBusy);
    const ours = sum((r) => r.cpu.runtime + r.cpu.postgres + r.cpu.service + r.cpu.loadGenerator + r.cpu.harness);
    const per1k = (seconds: number): number => (requests === 0 ? 0 : (seconds / requests) * 1000);
    return {
      workload: first.workload,
      concurrency: first.concurrency,
      runtime: first.runtime,
      loadGenerator: first.loadGenerator,
      rounds: runs.length,
      requests,
      non2xx: runs.reduce((a, r) => a + r.stats.non2xx, 0),
      errors: runs.reduce((a, r) => a + r.stats.errors, 0),
      rps: elapsed === 0 ? 0 : requests / elapsed,
      p50Ms: mean(runs.map((r) => r.stats.latencyMs.p50)),
      p99Ms: mean(runs.map((r) => r.stats.latencyMs.p99)),
      cpuPer1k: {
        runtime: per1k(cpuRuntime),
        postgres: per1k(cpuPostgres),
        total: per1k(cpuRuntime + cpuPostgres),
        service: per1k(sum((r) => r.cpu.service)),
        loadGenerator: per1k(sum((r) => r.cpu.loadGenerator)),
      },
      busyCores: window === 0 ? 0 : busy / window,
      otherCores: window === 0 ? 0 : Math.max(0, busy - ours) / window,
      peakRuntimeRssMiB: Math.max(...runs.map((r) => r.peakRuntimeRss)) / MiB,
      peakPostgresPssMiB: Math.max(...runs.map((r) => r.peakPostgresPss)) / MiB,
      ...groupCommit(runs, requests, window),
      ...clusterSummary(runs, requests),
    };
  });
}

function clusterSummary(
  runs: readonly RunRecord[],
  requests: number,
): Pick<Summary, 'postgresPerInvocation' | 'cluster'> {
  if (requests === 0 || !runs.every((r) => r.postgres !== undefined)) return {};
  const per = (pick: (r: RunRecord) => number): number => runs.reduce((a, r) => a + pick(r), 0) / requests;
  const pg = (key: keyof Omit<PostgresCost, 'topStatements' | 'settleS' | 'idleSubtractedS'>): number =>
    per((r) => r.postgres![key]);
  const byNode: number[] = [];
  for (const r of runs) (r.counters.acceptedByNode ?? []).forEach((n, i) => (byNode[i] = (byNode[i] ?? 0) + n));
  const accepted = byNode.reduce((a, b) => a + b, 0);
  return {
    postgresPerInvocation: {
      transactions: pg('transactions'),
      writeTransactions: pg('writeTransactions'),
      roundTrips: runs.every((r) => r.counters.roundTrips !== undefined)
        ? per((r) => r.counters.roundTrips ?? 0)
        : undefined,
      statements: pg('statements'),
      statementExecMs: pg('statementExecMs'),
      walBytes: pg('walBytes'),
      walRecords: pg('walRecords'),
      walFpi: pg('walFpi'),
      walWrites: pg('walWrites'),
      walSyncs: pg('walSyncs'),
      dataPageWrites: pg('dataPageWrites'),
    },
    cluster: {
      forwardedPerInvocation: per((r) => r.counters.forwarded ?? 0),
      forwardMisdirected: runs.reduce((a, r) => a + (r.counters.forwardMisdirected ?? 0), 0),
      forwardFailed: runs.reduce((a, r) => a + (r.counters.forwardFailed ?? 0), 0),
      forwardNoOwner: runs.reduce((a, r) => a + (r.counters.forwardNoOwner ?? 0), 0),
      partitionMoves: runs.reduce((a, r) => a + (r.counters.partitionMoves ?? 0), 0),
      invocationShareByNode: byNode.map((n) => (accepted === 0 ? 0 : n / accepted)),
    },
  };
}

function groupCommit(runs: readonly RunRecord[], requests: number, windowS: number): Pick<Summary, 'groupCommit'> {
  if (!runs.every((r) => r.counters.commits !== undefined && r.counters.commitSeconds !== undefined)) return {};
  const commits = runs.reduce((a, r) => a + (r.counters.commits ?? 0), 0);
  const writes = runs.reduce((a, r) => a + (r.counters.commitWrites ?? 0), 0);
  const seconds = runs.reduce((a, r) => a + (r.counters.commitSeconds ?? 0), 0);
  if (commits === 0 || requests === 0 || windowS === 0) return {};
  return {
    groupCommit: {
      commitsPerInvocation: commits / requests,
      writesPerCommit: writes / commits,
      meanCommitMs: (seconds / commits) * 1000,
      committerBusy: seconds / windowS,
    },
  };
}

function find(
  summaries: readonly Summary[],
  workload: Workload,
  concurrency: number,
  runtime: RuntimeName,
  generator: LoadGeneratorName,
) {
  return summaries.find(
    (s) =>
      s.workload === workload &&
      s.concurrency === concurrency &&
      s.runtime === runtime &&
      s.loadGenerator === generator,
  );
}

export function ratios(summaries: readonly Summary[]): Ratio[] {
  const out: Ratio[] = [];
  for (const r of summaries) {
    if (r.runtime !== 'ratchet') continue;
    const s = find(summaries, r.workload, r.concurrency, 'restate', r.loadGenerator);
    if (s === undefined) continue;
    out.push({
      workload: r.workload,
      concurrency: r.concurrency,
      loadGenerator: r.loadGenerator,
      rps: r.rps / s.rps,
      p50: r.p50Ms / s.p50Ms,
      p99: r.p99Ms / s.p99Ms,
      cpuPerInvocation: r.cpuPer1k.total / s.cpuPer1k.total,
    });
  }
  return out;
}

/** Cluster mode: each cluster ÷ the first one (`baseline`), workload by workload. */
export interface ClusterRatio extends Ratio {
  readonly runtime: RuntimeName;
  readonly baseline: RuntimeName;
}

export function clusterRatios(summaries: readonly Summary[], baseline: RuntimeName): ClusterRatio[] {
  const out: ClusterRatio[] = [];
  for (const r of summaries) {
    if (r.runtime === baseline) continue;
    const b = find(summaries, r.workload, r.concurrency, baseline, r.loadGenerator);
    if (b === undefined) continue;
    out.push({
      workload: r.workload,
      concurrency: r.concurrency,
      loadGenerator: r.loadGenerator,
      runtime: r.runtime,
      baseline,
      rps: r.rps / b.rps,
      p50: r.p50Ms / b.p50Ms,
      p99: r.p99Ms / b.p99Ms,
      cpuPerInvocation: r.cpuPer1k.total / b.cpuPer1k.total,
    });
  }
  return out;
}

/** A ratio as printed: `1.23×`, or `n/a`. */
export function x(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a';
}

/** The speed targets hold with every load generator: each is checked once per generator measured. */
export function targets(summaries: readonly Summary[], totals: readonly CpuTotal[]): Target[] {
  const result: Target[] = [];
  const generators = [...new Set(summaries.map((s) => s.loadGenerator))];
  for (const generator of generators) {
    const throughput = (workload: Workload, atLeast: number): void => {
      const r = find(summaries, workload, 128, 'ratchet', generator);
      const s = find(summaries, workload, 128, 'restate', generator);
      const name = `${workload} c128 throughput ≥ ${atLeast.toFixed(2)}× restate (${generator})`;
      if (r === undefined || s === undefined) {
        result.push({ name, loadGenerator: generator, verdict: 'n/a', detail: 'not measured (c128 not run)' });
        return;
      }
      const ratio = r.rps / s.rps;
      result.push({
        name,
        loadGenerator: generator,
        verdict: ratio >= atLeast ? 'PASS' : 'MISS',
        detail: `${x(ratio)} (${r.rps.toFixed(0)} vs ${s.rps.toFixed(0)} req/s)`,
      });
    };
    throughput('noop', 1.25);
    throughput('steps', 1.0);
    throughput('add', 1.0);

    const r = find(summaries, 'noop', 1, 'ratchet', generator);
    const s = find(summaries, 'noop', 1, 'restate', generator);
    const name = `noop c1 p50 ≤ 0.80× restate (${generator})`;
    if (r === undefined || s === undefined)
      result.push({ name, loadGenerator: generator, verdict: 'n/a', detail: 'not measured (c1 not run)' });
    else {
      const ratio = r.p50Ms / s.p50Ms;
      result.push({
        name,
        loadGenerator: generator,
        verdict: ratio <= 0.8 ? 'PASS' : 'MISS',
        detail: `${x(ratio)} (${r.p50Ms.toFixed(2)} vs ${s.p50Ms.toFixed(2)} ms)`,
      });
    }
  }

  {
    const r = totals.find((t) => t.runtime === 'ratchet');
    const s = totals.find((t) => t.runtime === 'restate');
    const name = 'CPU per invocation (Ratchet + PostgreSQL) ≤ restate-server';
    if (r === undefined || s === undefined) result.push({ name, verdict: 'n/a', detail: 'not measured' });
    else {
      const ratio = r.msPerInvocation / s.msPerInvocation;
      result.push({
        name,
        verdict: ratio <= 1 ? 'PASS' : 'MISS',
        detail:
          `${x(ratio)} (${r.msPerInvocation.toFixed(3)} vs ${s.msPerInvocation.toFixed(3)} ms CPU per invocation, ` +
          'whole benchmark incl. background work)',
      });
    }
  }

  {
    const peaks = summaries.filter((s) => s.runtime === 'ratchet').map((s) => s.peakRuntimeRssMiB);
    const name = 'Ratchet RSS under load < 300 MB';
    if (peaks.length === 0) result.push({ name, verdict: 'n/a', detail: 'not measured' });
    else {
      const peak = Math.max(...peaks);
      const mb = (peak * MiB) / 1e6;
      result.push({
        name,
        verdict: mb < 300 ? 'PASS' : 'MISS',
        detail: `peak ${mb.toFixed(0)} MB (${peak.toFixed(0)} MiB)`,
      });
    }
  }
  return result;
}
