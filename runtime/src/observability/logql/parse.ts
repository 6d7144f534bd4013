/*
 * LogQL → typed AST, with Grafana's lezer grammar (@grafana/lezer-logql) doing the parsing. A syntax error (an error
 * node of lezer) becomes a 400 with Loki's wording and position; the grammar's binary-operator precedence (which
 * differs from Prometheus') is restored here by re-associating chains of binary operations.
 */
import { parser } from '@grafana/lezer-logql';
import { ObservabilityQueryError } from '../errors.ts';
import type { LabelMatcher } from '../model.ts';
import type {
  BinaryOpName,
  Expr,
  LabelFilter,
  LogQuery,
  MetricExpr,
  RangeOp,
  Stage,
  Unwrap,
  VectorMatching,
  VectorOp,
} from './ast.ts';
import { child, listItems, literalValue, numberOf, required, syntaxError, text, type Ctx, type Node } from './lezer.ts';
import { parseDurationNs } from '../go/durations.ts';
import { goRegex, unquote } from './literals.ts';
import { convertLabelFilter, convertStage, matcherOf } from './parse-stages.ts';

/** Parses a LogQL query; any syntax or semantic error is an ObservabilityQueryError (400). */
export function parseLogQL(query: string): Expr {
  const tree = parser.parse(query);
  let errorAt: number | undefined;
  tree.iterate({
    enter(n) {
      if (n.type.isError && (errorAt === undefined || n.from < errorAt)) errorAt = n.from;
    },
  });
  if (errorAt !== undefined || query.trim() === '') throw syntaxError(query, errorAt ?? query.length);
  const ctx: Ctx = { query };
  const top = tree.topNode.firstChild;
  if (top === null) throw syntaxError(query, 0);
  return convertExpr(ctx, top);
}

/** A stream selector (labels, series, index endpoints): a log query whose matchers are used, pipeline ignored. */
export function parseSelector(query: string): readonly LabelMatcher[] {
  const expr = parseLogQL(query);
  if (expr.kind !== 'log')
    throw new ObservabilityQueryError(`parse error : only log stream selectors are accepted here`);
  return expr.matchers;
}

function convertExpr(ctx: Ctx, n: Node): Expr {
  const inner = n.name === 'Expr' ? n.firstChild : n;
  if (inner === null) throw syntaxError(ctx.query, n.from);
  if (inner.name === 'LogExpr') return convertLogExpr(ctx, inner);
  if (inner.name === 'MetricExpr') return convertMetric(ctx, inner);
  throw syntaxError(ctx.query, inner.from);
}

function convertLogExpr(ctx: Ctx, n: Node): LogQuery {
  const nested = child(n, 'LogExpr');
  if (nested !== null) return convertLogExpr(ctx, nested);
  const matchers = convertSelector(ctx, required(ctx, n, 'Selector'));
  const pipeline = child(n, 'PipelineExpr');
  return { kind: 'log', matchers, stages: pipeline === null ? [] : convertPipeline(ctx, pipeline) };
}

function convertSelector(ctx: Ctx, n: Node): LabelMatcher[] {
  const matchers = listItems(required(ctx, n, 'Matchers'), 'Matchers', 'Matcher').map((m) => matcherOf(ctx, m));
  for (const m of matchers) if (m.op === '=~' || m.op === '!~') goRegex(m.value, true, true);
  const nonEmpty = matchers.some((m) => {
    if (m.op === '=') return m.value !== '';
    if (m.op === '=~') return !goRegex(m.value, true, true).test('');
    return false;
  });
  if (!nonEmpty) {
    throw new ObservabilityQueryError(
      'parse error : queries require at least one regexp or equality matcher that does not have an empty-compatible ' +
        'value. For instance, app=~".*" does not meet this requirement, but app=~".+" will',
    );
  }
  return matchers;
}

function convertPipeline(ctx: Ctx, n: Node): Stage[] {
  return listItems(n, 'PipelineExpr', 'PipelineStage').flatMap((s) => convertStage(ctx, s));
}

// ---- metric expressions ----

const UNWRAP_OPS: ReadonlySet<string> = new Set([
  'sum_over_time',
  'avg_over_time',
  'min_over_time',
  'max_over_time',
  'first_over_time',
  'last_over_time',
  'stddev_over_time',
  'stdvar_over_time',
  'quantile_over_time',
]);
const RANGE_OPS: ReadonlySet<string> = new Set([
  'count_over_time',
  'rate',
  'bytes_over_time',
  'bytes_rate',
  ...UNWRAP_OPS,
]);

function convertMetric(ctx: Ctx, n: Node): MetricExpr {
  const c = n.firstChild;
  if (c === null) throw syntaxError(ctx.query, n.from);
  switch (c.name) {
    case 'MetricExpr':
      return convertMetric(ctx, c);
    case 'RangeAggregationExpr':
      return convertRange(ctx, c);
    case 'VectorAggregationExpr':
      return convertVectorAgg(ctx, c);
    case 'BinOpExpr':
      return convertBinOp(ctx, c);
    case 'LiteralExpr':
      return { kind: 'number', value: literalValue(ctx, c) };
    case 'VectorExpr':
      return { kind: 'vector', value: numberOf(ctx, required(ctx, c, 'Number')) };
    case 'LabelReplaceExpr': {
      const [dst, replacement, src, regex] = c.getChildren('String').map((s) => unquote(text(ctx, s)));
      if (regex === undefined || src === undefined || replacement === undefined || dst === undefined) {
        throw syntaxError(ctx.query, c.to);
      }
      return {
        kind: 'labelReplace',
        expr: convertMetric(ctx, required(ctx, c, 'MetricExpr')),
        dst,
        replacement,
        src,
        regex: goRegex(regex, true, true),
      };
    }
    default:
      throw syntaxError(ctx.query, c.from);
  }
}

function durationOf(ctx: Ctx, n: Node): bigint {
  const d = parseDurationNs(text(ctx, n));
  if (d === undefined) throw syntaxError(ctx.query, n.from);
  return d;
}

function convertGrouping(ctx: Ctx, n: Node | null): { without: boolean; labels: string[] } | undefined {
  if (n === null) return undefined;
  const labels = child(n, 'Labels');
  return {
    without: child(n, 'Without') !== null,
    labels: labels === null ? [] : listItems(labels, 'Labels', 'Identifier').map((l) => text(ctx, l)),
  };
}

function convertRange(ctx: Ctx, n: Node): MetricExpr {
  const opNode = required(ctx, n, 'RangeOp');
  const op = text(ctx, opNode);
  if (!RANGE_OPS.has(op)) throw new ObservabilityQueryError(`parse error : ${op} is not supported`);
  let lr = required(ctx, n, 'LogRangeExpr');
  for (let inner = child(lr, 'LogRangeExpr'); inner !== null; inner = child(lr, 'LogRangeExpr')) lr = inner;
  const selector = required(ctx, lr, 'Selector');
  const pipeline = child(lr, 'PipelineExpr');
  const log: LogQuery = {
    kind: 'log',
    matchers: convertSelector(ctx, selector),
    stages: pipeline === null ? [] : convertPipeline(ctx, pipeline),
  };
  const range = required(ctx, lr, 'Range');
  const offset = child(lr, 'OffsetExpr');
  const unwrapNode = child(lr, 'UnwrapExpr');
  const unwrap = unwrapNode === null ? undefined : convertUnwrap(ctx, unwrapNode);
  const paramNode = child(n, 'Number');
  const param = paramNode === null ? undefined : numberOf(ctx, paramNode);
  if (UNWRAP_OPS.has(op) && unwrap === undefined) {
    throw new ObservabilityQueryError(`parse error : invalid aggregation ${op} without unwrap`);
  }
  if (!UNWRAP_OPS.has(op) && op !== 'rate' && unwrap !== undefined) {
    throw new ObservabilityQueryError(`parse error : invalid aggregation ${op} with unwrap`);
  }
  if ((op === 'quantile_over_time') !== (param !== undefined)) {
    throw new ObservabilityQueryError(`parse error : invalid parameter for ${op}`);
  }
  const grouping = convertGrouping(ctx, child(n, 'Grouping'));
  if (grouping !== undefined && unwrap === undefined) {
    throw new ObservabilityQueryError(`parse error : grouping not allowed for ${op} aggregation`);
  }
  return {
    kind: 'range',
    op: op as RangeOp,
    param,
    log,
    rangeNs: durationOf(ctx, required(ctx, range, 'Duration')),
    offsetNs: offset === null ? 0n : durationOf(ctx, required(ctx, offset, 'Duration')),
    unwrap,
    grouping,
  };
}

function convertUnwrap(ctx: Ctx, n: Node): Unwrap {
  const filters: LabelFilter[] = [];
  let base = n;
  for (let inner = child(base, 'UnwrapExpr'); inner !== null; inner = child(base, 'UnwrapExpr')) {
    const f = child(base, 'LabelFilter');
    if (f !== null) filters.unshift(convertLabelFilter(ctx, f));
    base = inner;
  }
  const conv = child(base, 'ConvOp');
  const conversion = conv === null ? 'none' : (text(ctx, conv) as 'bytes' | 'duration' | 'duration_seconds');
  return { label: text(ctx, required(ctx, base, 'Identifier')), conversion, filters };
}

function convertVectorAgg(ctx: Ctx, n: Node): MetricExpr {
  const op = text(ctx, required(ctx, n, 'VectorOp')).toLowerCase();
  const paramNode = child(n, 'Number');
  const param = paramNode === null ? undefined : numberOf(ctx, paramNode);
  if ((op === 'topk' || op === 'bottomk') !== (param !== undefined)) {
    throw new ObservabilityQueryError(`parse error : invalid parameter for ${op}`);
  }
  if (param !== undefined && (!Number.isInteger(param) || param <= 0)) {
    throw new ObservabilityQueryError(`parse error : invalid parameter for ${op}: ${param} is not a positive integer`);
  }
  return {
    kind: 'vagg',
    op: op as VectorOp,
    param,
    grouping: convertGrouping(ctx, child(n, 'Grouping')),
    expr: convertMetric(ctx, required(ctx, n, 'MetricExpr')),
  };
}

// ---- binary operations: flatten the grammar's chain, then apply Prometheus' precedence ----

const OP_NODES: Record<string, BinaryOpName> = {
  Or: 'or',
  And: 'and',
  Unless: 'unless',
  Add: '+',
  Sub: '-',
  Mul: '*',
  Div: '/',
  Mod: '%',
  Pow: '^',
  Eql: '==',
  Neq: '!=',
  Gtr: '>',
  Gte: '>=',
  Lss: '<',
  Lte: '<=',
};
const PRECEDENCE: Record<BinaryOpName, number> = {
  or: 1,
  and: 2,
  unless: 2,
  '==': 3,
  '!=': 3,
  '>': 3,
  '>=': 3,
  '<': 3,
  '<=': 3,
  '+': 4,
  '-': 4,
  '*': 5,
  '/': 5,
  '%': 5,
  '^': 6,
};

interface OpToken {
  readonly op: BinaryOpName;
  readonly bool: boolean;
  readonly matching: VectorMatching | undefined;
}

function flatten(ctx: Ctx, n: Node, operands: MetricExpr[], ops: OpToken[]): void {
  const metric = n.name === 'Expr' ? n.firstChild : n;
  const bin = metric?.name === 'MetricExpr' ? child(metric, 'BinOpExpr') : null;
  if (bin === null) {
    const e = convertExpr(ctx, n);
    if (e.kind === 'log') {
      throw new ObservabilityQueryError(
        'parse error : unexpected type for binary operation (a log query, not a metric)',
      );
    }
    operands.push(e);
    return;
  }
  const [left, right] = bin.getChildren('Expr');
  if (left === undefined || right === undefined) throw syntaxError(ctx.query, bin.to);
  flatten(ctx, left, operands, ops);
  let opNode: Node | null = left.nextSibling;
  while (opNode !== null && OP_NODES[opNode.name] === undefined) opNode = opNode.nextSibling;
  if (opNode === null) throw syntaxError(ctx.query, left.to);
  ops.push({ op: OP_NODES[opNode.name]!, ...convertModifier(ctx, child(bin, 'BinOpModifier')) });
  flatten(ctx, right, operands, ops);
}

function convertModifier(ctx: Ctx, n: Node | null): { bool: boolean; matching: VectorMatching | undefined } {
  if (n === null) return { bool: false, matching: undefined };
  const labelsOf = (g: Node | null) =>
    g === null ? [] : listItems(g, 'GroupingLabelList', 'GroupingLabel').map((l) => text(ctx, l));
  const onIgnoring = child(n, 'OnOrIgnoringModifier');
  const groupNode = child(n, 'GroupLeft') ?? child(n, 'GroupRight');
  const matching: VectorMatching | undefined =
    onIgnoring === null
      ? undefined
      : {
          on: child(onIgnoring, 'On') !== null,
          labels: labelsOf(child(onIgnoring, 'GroupingLabels')),
          group:
            groupNode === null
              ? undefined
              : {
                  side: groupNode.name === 'GroupLeft' ? 'left' : 'right',
                  include: labelsOf(child(n, 'GroupingLabels')),
                },
        };
  return { bool: child(n, 'Bool') !== null, matching };
}

function convertBinOp(ctx: Ctx, n: Node): MetricExpr {
  const operands: MetricExpr[] = [];
  const ops: OpToken[] = [];
  const holder = n.parent;
  if (holder === null) throw syntaxError(ctx.query, n.from);
  flatten(ctx, holder, operands, ops);
  let pos = 0;
  let opIndex = 0;
  const climb = (minPrec: number): MetricExpr => {
    let left = operands[pos++]!;
    while (opIndex < ops.length && PRECEDENCE[ops[opIndex]!.op] >= minPrec) {
      const tok = ops[opIndex++]!;
      const prec = PRECEDENCE[tok.op];
      const right = climb(tok.op === '^' ? prec : prec + 1);
      left = makeBinary(tok, left, right);
    }
    return left;
  };
  return climb(0);
}

function makeBinary(tok: OpToken, left: MetricExpr, right: MetricExpr): MetricExpr {
  const comparison = PRECEDENCE[tok.op] === 3;
  const setOp = tok.op === 'and' || tok.op === 'or' || tok.op === 'unless';
  if (tok.bool && !comparison)
    throw new ObservabilityQueryError('parse error : bool modifier can only be used on comparison operators');
  if (left.kind === 'number' && right.kind === 'number') {
    if (comparison && !tok.bool) {
      throw new ObservabilityQueryError('parse error : comparisons between scalars must use BOOL modifier');
    }
    if (setOp)
      throw new ObservabilityQueryError(
        `parse error : set operator "${tok.op}" not allowed in binary scalar expression`,
      );
  }
  return { kind: 'binop', op: tok.op, bool: tok.bool, matching: tok.matching, left, right };
}
