/*
 * Tempo's legacy search: `tags=k=v k2="v 2"` (logfmt), each condition met by some span of the trace. String values
 * match as case-insensitive substrings, as Tempo's substring predicates do; numbers and booleans by their text. Special
 * keys as in Tempo's legacy search: `name` (span name), `status.code` (ok|error|unset), `root.service.name` and
 * `root.name` (the trace's root span), `service.name` (resource). The invocation-id aliases apply.
 */
import { ObservabilityQueryError } from '../errors.ts';
import type { AttributeValue, SpanRecord } from '../model.ts';
import { type TraceContext, canonicalAttribute, statusName } from '../traceql/fields.ts';
import type { TraceMatcher } from '../traceql/search.ts';

/** Pairs of a logfmt line: `k=v`, `k="quoted \" value"`, a bare `k` (value ''). Duplicate keys are refused. */
export function parseLogfmt(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /\s*([^\s=]+)(?:=("(?:[^"\\]|\\.)*"|[^\s"]*))?/y;
  let pos = 0;
  while (pos < text.length) {
    if (/^\s*$/.test(text.slice(pos))) break;
    re.lastIndex = pos;
    const m = re.exec(text);
    if (m === null || m[0] === '')
      throw new ObservabilityQueryError(`invalid tags: cannot parse ${JSON.stringify(text)}`);
    pos = re.lastIndex;
    const key = m[1]!;
    const raw = m[2] ?? '';
    const value = raw.startsWith('"') ? (JSON.parse(raw.replace(/\\([^"\\/bfnrtu])/g, '$1')) as string) : raw;
    if (out.has(key)) throw new ObservabilityQueryError(`invalid tags: duplicate key ${JSON.stringify(key)}`);
    out.set(key, value);
  }
  return out;
}

function textMatches(v: AttributeValue | undefined, want: string): boolean {
  if (v === undefined) return false;
  if (typeof v === 'string') return v.toLowerCase().includes(want.toLowerCase());
  return String(v) === want;
}

type Condition = (span: SpanRecord, trace: TraceContext) => boolean;

function condition(key: string, want: string): Condition {
  switch (key) {
    case 'name':
      return (s) => textMatches(s.name, want);
    case 'status.code': {
      const status = want.toLowerCase().replace(/^status_code_/, '');
      return (s) => statusName(s.statusCode) === status;
    }
    case 'root.service.name':
      return (_s, t) => textMatches(t.rootServiceName(), want);
    case 'root.name':
      return (_s, t) => textMatches(t.rootName(), want);
    case 'service.name':
      return (s) => textMatches(s.resource['service.name'], want);
    default: {
      const k = canonicalAttribute(key);
      return (s) => textMatches(s.attributes[k] ?? s.attributes[key], want) || textMatches(s.resource[k], want);
    }
  }
}

export function tagsMatcher(tags: ReadonlyMap<string, string>): TraceMatcher {
  const conditions = [...tags].map(([k, v]) => condition(k, v));
  const wholeTrace = tags.has('root.service.name') || tags.has('root.name');
  return {
    scanHints: [],
    wholeTrace,
    match: (trace: TraceContext) => (conditions.every((c) => trace.spans.some((s) => c(s, trace))) ? [] : null),
  };
}
