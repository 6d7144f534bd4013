/*
 * TraceQL literals as Tempo reads them: Go string literals (strconv.Unquote), durations (Go's time.ParseDuration
 * units, as Tempo's lexer reads `1.5s` or `200us`), RE2 regexes turned into JS RegExps (fully anchored, as Tempo
 * matches them), and Go's formatting of durations for output.
 */
import { parseDurationNs } from '../go/durations.ts';
import { re2 } from '../go/regex.ts';
import { unquoteGo } from '../go/strings.ts';

/** The value of a Go string literal: `"…"` with Go's escapes, or a raw `` `…` `` string. */
export function unquote(literal: string): string {
  return unquoteGo(literal, 'invalid TraceQL query: ');
}

/** An attribute name as written after the scope: quoted parts (`"x y".z`) are unquoted and joined. */
export function unquoteIdentifier(text: string): string {
  return text.replace(/"(?:[^"\\]|\\.)*"/g, (part) => unquote(part));
}

/** A Go duration (`300ms`, `1.5h`, `2h45m`, `0`) in nanoseconds, or undefined when it is not one. */
export function parseGoDurationNs(text: string): bigint | undefined {
  return parseDurationNs(text, 'go');
}

/**
 * An RE2 regex as a fully anchored JS RegExp (Tempo anchors `=~` and `!~` at both ends). An invalid regex is the
 * query's fault: 400.
 */
export function anchoredRegex(source: string): RegExp {
  return re2(source, { anchored: true, errorPrefix: 'invalid TraceQL query: ' });
}
