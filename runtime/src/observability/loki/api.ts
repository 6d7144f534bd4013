/*
 * Loki's query API over a LogSource: one function per endpoint, `(source, params, now) => ApiResponse`, answering as
 * Loki does (spec 2.2): `{"status":"success","data":…}` bodies, Loki's defaults, limits and error messages. Errors are
 * thrown as ObservabilityQueryError; the listener turns them into plain-text 4xx answers.
 */
import { ObservabilityQueryError, type ApiParams, type ApiResponse } from '../errors.ts';
import type { LabelMatcher, LogSource } from '../model.ts';
import type { Expr } from '../logql/ast.ts';
import { formatGoDuration } from '../go/durations.ts';
import { formatSampleValue, nsToSeconds } from '../logql/literals.ts';
import { DEFAULT_SCAN_LIMITS, evalLogQuery, type ScanLimits } from '../logql/logs.ts';
import { evalMetricQuery, type MetricResult } from '../logql/metrics.ts';
import { parseLogQL, parseSelector } from '../logql/parse.ts';
import type { PipelineOptions } from '../logql/pipeline.ts';
import {
  bounds,
  defaultStep,
  HOUR_NS,
  param,
  params as paramList,
  parseDirection,
  parseLimit,
  parseSecondsOrDuration,
  parseTimestamp,
  SECOND_NS,
  success,
} from './params.ts';

export interface LokiLimits {
  /** Loki's max_entries_limit_per_query. */
  readonly maxEntriesPerQuery: number;
  /** Loki's max_query_length (721h by default). */
  readonly maxQueryLengthNs: bigint;
  /** Points per series of a range query. */
  readonly maxPoints: number;
  readonly scan: ScanLimits;
}

export const DEFAULT_LOKI_LIMITS: LokiLimits = {
  maxEntriesPerQuery: 5000,
  maxQueryLengthNs: 721n * HOUR_NS,
  maxPoints: 11_000,
  scan: DEFAULT_SCAN_LIMITS,
};

export type Now = () => bigint;

function pipelineOptions(query: string): PipelineOptions {
  // Only queries that name `detected_level` see it, so plain log queries keep the stream labels as stored.
  return { detectedLevel: query.includes('detected_level') };
}

function checkLength(startNs: bigint, endNs: bigint, limits: LokiLimits): void {
  if (endNs - startNs > limits.maxQueryLengthNs) {
    throw new ObservabilityQueryError(
      `the query time range exceeds the limit (query length: ${formatGoDuration(endNs - startNs)}, ` +
        `limit: ${formatGoDuration(limits.maxQueryLengthNs)})`,
    );
  }
}

/** The query endpoints: the store, the request's parameters, the clock, and the limits of one query. */
type QueryEndpoint = (source: LogSource, p: ApiParams, now: Now, limits?: LokiLimits) => Promise<ApiResponse>;

/** `GET /loki/api/v1/query`: an instant metric query (log queries are refused, as current Loki does). */
export const query: QueryEndpoint = async (source, p, now, limits = DEFAULT_LOKI_LIMITS) => {
  const text = param(p, 'query') ?? '';
  parseLimit(p, 100);
  parseDirection(p);
  const t = parseTimestamp(param(p, 'time'), now(), 'time');
  const expr = parseLogQL(text);
  if (expr.kind === 'log') {
    throw new ObservabilityQueryError(
      'log queries are not supported as an instant query type, please change your query to a range query type',
    );
  }
  const r = await evalMetricQuery(
    source,
    expr,
    { startNs: t, endNs: t, stepNs: SECOND_NS },
    limits.scan,
    pipelineOptions(text),
  );
  const sec = nsToSeconds(t);
  if (r.value.kind === 'scalar') {
    return success(
      { resultType: 'scalar', result: [sec, formatSampleValue(r.value.values[0]!)], stats: {} },
      r.warnings,
    );
  }
  const result = r.value.steps[0]!.map((s) => ({ metric: s.labels, value: [sec, formatSampleValue(s.value)] }));
  return success({ resultType: 'vector', result, stats: {} }, r.warnings);
};

/** `GET /loki/api/v1/query_range`: log queries → streams, metric queries → matrix. */
export const queryRange: QueryEndpoint = async (source, p, now, limits = DEFAULT_LOKI_LIMITS) => {
  const text = param(p, 'query') ?? '';
  const { startNs, endNs } = bounds(p, now(), HOUR_NS);
  if (endNs < startNs) throw new ObservabilityQueryError('end timestamp must not be before start time');
  const limit = parseLimit(p, 100);
  const direction = parseDirection(p);
  const stepText = param(p, 'step');
  const stepNs = stepText === undefined ? defaultStep(startNs, endNs) : parseSecondsOrDuration(stepText, 'step');
  if (stepNs <= 0n) {
    throw new ObservabilityQueryError(
      'zero or negative query resolution step widths are not accepted. Try a positive integer',
    );
  }
  if ((endNs - startNs) / stepNs > BigInt(limits.maxPoints)) {
    throw new ObservabilityQueryError(
      `exceeded maximum resolution of ${limits.maxPoints.toLocaleString('en-US')} points per timeseries. ` +
        'Try decreasing the query resolution (?step=XX)',
    );
  }
  const intervalText = param(p, 'interval');
  const intervalNs = intervalText === undefined ? 0n : parseSecondsOrDuration(intervalText, 'interval');
  const expr: Expr = parseLogQL(text);
  checkLength(startNs, endNs, limits);
  const options = pipelineOptions(text);
  if (expr.kind === 'log') {
    if (limit > limits.maxEntriesPerQuery) {
      throw new ObservabilityQueryError(
        `max entries limit per query exceeded, limit > max_entries_limit_per_query (${limit} > ${limits.maxEntriesPerQuery})`,
      );
    }
    const r = await evalLogQuery(source, expr, { startNs, endNs, direction, limit, intervalNs }, limits.scan, options);
    return success({ resultType: 'streams', result: r.streams, stats: {} }, r.warnings);
  }
  const r = await evalMetricQuery(source, expr, { startNs, endNs, stepNs }, limits.scan, options);
  return success({ resultType: 'matrix', result: toMatrix(r), stats: {} }, r.warnings);
};

export function toMatrix(r: MetricResult): { metric: Record<string, string>; values: [number, string][] }[] {
  if (r.value.kind === 'scalar') {
    const values = r.value.values;
    return [{ metric: {}, values: r.steps.map((t, i) => [nsToSeconds(t), formatSampleValue(values[i]!)]) }];
  }
  const series = new Map<string, { metric: Record<string, string>; values: [number, string][] }>();
  r.value.steps.forEach((samples, i) => {
    const sec = nsToSeconds(r.steps[i]!);
    for (const s of samples) {
      let entry = series.get(s.key);
      if (entry === undefined) {
        entry = { metric: { ...s.labels }, values: [] };
        series.set(s.key, entry);
      }
      entry.values.push([sec, formatSampleValue(s.value)]);
    }
  });
  return [...series.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
}

function optionalSelector(p: ApiParams): readonly LabelMatcher[] {
  const q = param(p, 'query');
  return q === undefined ? [] : parseSelector(q);
}

const LABELS_SINCE = 6n * HOUR_NS;

/** `GET /loki/api/v1/labels`. */
export async function labels(source: LogSource, p: ApiParams, now: Now): Promise<ApiResponse> {
  const { startNs, endNs } = bounds(p, now(), LABELS_SINCE);
  const matchers = optionalSelector(p);
  const names = await source.labelNames(startNs, endNs, matchers);
  return success([...new Set(names)].sort());
}

/** `GET /loki/api/v1/label/<name>/values`. */
export async function labelValues(source: LogSource, name: string, p: ApiParams, now: Now): Promise<ApiResponse> {
  const { startNs, endNs } = bounds(p, now(), LABELS_SINCE);
  const matchers = optionalSelector(p);
  const values = await source.labelValues(name, startNs, endNs, matchers);
  return success([...new Set(values)].sort());
}

/** `GET|POST /loki/api/v1/series` with repeated `match[]`. */
export async function series(source: LogSource, p: ApiParams, now: Now): Promise<ApiResponse> {
  const selectors = [...paramList(p, 'match[]'), ...paramList(p, 'match')];
  if (selectors.length === 0) throw new ObservabilityQueryError('0 matcher groups supplied');
  const groups = selectors.map((s) => parseSelector(s));
  const { startNs, endNs } = bounds(p, now(), LABELS_SINCE);
  const sets = await source.series(groups, startNs, endNs);
  const unique = new Map(sets.map((s) => [JSON.stringify(Object.entries(s).sort()), s]));
  return success([...unique.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s));
}

/** `GET /loki/api/v1/status/buildinfo`: a Loki 2.9 version, for Grafana's feature detection (not wrapped). */
export function buildInfo(): ApiResponse {
  return {
    status: 200,
    body: {
      version: '2.9.10',
      revision: 'ratchet',
      branch: 'HEAD',
      buildUser: 'ratchet',
      buildDate: '2024-08-01T00:00:00Z',
      goVersion: 'go1.22.5',
    },
  };
}

export { indexStats, indexVolume, indexVolumeRange } from './index-api.ts';
