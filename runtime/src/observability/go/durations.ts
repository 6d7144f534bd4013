/*
 * Durations as Go and Prometheus write them: parsing `1h30m`, `1.5s`, `200us` (Prometheus also has d, w, y) into
 * nanoseconds, and Go's time.Duration.String() for messages and responses.
 */

const UNIT_NS: Readonly<Record<string, bigint>> = {
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

const PART = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w|y)/;

/** Multiplies a decimal string by an integer exactly (fractions of the unit are truncated to whole ns). */
function scaleDecimal(num: string, unit: bigint): bigint {
  const [int = '0', frac = ''] = num.split('.');
  const scale = 10n ** BigInt(frac.length);
  return ((BigInt(int === '' ? '0' : int) * scale + BigInt(frac === '' ? '0' : frac)) * unit) / scale;
}

/**
 * A duration in nanoseconds: a sequence of `<number><unit>` with units y w d h m s ms us µs ns (`prometheus`), or
 * without y, w and d as Go's time.ParseDuration reads it (`go`). Undefined when it is not a duration.
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
  let total = 0n;
  while (s !== '') {
    const m = PART.exec(s);
    if (m === null) return undefined;
    const unit = m[2]!;
    if (style === 'go' && (unit === 'd' || unit === 'w' || unit === 'y')) return undefined;
    total += scaleDecimal(m[1]!, UNIT_NS[unit]!);
    s = s.slice(m[0].length);
  }
  return sign * total;
}

function trimFraction(int: bigint, frac: bigint, digits: number): string {
  const f = frac.toString().padStart(digits, '0').replace(/0+$/, '');
  return f === '' ? int.toString() : `${int}.${f}`;
}

/** Go's time.Duration.String(): `721h0m0s`, `1m30s`, `1.5ms`, `250µs`, `0s`. */
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
