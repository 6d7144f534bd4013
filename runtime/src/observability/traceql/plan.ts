/*
 * What the engine learns from a query before scanning: which attribute equalities it can push down to the span
 * store (SpanHint[]), whether spans need their whole trace (root span, trace duration, parent, structure), and which
 * fields to return with each matched span (Tempo returns the fields a filter looked at).
 */
import type { SpanHint } from '../model.ts';
import type { Field, FieldExpr, SpansetExpr } from './ast.ts';
import { canonicalAttribute, needsWholeTrace } from './fields.ts';

export interface QueryPlan {
  /**
   * Whether the query needs whole traces (`source.traces`) rather than the spans a scan returns: trace-level
   * intrinsics, `parent.` attributes, structural operators.
   */
  readonly wholeTrace: boolean;
  /**
   * Hints for the scan. Without `wholeTrace`: conditions every span the query can return satisfies (the scan's spans
   * are evaluated directly). With `wholeTrace`: conditions some span of every matching trace satisfies (the scan only
   * finds candidate traces).
   */
  readonly scanHints: readonly SpanHint[];
  /** Fields whose values are returned with matched spans (`span.attributes` of search results). */
  readonly outputFields: readonly Field[];
}

/** `attr = literal` conjuncts that every span passing the filter satisfies. */
export function requiredHints(e: FieldExpr | null): SpanHint[] {
  if (e === null || e.kind !== 'binary') return [];
  if (e.op === '&&') return [...requiredHints(e.left), ...requiredHints(e.right)];
  if (e.op !== '=') return [];
  const [field, lit] = e.left.kind === 'static' ? [e.right, e.left] : [e.left, e.right];
  if (field.kind !== 'attribute' || field.parent || lit.kind !== 'static') return [];
  if (field.scope !== 'span' && field.scope !== 'resource' && field.scope !== 'unscoped') return [];
  const v = lit.value;
  if (v.type !== 'string' && v.type !== 'int' && v.type !== 'float' && v.type !== 'bool') return [];
  const scope = field.scope === 'unscoped' ? 'any' : field.scope;
  return [{ scope, key: canonicalAttribute(field.name), value: v.value }];
}

/** Hints satisfied by every span a pipeline can output, when evaluated on scanned spans. */
function directHints(e: SpansetExpr): SpanHint[] {
  switch (e.kind) {
    case 'filter':
      return requiredHints(e.expr);
    case 'pipe':
      // Later stages only narrow or regroup the spans of the first one (a count after it counts those spans).
      return directHints(e.left);
    case 'and':
    case 'or':
    case 'structural':
    case 'scalarFilter':
    case 'select':
    case 'by':
    case 'coalesce':
      // `{a} && {b}` needs the spans of both sides; `select`, `by`, scalar filters alone see the whole spanset.
      return [];
  }
}

/** Hints satisfied by at least one span of every trace the expression matches. */
function anchorHints(e: SpansetExpr): SpanHint[] {
  switch (e.kind) {
    case 'filter':
      return requiredHints(e.expr);
    case 'pipe':
      return anchorHints(e.left);
    case 'and': {
      const l = anchorHints(e.left);
      return l.length > 0 ? l : anchorHints(e.right);
    }
    case 'structural': {
      if (e.negated) return anchorHints(e.right);
      const l = anchorHints(e.left);
      return l.length > 0 ? l : anchorHints(e.right);
    }
    case 'or':
    case 'scalarFilter':
    case 'select':
    case 'by':
    case 'coalesce':
      return [];
  }
}

function fieldsOf(e: FieldExpr | null, out: Field[]): void {
  if (e === null) return;
  switch (e.kind) {
    case 'attribute':
    case 'intrinsic':
      out.push(e);
      return;
    case 'static':
      return;
    case 'not':
    case 'negate':
      fieldsOf(e.operand, out);
      return;
    case 'binary':
      fieldsOf(e.left, out);
      fieldsOf(e.right, out);
      return;
  }
}

function walk(e: SpansetExpr, visit: (e: SpansetExpr) => void): void {
  visit(e);
  if (e.kind === 'and' || e.kind === 'or' || e.kind === 'structural' || e.kind === 'pipe') {
    walk(e.left, visit);
    walk(e.right, visit);
  }
}

/** Intrinsics Tempo does not repeat among a span's attributes (they are fields of the result, or trace-level). */
const NOT_RETURNED = new Set([
  'name',
  'duration',
  'traceDuration',
  'rootName',
  'rootServiceName',
  'trace:id',
  'span:id',
]);

export function planQuery(root: SpansetExpr): QueryPlan {
  const fields: Field[] = [];
  let structural = false;
  walk(root, (e) => {
    if (e.kind === 'structural') structural = true;
    if (e.kind === 'filter') fieldsOf(e.expr, fields);
    if (e.kind === 'by') for (const f of e.fields) fieldsOf(f, fields);
    if (e.kind === 'scalarFilter') {
      const scalarFields = (s: typeof e.left): void => {
        if (s.kind === 'aggregate') fieldsOf(s.field, fields);
        if (s.kind === 'arith') {
          scalarFields(s.left);
          scalarFields(s.right);
        }
      };
      scalarFields(e.left);
      scalarFields(e.right);
    }
    if (e.kind === 'select') fields.push(...e.fields);
  });
  const wholeTrace = structural || fields.some(needsWholeTrace);
  const outputFields = fields.filter(
    (f, i) =>
      !(f.kind === 'intrinsic' && NOT_RETURNED.has(f.name)) &&
      !(f.kind === 'attribute' && f.parent) &&
      fields.findIndex((g) => g.text === f.text) === i,
  );
  return { wholeTrace, scanHints: wholeTrace ? anchorHints(root) : directHints(root), outputFields };
}
