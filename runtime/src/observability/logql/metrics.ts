/*
 * Metric queries: the range aggregations read their records once (forward, over every step's window), turn them into
 * samples per series, and slide a window `(t - offset - range, t - offset]` over them at each step; the rest of the
 * expression is instant-vector arithmetic (vector.ts).
 */
import { Buffer } from 'node:buffer';
import { ObservabilityQueryError } from '../errors.ts';
import type { LogSource } from '../model.ts';
import type { MetricExpr, RangeAggregation } from './ast.ts';
import { parseDurationNs } from '../go/durations.ts';
import { parseBytes, parseGoFloat } from './literals.ts';
import { capWarning, DEFAULT_SCAN_LIMITS, pushdownFilters, scanRecords, type ScanLimits } from './logs.ts';
import {
  compilePipeline,
  ERROR_LABEL,
  evalLabelFilter,
  labelsObject,
  setError,
  type Entry,
  type PipelineOptions,
} from './pipeline.ts';
import { aggregate, binary, groupLabels, labelReplace, reduce, sample, type Sample, type Value } from './vector.ts';

export interface MetricParams {
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly stepNs: bigint;
}

export interface MetricResult {
  readonly steps: readonly bigint[];
  readonly value: Value;
  readonly warnings: string[];
}

interface Series {
  readonly labels: Record<string, string>;
  readonly ts: bigint[];
  readonly values: number[];
}

export function stepTimes(p: MetricParams): bigint[] {
  const steps: bigint[] = [];
  for (let t = p.startNs; t <= p.endNs; t += p.stepNs) steps.push(t);
  return steps;
}

export async function evalMetricQuery(
  source: LogSource,
  expr: MetricExpr,
  p: MetricParams,
  limits: ScanLimits = DEFAULT_SCAN_LIMITS,
  options: PipelineOptions = {},
): Promise<MetricResult> {
  const steps = stepTimes(p);
  const ranges = new Map<RangeAggregation, Sample[][]>();
  const warnings: string[] = [];
  for (const node of rangeNodes(expr)) {
    const { series, capped } = await loadSeries(source, node, steps, limits, options);
    if (capped && warnings.length === 0) warnings.push(capWarning(limits));
    ranges.set(node, windows(node, series, steps));
  }
  return { steps, value: evaluate(expr, steps, ranges), warnings };
}

function rangeNodes(e: MetricExpr): RangeAggregation[] {
  switch (e.kind) {
    case 'range':
      return [e];
    case 'vagg':
    case 'labelReplace':
      return rangeNodes(e.expr);
    case 'binop':
      return [...rangeNodes(e.left), ...rangeNodes(e.right)];
    case 'number':
    case 'vector':
      return [];
  }
}

function evaluate(e: MetricExpr, steps: readonly bigint[], ranges: Map<RangeAggregation, Sample[][]>): Value {
  switch (e.kind) {
    case 'range':
      return { kind: 'vector', steps: ranges.get(e)! };
    case 'number':
      return { kind: 'scalar', values: steps.map(() => e.value) };
    case 'vector':
      return { kind: 'vector', steps: steps.map(() => [sample({}, e.value)]) };
    case 'vagg':
      return aggregate(e, evaluate(e.expr, steps, ranges));
    case 'labelReplace':
      return labelReplace(e, evaluate(e.expr, steps, ranges));
    case 'binop':
      return binary(e, evaluate(e.left, steps, ranges), evaluate(e.right, steps, ranges));
  }
}

function pipelineError(e: Entry): ObservabilityQueryError {
  const err = e.labels.get(ERROR_LABEL)!;
  const series = [...e.labels].map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ');
  return new ObservabilityQueryError(
    `pipeline error: '${err}' for series: '{${series}}'.\n` +
      `Use a label filter to intentionally skip this error. (e.g | __error__!="${err}").\n` +
      'To skip all potential errors you can match empty errors.(e.g __error__="")\n' +
      'The label filter can also be specified after unwrap. (e.g | unwrap latency | __error__="" )\n',
  );
}

function unwrapValue(raw: string | undefined, conversion: string): number | undefined {
  if (raw === undefined) return undefined;
  if (conversion === 'bytes') return parseBytes(raw);
  if (conversion === 'duration' || conversion === 'duration_seconds') {
    const ns = parseDurationNs(raw, 'go');
    return ns === undefined ? undefined : Number(ns) / 1e9;
  }
  return parseGoFloat(raw);
}

async function loadSeries(
  source: LogSource,
  node: RangeAggregation,
  steps: readonly bigint[],
  limits: ScanLimits,
  options: PipelineOptions,
): Promise<{ series: Series[]; capped: boolean }> {
  const pipeline = compilePipeline(node.log.stages, options);
  const byKey = new Map<string, Series>();
  const first = steps[0]!;
  const last = steps[steps.length - 1]!;
  const bytes = node.op === 'bytes_over_time' || node.op === 'bytes_rate';
  const outcome = await scanRecords(
    source,
    {
      matchers: node.log.matchers,
      lineFilters: pushdownFilters(node.log),
      startNs: first - node.offsetNs - node.rangeNs + 1n,
      endNs: last - node.offsetNs + 1n,
      direction: 'forward',
    },
    limits,
    (r) => {
      const e = pipeline(r);
      if (e === undefined) return true;
      let value = bytes ? Buffer.byteLength(e.line) : 1;
      const u = node.unwrap;
      if (u !== undefined) {
        const raw = e.labels.get(u.label);
        const v = e.labels.has(ERROR_LABEL) ? undefined : unwrapValue(raw, u.conversion);
        if (v === undefined && !e.labels.has(ERROR_LABEL)) {
          setError(e, 'SampleExtractionErr', `cannot convert ${JSON.stringify(raw ?? '')} of label ${u.label}`);
        }
        if (!u.filters.every((f) => evalLabelFilter(f, e))) return true;
        e.labels.delete(u.label);
        value = v ?? 0;
      }
      if (e.labels.has(ERROR_LABEL)) throw pipelineError(e);
      let labels = labelsObject(e.labels);
      if (node.grouping !== undefined) labels = groupLabels(labels, node.grouping);
      const key = JSON.stringify(labels);
      let s = byKey.get(key);
      if (s === undefined) {
        s = { labels, ts: [], values: [] };
        byKey.set(key, s);
      }
      s.ts.push(r.tsNs);
      s.values.push(value);
      return true;
    },
  );
  return { series: [...byKey.values()], capped: outcome.capped };
}

/** The range aggregation's vector at each step. */
function windows(node: RangeAggregation, series: readonly Series[], steps: readonly bigint[]): Sample[][] {
  const out: Sample[][] = steps.map(() => []);
  const rangeSeconds = Number(node.rangeNs) / 1e9;
  const summing = SUMMING.has(node.op) && node.unwrap === undefined; // integers: exact
  for (const s of series) {
    // Prefix sums make the common aggregations O(1) per step however many windows overlap.
    const prefix = summing ? prefixSums(s.values) : [];
    let lo = 0;
    let hi = 0;
    steps.forEach((t, i) => {
      const end = t - node.offsetNs;
      const start = end - node.rangeNs;
      while (hi < s.ts.length && s.ts[hi]! <= end) hi++;
      while (lo < hi && s.ts[lo]! <= start) lo++;
      if (hi <= lo) return;
      let v: number;
      if (node.op === 'count_over_time') v = hi - lo;
      else if (summing) {
        const sum = prefix[hi]! - prefix[lo]!;
        v = node.op === 'rate' || node.op === 'bytes_rate' ? sum / rangeSeconds : sum;
      } else v = overTime(node, s.values.slice(lo, hi), rangeSeconds);
      out[i]!.push(sample(s.labels, v));
    });
  }
  return out;
}

const SUMMING = new Set(['rate', 'bytes_rate', 'bytes_over_time']);

function prefixSums(values: readonly number[]): number[] {
  const out = [0];
  for (const v of values) out.push(out[out.length - 1]! + v);
  return out;
}

function overTime(node: RangeAggregation, values: readonly number[], rangeSeconds: number): number {
  switch (node.op) {
    case 'count_over_time':
      return values.length;
    case 'rate':
      return reduce('sum', values) / rangeSeconds;
    case 'bytes_rate':
    case 'bytes_over_time':
    case 'sum_over_time':
      return reduce('sum', values);
    case 'avg_over_time':
      return reduce('avg', values);
    case 'min_over_time':
      return reduce('min', values);
    case 'max_over_time':
      return reduce('max', values);
    case 'first_over_time':
      return values[0]!;
    case 'last_over_time':
      return values[values.length - 1]!;
    case 'stddev_over_time':
      return reduce('stddev', values);
    case 'stdvar_over_time':
      return reduce('stdvar', values);
    case 'quantile_over_time':
      return quantile(node.param ?? 0, values);
  }
}

/** Prometheus' quantile: linear interpolation between the closest ranks. */
function quantile(q: number, values: readonly number[]): number {
  if (Number.isNaN(q)) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = q * (sorted.length - 1);
  const lower = Math.max(0, Math.floor(rank));
  const upper = Math.min(sorted.length - 1, lower + 1);
  const weight = rank - Math.floor(rank);
  return sorted[lower]! * (1 - weight) + sorted[upper]! * weight;
}
