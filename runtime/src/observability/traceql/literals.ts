/*
 * TraceQL literals as Tempo reads them: Go string literals (strconv.Unquote), durations (Go's time.ParseDuration
 * units, as Tempo's lexer reads `1.5s` or `200us`), RE2 regexes turned into JS RegExps (fully anchored, as Tempo
 * matches them), and Go's formatting of durations for output.
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

/** The value of a Go string literal: `"…"` with Go's escapes, or a raw `` `…` `` string. */
export function unquote(literal: string): string {
  if (literal.length >= 2 && literal.startsWith('`') && literal.endsWith('`')) return literal.slice(1, -1);
  if (literal.length < 2 || !literal.startsWith('"') || !literal.endsWith('"')) {
    throw new ObservabilityQueryError(`invalid TraceQL query: invalid string literal ${literal}`);
  }
  const body = literal.slice(1, -1);
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = body[++i] ?? '';
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
    throw new ObservabilityQueryError(`invalid TraceQL query: invalid escape sequence \\${e} in ${literal}`);
  }
  return out;
}

/** An attribute name as written after the scope: quoted parts (`"x y".z`) are unquoted and joined. */
export function unquoteIdentifier(text: string): string {
  return text.replace(/"(?:[^"\\]|\\.)*"/g, (part) => unquote(part));
}

const UNIT_NS: Readonly<Record<string, bigint>> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n,
  μs: 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

function scaleDecimal(num: string, unit: bigint): bigint {
  const [int = '0', frac = ''] = num.split('.');
  const scale = 10n ** BigInt(frac.length);
  return ((BigInt(int === '' ? '0' : int) * scale + BigInt(frac === '' ? '0' : frac)) * unit) / scale;
}

/** A Go duration (`300ms`, `1.5h`, `2h45m`, `0`) in nanoseconds, or undefined when it is not one. */
export function parseGoDurationNs(text: string): bigint | undefined {
  let s = text.trim();
  let sign = 1n;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s.startsWith('-')) sign = -1n;
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') return undefined;
  const part = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/;
  let total = 0n;
  while (s !== '') {
    const m = part.exec(s);
    if (m === null) return undefined;
    total += scaleDecimal(m[1]!, UNIT_NS[m[2]!]!);
    s = s.slice(m[0].length);
  }
  return sign * total;
}

function trimFraction(int: bigint, frac: bigint, digits: number): string {
  const f = frac.toString().padStart(digits, '0').replace(/0+$/, '');
  return f === '' ? int.toString() : `${int}.${f}`;
}

/** Go's time.Duration.String(): `1h2m3.5s`, `1.5ms`, `250µs`, `0s`. */
export function formatGoDuration(ns: bigint): string {
  if (ns === 0n) return '0s';
  if (ns < 0n) return `-${formatGoDuration(-ns)}`;
  if (ns < 1_000n) return `${ns}ns`;
  if (ns < 1_000_000n) return `${trimFraction(ns / 1_000n, ns % 1_000n, 3)}µs`;
  if (ns < 1_000_000_000n) return `${trimFraction(ns / 1_000_000n, ns % 1_000_000n, 6)}ms`;
  const h = ns / 3_600_000_000_000n;
  const m = (ns / 60_000_000_000n) % 60n;
  const s = trimFraction((ns / 1_000_000_000n) % 60n, ns % 1_000_000_000n, 9);
  if (h > 0n) return `${h}h${m}m${s}s`;
  if (m > 0n) return `${m}m${s}s`;
  return `${s}s`;
}

const regexCache = new Map<string, RegExp>();

/**
 * An RE2 regex as a fully anchored JS RegExp (Tempo anchors `=~` and `!~` at both ends): leading flag groups such as
 * `(?i)` become flags, `(?P<name>` becomes `(?<name>`. An invalid regex is the query's fault: 400.
 */
export function anchoredRegex(source: string): RegExp {
  const cached = regexCache.get(source);
  if (cached !== undefined) return cached;
  let flags = '';
  let body = source;
  for (let m = /^\(\?([ims]+)\)/.exec(body); m !== null; m = /^\(\?([ims]+)\)/.exec(body)) {
    for (const f of m[1]!) if (!flags.includes(f)) flags += f;
    body = body.slice(m[0].length);
  }
  body = body
    .replace(/\(\?P</g, '(?<')
    .replace(/\\z/g, '$')
    .replace(/\\A/g, '^');
  let re: RegExp;
  try {
    re = new RegExp(`^(?:${body})$`, flags);
  } catch (err) {
    throw new ObservabilityQueryError(
      `invalid TraceQL query: invalid regular expression ${JSON.stringify(source)}: ${(err as Error).message}`,
    );
  }
  if (regexCache.size > 1000) regexCache.clear();
  regexCache.set(source, re);
  return re;
}
