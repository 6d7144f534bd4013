/*
 * Loki's request parameters (pkg/loghttp/params.go): timestamps, durations, `start`/`end`/`since` bounds, `limit`,
 * `direction`, `step`; and the `{"status":"success","data":…}` wrapper. Times are Unix nanoseconds as bigint.
 */
import { ObservabilityQueryError, type ApiParams, type ApiResponse } from '../errors.ts';
import { parseDurationNs } from '../go/durations.ts';

export const SECOND_NS = 1_000_000_000n;
export const HOUR_NS = 3600n * SECOND_NS;

/** A parameter's value (the first of a repeated one); an empty value counts as absent, as Go's `r.Form.Get` does. */
export function param(params: ApiParams, name: string): string | undefined {
  const v = params[name];
  const s = typeof v === 'string' ? v : v?.[0];
  return s === undefined || s === '' ? undefined : s;
}

/** Every value of a repeated parameter (`match[]`). */
export function params(params: ApiParams, name: string): string[] {
  const v = params[name];
  if (v === undefined) return [];
  return (typeof v === 'string' ? [v] : [...v]).filter((s) => s !== '');
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

function parseRfc3339(value: string): bigint | undefined {
  const m = RFC3339.exec(value);
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, frac = '', zone] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  if (Number.isNaN(ms)) return undefined;
  let ns = BigInt(ms) * 1_000_000n + BigInt(frac.padEnd(9, '0'));
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone!.startsWith('-') ? -1n : 1n;
    const [zh, zm] = zone!.slice(1).split(':').map(Number) as [number, number];
    ns -= sign * BigInt(zh * 60 + zm) * 60n * SECOND_NS;
  }
  return ns;
}

/**
 * A timestamp as Loki reads it: with a `.`, float seconds (the fraction rounded to milliseconds); an integer of at
 * most 10 characters, seconds; a longer integer, nanoseconds; else RFC3339(Nano).
 */
export function parseTimestamp(value: string | undefined, def: bigint, name: string): bigint {
  if (value === undefined) return def;
  if (value.includes('.') && /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) {
    const f = Number(value);
    const whole = Math.trunc(f);
    const ms = Math.round((f - whole) * 1000);
    return BigInt(whole) * SECOND_NS + BigInt(ms) * 1_000_000n;
  }
  if (/^[+-]?\d+$/.test(value)) {
    const n = BigInt(value);
    if (n > 9_223_372_036_854_775_807n || n < -9_223_372_036_854_775_808n) {
      throw new ObservabilityQueryError(`invalid ${name}: strconv.ParseInt: parsing "${value}": value out of range`);
    }
    return value.length <= 10 ? n * SECOND_NS : n;
  }
  const t = parseRfc3339(value);
  if (t === undefined) {
    throw new ObservabilityQueryError(
      `could not parse '${name}' parameter: cannot parse "${value}" to a valid timestamp`,
    );
  }
  return t;
}

/** A Prometheus duration (`5m`, `1h30m`, `1d`). */
export function parseDuration(value: string, name: string): bigint {
  const d = parseDurationNs(value);
  if (d === undefined)
    throw new ObservabilityQueryError(`could not parse '${name}' parameter: not a valid duration: "${value}"`);
  return d;
}

/** `step` / `interval`: float seconds, or a Prometheus duration. */
export function parseSecondsOrDuration(value: string, name: string): bigint {
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) {
    const ns = Number(value) * 1e9;
    if (!Number.isFinite(ns) || Math.abs(ns) > 9.2e18) {
      throw new ObservabilityQueryError(`cannot parse "${value}" to a valid duration. It overflows int64`);
    }
    return BigInt(Math.trunc(ns));
  }
  const d = parseDurationNs(value);
  if (d === undefined)
    throw new ObservabilityQueryError(`invalid ${name}: cannot parse "${value}" to a valid duration`);
  return d;
}

/**
 * `start`, `end` and `since` (Loki's determineBounds): end defaults to now; start to `min(end, now) - since`, `since`
 * defaulting to `defaultSince`.
 */
export function bounds(p: ApiParams, nowNs: bigint, defaultSince: bigint): { startNs: bigint; endNs: bigint } {
  const sinceText = param(p, 'since');
  const since = sinceText === undefined ? defaultSince : parseDuration(sinceText, 'since');
  const endNs = parseTimestamp(param(p, 'end'), nowNs, 'end');
  const endOrNow = endNs > nowNs ? nowNs : endNs;
  const startNs = parseTimestamp(param(p, 'start'), endOrNow - since, 'start');
  return { startNs, endNs };
}

export function parseLimit(p: ApiParams, def: number): number {
  const v = param(p, 'limit');
  if (v === undefined) return def;
  if (!/^[+-]?\d+$/.test(v))
    throw new ObservabilityQueryError(`invalid limit: strconv.Atoi: parsing "${v}": invalid syntax`);
  const n = Number(v);
  if (n <= 0) throw new ObservabilityQueryError('limit must be a positive value');
  return n;
}

export function parseDirection(p: ApiParams): 'forward' | 'backward' {
  const v = param(p, 'direction');
  if (v === undefined) return 'backward';
  const d = v.toLowerCase();
  if (d !== 'forward' && d !== 'backward') throw new ObservabilityQueryError(`invalid direction '${v}'`);
  return d;
}

/** Loki's default step: max(floor(range / 250 s), 1) seconds. */
export function defaultStep(startNs: bigint, endNs: bigint): bigint {
  const seconds = (endNs - startNs) / (250n * SECOND_NS);
  return (seconds > 1n ? seconds : 1n) * SECOND_NS;
}

/** Loki's success body; `warnings` (Loki 3) when the answer may be incomplete. */
export function success(data: unknown, warnings: readonly string[] = []): ApiResponse {
  const body: Record<string, unknown> = { status: 'success', data };
  if (warnings.length > 0) body['warnings'] = warnings;
  return { status: 200, body };
}
