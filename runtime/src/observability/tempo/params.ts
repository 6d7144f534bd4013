/*
 * Query parameters of Tempo's HTTP API: Unix-second ranges (capped at 7 days), limits (search capped at 1000), Go
 * durations, and trace ids. Bad values are 400s with Tempo's wording where Tempo has one.
 */
import { type ApiParams, ObservabilityQueryError } from '../errors.ts';
import { formatGoDuration } from '../go/durations.ts';
import { parseGoDurationNs } from '../traceql/literals.ts';

export const MAX_SEARCH_LIMIT = 1000;
export const MAX_SPANS_PER_SPANSET = 1000;
/** Tag name/value lists are clamped to this (Grafana asks for 5000). */
export const MAX_TAG_LIMIT = 5000;
export const MAX_RANGE_NS = 7n * 24n * 3_600_000_000_000n;
/** The window searched when the request gives no start (Tempo then searches recent data only). */
export const DEFAULT_WINDOW_NS = 3_600_000_000_000n;
const NS_PER_S = 1_000_000_000n;

export function param(params: ApiParams, name: string): string | undefined {
  const v = params[name];
  const s = typeof v === 'string' ? v : v?.[0];
  return s === undefined || s === '' ? undefined : s;
}

function unixSeconds(params: ApiParams, name: string): bigint | undefined {
  const s = param(params, name);
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s)) {
    throw new ObservabilityQueryError(
      `invalid ${name}: strconv.ParseInt: parsing ${JSON.stringify(s)}: invalid syntax`,
    );
  }
  const seconds = BigInt(s);
  // Nanoseconds are stored as a signed 64-bit integer: the latest second they can say is in April 2262.
  if (seconds > MAX_UNIX_SECONDS) {
    throw new ObservabilityQueryError(
      `invalid ${name}: strconv.ParseInt: parsing ${JSON.stringify(s)}: value out of range`,
    );
  }
  return seconds * NS_PER_S;
}

const MAX_UNIX_SECONDS = 9_223_372_035n;

export interface TimeRange {
  readonly startNs: bigint;
  /** Exclusive. */
  readonly endNs: bigint;
}

/** `start`/`end` in Unix seconds; `end` defaults to now and `start` to an hour before `end`. */
export function timeRange(params: ApiParams, nowNs: bigint, capped = true): TimeRange {
  const start = unixSeconds(params, 'start');
  const end = unixSeconds(params, 'end');
  const endNs = end ?? nowNs;
  const startNs = start ?? endNs - DEFAULT_WINDOW_NS;
  if (start !== undefined && end !== undefined && end <= start) {
    throw new ObservabilityQueryError(
      `http parameter start must be before end. received start=${start / NS_PER_S} end=${end / NS_PER_S}`,
    );
  }
  if (capped && endNs - startNs > MAX_RANGE_NS) {
    throw new ObservabilityQueryError(
      `range specified by start and end (${formatGoDuration(endNs - startNs)}) exceeds the maximum of ${formatGoDuration(MAX_RANGE_NS)}`,
    );
  }
  // Whole seconds: `end` is inclusive in Tempo, so the second it names is searched too.
  return { startNs, endNs: end === undefined ? endNs : endNs + NS_PER_S };
}

/** A positive integer parameter; over `max` is a 400 (`clamp` false) or clamped. */
export function positiveInt(
  params: ApiParams,
  name: string,
  dflt: number,
  max: number,
  clamp: boolean,
  allowZero = false,
): number {
  const s = param(params, name);
  if (s === undefined) return dflt;
  const n = /^\d+$/.test(s) ? Number(s) : NaN;
  if (!Number.isSafeInteger(n) || (n === 0 && !allowZero)) {
    throw new ObservabilityQueryError(`invalid ${name}: must be a positive integer, got ${JSON.stringify(s)}`);
  }
  if (n > max) {
    if (clamp) return max;
    throw new ObservabilityQueryError(`invalid ${name}: ${n} exceeds the maximum of ${max}`);
  }
  return n;
}

export function goDuration(params: ApiParams, name: string): bigint | undefined {
  const s = param(params, name);
  if (s === undefined) return undefined;
  const ns = parseGoDurationNs(s);
  if (ns === undefined || ns < 0n) {
    throw new ObservabilityQueryError(`invalid ${name}: time: invalid duration ${JSON.stringify(s)}`);
  }
  return ns;
}

/** A trace id as given in the path: 1–32 hex digits, any case; the stored form is 32 lower-case digits. */
export function parseTraceId(raw: string): string {
  if (raw === '' || !/^[0-9a-fA-F]+$/.test(raw)) {
    throw new ObservabilityQueryError(`invalid trace id ${JSON.stringify(raw)}: trace IDs are only hex strings`);
  }
  const trimmed = raw.replace(/^0+(?=.)/, '');
  if (trimmed.length > 32) {
    throw new ObservabilityQueryError(
      `invalid trace id ${JSON.stringify(raw)}: trace IDs can't be larger than 128 bits`,
    );
  }
  return trimmed.toLowerCase().padStart(32, '0');
}
