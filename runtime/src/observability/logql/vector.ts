/*
 * Instant-vector arithmetic of metric queries, step by step: vector aggregations (`sum by (…)`, `topk`, …), binary
 * operations between scalars and vectors with Prometheus' vector matching, and `label_replace`.
 */
import { ObservabilityQueryError } from '../errors.ts';
import { applyArithmetic, applyComparison, isArithmetic, isComparison } from '../go/numbers.ts';
import type { BinaryOp, Grouping, LabelReplace, VectorAggregation } from './ast.ts';

export interface Sample {
  readonly labels: Readonly<Record<string, string>>;
  /** The labels as a string, identifying the series. */
  readonly key: string;
  readonly value: number;
}

/** A value at every step of the query: a scalar per step, or a vector per step. */
export type Value =
  | { readonly kind: 'scalar'; readonly values: readonly number[] }
  | { readonly kind: 'vector'; readonly steps: readonly (readonly Sample[])[] };

export function sample(labels: Readonly<Record<string, string>>, value: number): Sample {
  const sorted: Record<string, string> = {};
  for (const k of Object.keys(labels).sort()) sorted[k] = labels[k]!;
  return { labels: sorted, key: JSON.stringify(sorted), value };
}

export function groupLabels(labels: Readonly<Record<string, string>>, g: Grouping | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (g === undefined) return out;
  for (const [k, v] of Object.entries(labels)) {
    if (g.labels.includes(k) !== g.without) out[k] = v;
  }
  return out;
}

export function aggregate(a: VectorAggregation, inner: Value): Value {
  if (inner.kind !== 'vector')
    throw new ObservabilityQueryError(`parse error : ${a.op} expects a vector, not a scalar`);
  return { kind: 'vector', steps: inner.steps.map((v) => aggregateStep(a, v)) };
}

function aggregateStep(a: VectorAggregation, v: readonly Sample[]): Sample[] {
  if (a.op === 'sort' || a.op === 'sort_desc') {
    const sign = a.op === 'sort' ? 1 : -1;
    return [...v].sort((x, y) => sign * (x.value - y.value));
  }
  const groups = new Map<string, { labels: Record<string, string>; samples: Sample[] }>();
  for (const s of v) {
    const labels = groupLabels(s.labels, a.grouping ?? { without: false, labels: [] });
    const key = sample(labels, 0).key;
    let g = groups.get(key);
    if (g === undefined) {
      g = { labels, samples: [] };
      groups.set(key, g);
    }
    g.samples.push(s);
  }
  const out: Sample[] = [];
  for (const { labels, samples } of groups.values()) {
    const values = samples.map((s) => s.value);
    if (a.op === 'topk' || a.op === 'bottomk') {
      const sign = a.op === 'topk' ? -1 : 1;
      out.push(...[...samples].sort((x, y) => sign * (x.value - y.value)).slice(0, a.param ?? 0));
      continue;
    }
    out.push(sample(labels, reduce(a.op, values)));
  }
  return out;
}

export function reduce(op: string, values: readonly number[]): number {
  const n = values.length;
  const sum = values.reduce((x, y) => x + y, 0);
  switch (op) {
    case 'sum':
      return sum;
    case 'avg':
      return sum / n;
    case 'count':
      return n;
    case 'min':
      return Math.min(...values);
    case 'max':
      return Math.max(...values);
    case 'stddev':
    case 'stdvar': {
      const mean = sum / n;
      const variance = values.reduce((acc, x) => acc + (x - mean) ** 2, 0) / n;
      return op === 'stddev' ? Math.sqrt(variance) : variance;
    }
    default:
      throw new ObservabilityQueryError(`parse error : unsupported aggregation ${op}`);
  }
}

/** One operation on two numbers; undefined when a comparison without `bool` drops the sample. */
function apply(b: BinaryOp, l: number, r: number, keep: number): number | undefined {
  if (isArithmetic(b.op)) return applyArithmetic(b.op, l, r);
  if (!isComparison(b.op)) return undefined;
  const c = applyComparison(b.op, l, r);
  if (b.bool) return c ? 1 : 0;
  return c ? keep : undefined;
}

export function binary(b: BinaryOp, left: Value, right: Value): Value {
  if (left.kind === 'scalar' && right.kind === 'scalar') {
    return { kind: 'scalar', values: left.values.map((l, i) => apply(b, l, right.values[i]!, l) ?? NaN) };
  }
  if (left.kind === 'vector' && right.kind === 'scalar') {
    return {
      kind: 'vector',
      steps: left.steps.map((v, i) => withScalar(b, v, right.values[i]!, true)),
    };
  }
  if (left.kind === 'scalar' && right.kind === 'vector') {
    return {
      kind: 'vector',
      steps: right.steps.map((v, i) => withScalar(b, v, left.values[i]!, false)),
    };
  }
  if (left.kind === 'vector' && right.kind === 'vector') {
    return { kind: 'vector', steps: left.steps.map((l, i) => vectorVector(b, l, right.steps[i]!)) };
  }
  throw new Error('unreachable');
}

function withScalar(b: BinaryOp, v: readonly Sample[], s: number, vectorOnLeft: boolean): Sample[] {
  if (b.op === 'and' || b.op === 'or' || b.op === 'unless') {
    throw new ObservabilityQueryError(`set operator "${b.op}" not allowed between a vector and a scalar`);
  }
  const out: Sample[] = [];
  for (const x of v) {
    const value = vectorOnLeft ? apply(b, x.value, s, x.value) : apply(b, s, x.value, x.value);
    if (value !== undefined) out.push({ ...x, value });
  }
  return out;
}

function signature(labels: Readonly<Record<string, string>>, b: BinaryOp): string {
  const m = b.matching;
  const out: Record<string, string> = {};
  for (const k of Object.keys(labels).sort()) {
    if (m === undefined || m.labels.includes(k) === m.on) out[k] = labels[k]!;
  }
  return JSON.stringify(out);
}

function vectorVector(b: BinaryOp, left: readonly Sample[], right: readonly Sample[]): Sample[] {
  const rightBySig = new Map<string, Sample[]>();
  for (const r of right) {
    const sig = signature(r.labels, b);
    rightBySig.set(sig, [...(rightBySig.get(sig) ?? []), r]);
  }
  if (b.op === 'and') return left.filter((l) => rightBySig.has(signature(l.labels, b)));
  if (b.op === 'unless') return left.filter((l) => !rightBySig.has(signature(l.labels, b)));
  if (b.op === 'or') {
    const leftSigs = new Set(left.map((l) => signature(l.labels, b)));
    return [...left, ...right.filter((r) => !leftSigs.has(signature(r.labels, b)))];
  }
  const group = b.matching?.group;
  const many = group?.side === 'right' ? right : left;
  const oneBySig = group?.side === 'right' ? new Map<string, Sample[]>() : rightBySig;
  if (group?.side === 'right') {
    for (const l of left) oneBySig.set(signature(l.labels, b), [...(oneBySig.get(signature(l.labels, b)) ?? []), l]);
  }
  const out: Sample[] = [];
  const seen = new Set<string>();
  for (const m of many) {
    const matches = oneBySig.get(signature(m.labels, b));
    if (matches === undefined) continue;
    if (matches.length > 1) {
      throw new ObservabilityQueryError(
        `found duplicate series for the match group ${signature(m.labels, b)} on the ` +
          `${group?.side === 'right' ? 'left' : 'right'} hand-side of the operation; many-to-many matching not allowed`,
      );
    }
    const o = matches[0]!;
    const [l, r] = group?.side === 'right' ? [o, m] : [m, o];
    const value = apply(b, l.value, r.value, l.value);
    if (value === undefined) continue;
    const labels = resultLabels(b, m, o);
    const s = sample(labels, value);
    if (group === undefined && seen.has(s.key)) {
      throw new ObservabilityQueryError(
        `found duplicate series for the match group ${signature(m.labels, b)} on the left hand-side of the operation; ` +
          'many-to-many matching not allowed: matching labels must be unique on one side',
      );
    }
    seen.add(s.key);
    out.push(s);
  }
  return out;
}

function resultLabels(b: BinaryOp, many: Sample, one: Sample): Record<string, string> {
  const m = b.matching;
  const out: Record<string, string> = { ...many.labels };
  if (m === undefined) return out;
  if (m.group === undefined) {
    for (const k of Object.keys(out)) if (m.labels.includes(k) !== m.on) delete out[k];
    return out;
  }
  for (const k of m.group.include) {
    const v = one.labels[k];
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

export function labelReplace(lr: LabelReplace, inner: Value): Value {
  if (inner.kind !== 'vector') throw new ObservabilityQueryError('parse error : label_replace expects a vector');
  return {
    kind: 'vector',
    steps: inner.steps.map((v) =>
      v.map((s) => {
        const m = lr.regex.exec(s.labels[lr.src] ?? '');
        if (m === null) return s;
        const value = lr.replacement.replace(/\$(?:\{(\w+)\}|(\w+))/g, (_, a?: string, b?: string) => {
          const ref = a ?? b ?? '';
          return (/^\d+$/.test(ref) ? m[Number(ref)] : m.groups?.[ref]) ?? '';
        });
        const labels: Record<string, string> = { ...s.labels };
        if (value === '') delete labels[lr.dst];
        else labels[lr.dst] = value;
        return sample(labels, s.value);
      }),
    ),
  };
}
