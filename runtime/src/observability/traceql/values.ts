/*
 * Comparison and arithmetic of TraceQL values, with Tempo's typing: int, float and duration compare as numbers
 * (a duration is its nanoseconds), strings compare as strings and by anchored regex, booleans, statuses and kinds only
 * by (in)equality. A missing attribute (nil) compares false to everything (`= nil` and `!= nil` are existence tests, evaluate.ts); mismatched types are false
 * for every operator, `!=` included, so `{ .x != "a" }` needs the attribute to exist, as in Tempo.
 */
import { applyArithmetic } from '../go/numbers.ts';
import type { ArithmeticOp, BinaryOp, ComparisonOp, Value } from './ast.ts';

const COMPARISONS = new Set<string>(['=', '!=', '<', '<=', '>', '>=', '=~', '!~']);

export function isComparison(op: BinaryOp): op is ComparisonOp {
  return COMPARISONS.has(op);
}

const NUMERIC = new Set(['int', 'float', 'duration']);

function ordered(op: ComparisonOp, c: number): boolean {
  switch (op) {
    case '=':
      return c === 0;
    case '!=':
      return c !== 0;
    case '<':
      return c < 0;
    case '<=':
      return c <= 0;
    case '>':
      return c > 0;
    case '>=':
      return c >= 0;
    case '=~':
    case '!~':
      return false;
  }
}

function numeric(v: Value): number {
  return v.type === 'duration' ? Number(v.value) : v.type === 'int' || v.type === 'float' ? v.value : NaN;
}

/** Whether `l op r` holds; `regex` compiles the right-hand side of `=~`/`!~` (anchored). */
export function compare(op: ComparisonOp, l: Value, r: Value, regex: (source: string) => RegExp): boolean {
  if (l.type === 'nil' || r.type === 'nil') return false;
  if (l.type === 'duration' && r.type === 'duration') {
    return ordered(op, l.value < r.value ? -1 : l.value > r.value ? 1 : 0);
  }
  if (NUMERIC.has(l.type) && NUMERIC.has(r.type)) {
    const a = numeric(l);
    const b = numeric(r);
    if (Number.isNaN(a) || Number.isNaN(b)) return op === '!=';
    return ordered(op, a < b ? -1 : a > b ? 1 : 0);
  }
  // A status or kind compared with a string compares by name (`status = "error"` reads as `status = error`).
  const text = (v: Value): string | undefined =>
    v.type === 'string' || v.type === 'status' || v.type === 'kind' ? v.value : undefined;
  if (l.type === 'string' && r.type === 'string') {
    if (op === '=~') return regex(r.value).test(l.value);
    if (op === '!~') return !regex(r.value).test(l.value);
    return ordered(op, l.value < r.value ? -1 : l.value > r.value ? 1 : 0);
  }
  const lt = text(l);
  const rt = text(r);
  if (lt !== undefined && rt !== undefined && (l.type === r.type || l.type === 'string' || r.type === 'string')) {
    if (op === '=') return lt === rt;
    if (op === '!=') return lt !== rt;
    return false;
  }
  if (l.type === 'bool' && r.type === 'bool') {
    if (op === '=') return l.value === r.value;
    if (op === '!=') return l.value !== r.value;
  }
  return false;
}

/** `l op r` on numbers and durations; anything else (or a division by zero) is nil. */
export function arithmetic(op: ArithmeticOp, l: Value, r: Value): Value {
  if (!NUMERIC.has(l.type) || !NUMERIC.has(r.type)) return { type: 'nil' };
  const v = applyArithmetic(op, numeric(l), numeric(r));
  if (!Number.isFinite(v)) return { type: 'nil' };
  if (l.type === 'duration' || r.type === 'duration') return { type: 'duration', value: BigInt(Math.trunc(v)) };
  if (l.type === 'int' && r.type === 'int' && op !== '/' && op !== '^') return { type: 'int', value: v };
  if (l.type === 'int' && r.type === 'int' && op === '^' && Number.isInteger(v)) return { type: 'int', value: v };
  return { type: Number.isInteger(v) && op !== '/' ? 'int' : 'float', value: v };
}
