/* Helpers over the lezer syntax tree of @grafana/lezer-logql shared by the parser modules. */
import type { parser } from '@grafana/lezer-logql';
import { ObservabilityQueryError } from '../errors.ts';
import { parseGoFloat } from './literals.ts';

export type Node = ReturnType<typeof parser.parse>['topNode'];

/** The query being converted (node positions index into it). */
export interface Ctx {
  readonly query: string;
}

export function text(ctx: Ctx, n: Node): string {
  return ctx.query.slice(n.from, n.to);
}

/** Loki's message for a syntax error at offset `at`: `parse error at line 1, col 12: syntax error: unexpected …`. */
export function syntaxError(query: string, at: number): ObservabilityQueryError {
  const before = query.slice(0, at);
  const line = before.split('\n').length;
  const col = at - (before.lastIndexOf('\n') + 1) + 1;
  const rest = query.slice(at).trimStart();
  const token = /^(`[^`]*`?|"(?:[^"\\]|\\.)*"?|[A-Za-z_:][\w:]*|\d[\w.]*|[|!=~<>]=?|\S)/.exec(rest)?.[0];
  const what = token === undefined ? 'end of input' : token;
  return new ObservabilityQueryError(`parse error at line ${line}, col ${col}: syntax error: unexpected ${what}`);
}

export function child(n: Node, name: string): Node | null {
  return n.getChild(name);
}

export function required(ctx: Ctx, n: Node, name: string): Node {
  const c = n.getChild(name);
  if (c === null) throw syntaxError(ctx.query, n.to);
  return c;
}

/** Items of a left-recursive list node (`Matchers`, `PipelineExpr`, `Labels`, …), in order. */
export function listItems(n: Node, list: string, item: string): Node[] {
  const out: Node[] = [];
  for (let c = n.firstChild; c !== null; c = c.nextSibling) {
    if (c.name === list) out.push(...listItems(c, list, item));
    else if (c.name === item) out.push(c);
  }
  return out;
}

export function numberOf(ctx: Ctx, n: Node): number {
  const v = parseGoFloat(text(ctx, n));
  if (v === undefined) throw syntaxError(ctx.query, n.from);
  return v;
}

/** `LiteralExpr`: a number with an optional sign. */
export function literalValue(ctx: Ctx, n: Node): number {
  const v = numberOf(ctx, required(ctx, n, 'Number'));
  return child(n, 'Sub') !== null ? -v : v;
}
