/**
 * Durations and sizes written for people, as Restate reads and writes them.
 *
 * Durations follow jiff's "friendly" format (what restate-server prints and parses) plus ISO-8601:
 * `500ms`, `90s`, `1m 30s`, `2h`, `1d`, `3 days, 4 hours`, `1h30m`, `01:30:00`, `PT1M`, `P1DT2H`. Days are 24 hours
 * and weeks 7 days; months and years are refused because their length varies. Values are milliseconds; sub-millisecond
 * input (`1500us`) is rounded to the nearest millisecond. `formatDuration` renders Restate's output: compact units
 * from days down, separated by a space (`"1d"`, `"1m 30s"`, `"500ms"`).
 *
 * Sizes: a number of bytes, optionally with a unit: `B`, decimal `KB`/`MB`/`GB`/`TB` (powers of 1000, also `K`, `M`,
 * …) and binary `KiB`/`MiB`/`GiB`/`TiB` (powers of 1024); units are case-insensitive; `32 MiB`, `10 KB`, `1048576`.
 *
 * These functions know nothing of configuration or HTTP: they throw `UnitFormatError`, and each caller turns it into
 * its own error (RT0002 in config, a 4xx in a listener).
 */

export class UnitFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnitFormatError';
  }
}

const MS_PER_SECOND = 1_000;
const MS_PER_MINUTE = 60 * MS_PER_SECOND;
const MS_PER_HOUR = 60 * MS_PER_MINUTE;
const MS_PER_DAY = 24 * MS_PER_HOUR;
const MS_PER_WEEK = 7 * MS_PER_DAY;

interface DurationUnit {
  readonly ms: number;
  /** Rank from largest (0) to smallest: friendly units must appear largest first, each at most once. */
  readonly rank: number;
  /** jiff allows a fraction only on units of an hour or smaller. */
  readonly fractionAllowed: boolean;
}

function unit(ms: number, rank: number, fractionAllowed: boolean, names: readonly string[]): [string, DurationUnit][] {
  return names.map((name) => [name, { ms, rank, fractionAllowed }]);
}

const FRIENDLY_UNITS: ReadonlyMap<string, DurationUnit> = new Map([
  ...unit(MS_PER_WEEK, 0, false, ['w', 'wk', 'wks', 'week', 'weeks']),
  ...unit(MS_PER_DAY, 1, false, ['d', 'day', 'days']),
  ...unit(MS_PER_HOUR, 2, true, ['h', 'hr', 'hrs', 'hour', 'hours']),
  ...unit(MS_PER_MINUTE, 3, true, ['m', 'min', 'mins', 'minute', 'minutes']),
  ...unit(MS_PER_SECOND, 4, true, ['s', 'sec', 'secs', 'second', 'seconds']),
  ...unit(1, 5, true, ['ms', 'msec', 'msecs', 'millisecond', 'milliseconds']),
  ...unit(1e-3, 6, true, ['µs', 'μs', 'us', 'usec', 'usecs', 'microsecond', 'microseconds']),
  ...unit(1e-6, 7, true, ['ns', 'nsec', 'nsecs', 'nanosecond', 'nanoseconds']),
]);

const CALENDAR_UNITS = new Set(['y', 'yr', 'yrs', 'year', 'years', 'mo', 'mos', 'month', 'months']);

const EXAMPLES = "e.g. '500ms', '1m 30s', '2h', '1d' or ISO-8601 'PT1M'";

/** `integer[.fraction] * unitMs`, exact for the integer part so large values do not pick up float noise. */
function scale(integer: string, fraction: string | undefined, unitMs: number): number {
  const whole = Number(integer) * unitMs;
  if (fraction === undefined || fraction === '') return whole;
  return whole + Number(`0.${fraction}`) * unitMs;
}

function finish(totalMs: number, input: string): number {
  const ms = Math.round(totalMs);
  if (!Number.isSafeInteger(ms)) throw new UnitFormatError(`duration '${input}' is too large`);
  return ms;
}

const FRIENDLY_PART = /^(\d+)(?:\.(\d+))?\s*([a-zµμ]+)\s*,?\s*/;
const HMS = /^(\d+):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/;

function parseFriendly(text: string, input: string): number {
  const hms = HMS.exec(text);
  if (hms !== null) {
    const [, h = '', m = '', s = '', frac] = hms;
    if (Number(m) > 59 || Number(s) > 59)
      throw new UnitFormatError(`invalid duration '${input}': minutes and seconds must be below 60`);
    return Number(h) * MS_PER_HOUR + Number(m) * MS_PER_MINUTE + scale(s, frac, MS_PER_SECOND);
  }
  if (/^\d+(\.\d+)?$/.test(text)) {
    throw new UnitFormatError(`invalid duration '${input}': a unit is required, ${EXAMPLES}`);
  }
  let rest = text;
  let total = 0;
  let lastRank = -1;
  let sawFraction = false;
  while (rest.length > 0) {
    const match = FRIENDLY_PART.exec(rest);
    if (match === null) throw new UnitFormatError(`invalid duration '${input}': expected ${EXAMPLES}`);
    const [whole, integer = '', fraction, name = ''] = match;
    const found = FRIENDLY_UNITS.get(name);
    if (found === undefined) {
      if (CALENDAR_UNITS.has(name)) {
        throw new UnitFormatError(
          `invalid duration '${input}': use days or smaller units, months and years vary in length`,
        );
      }
      throw new UnitFormatError(`invalid duration '${input}': unknown unit '${name}', ${EXAMPLES}`);
    }
    if (found.rank <= lastRank) {
      throw new UnitFormatError(
        `invalid duration '${input}': units must go from largest to smallest, each at most once`,
      );
    }
    if (sawFraction) throw new UnitFormatError(`invalid duration '${input}': only the last unit may have a fraction`);
    if (fraction !== undefined) {
      if (!found.fractionAllowed) {
        throw new UnitFormatError(`invalid duration '${input}': fractions are allowed only on hours or smaller units`);
      }
      sawFraction = true;
    }
    lastRank = found.rank;
    total += scale(integer, fraction, found.ms);
    rest = rest.slice(whole.length);
  }
  return total;
}

const ISO =
  /^p(?:(\d+)y)?(?:(\d+)m)?(?:(\d+)w)?(?:(\d+)d)?(?:t(?:(\d+)(?:[.,](\d+))?h)?(?:(\d+)(?:[.,](\d+))?m)?(?:(\d+)(?:[.,](\d+))?s)?)?$/;

function parseIso(text: string, input: string): number {
  const match = ISO.exec(text);
  // `P` and `PT` alone match the pattern with nothing in it; a time part must not be empty either.
  if (match === null || /^pt?$/.test(text) || text.endsWith('t')) {
    throw new UnitFormatError(`invalid ISO-8601 duration '${input}': expected e.g. 'PT1M', 'PT1.5S', 'P1DT2H'`);
  }
  const [, years, months, weeks, days, h, hFrac, m, mFrac, s, sFrac] = match;
  if (years !== undefined || months !== undefined) {
    throw new UnitFormatError(
      `invalid duration '${input}': use days or smaller units, months and years vary in length`,
    );
  }
  const fractions = [hFrac, mFrac, sFrac];
  const parts = [h, m, s];
  // A fraction is allowed only on the smallest unit present.
  const lastPresent = parts.reduce((last, part, i) => (part === undefined ? last : i), -1);
  if (fractions.some((f, i) => f !== undefined && i !== lastPresent)) {
    throw new UnitFormatError(`invalid duration '${input}': only the last unit may have a fraction`);
  }
  return (
    Number(weeks ?? 0) * MS_PER_WEEK +
    Number(days ?? 0) * MS_PER_DAY +
    scale(h ?? '0', hFrac, MS_PER_HOUR) +
    scale(m ?? '0', mFrac, MS_PER_MINUTE) +
    scale(s ?? '0', sFrac, MS_PER_SECOND)
  );
}

/** Parses a human-written duration into whole milliseconds. Throws `UnitFormatError`. */
export function parseDuration(input: string): number {
  let text = input.trim().toLowerCase();
  if (text.length === 0) throw new UnitFormatError(`invalid duration '${input}': empty, ${EXAMPLES}`);
  if (text.startsWith('+')) text = text.slice(1);
  if (text.startsWith('-') || text.endsWith(' ago')) {
    throw new UnitFormatError(`invalid duration '${input}': durations cannot be negative`);
  }
  return finish(text.startsWith('p') ? parseIso(text, input) : parseFriendly(text, input), input);
}

const FORMAT_UNITS: readonly (readonly [string, number])[] = [
  ['d', MS_PER_DAY],
  ['h', MS_PER_HOUR],
  ['m', MS_PER_MINUTE],
  ['s', MS_PER_SECOND],
  ['ms', 1],
];

function checkFormattable(ms: number): void {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`cannot format duration ${ms}: must be finite and >= 0`);
}

/**
 * Renders milliseconds the way restate-server does: the largest unit is days, compact designators, one space between
 * units, zero as `0s`: `86400000` → `"1d"`, `90000` → `"1m 30s"`, `500` → `"500ms"`. A fractional millisecond is
 * rendered in `µs`/`ns`.
 */
export function formatDuration(ms: number): string {
  checkFormattable(ms);
  let rest = Math.trunc(ms);
  const parts: string[] = [];
  for (const [name, size] of FORMAT_UNITS) {
    const count = Math.floor(rest / size);
    if (count > 0) parts.push(`${count}${name}`);
    rest -= count * size;
  }
  const subMsNs = Math.round((ms - Math.trunc(ms)) * 1e6);
  if (subMsNs >= 1000) parts.push(`${Math.floor(subMsNs / 1000)}µs`);
  if (subMsNs % 1000 > 0) parts.push(`${subMsNs % 1000}ns`);
  return parts.length === 0 ? '0s' : parts.join(' ');
}

/**
 * Renders milliseconds as an ISO-8601 duration in seconds only, as Restate's SQL introspection shows intervals:
 * `86400000` → `"PT86400S"`, `1500` → `"PT1.5S"`.
 */
export function formatDurationIso(ms: number): string {
  checkFormattable(ms);
  const whole = Math.round(ms);
  const seconds = Math.trunc(whole / MS_PER_SECOND);
  const millis = whole - seconds * MS_PER_SECOND;
  if (millis === 0) return `PT${seconds}S`;
  return `PT${seconds}.${String(millis).padStart(3, '0').replace(/0+$/, '')}S`;
}

const SIZE_UNITS: ReadonlyMap<string, number> = new Map([
  ['', 1],
  ['b', 1],
  ['k', 1e3],
  ['kb', 1e3],
  ['m', 1e6],
  ['mb', 1e6],
  ['g', 1e9],
  ['gb', 1e9],
  ['t', 1e12],
  ['tb', 1e12],
  ['ki', 2 ** 10],
  ['kib', 2 ** 10],
  ['mi', 2 ** 20],
  ['mib', 2 ** 20],
  ['gi', 2 ** 30],
  ['gib', 2 ** 30],
  ['ti', 2 ** 40],
  ['tib', 2 ** 40],
]);

const SIZE = /^(\d+)(?:\.(\d+))?\s*([a-z]*)$/;

/** Parses a human-written size into bytes (a fraction of a byte is dropped). Throws `UnitFormatError`. */
export function parseSize(input: string): number {
  const text = input.trim().toLowerCase();
  const match = SIZE.exec(text);
  if (match === null) {
    throw new UnitFormatError(
      `invalid size '${input}': expected a number of bytes with an optional unit, e.g. '32 MiB', '10 KB', '4096'`,
    );
  }
  const [, integer = '', fraction, unitName = ''] = match;
  const multiplier = SIZE_UNITS.get(unitName);
  if (multiplier === undefined) {
    throw new UnitFormatError(
      `invalid size '${input}': unknown unit '${unitName}', use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB`,
    );
  }
  const bytes = Math.floor(scale(integer, fraction, multiplier));
  if (!Number.isSafeInteger(bytes)) throw new UnitFormatError(`size '${input}' is too large`);
  return bytes;
}

const FORMAT_SIZE_UNITS: readonly (readonly [string, number])[] = [
  ['TiB', 2 ** 40],
  ['GiB', 2 ** 30],
  ['MiB', 2 ** 20],
  ['KiB', 2 ** 10],
  ['TB', 1e12],
  ['GB', 1e9],
  ['MB', 1e6],
  ['KB', 1e3],
];

/** Renders bytes exactly, in the largest binary unit that divides them, else the largest decimal one: `"32 MiB"`. */
export function formatSize(bytes: number): string {
  if (!Number.isSafeInteger(bytes) || bytes < 0)
    throw new RangeError(`cannot format size ${bytes}: must be a whole number >= 0`);
  if (bytes > 0) {
    for (const [name, size] of FORMAT_SIZE_UNITS) {
      if (bytes % size === 0) return `${bytes / size} ${name}`;
    }
  }
  return `${bytes} B`;
}
