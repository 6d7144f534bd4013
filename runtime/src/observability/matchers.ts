import type { LabelMatcher } from './model.ts';
import { re2 } from './go/regex.ts';

/** A matcher's regex, anchored at both ends and with `.` matching newlines, as in Prometheus and Loki; 400 if invalid. */
export function anchoredRegex(source: string): RegExp {
  return re2(source, { anchored: true, dotAll: true });
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
