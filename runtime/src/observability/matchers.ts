import type { LabelMatcher } from './model.ts';
import { ObservabilityQueryError } from './errors.ts';

const compiled = new Map<string, RegExp>();

/** A matcher's regex, anchored at both ends as in Prometheus and Loki; an invalid one is the query's fault (400). */
export function anchoredRegex(source: string): RegExp {
  let re = compiled.get(source);
  if (re === undefined) {
    // RE2's leading flag groups (`(?i)`, `(?s)`, `(?is)` …), which JavaScript has only as flags.
    const flags = /^\(\?([imsU]+)\)/.exec(source);
    const body = flags === null ? source : source.slice(flags[0].length);
    const jsFlags = new Set(['s', ...(flags?.[1] ?? '').replace(/U/g, '').split('')]);
    try {
      re = new RegExp(`^(?:${body})$`, [...jsFlags].join(''));
    } catch (err) {
      throw new ObservabilityQueryError(
        `invalid regular expression ${JSON.stringify(source)}: ${(err as Error).message}`,
      );
    }
    if (compiled.size > 1000) compiled.clear();
    compiled.set(source, re);
  }
  return re;
}

/** Whether a label set matches one matcher; a missing label has the value '' (Prometheus semantics). */
export function matches(labels: Readonly<Record<string, string>>, m: LabelMatcher): boolean {
  const v = labels[m.name] ?? '';
  switch (m.op) {
    case '=':
      return v === m.value;
    case '!=':
      return v !== m.value;
    case '=~':
      return anchoredRegex(m.value).test(v);
    case '!~':
      return !anchoredRegex(m.value).test(v);
  }
}

export function matchesAll(labels: Readonly<Record<string, string>>, ms: readonly LabelMatcher[]): boolean {
  for (const m of ms) if (!matches(labels, m)) return false;
  return true;
}
