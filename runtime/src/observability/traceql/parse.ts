/*
 * TraceQL text → typed AST, through Grafana's lezer grammar (@grafana/lezer-traceql, the grammar Grafana's query
 * editor uses). Syntax errors are reported as Tempo does: `invalid TraceQL query: parse error at line 1, col 5:
 * syntax error: unexpected …`. Constructs the grammar accepts but this engine does not evaluate (TraceQL metrics,
 * template variables, `parent` alone) are refused with a 400 naming them.
 */
import { parser } from '@grafana/lezer-traceql';
import { ObservabilityQueryError } from '../errors.ts';
import type {
  AggregateFn,
  ArithmeticOp,
  AttributeScope,
  BinaryOp,
  ComparisonOp,
  Field,
  FieldExpr,
  IntrinsicName,
  ScalarExpr,
  SpansetExpr,
  StructuralOp,
  TraceQLQuery,
  Value,
} from './ast.ts';
import { anchoredRegex, parseGoDurationNs, unquote, unquoteIdentifier } from './literals.ts';
import { type Builders, type ChainItem, reassociate } from './precedence.ts';

type Node = ReturnType<typeof parser.parse>['topNode'];

const INTRINSICS: Readonly<Record<string, IntrinsicName>> = {
  name: 'name',
  'span:name': 'name',
  status: 'status',
  'span:status': 'status',
  statusMessage: 'statusMessage',
  'span:statusMessage': 'statusMessage',
  duration: 'duration',
  'span:duration': 'duration',
  kind: 'kind',
  'span:kind': 'kind',
  rootName: 'rootName',
  'trace:rootName': 'rootName',
  rootServiceName: 'rootServiceName',
  'trace:rootService': 'rootServiceName',
  traceDuration: 'traceDuration',
  'trace:duration': 'traceDuration',
  'trace:id': 'trace:id',
  'span:id': 'span:id',
  'span:parentID': 'span:parentID',
  'event:name': 'event:name',
  'event:timeSinceStart': 'event:timeSinceStart',
  'link:traceID': 'link:traceID',
  'link:spanID': 'link:spanID',
  'instrumentation:name': 'instrumentation:name',
  'instrumentation:version': 'instrumentation:version',
};

const KEYWORD_VALUES: Readonly<Record<string, Value>> = {
  true: { type: 'bool', value: true },
  false: { type: 'bool', value: false },
  nil: { type: 'nil' },
  ok: { type: 'status', value: 'ok' },
  error: { type: 'status', value: 'error' },
  unset: { type: 'status', value: 'unset' },
  unspecified: { type: 'kind', value: 'unspecified' },
  internal: { type: 'kind', value: 'internal' },
  server: { type: 'kind', value: 'server' },
  client: { type: 'kind', value: 'client' },
  producer: { type: 'kind', value: 'producer' },
  consumer: { type: 'kind', value: 'consumer' },
};

const SCOPES: Readonly<Record<string, AttributeScope>> = {
  Span: 'span',
  Resource: 'resource',
  Event: 'event',
  Link: 'link',
  Instrumentation: 'instrumentation',
};

const ARITHMETIC_OPS = new Set<string>(['+', '-', '*', '/', '%', '^']);

/** Tempo's message for a syntax error at offset `at`. */
export function syntaxError(query: string, at: number): ObservabilityQueryError {
  const before = query.slice(0, at);
  const line = before.split('\n').length;
  const col = at - (before.lastIndexOf('\n') + 1) + 1;
  const rest = query.slice(at).trimStart();
  const token = /^("(?:[^"\\]|\\.)*"?|`[^`]*`?|[\w.:$]+|[|&!=~<>]+|\S)/.exec(rest)?.[0];
  const what = token === undefined ? '$end' : token;
  return new ObservabilityQueryError(
    `invalid TraceQL query: parse error at line ${line}, col ${col}: syntax error: unexpected ${what}`,
  );
}

export function unsupported(what: string): ObservabilityQueryError {
  return new ObservabilityQueryError(`invalid TraceQL query: ${what} is not supported`);
}

class Converter {
  constructor(private readonly q: string) {}

  text(n: Node): string {
    return this.q.slice(n.from, n.to);
  }

  children(n: Node): Node[] {
    const out: Node[] = [];
    for (let c = n.firstChild; c !== null; c = c.nextSibling) out.push(c);
    return out;
  }

  fail(n: Node): never {
    throw syntaxError(this.q, n.from);
  }

  /** `SpansetPipelineExpression` and `SpansetExpression`: binary spanset operators, pipes, parentheses. */
  spanset(n: Node): SpansetExpr {
    const items: ChainItem<SpansetExpr>[] = [];
    this.flattenSpanset(n, items);
    return this.rebuild(n, items, {
      binary: (op, left, right) => spansetBinary(op, left, right, () => this.fail(n)),
      prefix: () => this.fail(n),
    });
  }

  flattenSpanset(n: Node, out: ChainItem<SpansetExpr>[]): void {
    const cs = this.children(n);
    if (n.name === 'SpansetPipeline' && cs.length === 1) {
      out.push({ kind: 'operand', value: this.pipelineElement(cs[0]!) });
    } else if (cs.length === 1 && this.q[n.from] === '(') {
      out.push({ kind: 'operand', value: this.spanset(cs[0]!) });
    } else if (cs.length === 1) {
      this.flattenSpanset(cs[0]!, out);
    } else if (cs.length === 2 || cs.length === 3) {
      this.flattenSpanset(cs[0]!, out);
      out.push({ kind: 'binary', op: cs.length === 2 ? '~' : this.text(cs[1]!) });
      this.flattenSpanset(cs[cs.length - 1]!, out);
    } else {
      this.fail(n);
    }
  }

  rebuild<T>(n: Node, items: readonly ChainItem<T>[], build: Builders<T>): T {
    try {
      return reassociate(items, build);
    } catch (err) {
      if (err instanceof ObservabilityQueryError) throw err;
      return this.fail(n);
    }
  }

  pipelineElement(n: Node): SpansetExpr {
    switch (n.name) {
      case 'SpansetFilter': {
        const fe = n.getChild('FieldExpression');
        return { kind: 'filter', expr: fe === null ? null : this.field(fe) };
      }
      case 'SpansetExpression':
        return this.spanset(n);
      case 'ScalarFilter': {
        const [l, op, r] = this.children(n);
        if (l === undefined || op === undefined || r === undefined) return this.fail(n);
        return { kind: 'scalarFilter', op: this.text(op) as ComparisonOp, left: this.scalar(l), right: this.scalar(r) };
      }
      case 'SelectOperation': {
        const fields = this.listOf(n.getChild('SelectArgs'), 'SelectArgs').map((fe) => {
          const f = this.field(fe);
          if (f.kind !== 'attribute' && f.kind !== 'intrinsic') throw unsupported(`select(${this.text(fe)})`);
          return f;
        });
        return { kind: 'select', fields };
      }
      case 'GroupOperation': {
        const args = n.getChildren('FieldExpression');
        return { kind: 'by', fields: args.map((fe) => this.field(fe)), text: this.text(n).replace(/\s+/g, '') };
      }
      case 'CoalesceOperation':
        return { kind: 'coalesce' };
      case 'MetricsOperation':
      case 'MetricsAggregatorFunctions':
        throw unsupported(`the TraceQL metrics function ${this.text(n).replace(/\(.*$/s, '')}() in a search`);
      default:
        return this.fail(n);
    }
  }

  /** Items of a left-recursive list (`SelectArgs`). */
  listOf(n: Node | null, list: string): Node[] {
    if (n === null) return [];
    const out: Node[] = [];
    for (const c of this.children(n)) {
      if (c.name === list) out.push(...this.listOf(c, list));
      else if (c.name === 'FieldExpression') out.push(c);
    }
    return out;
  }

  field(n: Node): FieldExpr {
    const items: ChainItem<FieldExpr>[] = [];
    this.flattenField(n, items);
    return this.rebuild(n, items, {
      binary: (op, left, right) => {
        if (op === '~') throw unsupported('the field operator ~');
        // A literal regex is compiled now, so a bad one is a 400 before any scan.
        if ((op === '=~' || op === '!~') && right.kind === 'static' && right.value.type === 'string') {
          anchoredRegex(right.value.value);
        }
        return { kind: 'binary', op: op as BinaryOp, left, right };
      },
      prefix: (op, operand) => {
        if (op === '!') return { kind: 'not', operand };
        if (operand.kind === 'static') return { kind: 'static', value: negate(operand.value, () => this.fail(n)) };
        return { kind: 'negate', operand };
      },
    });
  }

  flattenField(n: Node, out: ChainItem<FieldExpr>[]): void {
    const cs = this.children(n);
    if (cs.length === 3) {
      this.flattenField(cs[0]!, out);
      out.push({ kind: 'binary', op: this.text(cs[1]!) });
      this.flattenField(cs[2]!, out);
      return;
    }
    const c = cs[0];
    if (cs.length !== 1 || c === undefined) return this.fail(n);
    switch (c.name) {
      case 'FieldExpression': {
        const prefix = this.q[n.from];
        if (prefix === '!' || prefix === '-') {
          out.push({ kind: 'prefix', op: prefix });
          this.flattenField(c, out);
        } else {
          out.push({ kind: 'operand', value: this.field(c) });
        }
        return;
      }
      case 'Static':
        out.push({ kind: 'operand', value: { kind: 'static', value: this.staticValue(c) } });
        return;
      case 'IntrinsicField':
        out.push({ kind: 'operand', value: this.intrinsic(c) });
        return;
      case 'AttributeField':
        out.push({ kind: 'operand', value: this.attribute(c) });
        return;
      default:
        return this.fail(c);
    }
  }

  intrinsic(n: Node): Field {
    const text = this.text(n);
    const name = INTRINSICS[text];
    if (name === undefined) throw unsupported(`the intrinsic ${text}`);
    return { kind: 'intrinsic', name, text };
  }

  attribute(n: Node): Field {
    let scope: AttributeScope = 'unscoped';
    let parent = false;
    let name = '';
    for (const c of this.children(n)) {
      if (c.name === 'Parent') parent = true;
      else if (c.name === 'Identifier') name = unquoteIdentifier(this.text(c));
      else if (SCOPES[c.name] !== undefined) scope = SCOPES[c.name]!;
    }
    if (name.startsWith('$')) throw unsupported(`the template variable ${name}`);
    if (name === '') return this.fail(n);
    return { kind: 'attribute', scope, name, parent, text: this.text(n) };
  }

  staticValue(n: Node): Value {
    const c = n.firstChild;
    const text = this.text(c ?? n);
    if (c === null) {
      const v = KEYWORD_VALUES[text];
      if (v === undefined) return this.fail(n);
      return v;
    }
    return this.literal(c, text);
  }

  literal(c: Node, text: string): Value {
    switch (c.name) {
      case 'String':
        return { type: 'string', value: unquote(text) };
      case 'Integer':
        return { type: 'int', value: Number(text) };
      case 'Float':
        return { type: 'float', value: Number(text) };
      case 'Duration': {
        const ns = parseGoDurationNs(text);
        if (ns === undefined) return this.fail(c);
        return { type: 'duration', value: ns };
      }
      case 'TemplateVariable':
        throw unsupported(`the template variable ${text}`);
      default:
        return this.fail(c);
    }
  }

  scalar(n: Node): ScalarExpr {
    const items: ChainItem<ScalarExpr>[] = [];
    this.flattenScalar(n, items);
    return this.rebuild(n, items, {
      binary: (op, left, right) => {
        if (!ARITHMETIC_OPS.has(op)) return this.fail(n);
        return { kind: 'arith', op: op as ArithmeticOp, left, right };
      },
      prefix: () => this.fail(n),
    });
  }

  flattenScalar(n: Node, out: ChainItem<ScalarExpr>[]): void {
    const cs = this.children(n);
    if (cs.length === 3 && cs[1]!.name === 'ScalarOp') {
      this.flattenScalar(cs[0]!, out);
      out.push({ kind: 'binary', op: this.text(cs[1]!) });
      this.flattenScalar(cs[2]!, out);
      return;
    }
    const c = cs[0];
    if (cs.length !== 1 || c === undefined) return this.fail(n);
    if (c.name === 'ScalarExpression') {
      out.push({ kind: 'operand', value: this.scalar(c) });
    } else if (c.name === 'Aggregate') {
      const fn = c.getChild('AggregateExpression');
      const fe = c.getChild('FieldExpression');
      const value: ScalarExpr =
        fn === null || fe === null
          ? { kind: 'aggregate', fn: 'count', field: null }
          : { kind: 'aggregate', fn: this.text(fn) as AggregateFn, field: this.field(fe) };
      out.push({ kind: 'operand', value });
    } else {
      const v = this.literal(c, this.text(c));
      out.push({
        kind: 'operand',
        value: { kind: 'number', value: this.q[n.from] === '-' ? negate(v, () => this.fail(c)) : v },
      });
    }
  }
}

function spansetBinary(op: string, left: SpansetExpr, right: SpansetExpr, fail: () => never): SpansetExpr {
  if (op === '&&') return { kind: 'and', left, right };
  if (op === '||') return { kind: 'or', left, right };
  if (op === '|') return { kind: 'pipe', left, right };
  const m = /^(!|&)?(>>|<<|>|<|~)$/.exec(op);
  if (m === null) return fail();
  return { kind: 'structural', op: m[2] as StructuralOp, negated: m[1] === '!', union: m[1] === '&', left, right };
}

function negate(v: Value, fail: () => never): Value {
  if (v.type === 'int' || v.type === 'float') return { type: v.type, value: -v.value };
  if (v.type === 'duration') return { type: 'duration', value: -v.value };
  return fail();
}

function firstError(top: Node): Node | null {
  let found: Node | null = null;
  top.cursor().iterate((c) => {
    if (found !== null) return false;
    if (c.type.isError) {
      found = c.node;
      return false;
    }
    return undefined;
  });
  return found;
}

function hintsOf(conv: Converter, top: Node): Record<string, boolean> {
  const hints: Record<string, boolean> = {};
  for (const p of top.getChild('WithHint')?.getChild('HintParameters')?.getChildren('HintParameter') ?? []) {
    const id = p.getChild('HintIdentifier');
    const v = p.getChild('HintValue');
    if (id !== null && v !== null) hints[conv.text(id)] = conv.text(v) === 'true';
  }
  return hints;
}

/** Parses a TraceQL query; throws ObservabilityQueryError 400 on a syntax error or an unsupported construct. */
export function parseTraceQL(query: string): TraceQLQuery {
  const tree = parser.parse(query);
  const top = tree.topNode;
  const err = firstError(top);
  if (err !== null) throw syntaxError(query, err.from);
  const conv = new Converter(query);
  const root = top.getChild('SpansetPipelineExpression');
  if (root === null) throw syntaxError(query, query.length);
  return { root: conv.spanset(root), hints: hintsOf(conv, top) };
}
