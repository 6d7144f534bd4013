/*
 * TraceQL evaluation on one trace. A pipeline maps a list of spansets to a list of spansets; it starts with one
 * spanset holding the trace's spans, and the trace matches when a non-empty spanset comes out, as in Tempo's engine.
 */
import type { SpanRecord } from '../model.ts';
import type { BinaryOp, ComparisonOp, Field, FieldExpr, ScalarExpr, SpansetExpr, StructuralOp, Value } from './ast.ts';
import { NIL, type TraceContext, fieldValue } from './fields.ts';
import { anchoredRegex } from './literals.ts';
import { isComparison } from './values.ts';
import { arithmetic, compare } from './values.ts';

export interface SpansetAttribute {
  readonly key: string;
  readonly value: Value;
}

export interface Spanset {
  readonly spans: readonly SpanRecord[];
  /** Spanset-level values: the keys of `by()`. */
  readonly attributes: readonly SpansetAttribute[];
  /** Fields named by `select()`, to be returned with each span. */
  readonly selected: readonly Field[];
}

type Values = Value | readonly Value[];

const isList = (v: Values): v is readonly Value[] => Array.isArray(v);

function truthy(v: Values): boolean {
  return !isList(v) && v.type === 'bool' && v.value;
}

function single(v: Values): Value {
  return isList(v) ? (v[0] ?? NIL) : v;
}

/** A comparison where either side may be a list (event/link scopes): `=`-like ops need one match, `!=`-like none. */
function compareValues(op: ComparisonOp, l: Values, r: Values): boolean {
  if (!isList(l) && !isList(r)) return compare(op, l, r, anchoredRegex);
  const ls = isList(l) ? l : [l];
  const rs = isList(r) ? r : [r];
  if (ls.length === 0 || rs.length === 0) return compare(op, ls[0] ?? NIL, rs[0] ?? NIL, anchoredRegex);
  if (op === '!=' || op === '!~') {
    const positive = op === '!=' ? '=' : '=~';
    return !ls.some((a) => rs.some((b) => compare(positive, a, b, anchoredRegex)));
  }
  return ls.some((a) => rs.some((b) => compare(op, a, b, anchoredRegex)));
}

const isNilLiteral = (e: FieldExpr): boolean => e.kind === 'static' && e.value.type === 'nil';

/** `x = nil` holds when x is missing, `x != nil` when it is there; nil takes no other operator. */
function existence(op: BinaryOp, v: Values): boolean {
  const missing = isList(v) ? v.length === 0 : v.type === 'nil';
  return op === '=' ? missing : op === '!=' ? !missing : false;
}

export function evalField(e: FieldExpr, span: SpanRecord, trace: TraceContext): Values {
  switch (e.kind) {
    case 'attribute':
    case 'intrinsic':
      return fieldValue(e, span, trace);
    case 'static':
      return e.value;
    case 'not': {
      const v = single(evalField(e.operand, span, trace));
      return v.type === 'bool' ? { type: 'bool', value: !v.value } : { type: 'bool', value: true };
    }
    case 'negate':
      return arithmetic('-', { type: 'int', value: 0 }, single(evalField(e.operand, span, trace)));
    case 'binary': {
      if (e.op === '&&') {
        return {
          type: 'bool',
          value: truthy(evalField(e.left, span, trace)) && truthy(evalField(e.right, span, trace)),
        };
      }
      if (e.op === '||') {
        return {
          type: 'bool',
          value: truthy(evalField(e.left, span, trace)) || truthy(evalField(e.right, span, trace)),
        };
      }
      const nilSide = isNilLiteral(e.right) ? e.left : isNilLiteral(e.left) ? e.right : undefined;
      if (nilSide !== undefined) return { type: 'bool', value: existence(e.op, evalField(nilSide, span, trace)) };
      const l = evalField(e.left, span, trace);
      const r = evalField(e.right, span, trace);
      if (isComparison(e.op)) return { type: 'bool', value: compareValues(e.op, l, r) };
      return arithmetic(e.op, single(l), single(r));
    }
  }
}

export function spanMatches(e: FieldExpr | null, span: SpanRecord, trace: TraceContext): boolean {
  return e === null || truthy(evalField(e, span, trace));
}

function merge(sets: readonly Spanset[]): Spanset {
  const seen = new Set<string>();
  const spans: SpanRecord[] = [];
  const attributes: SpansetAttribute[] = [];
  const selected: Field[] = [];
  for (const ss of sets) {
    for (const s of ss.spans) {
      if (seen.has(s.spanId)) continue;
      seen.add(s.spanId);
      spans.push(s);
    }
    for (const a of ss.attributes) if (!attributes.some((b) => b.key === a.key)) attributes.push(a);
    for (const f of ss.selected) if (!selected.includes(f)) selected.push(f);
  }
  return { spans, attributes, selected };
}

function isAncestor(a: SpanRecord, b: SpanRecord, trace: TraceContext): boolean {
  let cur = trace.parentOf(b);
  for (let hops = 0; cur !== undefined && hops <= trace.spans.length; hops++) {
    if (cur.spanId === a.spanId) return true;
    cur = trace.parentOf(cur);
  }
  return false;
}

/** Whether `b` stands in relation `op` to `a`: `{a} > {b}` holds when b is a child of a, and so on. */
function related(op: StructuralOp, a: SpanRecord, b: SpanRecord, trace: TraceContext): boolean {
  switch (op) {
    case '>':
      return b.parentSpanId !== '' && b.parentSpanId === a.spanId;
    case '<':
      return a.parentSpanId !== '' && a.parentSpanId === b.spanId;
    case '>>':
      return isAncestor(a, b, trace);
    case '<<':
      return isAncestor(b, a, trace);
    case '~':
      return a.spanId !== b.spanId && a.parentSpanId !== '' && a.parentSpanId === b.parentSpanId;
  }
}

function structural(e: Extract<SpansetExpr, { kind: 'structural' }>, ss: Spanset, trace: TraceContext): Spanset[] {
  const l = merge(run(e.left, [ss], trace));
  const r = merge(run(e.right, [ss], trace));
  const rel = (b: SpanRecord): boolean => l.spans.some((a) => related(e.op, a, b, trace));
  let spans: SpanRecord[];
  if (e.negated) spans = r.spans.filter((b) => !rel(b));
  else if (e.union) {
    const right = r.spans.filter(rel);
    const left = l.spans.filter((a) => right.some((b) => related(e.op, a, b, trace)));
    spans = [...left, ...right.filter((b) => !left.includes(b))];
  } else spans = r.spans.filter(rel);
  if (spans.length === 0) return [];
  return [{ spans, attributes: [...l.attributes, ...r.attributes], selected: [...l.selected, ...r.selected] }];
}

function numericValues(field: FieldExpr, ss: Spanset, trace: TraceContext): Value[] {
  const out: Value[] = [];
  for (const s of ss.spans) {
    const v = single(evalField(field, s, trace));
    if (v.type === 'int' || v.type === 'float' || v.type === 'duration') out.push(v);
  }
  return out;
}

function scalarValue(e: ScalarExpr, ss: Spanset, trace: TraceContext): Value {
  switch (e.kind) {
    case 'number':
      return e.value;
    case 'arith':
      return arithmetic(e.op, scalarValue(e.left, ss, trace), scalarValue(e.right, ss, trace));
    case 'aggregate': {
      if (e.fn === 'count' || e.field === null) return { type: 'int', value: ss.spans.length };
      const vs = numericValues(e.field, ss, trace);
      if (vs.length === 0) return NIL;
      if (e.fn === 'min' || e.fn === 'max') {
        const want = e.fn === 'min' ? '<' : '>';
        return vs.reduce((best, v) => (compare(want, v, best, anchoredRegex) ? v : best));
      }
      const sum = vs.reduce((acc, v) => arithmetic('+', acc, v));
      return e.fn === 'sum' ? sum : arithmetic('/', sum, { type: 'int', value: vs.length });
    }
  }
}

function groupBy(e: Extract<SpansetExpr, { kind: 'by' }>, ss: Spanset, trace: TraceContext): Spanset[] {
  const groups = new Map<string, { spans: SpanRecord[]; values: Value[] }>();
  for (const s of ss.spans) {
    const values = e.fields.map((f) => single(evalField(f, s, trace)));
    const key = JSON.stringify(values, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    const g = groups.get(key);
    if (g === undefined) groups.set(key, { spans: [s], values });
    else g.spans.push(s);
  }
  return [...groups.values()].map((g) => ({
    spans: g.spans,
    attributes: [
      ...ss.attributes,
      ...g.values.flatMap((value) => (value.type === 'nil' ? [] : [{ key: e.text, value }])),
    ],
    selected: ss.selected,
  }));
}

function perSpanset(input: readonly Spanset[], f: (ss: Spanset) => Spanset[]): Spanset[] {
  return input.flatMap(f);
}

function run(e: SpansetExpr, input: readonly Spanset[], trace: TraceContext): Spanset[] {
  switch (e.kind) {
    case 'filter':
      return perSpanset(input, (ss) => {
        const spans = ss.spans.filter((s) => spanMatches(e.expr, s, trace));
        return spans.length === 0 ? [] : [{ ...ss, spans }];
      });
    case 'and':
    case 'or':
      return perSpanset(input, (ss) => {
        const l = run(e.left, [ss], trace);
        const r = run(e.right, [ss], trace);
        const ok = e.kind === 'and' ? l.length > 0 && r.length > 0 : l.length > 0 || r.length > 0;
        return ok ? [merge([...l, ...r])] : [];
      });
    case 'structural':
      return perSpanset(input, (ss) => structural(e, ss, trace));
    case 'pipe':
      return run(e.right, run(e.left, input, trace), trace);
    case 'scalarFilter':
      return input.filter((ss) =>
        compare(e.op, scalarValue(e.left, ss, trace), scalarValue(e.right, ss, trace), anchoredRegex),
      );
    case 'select':
      return input.map((ss) => ({ ...ss, selected: [...ss.selected, ...e.fields] }));
    case 'by':
      return perSpanset(input, (ss) => groupBy(e, ss, trace));
    case 'coalesce':
      return input.length === 0 ? [] : [merge(input)];
  }
}

/** The spansets a query yields on a trace (the spans given, in `trace.spans`); empty when the trace does not match. */
export function evaluate(root: SpansetExpr, trace: TraceContext): Spanset[] {
  if (trace.spans.length === 0) return [];
  return run(root, [{ spans: trace.spans, attributes: [], selected: [] }], trace).filter((ss) => ss.spans.length > 0);
}
