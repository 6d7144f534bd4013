/*
 * Literals of LogQL as Loki reads them: Go string literals, Go/RE2 regexes (turned into JS RegExps), Prometheus and Go
 * durations, humanized byte sizes, and Go's formatting of durations and floats for messages and sample values.
 */
import { re2 } from '../go/regex.ts';
import { unquoteGo } from '../go/strings.ts';

/** The value of a Go string literal: `"…"` with Go's escapes, or a raw `` `…` `` string. */
export function unquote(literal: string): string {
  return unquoteGo(literal, 'parse error : ', true);
}

/**
 * A Go (RE2) regex as a JS RegExp (see ../go/regex.ts). `anchored` wraps it in `^(?:…)$` (label matchers; line filters
 * are not anchored). An invalid regex is the query's fault: 400.
 */
export function goRegex(source: string, anchored: boolean, dotAll = false): RegExp {
  return re2(source, { anchored, dotAll });
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
