/*
 * Reading records from a LogSource page by page, and evaluating log queries. The stream matchers and the line filters
 * before the first other stage go to the store; later stages filter in the engine, so the engine pages through the
 * range (moving start or end past what it has seen) until it has `limit` entries, the range is exhausted, or the scan
 * cap is reached (then with a warning: the result may be incomplete).
 */
import type { LineFilter, LogRecord, LogSelection, LogSource } from '../model.ts';
import type { LogQuery } from './ast.ts';
import { compilePipeline, labelsObject, matchValue, type PipelineOptions } from './pipeline.ts';

export interface ScanLimits {
  /** Records asked of the store per call. */
  readonly pageSize: number;
  /** Records read in all, at most, for one query. */
  readonly maxScan: number;
}

export const DEFAULT_SCAN_LIMITS: ScanLimits = { pageSize: 5000, maxScan: 200_000 };

/** What one scan reads: a store selection without its page limit (the scan pages itself). */
export type ScanRange = Omit<LogSelection, 'limit'>;

export interface ScanOutcome {
  readonly scanned: number;
  /** The scan cap stopped the scan before the range was exhausted. */
  readonly capped: boolean;
}

/**
 * Calls `visit` for every record of the range in `direction` (until it returns false). Records sharing the timestamp
 * of a page boundary are asked for again and skipped, so none is lost or seen twice.
 */
export async function scanRecords(
  source: LogSource,
  range: ScanRange,
  limits: ScanLimits,
  visit: (r: LogRecord) => boolean,
): Promise<ScanOutcome> {
  let { startNs, endNs } = range;
  let boundary: bigint | undefined;
  let skip = 0;
  let scanned = 0;
  while (startNs < endNs) {
    const budget = Math.min(limits.pageSize, limits.maxScan - scanned);
    if (budget <= 0) return { scanned, capped: true };
    const limit = budget + skip;
    const page = await source.select({
      matchers: range.matchers,
      lineFilters: range.lineFilters,
      startNs,
      endNs,
      direction: range.direction,
      limit,
    });
    let i = 0;
    while (i < skip && i < page.length && page[i]!.tsNs === boundary) i++;
    for (; i < page.length; i++) {
      const r = page[i]!;
      // The store may skip a matcher or filter it cannot apply; the stream matchers are checked again here.
      if (!range.matchers.every((m) => matchValue(r.labels[m.name] ?? '', m))) continue;
      scanned++;
      if (!visit(r)) return { scanned, capped: false };
    }
    if (page.length < limit) return { scanned, capped: false };
    const last = page[page.length - 1]!.tsNs;
    skip = page.filter((r) => r.tsNs === last).length;
    boundary = last;
    if (range.direction === 'forward') startNs = last;
    else endNs = last + 1n;
  }
  return { scanned, capped: false };
}

export function capWarning(limits: ScanLimits): string {
  return (
    `the query read the maximum of ${limits.maxScan} log lines before finishing; the result covers only part of the ` +
    'time range: narrow the time range or the stream selector'
  );
}

/** The line filters a store can apply: those before the first parser or other stage, single-valued, no pattern. */
export function pushdownFilters(q: LogQuery): LineFilter[] {
  const out: LineFilter[] = [];
  for (const s of q.stages) {
    if (s.kind !== 'lineFilter') break;
    if (s.values.length === 1 && s.op !== '|>' && s.op !== '!>') out.push({ op: s.op, value: s.values[0]! });
  }
  return out;
}

export interface LogStream {
  readonly stream: Record<string, string>;
  readonly values: [string, string][];
}

export interface LogQueryParams {
  readonly startNs: bigint;
  /** Exclusive. */
  readonly endNs: bigint;
  readonly direction: 'forward' | 'backward';
  readonly limit: number;
  /** Loki's `interval`: at most one entry per interval (across streams, as Loki does). */
  readonly intervalNs?: bigint;
}

export interface LogQueryResult {
  readonly streams: LogStream[];
  readonly warnings: string[];
  readonly scanned: number;
}

export async function evalLogQuery(
  source: LogSource,
  q: LogQuery,
  p: LogQueryParams,
  limits: ScanLimits = DEFAULT_SCAN_LIMITS,
  options: PipelineOptions = {},
): Promise<LogQueryResult> {
  const pipeline = compilePipeline(q.stages, options);
  const streams = new Map<string, LogStream>();
  const interval = p.intervalNs ?? 0n;
  let last: bigint | undefined;
  let found = 0;
  const outcome = await scanRecords(
    source,
    {
      matchers: q.matchers,
      lineFilters: pushdownFilters(q),
      startNs: p.startNs,
      endNs: p.endNs,
      direction: p.direction,
    },
    { ...limits, pageSize: Math.min(limits.pageSize, Math.max(p.limit, 1000)) },
    (r) => {
      const e = pipeline(r);
      if (e === undefined) return true;
      if (interval > 0n && last !== undefined) {
        const due = p.direction === 'forward' ? e.tsNs >= last + interval : e.tsNs <= last - interval;
        if (!due) return true;
      }
      last = e.tsNs;
      const labels = labelsObject(e.labels);
      const key = JSON.stringify(labels);
      let s = streams.get(key);
      if (s === undefined) {
        s = { stream: labels, values: [] };
        streams.set(key, s);
      }
      s.values.push([e.tsNs.toString(), e.line]);
      return ++found < p.limit;
    },
  );
  const result = [...streams.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s);
  return { streams: result, warnings: outcome.capped ? [capWarning(limits)] : [], scanned: outcome.scanned };
}
