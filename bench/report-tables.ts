import type { PostgresIdle, StorageReading } from './postgres.ts';
import { MiB, x, type ClusterRatio, type CpuTotal, type Ratio, type Summary, type Target } from './report.ts';
import type { RuntimeName } from './runtimes.ts';

/* The printed tables of a benchmark run: Markdown, readable in a terminal and pasted as is into bench/README.md. */

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

export function table(
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
