import { describe, expect, it } from 'vitest';
import {
  formatDuration,
  formatDurationIso,
  formatSize,
  parseDuration,
  parseSize,
  UnitFormatError,
} from '../../../runtime/src/config/units.ts';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['90s', 90 * SECOND],
    ['1m', MINUTE],
    ['1m 30s', MINUTE + 30 * SECOND],
    ['1m30s', MINUTE + 30 * SECOND],
    ['10m', 10 * MINUTE],
    ['2h', 2 * HOUR],
    ['1d', DAY],
    ['2d', 2 * DAY],
    ['1w', 7 * DAY],
    ['36h 4m 2s', 129_842 * SECOND],
    ['10 min', 10 * MINUTE],
    ['3 days, 4 hours, 59 minutes', 3 * DAY + 4 * HOUR + 59 * MINUTE],
    ['1 hour 500 milliseconds', HOUR + 500],
    ['1.5s', 1500],
    ['1.5h', 90 * MINUTE],
    ['0s', 0],
    ['+5s', 5 * SECOND],
    ['  2H  ', 2 * HOUR],
    ['1500us', 2],
    ['1500µs', 2],
    ['01:30:00', 90 * MINUTE],
    ['00:00:01.25', 1250],
    ['PT1M', MINUTE],
    ['pt1m', MINUTE],
    ['PT1.5S', 1500],
    ['PT0,5S', 500],
    ['PT7200S', 2 * HOUR],
    ['P1D', DAY],
    ['P30DT10H30M15S', 30 * DAY + 10 * HOUR + 30 * MINUTE + 15 * SECOND],
    ['P1W', 7 * DAY],
    ['PT1H1.5M', HOUR + 90 * SECOND],
  ])('%s → %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });

  it.each([
    ['', /empty/],
    ['banana', /expected/],
    ['500', /unit is required/],
    ['10 parsecs', /unknown unit 'parsecs'/],
    ['1mo', /days or smaller/],
    ['1 year', /days or smaller/],
    ['P1M', /days or smaller/],
    ['P1Y', /days or smaller/],
    ['-5s', /negative/],
    ['5s ago', /negative/],
    ['-PT1M', /negative/],
    ['30s 1m', /largest to smallest/],
    ['1m 1m', /largest to smallest/],
    ['1.5m 3s', /only the last unit/],
    ['1.5d', /hours or smaller/],
    ['P', /ISO-8601/],
    ['PT', /ISO-8601/],
    ['P1DT', /ISO-8601/],
    ['PT1.5M3S', /only the last unit/],
    ['00:61:00', /below 60/],
    ['99999999999999999d', /too large/],
  ])('%j is refused', (input, message) => {
    expect(() => parseDuration(input)).toThrow(UnitFormatError);
    expect(() => parseDuration(input)).toThrow(message);
  });
});

describe('formatDuration', () => {
  // Renderings observed from restate-server 1.7.12 (admin API ServiceMetadata).
  it.each([
    [DAY, '1d'],
    [MINUTE, '1m'],
    [90 * SECOND, '1m 30s'],
    [10 * MINUTE, '10m'],
    [500, '500ms'],
    [100, '100ms'],
    [2 * HOUR, '2h'],
    [30 * MINUTE, '30m'],
    [2 * DAY, '2d'],
    [129_842 * SECOND, '1d 12h 4m 2s'],
    [32 * DAY, '32d'],
    [7 * DAY, '7d'],
    [HOUR + 1, '1h 1ms'],
    [0, '0s'],
    [1.5, '1ms 500µs'],
    [0.000022, '22ns'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('round-trips through parseDuration', () => {
    const samples = [0, 1, 999, 1000, 1001, 59_999, 90_000, 3_600_000, 86_399_999, 86_400_000, 31 * DAY + 1, 2 ** 40];
    for (const ms of samples) expect(parseDuration(formatDuration(ms))).toBe(ms);
    for (const text of ['1d', '1m', '1m 30s', '10m', '500ms', '2d 3h 4m 5s 6ms']) {
      expect(formatDuration(parseDuration(text))).toBe(text);
    }
  });

  it('refuses negative and non-finite values', () => {
    expect(() => formatDuration(-1)).toThrow(RangeError);
    expect(() => formatDuration(Number.NaN)).toThrow(RangeError);
    expect(() => formatDuration(Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });
});

describe('formatDurationIso', () => {
  it('renders seconds as introspection shows intervals, and parses back', () => {
    expect(formatDurationIso(DAY)).toBe('PT86400S');
    expect(formatDurationIso(2 * HOUR)).toBe('PT7200S');
    expect(formatDurationIso(1500)).toBe('PT1.5S');
    expect(formatDurationIso(1)).toBe('PT0.001S');
    expect(formatDurationIso(0)).toBe('PT0S');
    for (const ms of [0, 1, 1500, 59_999, DAY + 7]) expect(parseDuration(formatDurationIso(ms))).toBe(ms);
  });
});

describe('parseSize', () => {
  it.each([
    ['32 MiB', 32 * 2 ** 20],
    ['32MiB', 32 * 2 ** 20],
    ['32 mib', 32 * 2 ** 20],
    ['10 KB', 10_000],
    ['10 kB', 10_000],
    ['10 KiB', 10_240],
    ['10K', 10_000],
    ['1 GB', 1e9],
    ['2 GiB', 2 * 2 ** 30],
    ['1 TiB', 2 ** 40],
    ['4096', 4096],
    ['4096 B', 4096],
    ['0', 0],
    ['1.5 KiB', 1536],
    ['1.1 MB', 1_100_000],
    ['1.1 KiB', 1126],
  ])('%s → %d bytes', (input, bytes) => {
    expect(parseSize(input)).toBe(bytes);
  });

  it.each([
    ['', /expected a number of bytes/],
    ['MiB', /expected a number of bytes/],
    ['-1 KB', /expected a number of bytes/],
    ['32 MeB', /unknown unit 'meb'/],
    ['32 bits', /unknown unit/],
    ['99999999 TiB', /too large/],
  ])('%j is refused', (input, message) => {
    expect(() => parseSize(input)).toThrow(UnitFormatError);
    expect(() => parseSize(input)).toThrow(message);
  });
});

describe('formatSize', () => {
  it('renders exact sizes and round-trips', () => {
    expect(formatSize(32 * 2 ** 20)).toBe('32 MiB');
    expect(formatSize(10_000)).toBe('10 KB');
    expect(formatSize(10_240)).toBe('10 KiB');
    expect(formatSize(1023)).toBe('1023 B');
    expect(formatSize(0)).toBe('0 B');
    for (const bytes of [0, 1, 1000, 1024, 1536, 999_999, 2 ** 30, 5e12, 2 ** 45 + 1]) {
      expect(parseSize(formatSize(bytes))).toBe(bytes);
    }
    expect(() => formatSize(-1)).toThrow(RangeError);
    expect(() => formatSize(1.5)).toThrow(RangeError);
  });
});
