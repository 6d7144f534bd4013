/*
 * A compiled log pipeline: the stages of a log query applied to one record, as Loki applies them. Parsed labels that
 * clash with a stream label get the `_extracted` suffix; a parser failure sets `__error__` (and `__error_details__`),
 * which only string label filters and `drop` can look at; numeric filters let erroring lines through.
 */
import type { LabelMatcher, LogRecord } from '../model.ts';
import type { LabelFilter, LineFilterStage, Stage } from './ast.ts';
import { applyComparison } from '../go/numbers.ts';
import { extractJsonPaths, flattenJson, sanitizeLabelName, topLevelStrings } from './json.ts';
import { parseDurationNs } from '../go/durations.ts';
import { goRegex, parseBytes, parseGoFloat } from './literals.ts';
import { compilePattern, decolorize, parseLogfmt } from './parsers.ts';
import { renderTemplate } from './template.ts';

export const ERROR_LABEL = '__error__';
export const ERROR_DETAILS_LABEL = '__error_details__';

/** One record on its way through the pipeline. */
export interface Entry {
  readonly tsNs: bigint;
  line: string;
  readonly labels: Map<string, string>;
  /** The stream labels: a parsed label of the same name becomes `<name>_extracted`. */
  readonly base: Readonly<Record<string, string>>;
}

export type StageFn = (e: Entry) => boolean;

export interface PipelineOptions {
  /** Add `detected_level` (from the `level` label or the line) to streams without one, as Loki 3 does. */
  readonly detectedLevel?: boolean;
}

export type Pipeline = (r: LogRecord) => Entry | undefined;

export function compilePipeline(stages: readonly Stage[], options: PipelineOptions = {}): Pipeline {
  const fns = stages.map(compileStage);
  return (r) => {
    const e: Entry = { tsNs: r.tsNs, line: r.line, labels: new Map(Object.entries(r.labels)), base: r.labels };
    if (options.detectedLevel === true && !e.labels.has('detected_level')) {
      e.labels.set('detected_level', detectLevel(e.labels.get('level'), r.line));
    }
    for (const fn of fns) if (!fn(e)) return undefined;
    return e;
  };
}

/** Labels in name order, as a plain object (the shape of Loki's `stream` and `metric`). */
export function labelsObject(labels: ReadonlyMap<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of [...labels.keys()].sort()) out[k] = labels.get(k)!;
  return out;
}

export function setParsed(e: Entry, name: string, value: string): void {
  if (name === '') return;
  e.labels.set(Object.hasOwn(e.base, name) ? `${name}_extracted` : name, value);
}

export function setError(e: Entry, error: string, details: string): void {
  if (e.labels.has(ERROR_LABEL)) return;
  e.labels.set(ERROR_LABEL, error);
  e.labels.set(ERROR_DETAILS_LABEL, details);
}

export function matchValue(value: string, m: LabelMatcher): boolean {
  switch (m.op) {
    case '=':
      return value === m.value;
    case '!=':
      return value !== m.value;
    case '=~':
      return goRegex(m.value, true, true).test(value);
    case '!~':
      return !goRegex(m.value, true, true).test(value);
  }
}

/** A line filter as a predicate on the line. */
export function lineFilterPredicate(f: Pick<LineFilterStage, 'op' | 'values'>): (line: string) => boolean {
  switch (f.op) {
    case '|=':
      return (l) => f.values.some((v) => l.includes(v));
    case '!=':
      return (l) => !f.values.some((v) => l.includes(v));
    case '|~':
    case '!~': {
      const res = f.values.map((v) => goRegex(v, false));
      const positive = f.op === '|~';
      return (l) => res.some((re) => re.test(l)) === positive;
    }
    case '|>':
    case '!>': {
      const res = f.values.map((v) => compilePattern(v, true).regex);
      const positive = f.op === '|>';
      return (l) => res.some((re) => re.test(l)) === positive;
    }
  }
}

/** Loki's label filter semantics (see the file comment). */
export function evalLabelFilter(f: LabelFilter, e: Entry): boolean {
  switch (f.kind) {
    case 'and': {
      const l = evalLabelFilter(f.left, e);
      const r = evalLabelFilter(f.right, e);
      return l && r;
    }
    case 'or':
      return evalLabelFilter(f.left, e) || evalLabelFilter(f.right, e);
    case 'match':
      return matchValue(e.labels.get(f.matcher.name) ?? '', f.matcher);
    case 'number':
    case 'duration':
    case 'bytes': {
      if (e.labels.has(ERROR_LABEL)) return true;
      const raw = e.labels.get(f.name);
      if (raw === undefined) return false;
      let v: number | undefined;
      if (f.kind === 'number') v = parseGoFloat(raw);
      else if (f.kind === 'bytes') v = parseBytes(raw);
      else {
        const ns = parseDurationNs(raw, 'go');
        v = ns === undefined ? undefined : Number(ns) / 1e9;
      }
      if (v === undefined) {
        setError(e, 'LabelFilterErr', `cannot parse ${JSON.stringify(raw)} of label ${f.name} as a ${f.kind}`);
        return true;
      }
      return applyComparison(f.op, v, f.kind === 'number' ? f.value : f.kind === 'bytes' ? f.bytes : f.seconds);
    }
  }
}

function compileStage(s: Stage): StageFn {
  switch (s.kind) {
    case 'lineFilter': {
      const pred = lineFilterPredicate(s);
      return (e) => pred(e.line);
    }
    case 'json':
      return s.extractions.length === 0 ? jsonAll : jsonPaths(s.extractions);
    case 'logfmt':
      return (e) => {
        const { pairs, error } = parseLogfmt(e.line, s.strict);
        const wanted = s.extractions.length === 0 ? undefined : new Map(s.extractions.map((x) => [x.key, x.label]));
        for (const { key, value } of pairs) {
          if (value === undefined && !s.keepEmpty) continue;
          const label = wanted === undefined ? sanitizeLabelName(key) : wanted.get(key);
          if (label !== undefined) setParsed(e, label, value ?? '');
        }
        if (s.strict && error !== undefined) setError(e, 'LogfmtParserErr', error);
        return true;
      };
    case 'regexp':
      return (e) => {
        const groups = s.regex.exec(e.line)?.groups;
        if (groups !== undefined) for (const [k, v] of Object.entries(groups)) setParsed(e, k, v ?? '');
        return true;
      };
    case 'pattern':
      return (e) => {
        const m = s.regex.exec(e.line);
        if (m !== null) s.names.forEach((name, i) => name !== undefined && setParsed(e, name, m[i + 1] ?? ''));
        return true;
      };
    case 'unpack':
      return (e) => {
        const fields = topLevelStrings(e.line);
        if (typeof fields === 'string') setError(e, 'JSONParserErr', fields);
        else {
          for (const [k, v] of fields) {
            if (k === '_entry') e.line = v;
            else setParsed(e, sanitizeLabelName(k), v);
          }
        }
        return true;
      };
    case 'labelFilter':
      return (e) => evalLabelFilter(s.filter, e);
    case 'lineFormat':
      return (e) => {
        e.line = renderTemplate(s.template, e);
        return true;
      };
    case 'labelFormat':
      return (e) => {
        const before = { labels: new Map(e.labels), line: e.line };
        for (const item of s.items) {
          if ('rename' in item) {
            const v = before.labels.get(item.rename);
            if (v === undefined) continue;
            e.labels.delete(item.rename);
            e.labels.set(item.dst, v);
          } else {
            e.labels.set(item.dst, renderTemplate(item.template, before));
          }
        }
        return true;
      };
    case 'drop':
      return (e) => {
        for (const { name, matcher } of s.items) {
          const v = e.labels.get(name);
          if (v !== undefined && (matcher === undefined || matchValue(v, matcher))) e.labels.delete(name);
        }
        return true;
      };
    case 'keep':
      return (e) => {
        for (const [name, v] of [...e.labels]) {
          const keep = s.items.some((i) => i.name === name && (i.matcher === undefined || matchValue(v, i.matcher)));
          if (!keep) e.labels.delete(name);
        }
        return true;
      };
    case 'decolorize':
      return (e) => {
        e.line = decolorize(e.line);
        return true;
      };
  }
}

function jsonAll(e: Entry): boolean {
  const pairs = flattenJson(e.line);
  if (typeof pairs === 'string') setError(e, 'JSONParserErr', pairs);
  else for (const [k, v] of pairs) setParsed(e, k, v);
  return true;
}

function jsonPaths(extractions: readonly { label: string; path: readonly (string | number)[] }[]): StageFn {
  const paths = extractions.map((x) => x.path);
  return (e) => {
    const values = extractJsonPaths(e.line, paths);
    if (typeof values === 'string') setError(e, 'JSONParserErr', values);
    else extractions.forEach((x, i) => setParsed(e, x.label, values[i]!));
    return true;
  };
}

const LEVELS: Record<string, string> = {
  trace: 'trace',
  trc: 'trace',
  debug: 'debug',
  dbg: 'debug',
  info: 'info',
  inf: 'info',
  information: 'info',
  notice: 'info',
  warn: 'warn',
  warning: 'warn',
  wrn: 'warn',
  error: 'error',
  err: 'error',
  eror: 'error',
  fatal: 'critical',
  critical: 'critical',
  crit: 'critical',
  panic: 'critical',
};

/** Loki's `detected_level`: the level label normalized, else a `level` field of a JSON or logfmt line. */
export function detectLevel(level: string | undefined, line: string): string {
  const raw =
    level ??
    /"(?:level|lvl|severity)"\s*:\s*"([A-Za-z]+)"|\b(?:level|lvl)=([A-Za-z]+)/
      .exec(line)
      ?.slice(1)
      .find((x) => x !== undefined);
  return (raw === undefined ? undefined : LEVELS[raw.toLowerCase()]) ?? 'unknown';
}
