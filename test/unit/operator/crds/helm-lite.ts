import { stringify } from 'yaml';

/*
 * A small renderer for the subset of Go templates + Sprig that charts/ uses, because no Helm binary exists on these
 * machines (spec/operator.md §4.6). It is not Helm: it knows only the functions below, and where Go would print a map
 * it throws. It renders the charts with a few value sets so tests can read the objects Helm would produce. Anything it
 * does not understand is an error, never a silent guess; a template that needs more should extend it (or stay simpler).
 */

type Value = unknown;

interface TextNode {
  readonly type: 'text';
  readonly text: string;
}
interface ActionNode {
  readonly type: 'action';
  readonly pipeline: Pipeline;
}
interface IfNode {
  readonly type: 'if' | 'with';
  readonly branches: { readonly cond: Pipeline; readonly body: Node[] }[];
  readonly otherwise: Node[];
}
interface RangeNode {
  readonly type: 'range';
  readonly variable: string | undefined;
  readonly list: Pipeline;
  readonly body: Node[];
  readonly otherwise: Node[];
}
type Node = TextNode | ActionNode | IfNode | RangeNode;

interface Pipeline {
  readonly declare: string | undefined;
  readonly commands: Term[][];
}

type Term =
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'number'; readonly value: number }
  | { readonly kind: 'bool'; readonly value: boolean }
  | { readonly kind: 'nil' }
  | { readonly kind: 'ident'; readonly name: string }
  /** `.A.B` (base dot), `$.A.B` (base `$`), `$x.A` (base `$x`). */
  | { readonly kind: 'field'; readonly base: string; readonly path: readonly string[] }
  | { readonly kind: 'paren'; readonly pipeline: Pipeline };

// ---------------------------------------------------------------------------------------------------------------
// Lexing: text and actions, with Go's trim markers.

type Token = { readonly kind: 'text'; text: string } | { readonly kind: 'action'; readonly source: string };

function lex(template: string, name: string): Token[] {
  const tokens: Token[] = [];
  let pos = 0;
  let trimNext = false;
  while (pos < template.length) {
    const open = template.indexOf('{{', pos);
    let text = template.slice(pos, open < 0 ? template.length : open);
    if (trimNext) text = text.replace(/^\s+/, '');
    trimNext = false;
    if (open < 0) {
      tokens.push({ kind: 'text', text });
      break;
    }
    let inner = open + 2;
    if (template.startsWith('- ', inner) || template.startsWith('-\n', inner)) {
      text = text.replace(/\s+$/, '');
      inner += 1;
    }
    tokens.push({ kind: 'text', text });
    // Comments may contain anything but `*/`; actions are scanned with their string literals.
    const commentStart = /^\s*\/\*/.exec(template.slice(inner, inner + 8));
    const close =
      commentStart === null
        ? findClose(template, inner, name)
        : template.indexOf('}}', template.indexOf('*/', inner + commentStart[0].length));
    if (close < 0) throw new Error(`${name}: unclosed comment`);
    let end = close;
    if (template[close - 1] === '-' && /\s/.test(template[close - 2] ?? '')) {
      trimNext = true;
      end = close - 1;
    }
    const source = template.slice(inner, end).trim();
    if (!(source.startsWith('/*') && source.endsWith('*/'))) tokens.push({ kind: 'action', source });
    pos = close + 2;
  }
  return tokens;
}

function findClose(template: string, from: number, name: string): number {
  let quote: string | undefined;
  for (let i = from; i < template.length; i++) {
    const c = template[i]!;
    if (quote !== undefined) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === '`') {
      quote = c;
    } else if (template.startsWith('}}', i)) {
      return i;
    }
  }
  throw new Error(`${name}: unclosed action`);
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing

interface Parsed {
  readonly body: Node[];
  readonly defines: Map<string, Node[]>;
}

function parseTemplate(template: string, name: string): Parsed {
  const tokens = lex(template, name);
  const defines = new Map<string, Node[]>();
  let i = 0;

  const parseList = (terminators: readonly string[]): { nodes: Node[]; end: string } => {
    const nodes: Node[] = [];
    while (i < tokens.length) {
      const token = tokens[i++]!;
      if (token.kind === 'text') {
        if (token.text !== '') nodes.push({ type: 'text', text: token.text });
        continue;
      }
      const src = token.source;
      const keyword = /^(if|else if|else|end|range|with|define)\b/.exec(src)?.[1];
      if (keyword === 'end' || keyword === 'else' || keyword === 'else if') {
        if (!terminators.includes(keyword)) throw new Error(`${name}: unexpected {{ ${src} }}`);
        return { nodes, end: src };
      }
      if (keyword === 'if' || keyword === 'with') {
        const branches = [{ cond: parsePipeline(src.slice(keyword.length), name), body: [] as Node[] }];
        let otherwise: Node[] = [];
        for (;;) {
          const part = parseList(keyword === 'if' ? ['end', 'else', 'else if'] : ['end', 'else']);
          branches[branches.length - 1]!.body = part.nodes;
          if (part.end === 'end') break;
          if (part.end.startsWith('else if')) {
            branches.push({ cond: parsePipeline(part.end.slice('else if'.length), name), body: [] });
            continue;
          }
          otherwise = parseList(['end']).nodes;
          break;
        }
        nodes.push({ type: keyword, branches, otherwise });
        continue;
      }
      if (keyword === 'range') {
        const m = /^range\s+(\$\w+)\s*:=\s*(.*)$/s.exec(src);
        const list = parsePipeline(m === null ? src.slice('range'.length) : m[2]!, name);
        const part = parseList(['end', 'else']);
        const otherwise = part.end === 'end' ? [] : parseList(['end']).nodes;
        nodes.push({ type: 'range', variable: m?.[1], list, body: part.nodes, otherwise });
        continue;
      }
      if (keyword === 'define') {
        const defName = /^define\s+"([^"]+)"$/.exec(src)?.[1];
        if (defName === undefined) throw new Error(`${name}: bad define: ${src}`);
        defines.set(defName, parseList(['end']).nodes);
        continue;
      }
      nodes.push({ type: 'action', pipeline: parsePipeline(src, name) });
    }
    if (terminators.length > 0) throw new Error(`${name}: missing {{ end }}`);
    return { nodes, end: '' };
  };

  const body = parseList([]).nodes;
  return { body, defines };
}

const TERM = /\s*(?:("(?:[^"\\]|\\.)*")|(`[^`]*`)|(-?\d+(?:\.\d+)?)|(\|)|(\()|(\))|(:=)|(\$\w*(?:\.\w+)*|(?:\.\w+)+|\.)|(\w+))/y;

function parsePipeline(source: string, name: string): Pipeline {
  let pos = 0;
  const text = source.trim();
  const parseCommands = (closing: boolean): Pipeline => {
    let declare: string | undefined;
    const decl = /^(\$\w+)\s*:=/.exec(text.slice(pos).trimStart());
    if (decl !== null && !closing) {
      declare = decl[1];
      pos = text.indexOf(':=', pos) + 2;
    }
    const commands: Term[][] = [[]];
    while (pos < text.length) {
      TERM.lastIndex = pos;
      const m = TERM.exec(text);
      if (m === null) {
        if (text.slice(pos).trim() === '') break;
        throw new Error(`${name}: cannot parse '${text.slice(pos)}' in {{ ${source} }}`);
      }
      pos = TERM.lastIndex;
      const current = commands[commands.length - 1]!;
      if (m[1] !== undefined) current.push({ kind: 'string', value: JSON.parse(m[1]) as string });
      else if (m[2] !== undefined) current.push({ kind: 'string', value: m[2].slice(1, -1) });
      else if (m[3] !== undefined) current.push({ kind: 'number', value: Number(m[3]) });
      else if (m[4] !== undefined) commands.push([]);
      else if (m[5] !== undefined) current.push({ kind: 'paren', pipeline: parseCommands(true) });
      else if (m[6] !== undefined) {
        if (!closing) throw new Error(`${name}: unbalanced ) in {{ ${source} }}`);
        return { declare, commands };
      } else if (m[7] !== undefined) throw new Error(`${name}: unexpected := in {{ ${source} }}`);
      else if (m[8] !== undefined) current.push(fieldTerm(m[8]));
      else if (m[9] === 'true' || m[9] === 'false') current.push({ kind: 'bool', value: m[9] === 'true' });
      else if (m[9] === 'nil') current.push({ kind: 'nil' });
      else current.push({ kind: 'ident', name: m[9]! });
    }
    if (closing) throw new Error(`${name}: missing ) in {{ ${source} }}`);
    return { declare, commands };
  };
  const pipeline = parseCommands(false);
  if (pipeline.commands.some((c) => c.length === 0)) throw new Error(`${name}: empty command in {{ ${source} }}`);
  return pipeline;
}

function fieldTerm(raw: string): Term {
  if (raw === '.') return { kind: 'field', base: '.', path: [] };
  if (raw.startsWith('.')) return { kind: 'field', base: '.', path: raw.slice(1).split('.') };
  const [base = '$', ...path] = raw.split('.');
  return { kind: 'field', base, path };
}

// ---------------------------------------------------------------------------------------------------------------
// Evaluation

class TemplateFail extends Error {}

interface Scope {
  readonly dot: Value;
  readonly vars: Map<string, Value>;
}

type Func = (...args: Value[]) => Value;

export function truthy(value: Value): boolean {
  if (value === undefined || value === null || value === false || value === 0 || value === '') return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return true;
}

function print(value: Value): string {
  if (value === undefined || value === null) return ''; // Helm turns "<no value>" into ""
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new Error(`refusing to print a ${Array.isArray(value) ? 'list' : 'map'} (Go would print map[...]/[...])`);
}

function toYaml(value: Value): string {
  if (value === undefined || value === null) return 'null';
  return stringify(value, { lineWidth: 0 }).replace(/\n$/, '');
}

function indentLines(n: number, text: string): string {
  const pad = ' '.repeat(n);
  return text
    .split('\n')
    .map((line) => pad + line)
    .join('\n');
}

function goPrintf(format: string, args: Value[]): string {
  let i = 0;
  return format.replace(/%([sdvq%])/g, (_, verb: string) => {
    if (verb === '%') return '%';
    const arg = args[i++];
    if (verb === 'd') return String(Math.trunc(Number(arg)));
    if (verb === 'q') return JSON.stringify(print(arg));
    return print(arg);
  });
}

export interface ChartContext {
  readonly Values: Record<string, unknown>;
  readonly Release: { readonly Name: string; readonly Namespace: string; readonly Service: string };
  readonly Chart: { readonly Name: string; readonly Version: string; readonly AppVersion: string };
  readonly Capabilities: { readonly APIVersions: { readonly Has: (apiVersion: string) => boolean } };
}

export class TemplateSet {
  private readonly defines = new Map<string, Node[]>();
  private readonly files = new Map<string, Node[]>();

  /** Adds a file; `_*.tpl` files contribute their defines only, as in Helm. */
  add(name: string, source: string): void {
    const parsed = parseTemplate(source, name);
    for (const [k, v] of parsed.defines) this.defines.set(k, v);
    this.files.set(name, parsed.body);
  }

  defined(): string[] {
    return [...this.defines.keys()];
  }

  /** Renders one file; a template's `fail` becomes a thrown Error with its message. */
  render(name: string, context: ChartContext): string {
    const body = this.files.get(name);
    if (body === undefined) throw new Error(`no template ${name}`);
    return this.exec(body, { dot: context, vars: new Map([['$', context]]) });
  }

  private exec(nodes: readonly Node[], scope: Scope): string {
    let out = '';
    const vars = new Map(scope.vars);
    const local: Scope = { dot: scope.dot, vars };
    for (const node of nodes) {
      switch (node.type) {
        case 'text':
          out += node.text;
          break;
        case 'action': {
          const value = this.pipeline(node.pipeline, local);
          if (node.pipeline.declare === undefined) out += print(value);
          break;
        }
        case 'if':
        case 'with': {
          const branch = node.branches.find((b) => truthy(this.pipeline(b.cond, local)));
          if (branch === undefined) {
            out += this.exec(node.otherwise, local);
          } else {
            const dot = node.type === 'with' ? this.pipeline(branch.cond, local) : local.dot;
            out += this.exec(branch.body, { dot, vars });
          }
          break;
        }
        case 'range': {
          const list = this.pipeline(node.list, local);
          const items = Array.isArray(list) ? list : list === undefined || list === null ? [] : undefined;
          if (items === undefined) throw new Error('range over a non-list is not supported here');
          if (items.length === 0) out += this.exec(node.otherwise, local);
          for (const item of items) {
            const itemVars = new Map(vars);
            if (node.variable !== undefined) itemVars.set(node.variable, item);
            out += this.exec(node.body, { dot: item, vars: itemVars });
          }
          break;
        }
      }
    }
    return out;
  }

  private pipeline(pipeline: Pipeline, scope: Scope): Value {
    let result: Value;
    pipeline.commands.forEach((command, i) => {
      result = this.command(command, scope, i === 0 ? [] : [result]);
    });
    if (pipeline.declare !== undefined) scope.vars.set(pipeline.declare, result);
    return result;
  }

  private command(terms: readonly Term[], scope: Scope, piped: Value[]): Value {
    const [head, ...rest] = terms;
    if (head === undefined) throw new Error('empty command');
    const args = () => [...rest.map((t) => this.term(t, scope)), ...piped];
    if (head.kind === 'ident') return this.call(head.name, args());
    if (head.kind === 'field' && rest.length + piped.length > 0) {
      const fn = this.term(head, scope);
      if (typeof fn !== 'function') throw new Error(`${head.path.join('.')} is not a method`);
      return (fn as Func)(...args());
    }
    if (rest.length + piped.length > 0) throw new Error('arguments to a non-function');
    return this.term(head, scope);
  }

  private term(term: Term, scope: Scope): Value {
    switch (term.kind) {
      case 'string':
      case 'number':
      case 'bool':
        return term.value;
      case 'nil':
        return null;
      case 'ident':
        return this.call(term.name, []);
      case 'paren':
        return this.pipeline(term.pipeline, scope);
      case 'field': {
        let value: Value = term.base === '.' ? scope.dot : scope.vars.get(term.base);
        if (term.base !== '.' && !scope.vars.has(term.base)) throw new Error(`undefined variable ${term.base}`);
        for (const key of term.path) {
          if (value === undefined || value === null) return undefined;
          if (typeof value !== 'object') throw new Error(`can't evaluate field ${key} in type ${typeof value}`);
          value = (value as Record<string, Value>)[key];
        }
        return value;
      }
    }
  }

  private call(name: string, args: Value[]): Value {
    const fn = this.functions[name];
    if (fn === undefined) throw new Error(`function "${name}" not defined (in this renderer)`);
    return fn(...args);
  }

  private readonly functions: Record<string, Func> = {
    include: (name, dot) => {
      const body = this.defines.get(String(name));
      if (body === undefined) throw new Error(`no template "${String(name)}"`);
      return this.exec(body, { dot, vars: new Map([['$', dot]]) });
    },
    default: (fallback, value) => (truthy(value) ? value : fallback),
    trunc: (n, s) => print(s).slice(0, Number(n)),
    trimSuffix: (suffix, s) => {
      const text = print(s);
      const end = print(suffix);
      return end !== '' && text.endsWith(end) ? text.slice(0, -end.length) : text;
    },
    replace: (from, to, s) => print(s).split(print(from)).join(print(to)),
    contains: (sub, s) => print(s).includes(print(sub)),
    printf: (format, ...args) => goPrintf(print(format), args),
    quote: (...values) => values.map((v) => JSON.stringify(print(v))).join(' '),
    toYaml: (value) => toYaml(value),
    nindent: (n, s) => `\n${indentLines(Number(n), print(s))}`,
    indent: (n, s) => indentLines(Number(n), print(s)),
    join: (sep, list) => (Array.isArray(list) ? list.map(print).join(print(sep)) : print(list)),
    int: (v) => Math.trunc(Number(v ?? 0)),
    gt: (a, b) => Number(a) > Number(b),
    lt: (a, b) => Number(a) < Number(b),
    eq: (a, ...others) => others.some((b) => a === b),
    ne: (a, b) => a !== b,
    and: (...values) => values.find((v) => !truthy(v)) ?? values[values.length - 1],
    or: (...values) => values.find((v) => truthy(v)) ?? values[values.length - 1],
    not: (v) => !truthy(v),
    empty: (v) => !truthy(v),
    fail: (message) => {
      throw new TemplateFail(print(message));
    },
    required: (message, value) => {
      if (!truthy(value)) throw new TemplateFail(print(message));
      return value;
    },
  };
}

export function isTemplateFail(err: unknown): err is Error {
  return err instanceof TemplateFail;
}

/** Helm's merge of user values over the chart's: maps merge recursively, everything else replaces. */
export function mergeValues(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const current = out[key];
    out[key] =
      isMap(current) && isMap(value) ? mergeValues(current, value) : structuredClone<unknown>(value);
  }
  return out;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
