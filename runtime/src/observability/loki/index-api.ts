/*
 * Loki's index endpoints over a LogSource: `index/stats` (streams, chunks, entries, bytes of a selector over a range)
 * and `index/volume` / `index/volume_range` (bytes per label set). There is no index here: entries and bytes are counted
 * by reading the records (up to the scan cap: beyond it the counts are lower bounds), `chunks` is the number of streams
 * (this store has no chunks).
 */
import { Buffer } from 'node:buffer';
import { ObservabilityQueryError, type ApiParams, type ApiResponse } from '../errors.ts';
import type { LabelMatcher, LogRecord, LogSource } from '../model.ts';
import { formatSampleValue, nsToSeconds } from '../logql/literals.ts';
import { capWarning, DEFAULT_SCAN_LIMITS, scanRecords, type ScanLimits } from '../logql/logs.ts';
import { parseSelector } from '../logql/parse.ts';
import { bounds, defaultStep, HOUR_NS, param, parseLimit, parseSecondsOrDuration, success } from './params.ts';

type Now = () => bigint;

function requiredSelector(p: ApiParams): readonly LabelMatcher[] {
  const q = param(p, 'query');
  if (q === undefined) throw new ObservabilityQueryError('query parameter is required');
  return parseSelector(q);
}

async function eachRecord(
  source: LogSource,
  matchers: readonly LabelMatcher[],
  startNs: bigint,
  endNs: bigint,
  limits: ScanLimits,
  visit: (r: LogRecord) => void,
): Promise<boolean> {
  const outcome = await scanRecords(
    source,
    { matchers, lineFilters: [], startNs, endNs, direction: 'forward' },
    limits,
    (r) => {
      visit(r);
      return true;
    },
  );
  return outcome.capped;
}

/** `GET /loki/api/v1/index/stats`: `{streams, chunks, entries, bytes}`, not wrapped (as Loki answers it). */
export async function indexStats(
  source: LogSource,
  p: ApiParams,
  now: Now,
  limits: ScanLimits = DEFAULT_SCAN_LIMITS,
): Promise<ApiResponse> {
  const matchers = requiredSelector(p);
  const { startNs, endNs } = bounds(p, now(), HOUR_NS);
  const streams = (await source.series([matchers], startNs, endNs)).length;
  let entries = 0;
  let bytes = 0;
  await eachRecord(source, matchers, startNs, endNs, limits, (r) => {
    entries++;
    bytes += Buffer.byteLength(r.line);
  });
  return { status: 200, body: { streams, chunks: streams, entries, bytes } };
}

interface VolumeSeries {
  readonly metric: Record<string, string>;
  total: number;
  readonly buckets: Map<number, number>;
}

/** The label sets a record's bytes count towards: by `targetLabels` (or the selector's names), or by label name. */
function volumeKeys(
  p: ApiParams,
  matchers: readonly LabelMatcher[],
): (labels: Record<string, string>) => Record<string, string>[] {
  const target = param(p, 'targetLabels')
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const aggregateBy = param(p, 'aggregateBy') ?? 'series';
  if (aggregateBy !== 'series' && aggregateBy !== 'labels') {
    throw new ObservabilityQueryError(`invalid aggregateBy '${aggregateBy}': expected series or labels`);
  }
  const names = target ?? [...new Set(matchers.map((m) => m.name))];
  if (aggregateBy === 'labels') {
    return (labels) => (target ?? Object.keys(labels)).filter((n) => n in labels).map((n) => ({ [n]: '' }));
  }
  return (labels) => {
    const metric: Record<string, string> = {};
    for (const n of [...names].sort()) if (n in labels) metric[n] = labels[n]!;
    return Object.keys(metric).length === 0 ? [] : [metric];
  };
}

async function volumes(
  source: LogSource,
  p: ApiParams,
  now: Now,
  limits: ScanLimits,
  bucketOf: (startNs: bigint, endNs: bigint) => (ts: bigint) => number,
): Promise<{ series: VolumeSeries[]; startNs: bigint; endNs: bigint; warnings: string[] }> {
  const matchers = requiredSelector(p);
  const { startNs, endNs } = bounds(p, now(), HOUR_NS);
  const limit = parseLimit(p, 100);
  const keysOf = volumeKeys(p, matchers);
  const bucket = bucketOf(startNs, endNs);
  const byKey = new Map<string, VolumeSeries>();
  const capped = await eachRecord(source, matchers, startNs, endNs, limits, (r) => {
    const size = Buffer.byteLength(r.line);
    const b = bucket(r.tsNs);
    for (const metric of keysOf(r.labels)) {
      const key = JSON.stringify(metric);
      let s = byKey.get(key);
      if (s === undefined) {
        s = { metric, total: 0, buckets: new Map() };
        byKey.set(key, s);
      }
      s.total += size;
      s.buckets.set(b, (s.buckets.get(b) ?? 0) + size);
    }
  });
  const series = [...byKey.values()].sort((a, b) => b.total - a.total).slice(0, limit);
  return { series, startNs, endNs, warnings: capped ? [capWarning(limits)] : [] };
}

/** `GET /loki/api/v1/index/volume`: a vector of bytes per label set at `end`, largest first. */
export async function indexVolume(
  source: LogSource,
  p: ApiParams,
  now: Now,
  limits: ScanLimits = DEFAULT_SCAN_LIMITS,
): Promise<ApiResponse> {
  const v = await volumes(source, p, now, limits, () => () => 0);
  const sec = nsToSeconds(v.endNs);
  const result = v.series.map((s) => ({ metric: s.metric, value: [sec, formatSampleValue(s.total)] }));
  return success({ resultType: 'vector', result, stats: {} }, v.warnings);
}

/** `GET /loki/api/v1/index/volume_range`: a matrix of bytes per label set and step (the bytes of `(t - step, t]`). */
export async function indexVolumeRange(
  source: LogSource,
  p: ApiParams,
  now: Now,
  limits: ScanLimits = DEFAULT_SCAN_LIMITS,
): Promise<ApiResponse> {
  let stepNs = 0n;
  const v = await volumes(source, p, now, limits, (startNs, endNs) => {
    const text = param(p, 'step');
    stepNs = text === undefined ? defaultStep(startNs, endNs) : parseSecondsOrDuration(text, 'step');
    if (stepNs <= 0n) {
      throw new ObservabilityQueryError(
        'zero or negative query resolution step widths are not accepted. Try a positive integer',
      );
    }
    if ((endNs - startNs) / stepNs > 11_000n) {
      throw new ObservabilityQueryError(
        'exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)',
      );
    }
    return (ts) => {
      const d = ts - startNs;
      return d <= 0n ? 0 : Number((d + stepNs - 1n) / stepNs);
    };
  });
  const result = v.series.map((s) => ({
    metric: s.metric,
    values: [...s.buckets.entries()]
      .sort(([a], [b]) => a - b)
      .map(([i, bytes]) => [nsToSeconds(v.startNs + BigInt(i) * stepNs), formatSampleValue(bytes)]),
  }));
  return success({ resultType: 'matrix', result, stats: {} }, v.warnings);
}
