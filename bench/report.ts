import type { LoadStats } from './load-generator.ts';
import type { PostgresCost, PostgresIdle, StorageReading } from './postgres.ts';
import type { RuntimeCounters, RuntimeName } from './runtimes.ts';
import type { LoadGeneratorName } from './settings.ts';
import type { Workload } from './workloads.ts';

/** Aggregation of the measured runs, the Ratchet/restate ratios, the targets, and the printed tables. */

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

const MiB = 1024 * 1024;

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

function x(value: number): string {
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

/**
 * `table` with the load generator as a first column when `generators` is given (a row's generator, in row order):
 * the default mode's tables, which may hold runs of both generators.
 */
function tableBy(
  generators: readonly string[] | undefined,
  header: readonly string[],
  rows: readonly (readonly string[])[],
  rightAligned: ReadonlySet<number>,
): string {
  if (generators === undefined) return table(header, rows, rightAligned);
  return table(
    ['load gen', ...header],
    rows.map((r, i) => [generators[i] ?? '', ...r]),
    new Set([...rightAligned].map((c) => c + 1)),
  );
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

function ordered(summaries: readonly Summary[]): Summary[] {
  return [...summaries].sort(
    (a, b) =>
      a.loadGenerator.localeCompare(b.loadGenerator) ||
      a.workload.localeCompare(b.workload) ||
      a.concurrency - b.concurrency ||
      a.runtime.localeCompare(b.runtime, undefined, { numeric: true }),
  );
}

/** Whether a runtime's CPU and memory include a PostgreSQL of its own (Ratchet and its clusters). */
function hasPostgres(runtime: RuntimeName): boolean {
  return runtime !== 'restate';
}

function generatorsOf(rows: readonly { loadGenerator: string }[], withGenerator: boolean): string[] | undefined {
  return withGenerator ? rows.map((r) => r.loadGenerator) : undefined;
}

function mainTable(rows: readonly Summary[], withGenerator: boolean): string {
  return tableBy(
    generatorsOf(rows, withGenerator),
    ['workload', 'c', 'runtime', 'req/s', 'p50 ms', 'p99 ms', 'CPU s/1k inv', 'peak RSS MiB', 'failed'],
    rows.map((s) => [
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
}

function breakdownTable(rows: readonly Summary[], withGenerator: boolean): string {
  return tableBy(
    generatorsOf(rows, withGenerator),
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
    rows.map((s) => [
      s.workload,
      String(s.concurrency),
      s.runtime,
      s.cpuPer1k.runtime.toFixed(3),
      hasPostgres(s.runtime) ? s.cpuPer1k.postgres.toFixed(3) : '',
      s.cpuPer1k.service.toFixed(3),
      s.cpuPer1k.loadGenerator.toFixed(3),
      hasPostgres(s.runtime) ? s.peakPostgresPssMiB.toFixed(0) : '',
      s.busyCores.toFixed(2),
      s.otherCores.toFixed(2),
    ]),
    new Set([1, 3, 4, 5, 6, 7, 8, 9]),
  );
}

/** Ratchet's group commit; in cluster mode one row per cluster (summed over its nodes). */
function commitSection(rows: readonly Summary[], withRuntime: boolean, withGenerator: boolean): string[] {
  const committed = rows.filter((s) => s.groupCommit !== undefined);
  if (committed.length === 0) return [];
  const commitTable = tableBy(
    generatorsOf(committed, withGenerator),
    [
      'workload',
      'c',
      ...(withRuntime ? ['runtime'] : []),
      'commits/inv',
      'writes/commit',
      'mean commit ms',
      'committer busy',
    ],
    committed.map((s) => [
      s.workload,
      String(s.concurrency),
      ...(withRuntime ? [s.runtime] : []),
      s.groupCommit!.commitsPerInvocation.toFixed(2),
      s.groupCommit!.writesPerCommit.toFixed(1),
      s.groupCommit!.meanCommitMs.toFixed(2),
      `${(s.groupCommit!.committerBusy * 100).toFixed(0)} %`,
    ]),
    new Set(withRuntime ? [1, 3, 4, 5, 6] : [1, 2, 3, 4, 5]),
  );
  return [
    "Ratchet's group commit (from its /metrics): transactions per invocation, writes per transaction, time from",
    withRuntime
      ? 'BEGIN to COMMIT, and the share of wall-clock time a commit was in progress (summed over the nodes):'
      : 'BEGIN to COMMIT, and the share of wall-clock time a commit was in progress:',
    '',
    commitTable,
    '',
  ];
}

function totalsTable(totals: readonly CpuTotal[]): string {
  return table(
    ['runtime', 'invocations', 'CPU s runtime', 'CPU s PG', 'ms CPU/inv', 'VmHWM MiB'],
    totals.map((t) => [
      t.runtime,
      String(t.invocations),
      t.cpuSeconds.runtime.toFixed(1),
      hasPostgres(t.runtime) ? t.cpuSeconds.postgres.toFixed(1) : '',
      t.msPerInvocation.toFixed(3),
      t.peakRssMiB.toFixed(0),
    ]),
    new Set([1, 2, 3, 4, 5]),
  );
}

/** The results as Markdown tables (readable in a terminal, pasted as is into bench/README.md). */
export function formatReport(
  summaries: readonly Summary[],
  ratioRows: readonly Ratio[],
  totals: readonly CpuTotal[],
  targetRows: readonly Target[],
): string {
  const rows = ordered(summaries);
  const sortedRatios = [...ratioRows].sort(
    (p, q) =>
      p.loadGenerator.localeCompare(q.loadGenerator) ||
      p.workload.localeCompare(q.workload) ||
      p.concurrency - q.concurrency,
  );
  const ratioTable = tableBy(
    sortedRatios.map((r) => r.loadGenerator),
    ['workload', 'c', 'req/s', 'p50', 'p99', 'CPU/inv'],
    sortedRatios.map((r) => [r.workload, String(r.concurrency), x(r.rps), x(r.p50), x(r.p99), x(r.cpuPerInvocation)]),
    new Set([1, 2, 3, 4, 5]),
  );
  const targetLines = targetRows.map((t) => `${t.verdict.padEnd(4)}  ${t.name}: ${t.detail}`);
  return [
    mainTable(rows, true),
    '',
    'Ratchet ÷ restate-server (req/s above 1 is better; latency and CPU below 1 are better):',
    '',
    ratioTable,
    '',
    'Where the CPU goes, ms per invocation by process, and how busy the cores were (others = processes not the',
    "benchmark's, i.e. noise):",
    '',
    breakdownTable(rows, true),
    '',
    ...commitSection(rows, false, true),
    'Whole benchmark (warm-up, runs and gaps; includes background work such as checkpoints and compaction):',
    '',
    totalsTable(totals),
    '',
    'Targets (reported, not asserted):',
    '',
    ...targetLines,
  ].join('\n');
}

function fixed(value: number | undefined, digits: number): string {
  return value === undefined ? '' : value.toFixed(digits);
}

/**
 * Cluster mode's report: the clusters side by side (each a number of Ratchet nodes on a PostgreSQL of its own), the
 * ratios to the first, where the CPU goes, PostgreSQL's work per invocation, and what the nodes did between them.
 */
export function formatClusterReport(
  summaries: readonly Summary[],
  ratioRows: readonly ClusterRatio[],
  totals: readonly CpuTotal[],
  idle: Readonly<Partial<Record<RuntimeName, PostgresIdle>>>,
  storage: Readonly<Partial<Record<RuntimeName, StorageReading | undefined>>>,
): string {
  const rows = ordered(summaries);
  const ratioTable = table(
    ['workload', 'c', 'runtime', 'req/s', 'p50', 'p99', 'CPU/inv'],
    ratioRows.map((r) => [
      r.workload,
      String(r.concurrency),
      `${r.runtime} ÷ ${r.baseline}`,
      x(r.rps),
      x(r.p50),
      x(r.p99),
      x(r.cpuPerInvocation),
    ]),
    new Set([1, 3, 4, 5, 6]),
  );
  const withPg = rows.filter((s) => s.postgresPerInvocation !== undefined);
  const pgTable = table(
    [
      'workload',
      'c',
      'runtime',
      'xacts',
      'writing',
      'round trips',
      'statements',
      'exec ms',
      'WAL bytes',
      'WAL records',
      'FPI',
      'WAL writes',
      'WAL syncs',
      'PG CPU ms',
    ],
    withPg.map((s) => {
      const p = s.postgresPerInvocation!;
      return [
        s.workload,
        String(s.concurrency),
        s.runtime,
        p.transactions.toFixed(2),
        p.writeTransactions.toFixed(2),
        fixed(p.roundTrips, 2),
        p.statements.toFixed(2),
        p.statementExecMs.toFixed(3),
        p.walBytes.toFixed(0),
        p.walRecords.toFixed(1),
        p.walFpi.toFixed(2),
        p.walWrites.toFixed(2),
        p.walSyncs.toFixed(2),
        s.cpuPer1k.postgres.toFixed(3),
      ];
    }),
    new Set([1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),
  );
  const clusterTable = table(
    [
      'workload',
      'c',
      'runtime',
      'forwarded/inv',
      'refused (421)',
      'lost',
      'no owner',
      'partition moves',
      'invocations by node',
    ],
    withPg.map((s) => [
      s.workload,
      String(s.concurrency),
      s.runtime,
      fixed(s.cluster?.forwardedPerInvocation, 2),
      String(s.cluster?.forwardMisdirected ?? ''),
      String(s.cluster?.forwardFailed ?? ''),
      String(s.cluster?.forwardNoOwner ?? ''),
      String(s.cluster?.partitionMoves ?? ''),
      (s.cluster?.invocationShareByNode ?? []).map((share) => `${(share * 100).toFixed(0)} %`).join(' / '),
    ]),
    new Set([1, 3, 4, 5, 6, 7]),
  );
  const idleRows = Object.entries(idle).map(([runtime, i]) => {
    const per = (v: number): string => (v / i!.seconds).toFixed(1);
    return [
      runtime,
      i!.seconds.toFixed(0),
      per(i!.cost.transactions),
      per(i!.cost.writeTransactions),
      per(i!.cost.statements),
      per(i!.cost.walBytes),
    ];
  });
  const idleTable = table(
    ['runtime', 'over s', 'xacts/s', 'writing/s', 'statements/s', 'WAL bytes/s'],
    idleRows,
    new Set([1, 2, 3, 4, 5]),
  );
  const storageRows = Object.entries(storage).flatMap(([runtime, st]) =>
    st === undefined
      ? []
      : [
          [
            runtime,
            String(st.invocations),
            String(st.journalEntries),
            (st.bytes / MiB).toFixed(1),
            st.invocations === 0 ? '' : (st.bytes / st.invocations / 1024).toFixed(2),
          ],
        ],
  );
  const storageTable = table(
    ['runtime', 'invocations', 'journal entries', 'tables MiB', 'KiB/inv'],
    storageRows,
    new Set([1, 2, 3, 4]),
  );
  return [
    mainTable(rows, false),
    '',
    'Each cluster ÷ the first (req/s above 1 is better; latency and CPU below 1 are better):',
    '',
    ratioTable,
    '',
    'Where the CPU goes, ms per invocation by process (runtime: all nodes together), and how busy the cores were',
    "(others = processes not the benchmark's, i.e. noise):",
    '',
    breakdownTable(rows, false),
    '',
    ...commitSection(rows, true, false),
    "PostgreSQL's work per invocation: transactions (committed or rolled back) and those that wrote (took an xid),",
    'round trips the nodes made, statements run and their execution time (pg_stat_statements), WAL (bytes from the',
    'insert position; records, full-page images, write calls and syncs from pg_stat_wal/pg_stat_io), PostgreSQL CPU.',
    'Counts read after the settle time are net of the idle background of that time (see below):',
    '',
    pgTable,
    '',
    'Between the nodes: requests forwarded to the owner of their partition per invocation; forwards the receiver',
    'refused (421: it does not serve the partition; the sender looks again), lost (outcome unknown, 503) or without',
    'an owner in time (503); partition moves during the runs; the share of invocations each node stored and ran:',
    '',
    clusterTable,
    '',
    ...(idleRows.length === 0
      ? []
      : ["PostgreSQL's background without load (heartbeats, lease renewals), per second:", '', idleTable, '']),
    ...(storageRows.length === 0
      ? []
      : [
          "What the runtime's tables hold at the end (results and journals are kept a day by default, so nothing was",
          'deleted yet; tables with their indexes and TOAST):',
          '',
          storageTable,
          '',
        ]),
    'Whole benchmark (warm-up, runs and gaps; includes background work such as checkpoints and autovacuum):',
    '',
    totalsTable(totals),
  ].join('\n');
}
