import type { LoadStats } from './load-generator.ts';
import type { RuntimeCounters, RuntimeName } from './runtimes.ts';
import type { Workload } from './workloads.ts';

/** Aggregation of the measured runs, the Ratchet/restate ratios, the targets, and the printed tables. */

export interface RunRecord {
  readonly round: number;
  readonly workload: Workload;
  readonly concurrency: number;
  readonly runtime: RuntimeName;
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
}

export interface Summary {
  readonly workload: Workload;
  readonly concurrency: number;
  readonly runtime: RuntimeName;
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
}

export interface Ratio {
  readonly workload: Workload;
  readonly concurrency: number;
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
  readonly verdict: 'PASS' | 'MISS' | 'n/a';
  readonly detail: string;
}

const MiB = 1024 * 1024;

export function summarize(records: readonly RunRecord[]): Summary[] {
  const groups = new Map<string, RunRecord[]>();
  for (const r of records) {
    const key = `${r.workload}/${r.concurrency}/${r.runtime}`;
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
    };
  });
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

function find(summaries: readonly Summary[], workload: Workload, concurrency: number, runtime: RuntimeName) {
  return summaries.find((s) => s.workload === workload && s.concurrency === concurrency && s.runtime === runtime);
}

export function ratios(summaries: readonly Summary[]): Ratio[] {
  const out: Ratio[] = [];
  for (const r of summaries) {
    if (r.runtime !== 'ratchet') continue;
    const s = find(summaries, r.workload, r.concurrency, 'restate');
    if (s === undefined) continue;
    out.push({
      workload: r.workload,
      concurrency: r.concurrency,
      rps: r.rps / s.rps,
      p50: r.p50Ms / s.p50Ms,
      p99: r.p99Ms / s.p99Ms,
      cpuPerInvocation: r.cpuPer1k.total / s.cpuPer1k.total,
    });
  }
  return out;
}

function x(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a';
}

export function targets(summaries: readonly Summary[], totals: readonly CpuTotal[]): Target[] {
  const result: Target[] = [];
  const throughput = (workload: Workload, atLeast: number): void => {
    const r = find(summaries, workload, 128, 'ratchet');
    const s = find(summaries, workload, 128, 'restate');
    const name = `${workload} c128 throughput ≥ ${atLeast.toFixed(2)}× restate`;
    if (r === undefined || s === undefined) {
      result.push({ name, verdict: 'n/a', detail: 'not measured (c128 not run)' });
      return;
    }
    const ratio = r.rps / s.rps;
    result.push({
      name,
      verdict: ratio >= atLeast ? 'PASS' : 'MISS',
      detail: `${x(ratio)} (${r.rps.toFixed(0)} vs ${s.rps.toFixed(0)} req/s)`,
    });
  };
  throughput('noop', 1.25);
  throughput('steps', 1.0);
  throughput('add', 1.0);

  {
    const r = find(summaries, 'noop', 1, 'ratchet');
    const s = find(summaries, 'noop', 1, 'restate');
    const name = 'noop c1 p50 ≤ 0.80× restate';
    if (r === undefined || s === undefined) result.push({ name, verdict: 'n/a', detail: 'not measured (c1 not run)' });
    else {
      const ratio = r.p50Ms / s.p50Ms;
      result.push({
        name,
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

function table(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  rightAligned: ReadonlySet<number>,
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (rightAligned.has(i) ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** The results as Markdown tables (readable in a terminal, pasted as is into bench/README.md). */
export function formatReport(
  summaries: readonly Summary[],
  ratioRows: readonly Ratio[],
  totals: readonly CpuTotal[],
  targetRows: readonly Target[],
): string {
  const ordered = [...summaries].sort(
    (a, b) =>
      a.workload.localeCompare(b.workload) || a.concurrency - b.concurrency || a.runtime.localeCompare(b.runtime),
  );
  const main = table(
    ['workload', 'c', 'runtime', 'req/s', 'p50 ms', 'p99 ms', 'CPU s/1k inv', 'peak RSS MiB', 'failed'],
    ordered.map((s) => [
      s.workload,
      String(s.concurrency),
      s.runtime,
      s.rps.toFixed(0),
      s.p50Ms.toFixed(2),
      s.p99Ms.toFixed(2),
      s.cpuPer1k.total.toFixed(3),
      s.peakRuntimeRssMiB.toFixed(0),
      String(s.non2xx + s.errors),
    ]),
    new Set([1, 3, 4, 5, 6, 7, 8]),
  );
  const breakdown = table(
    [
      'workload',
      'c',
      'runtime',
      'runtime',
      'PostgreSQL',
      'SDK service',
      'load gen',
      'PG PSS MiB',
      'cores busy',
      'of it others',
    ],
    ordered.map((s) => [
      s.workload,
      String(s.concurrency),
      s.runtime,
      s.cpuPer1k.runtime.toFixed(3),
      s.runtime === 'ratchet' ? s.cpuPer1k.postgres.toFixed(3) : '',
      s.cpuPer1k.service.toFixed(3),
      s.cpuPer1k.loadGenerator.toFixed(3),
      s.runtime === 'ratchet' ? s.peakPostgresPssMiB.toFixed(0) : '',
      s.busyCores.toFixed(2),
      s.otherCores.toFixed(2),
    ]),
    new Set([1, 3, 4, 5, 6, 7, 8, 9]),
  );
  const committed = ordered.filter((s) => s.groupCommit !== undefined);
  const commitTable = table(
    ['workload', 'c', 'commits/inv', 'writes/commit', 'mean commit ms', 'committer busy'],
    committed.map((s) => [
      s.workload,
      String(s.concurrency),
      s.groupCommit!.commitsPerInvocation.toFixed(2),
      s.groupCommit!.writesPerCommit.toFixed(1),
      s.groupCommit!.meanCommitMs.toFixed(2),
      `${(s.groupCommit!.committerBusy * 100).toFixed(0)} %`,
    ]),
    new Set([1, 2, 3, 4, 5]),
  );
  const ratioTable = table(
    ['workload', 'c', 'req/s', 'p50', 'p99', 'CPU/inv'],
    ratioRows.map((r) => [r.workload, String(r.concurrency), x(r.rps), x(r.p50), x(r.p99), x(r.cpuPerInvocation)]),
    new Set([1, 2, 3, 4, 5]),
  );
  const totalsTable = table(
    ['runtime', 'invocations', 'CPU s runtime', 'CPU s PG', 'ms CPU/inv', 'VmHWM MiB'],
    totals.map((t) => [
      t.runtime,
      String(t.invocations),
      t.cpuSeconds.runtime.toFixed(1),
      t.runtime === 'ratchet' ? t.cpuSeconds.postgres.toFixed(1) : '',
      t.msPerInvocation.toFixed(3),
      t.peakRssMiB.toFixed(0),
    ]),
    new Set([1, 2, 3, 4, 5]),
  );
  const targetLines = targetRows.map((t) => `${t.verdict.padEnd(4)}  ${t.name}: ${t.detail}`);
  return [
    main,
    '',
    'Ratchet ÷ restate-server (req/s above 1 is better; latency and CPU below 1 are better):',
    '',
    ratioTable,
    '',
    'Where the CPU goes, ms per invocation by process, and how busy the cores were (others = processes not the',
    "benchmark's, i.e. noise):",
    '',
    breakdown,
    '',
    ...(committed.length === 0
      ? []
      : [
          "Ratchet's group commit (from its /metrics): transactions per invocation, writes per transaction, time from",
          'BEGIN to COMMIT, and the share of wall-clock time a commit was in progress:',
          '',
          commitTable,
          '',
        ]),
    'Whole benchmark (warm-up, runs and gaps; includes background work such as checkpoints and compaction):',
    '',
    totalsTable,
    '',
    'Targets (reported, not asserted):',
    '',
    ...targetLines,
  ].join('\n');
}
