/*
 * Literals of LogQL as Loki reads them: Go string literals, Go/RE2 regexes (turned into JS RegExps), Prometheus and Go
 * durations, humanized byte sizes, and Go's formatting of durations and floats for messages and sample values.
 */
import { ObservabilityQueryError } from '../errors.ts';

const SIMPLE_ESCAPES: Record<string, string> = {
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
  if (literal.length >= 2 && literal.startsWith('`') && literal.endsWith('`')) {
    return literal.slice(1, -1).replace(/\r/g, '');
  }
  if (literal.length < 2 || !literal.startsWith('"') || !literal.endsWith('"')) {
    throw new ObservabilityQueryError(`parse error : invalid string literal ${literal}`);
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
    if (e === undefined) throw new ObservabilityQueryError(`parse error : invalid escape in string ${literal}`);
    const simple = SIMPLE_ESCAPES[e];
    if (simple !== undefined) {
      out += simple;
      continue;
    }
    const hexLen = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hexLen > 0 && /^[0-9a-fA-F]+$/.test(body.slice(i + 1, i + 1 + hexLen)) && i + hexLen < body.length) {
      out += String.fromCodePoint(parseInt(body.slice(i + 1, i + 1 + hexLen), 16));
      i += hexLen;
      continue;
    }
    if (/^[0-7]{3}$/.test(body.slice(i, i + 3))) {
      out += String.fromCharCode(parseInt(body.slice(i, i + 3), 8));
      i += 2;
      continue;
    }
    throw new ObservabilityQueryError(`parse error : invalid escape sequence \\${e} in string ${literal}`);
  }
  return out;
}

const POSIX_CLASSES: Record<string, string> = {
  alnum: '0-9A-Za-z',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7F',
  blank: '\\t ',
  cntrl: '\\x00-\\x1F\\x7F',
  digit: '0-9',
  graph: '!-~',
  lower: 'a-z',
  print: ' -~',
  punct: '!-/:-@[-`{-~',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: '0-9A-Za-z_',
  xdigit: '0-9A-Fa-f',
};

const regexCache = new Map<string, RegExp>();

/**
 * A Go (RE2) regex as a JS RegExp: leading flag groups such as `(?i)` become flags, `(?P<name>` named groups,
 * `[[:alpha:]]` classes and `\z` are translated. `anchored` wraps it in `^(?:…)$` (label matchers; line filters are not
 * anchored). An invalid regex is the query's fault: 400.
 */
export function goRegex(source: string, anchored: boolean, dotAll = false): RegExp {
  const key = `${anchored ? 'a' : 'u'}${dotAll ? 's' : ''}:${source}`;
  const cached = regexCache.get(key);
  if (cached !== undefined) return cached;
  let flags = dotAll ? 's' : '';
  let body = source;
  for (let m = /^\(\?([imsU]+)\)/.exec(body); m !== null; m = /^\(\?([imsU]+)\)/.exec(body)) {
    for (const f of m[1]!) {
      if (f === 'U')
        throw new ObservabilityQueryError(`invalid regex ${JSON.stringify(source)}: the U flag is not supported`);
      if (!flags.includes(f)) flags += f;
    }
    body = body.slice(m[0].length);
  }
  body = body
    .replace(/\(\?P</g, '(?<')
    .replace(/\[:(\^?)([a-z]+):\]/g, (all, neg: string, name: string) => {
      const cls = POSIX_CLASSES[name];
      if (cls === undefined) return all;
      return neg === '' ? cls : `^${cls}`;
    })
    .replace(/\\z/g, '$')
    .replace(/\\A/g, '^');
  let re: RegExp;
  try {
    re = new RegExp(anchored ? `^(?:${body})$` : body, flags);
  } catch (err) {
    throw new ObservabilityQueryError(`invalid regex ${JSON.stringify(source)}: ${(err as Error).message}`);
  }
  if (regexCache.size > 2000) regexCache.clear();
  regexCache.set(key, re);
  return re;
}

const NS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n,
  μs: 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
  d: 86_400_000_000_000n,
  w: 604_800_000_000_000n,
  y: 31_536_000_000_000_000n,
};

/** Multiplies a decimal string by an integer exactly (fractions of the unit are truncated to whole ns). */
function scaleDecimal(num: string, unit: bigint): bigint {
  const [int = '0', frac = ''] = num.split('.');
  const scale = 10n ** BigInt(frac.length);
  return ((BigInt(int === '' ? '0' : int) * scale + BigInt(frac === '' ? '0' : frac)) * unit) / scale;
}

/**
 * A duration in nanoseconds: a sequence of `<number><unit>` with units y w d h m s ms us µs ns (Prometheus and Go
 * styles; `go` refuses y/w/d as Go's time.ParseDuration does). Undefined when it is not a duration.
 */
export function parseDurationNs(text: string, style: 'prometheus' | 'go' = 'prometheus'): bigint | undefined {
  let s = text.trim();
  let sign = 1n;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s.startsWith('-')) sign = -1n;
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') return undefined;
  const part = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w|y)/;
  let total = 0n;
  while (s !== '') {
    const m = part.exec(s);
    if (m === null) return undefined;
    const unit = m[2]!;
    if (style === 'go' && (unit === 'd' || unit === 'w' || unit === 'y')) return undefined;
    total += scaleDecimal(m[1]!, NS[unit]!);
    s = s.slice(m[0].length);
  }
  return sign * total;
}

const BYTE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  ki: 1024,
  kib: 1024,
  m: 1e6,
  mb: 1e6,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1e9,
  gb: 1e9,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1e12,
  tb: 1e12,
  ti: 1024 ** 4,
  tib: 1024 ** 4,
  p: 1e15,
  pb: 1e15,
  pi: 1024 ** 5,
  pib: 1024 ** 5,
  e: 1e18,
  eb: 1e18,
  ei: 1024 ** 6,
  eib: 1024 ** 6,
};

/** A humanized byte size (`1KB` = 1000, `1KiB` = 1024, `5 MB`, `100`), as go-humanize's ParseBytes reads it. */
export function parseBytes(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$/.exec(text);
  if (m === null) return undefined;
  const unit = BYTE_UNITS[m[2]!.toLowerCase()];
  return unit === undefined ? undefined : Math.round(Number(m[1]) * unit);
}

/** A float as Go's strconv.ParseFloat reads it (decimal, exponent, `inf`, `nan`, hex integers), or undefined. */
export function parseGoFloat(text: string): number | undefined {
  const s = text.trim();
  if (/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(s)) return Number(s);
  if (/^[+-]?0[xX][0-9a-fA-F]+$/.test(s)) return s.startsWith('-') ? -Number(s.slice(1)) : Number(s.replace('+', ''));
  if (/^[+-]?(inf|infinity)$/i.test(s)) return s.startsWith('-') ? -Infinity : Infinity;
  if (/^nan$/i.test(s)) return NaN;
  return undefined;
}

/** Go's time.Duration.String(): `721h0m0s`, `1m30s`, `500ms`. */
export function formatGoDuration(ns: bigint): string {
  if (ns === 0n) return '0s';
  const neg = ns < 0n;
  let d = neg ? -ns : ns;
  let out: string;
  if (d < 1_000_000_000n) {
    const [unit, div] = d < 1_000n ? ['ns', 1n] : d < 1_000_000n ? ['µs', 1_000n] : ['ms', 1_000_000n];
    out = fixed(d, div) + unit;
  } else {
    const h = d / 3_600_000_000_000n;
    d -= h * 3_600_000_000_000n;
    const m = d / 60_000_000_000n;
    d -= m * 60_000_000_000n;
    const s = `${fixed(d, 1_000_000_000n)}s`;
    out = h > 0n ? `${h}h${m}m${s}` : m > 0n ? `${m}m${s}` : s;
  }
  return neg ? `-${out}` : out;
}

function fixed(value: bigint, div: bigint): string {
  const int = value / div;
  const frac = value % div;
  if (frac === 0n) return int.toString();
  const digits = div.toString().length - 1;
  return `${int}.${frac.toString().padStart(digits, '0').replace(/0+$/, '')}`;
}

/** A sample value as Prometheus and Loki write it (Go's FormatFloat(v, 'f', -1, 64)): `2`, `0.5`, `+Inf`, `NaN`. */
export function formatSampleValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  const s = String(v);
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (m === null) return s;
  const [, sign, lead, rest = '', expText] = m;
  const exp = Number(expText);
  const digits = lead! + rest;
  if (exp >= 0) return sign! + digits.padEnd(exp + 1, '0');
  return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
}

/** Unix nanoseconds as Prometheus' float seconds. */
export function nsToSeconds(ns: bigint): number {
  return Number(ns / 1_000_000n) / 1000;
}
