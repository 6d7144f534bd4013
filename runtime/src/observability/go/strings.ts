/*
 * Go's string literals (strconv.Unquote), as LogQL and TraceQL both write them: `"…"` with Go's escapes, or a raw
 * `` `…` `` string. The caller names its language in the error message (`errorPrefix`).
 */
import { ObservabilityQueryError } from '../errors.ts';

const ESCAPES: Readonly<Record<string, string>> = {
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  '"': '"',
  "'": "'",
};

/** The value of a Go string literal; `rawDropsCR` removes carriage returns from raw strings, as Go's lexer does. */
export function unquoteGo(literal: string, errorPrefix: string, rawDropsCR = false): string {
  if (literal.length >= 2 && literal.startsWith('`') && literal.endsWith('`')) {
    const raw = literal.slice(1, -1);
    return rawDropsCR ? raw.replace(/\r/g, '') : raw;
  }
  if (literal.length < 2 || !literal.startsWith('"') || !literal.endsWith('"')) {
    throw new ObservabilityQueryError(`${errorPrefix}invalid string literal ${literal}`);
  }
  const body = literal.slice(1, -1);
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = body[++i];
    if (e === undefined) throw new ObservabilityQueryError(`${errorPrefix}invalid escape in string ${literal}`);
    const simple = ESCAPES[e];
    if (simple !== undefined) {
      out += simple;
      continue;
    }
    const hexLen = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    const hex = body.slice(i + 1, i + 1 + hexLen);
    if (hexLen > 0 && hex.length === hexLen && /^[0-9a-fA-F]+$/.test(hex)) {
      out += String.fromCodePoint(parseInt(hex, 16));
      i += hexLen;
      continue;
    }
    if (/^[0-7]{3}$/.test(body.slice(i, i + 3))) {
      out += String.fromCharCode(parseInt(body.slice(i, i + 3), 8));
      i += 2;
      continue;
    }
    throw new ObservabilityQueryError(`${errorPrefix}invalid escape sequence \\${e} in string ${literal}`);
  }
  return out;
}
