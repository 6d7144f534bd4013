/* The pipeline part of the parser: lezer `PipelineStage` nodes → typed stages (see parse.ts for the rest). */
import { ObservabilityQueryError } from '../errors.ts';
import type { LabelMatcher } from '../model.ts';
import type { CompareOp, LabelFilter, LineFilterStage, Stage } from './ast.ts';
import { parseJsonPath } from './json.ts';
import { child, listItems, literalValue, required, syntaxError, text, type Ctx, type Node } from './lezer.ts';
import { parseDurationNs } from '../go/durations.ts';
import { goRegex, parseBytes, unquote } from './literals.ts';
import { compilePattern } from './parsers.ts';
import { compileTemplate } from './template.ts';

const MATCH_OPS: Record<string, LabelMatcher['op']> = { Eq: '=', Neq: '!=', Re: '=~', Nre: '!~' };
const FILTER_OPS: Record<string, LineFilterStage['op']> = {
  PipeExact: '|=',
  Neq: '!=',
  PipeMatch: '|~',
  Nre: '!~',
  PipePattern: '|>',
  Npa: '!>',
};
const COMPARE_OPS: Record<string, CompareOp> = {
  Gtr: '>',
  Gte: '>=',
  Lss: '<',
  Lte: '<=',
  Eq: '==',
  Eql: '==',
  Neq: '!=',
};

function opNode(n: Node, names: Record<string, unknown>): Node | undefined {
  for (let c = n.firstChild; c !== null; c = c.nextSibling) if (names[c.name] !== undefined) return c;
  return undefined;
}

/** `name op "value"`; regexes are checked here (400 when invalid). */
export function matcherOf(ctx: Ctx, n: Node): LabelMatcher {
  const op = opNode(n, MATCH_OPS);
  if (op === undefined) throw syntaxError(ctx.query, n.from);
  const m: LabelMatcher = {
    name: text(ctx, required(ctx, n, 'Identifier')),
    op: MATCH_OPS[op.name]!,
    value: unquote(text(ctx, required(ctx, n, 'String'))),
  };
  if (m.op === '=~' || m.op === '!~') goRegex(m.value, true, true);
  return m;
}

function stringOf(ctx: Ctx, n: Node): string {
  return unquote(text(ctx, required(ctx, n, 'String')));
}

export function convertStage(ctx: Ctx, n: Node): Stage[] {
  const lineFilters = child(n, 'LineFilters');
  if (lineFilters !== null) return convertLineFilters(ctx, lineFilters);
  const body = child(n, 'Pipe')?.nextSibling ?? null;
  if (body === null) throw syntaxError(ctx.query, n.from);
  switch (body.name) {
    case 'LabelParser':
      return [convertLabelParser(ctx, body)];
    case 'JsonExpressionParser':
      return [
        {
          kind: 'json',
          extractions: extractionList(ctx, body).map(({ label, expr }) => ({ label, path: parseJsonPath(expr) })),
        },
      ];
    case 'LogfmtParser':
    case 'LogfmtExpressionParser': {
      const flags = child(body, 'LogfmtParserFlags');
      const flagTexts =
        flags === null ? [] : listItems(flags, 'LogfmtParserFlags', 'ParserFlag').map((f) => text(ctx, f));
      return [
        {
          kind: 'logfmt',
          strict: flagTexts.includes('--strict'),
          keepEmpty: flagTexts.includes('--keep-empty'),
          extractions: extractionList(ctx, body).map(({ label, expr }) => ({ label, key: expr })),
        },
      ];
    }
    case 'LabelFilter':
      return [{ kind: 'labelFilter', filter: convertLabelFilter(ctx, body) }];
    case 'LineFormatExpr':
      return [{ kind: 'lineFormat', template: compileTemplate(stringOf(ctx, body)) }];
    case 'LabelFormatExpr':
      return [convertLabelFormat(ctx, body)];
    case 'DecolorizeExpr':
      return [{ kind: 'decolorize' }];
    case 'DropLabelsExpr':
    case 'KeepLabelsExpr': {
      const [list, item] = body.name === 'DropLabelsExpr' ? ['DropLabels', 'DropLabel'] : ['KeepLabels', 'KeepLabel'];
      const items = listItems(required(ctx, body, list), list, item).map((i) => {
        const m = child(i, 'Matcher');
        if (m === null) return { name: text(ctx, required(ctx, i, 'Identifier')) };
        const matcher = matcherOf(ctx, m);
        return { name: matcher.name, matcher };
      });
      return [{ kind: body.name === 'DropLabelsExpr' ? 'drop' : 'keep', items }];
    }
    default:
      throw syntaxError(ctx.query, body.from);
  }
}

function extractionList(ctx: Ctx, n: Node): { label: string; expr: string }[] {
  const list = child(n, 'LabelExtractionExpressionList');
  if (list === null) return [];
  return listItems(list, 'LabelExtractionExpressionList', 'LabelExtractionExpression').map((e) => {
    const label = text(ctx, required(ctx, e, 'Identifier'));
    const s = child(e, 'String');
    return { label, expr: s === null ? label : unquote(text(ctx, s)) };
  });
}

function convertLabelParser(ctx: Ctx, n: Node): Stage {
  const kind = n.firstChild?.name;
  switch (kind) {
    case 'Json':
      return { kind: 'json', extractions: [] };
    case 'Unpack':
      return { kind: 'unpack' };
    case 'Regexp': {
      const regex = goRegex(stringOf(ctx, n), false);
      if (!/\(\?<[A-Za-z_]/.test(regex.source)) {
        throw new ObservabilityQueryError('parse error : at least one named capture must be supplied');
      }
      return { kind: 'regexp', regex };
    }
    case 'Pattern':
      return { kind: 'pattern', ...compilePattern(stringOf(ctx, n), false) };
    case undefined:
    default:
      throw syntaxError(ctx.query, n.from);
  }
}

function convertLineFilters(ctx: Ctx, n: Node): Stage[] {
  const out: { op: LineFilterStage['op']; values: string[] }[] = [];
  const addOr = (orFilter: Node) => {
    const last = out[out.length - 1];
    if (last === undefined) throw syntaxError(ctx.query, orFilter.from);
    for (let c = orFilter.firstChild; c !== null; c = c.nextSibling) {
      if (c.name === 'String') last.values.push(unquote(text(ctx, c)));
      else if (c.name === 'FilterOp') throw unsupportedIp();
      else if (c.name === 'OrFilter') addOr(c);
    }
  };
  const visit = (node: Node) => {
    for (let c = node.firstChild; c !== null; c = c.nextSibling) {
      if (c.name === 'LineFilters') visit(c);
      else if (c.name === 'OrFilter') addOr(c);
      else if (c.name === 'LineFilter') {
        if (child(c, 'FilterOp') !== null) throw unsupportedIp();
        const filter = required(ctx, c, 'Filter');
        const op = FILTER_OPS[filter.firstChild?.name ?? ''];
        if (op === undefined) throw syntaxError(ctx.query, filter.from);
        out.push({ op, values: [stringOf(ctx, c)] });
        const or = child(c, 'OrFilter');
        if (or !== null) addOr(or);
      }
    }
  };
  visit(n);
  return out.map(({ op, values }) => {
    for (const v of values) {
      if (op === '|~' || op === '!~') goRegex(v, false);
      if (op === '|>' || op === '!>') compilePattern(v, true);
    }
    return { kind: 'lineFilter', op, values };
  });
}

function unsupportedIp(): ObservabilityQueryError {
  return new ObservabilityQueryError('parse error : ip() filters are not supported');
}

export function convertLabelFilter(ctx: Ctx, n: Node): LabelFilter {
  const subs = n.getChildren('LabelFilter');
  if (subs.length === 2) {
    const [left, right] = subs as [Node, Node];
    const kind = child(n, 'Or') !== null ? 'or' : 'and';
    return { kind, left: convertLabelFilter(ctx, left), right: convertLabelFilter(ctx, right) };
  }
  if (subs.length === 1) return convertLabelFilter(ctx, subs[0]!);
  const leaf = n.firstChild;
  if (leaf === null) throw syntaxError(ctx.query, n.from);
  switch (leaf.name) {
    case 'Matcher':
      return { kind: 'match', matcher: matcherOf(ctx, leaf) };
    case 'NumberFilter':
      return {
        kind: 'number',
        name: text(ctx, required(ctx, leaf, 'Identifier')),
        op: compareOp(ctx, leaf),
        value: literalValue(ctx, required(ctx, leaf, 'LiteralExpr')),
      };
    case 'UnitFilter': {
      const f = leaf.firstChild;
      if (f === null) throw syntaxError(ctx.query, leaf.from);
      const name = text(ctx, required(ctx, f, 'Identifier'));
      if (f.name === 'DurationFilter') {
        const ns = parseDurationNs(text(ctx, required(ctx, f, 'Duration')));
        if (ns === undefined) throw syntaxError(ctx.query, f.from);
        return { kind: 'duration', name, op: compareOp(ctx, f), seconds: Number(ns) / 1e9 };
      }
      const bytes = parseBytes(text(ctx, required(ctx, f, 'Bytes')));
      if (bytes === undefined) throw syntaxError(ctx.query, f.from);
      return { kind: 'bytes', name, op: compareOp(ctx, f), bytes };
    }
    case 'IpLabelFilter':
      throw unsupportedIp();
    default:
      throw syntaxError(ctx.query, leaf.from);
  }
}

function compareOp(ctx: Ctx, n: Node): CompareOp {
  const op = opNode(n, COMPARE_OPS);
  if (op === undefined) throw syntaxError(ctx.query, n.from);
  return COMPARE_OPS[op.name]!;
}

function convertLabelFormat(ctx: Ctx, n: Node): Stage {
  const items = listItems(required(ctx, n, 'LabelsFormat'), 'LabelsFormat', 'LabelFormatMatcher').map((m) => {
    const [dst, src] = m.getChildren('Identifier');
    if (dst === undefined) throw syntaxError(ctx.query, m.from);
    const s = child(m, 'String');
    if (s !== null) return { dst: text(ctx, dst), template: compileTemplate(unquote(text(ctx, s)), 'label_format') };
    if (src === undefined) throw syntaxError(ctx.query, m.from);
    return { dst: text(ctx, dst), rename: text(ctx, src) };
  });
  return { kind: 'labelFormat', items };
}
