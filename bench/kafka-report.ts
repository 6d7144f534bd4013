import { table } from './report-tables.ts';
import { MiB, x } from './report.ts';
import type { RuntimeName } from './runtimes.ts';

/* The `kafka` workload's records, their summary per sink and runtime, the ratios, and the printed tables. */

export interface KafkaRun {
  readonly round: number;
  /** `noop` (service `Bench.noop`) or `add` (object `Counter.add`, keyed records). */
  readonly sink: string;
  readonly runtime: RuntimeName;
  readonly topic: string;
  readonly subscriptionId: string;
  /** Records measured (the warm-up record before them is not). */
  readonly records: number;
  /** From the first `send` to the acknowledgement of the last record. */
  readonly produceS: number;
  /** From the first `send` to the last invocation's `completed_at`. */
  readonly endToEndS: number;
  readonly recordsPerS: number;
  /** Every 500 ms from the first `send`: records produced (acknowledged) minus invocations created from them. */
  readonly lagSamples: readonly number[];
  /** Every 500 ms: invocations created and not completed yet. */
  readonly unfinishedSamples: readonly number[];
  /** Ratchet only: the largest `lag` its `GET /subscriptions/{id}/status` answered during the run. */
  readonly ownLagMax?: number;
  /** Invocations that completed with a failure. */
  readonly failed: number;
  /**
   * CPU seconds from just before the first `send` to when the last completion was seen: the runtime's process, its
   * PostgreSQL (Ratchet), its SDK service host, and the mock Kafka (kcat).
   */
  readonly cpu: {
    readonly windowS: number;
    readonly runtime: number;
    readonly postgres: number;
    readonly service: number;
    readonly kafka: number;
  };
  /** Peak VmRSS of the runtime's process, sampled with the lag (bytes). */
  readonly peakRuntimeRss: number;
}

export interface KafkaSummary {
  readonly sink: string;
  readonly runtime: RuntimeName;
  readonly runs: number;
  readonly records: number;
  readonly produceS: number;
  readonly endToEndS: number;
  /** Mean over the runs. */
  readonly recordsPerS: number;
  /** Mean of each run's median lag; the largest of any sample. */
  readonly lagP50: number;
  readonly lagMax: number;
  readonly unfinishedMax: number;
  readonly ownLagMax?: number;
  /** Runtime (+ PostgreSQL) CPU seconds per 1 000 records (= ms per record), and the SDK service's. */
  readonly cpuPer1k: number;
  readonly servicePer1k: number;
  readonly peakRuntimeRssMiB: number;
  readonly failed: number;
}

export interface KafkaRatio {
  readonly sink: string;
  readonly recordsPerS: number;
  readonly lagP50: number;
  readonly lagMax: number;
  readonly cpuPerRecord: number;
}

export interface KafkaResult {
  readonly settings: Record<string, unknown>;
  /** Runtimes left out of the workload, and why (restate-server whose consumer handled nothing). */
  readonly skipped: readonly { readonly runtime: RuntimeName; readonly reason: string }[];
  readonly runs: readonly KafkaRun[];
  readonly summaries: readonly KafkaSummary[];
  readonly ratios: readonly KafkaRatio[];
}

/** Nearest-rank median. */
function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length / 2) - 1]!;
}

const mean = (values: readonly number[]): number =>
  values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

export function summarizeKafka(runs: readonly KafkaRun[]): {
  summaries: KafkaSummary[];
  ratios: KafkaRatio[];
} {
  const groups = new Map<string, KafkaRun[]>();
  for (const run of runs) {
    const key = `${run.sink}\0${run.runtime}`;
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  const summaries: KafkaSummary[] = [...groups.values()].map((group) => {
    const first = group[0]!;
    const records = sum(group.map((r) => r.records));
    const own = group.map((r) => r.ownLagMax).filter((v): v is number => v !== undefined);
    return {
      sink: first.sink,
      runtime: first.runtime,
      runs: group.length,
      records,
      produceS: mean(group.map((r) => r.produceS)),
      endToEndS: mean(group.map((r) => r.endToEndS)),
      recordsPerS: mean(group.map((r) => r.recordsPerS)),
      lagP50: mean(group.map((r) => median(r.lagSamples))),
      lagMax: Math.max(0, ...group.flatMap((r) => r.lagSamples)),
      unfinishedMax: Math.max(0, ...group.flatMap((r) => r.unfinishedSamples)),
      ...(own.length === 0 ? {} : { ownLagMax: Math.max(...own) }),
      cpuPer1k: (sum(group.map((r) => r.cpu.runtime + r.cpu.postgres)) / records) * 1000,
      servicePer1k: (sum(group.map((r) => r.cpu.service)) / records) * 1000,
      peakRuntimeRssMiB: Math.max(...group.map((r) => r.peakRuntimeRss)) / MiB,
      failed: sum(group.map((r) => r.failed)),
    };
  });
  summaries.sort((a, b) => a.sink.localeCompare(b.sink) || a.runtime.localeCompare(b.runtime));
  const ratios: KafkaRatio[] = [];
  for (const sink of new Set(summaries.map((s) => s.sink))) {
    const ratchet = summaries.find((s) => s.sink === sink && s.runtime === 'ratchet');
    const restate = summaries.find((s) => s.sink === sink && s.runtime === 'restate');
    if (ratchet === undefined || restate === undefined) continue;
    ratios.push({
      sink,
      recordsPerS: ratchet.recordsPerS / restate.recordsPerS,
      lagP50: ratchet.lagP50 / restate.lagP50,
      lagMax: ratchet.lagMax / restate.lagMax,
      cpuPerRecord: ratchet.cpuPer1k / restate.cpuPer1k,
    });
  }
  return { summaries, ratios };
}

/** The `kafka` workload's part of the printed report. */
export function formatKafkaReport(result: KafkaResult): string {
  const main = table(
    [
      'sink',
      'runtime',
      'records',
      'produce s',
      'end-to-end s',
      'records/s',
      'lag p50',
      'lag max',
      'unfinished max',
      'CPU s/1k rec',
      'peak RSS MiB',
      'failed',
    ],
    result.summaries.map((s) => [
      `kafka→${s.sink}`,
      s.runtime,
      String(s.records),
      s.produceS.toFixed(2),
      s.endToEndS.toFixed(2),
      s.recordsPerS.toFixed(0),
      s.lagP50.toFixed(0),
      String(s.lagMax),
      String(s.unfinishedMax),
      s.cpuPer1k.toFixed(3),
      s.peakRuntimeRssMiB.toFixed(0),
      String(s.failed),
    ]),
    new Set([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
  );
  const lines = [
    `Kafka: ${String(result.settings['records'])} records per run, produced at once to a topic of 4 partitions and ` +
      'consumed by a subscription, one',
    'invocation each. records/s = records ÷ (first produce → last completed_at); lag = records produced − invocations',
    'created, sampled every 500 ms; unfinished = invocations created − completed; CPU = runtime (+ PostgreSQL) per',
    '1 000 records (ms per record), the sampling queries included.',
    '',
    main,
  ];
  const own = result.summaries.filter((s) => s.ownLagMax !== undefined);
  if (own.length > 0) {
    lines.push(
      '',
      "Ratchet's own lag (GET /subscriptions/{id}/status, records of the assigned partitions not yet enqueued), max: " +
        own.map((s) => `kafka→${s.sink} ${String(s.ownLagMax)}`).join(', '),
    );
  }
  if (result.ratios.length > 0) {
    lines.push(
      '',
      'Kafka, Ratchet ÷ restate-server (records/s above 1 is better; lag and CPU below 1 are better):',
      '',
      table(
        ['sink', 'records/s', 'lag p50', 'lag max', 'CPU/record'],
        result.ratios.map((r) => [`kafka→${r.sink}`, x(r.recordsPerS), x(r.lagP50), x(r.lagMax), x(r.cpuPerRecord)]),
        new Set([1, 2, 3, 4]),
      ),
    );
  }
  for (const s of result.skipped) lines.push('', `Kafka: ${s.runtime} left out: ${s.reason}`);
  return lines.join('\n');
}
