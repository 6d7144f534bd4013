import { describe, expect, it } from 'vitest';
import { ObservabilityQueryError } from '../../../../runtime/src/observability/errors.ts';
import { formatGoDuration, parseDurationNs } from '../../../../runtime/src/observability/go/durations.ts';
import { formatSampleValue, unquote } from '../../../../runtime/src/observability/logql/literals.ts';
import {
  bounds,
  defaultStep,
  parseDirection,
  parseLimit,
  parseSecondsOrDuration,
  parseTimestamp,
} from '../../../../runtime/src/observability/loki/params.ts';

const S = 1_000_000_000n;
const NOW = 1_700_000_000n * S;

describe('Loki parameter parsing', () => {
  it('reads timestamps as Loki does: ≤ 10 digits seconds, longer integers nanoseconds, decimals seconds', () => {
    expect(parseTimestamp('1700000000', 0n, 'start')).toBe(1_700_000_000n * S);
    expect(parseTimestamp('1700000000123456789', 0n, 'start')).toBe(1_700_000_000_123_456_789n);
    expect(parseTimestamp('1700000000.5', 0n, 'start')).toBe(1_700_000_000_500_000_000n);
    // The fraction is rounded to milliseconds, as Loki rounds it.
    expect(parseTimestamp('1700000000.1234567', 0n, 'start')).toBe(1_700_000_000_123_000_000n);
    expect(parseTimestamp(undefined, 42n, 'start')).toBe(42n);
  });

  it('reads RFC3339 and RFC3339Nano timestamps with zones', () => {
    expect(parseTimestamp('2023-11-14T22:13:20Z', 0n, 'end')).toBe(NOW);
    expect(parseTimestamp('2023-11-14T22:13:20.000000123Z', 0n, 'end')).toBe(NOW + 123n);
    expect(parseTimestamp('2023-11-15T00:13:20+02:00', 0n, 'end')).toBe(NOW);
  });

  it('refuses what is not a timestamp with a 400', () => {
    expect(() => parseTimestamp('yesterday', 0n, 'start')).toThrow(ObservabilityQueryError);
    expect(() => parseTimestamp('yesterday', 0n, 'start')).toThrow(/could not parse 'start' parameter/);
  });

  it('bounds: end defaults to now, start to min(end, now) - since (1h unless given)', () => {
    expect(bounds({}, NOW, 3600n * S)).toEqual({ startNs: NOW - 3600n * S, endNs: NOW });
    expect(bounds({ since: '5m' }, NOW, 3600n * S)).toEqual({ startNs: NOW - 300n * S, endNs: NOW });
    expect(bounds({ end: String(NOW + 3600n * S), since: '1h30m' }, NOW, 0n)).toEqual({
      startNs: NOW - 5400n * S,
      endNs: NOW + 3600n * S,
    });
    expect(bounds({ start: '1699990000', end: '1700000000' }, NOW, 0n)).toEqual({
      startNs: 1_699_990_000n * S,
      endNs: NOW,
    });
    expect(() => bounds({ since: 'soon' }, NOW, 0n)).toThrow(ObservabilityQueryError);
  });

  it('step and interval: float seconds or Prometheus durations; default step max(floor(range/250s), 1)s', () => {
    expect(parseSecondsOrDuration('30', 'step')).toBe(30n * S);
    expect(parseSecondsOrDuration('0.5', 'step')).toBe(S / 2n);
    expect(parseSecondsOrDuration('5m', 'step')).toBe(300n * S);
    expect(parseSecondsOrDuration('60000ms', 'step')).toBe(60n * S);
    expect(parseSecondsOrDuration('1h30m', 'step')).toBe(5400n * S);
    expect(() => parseSecondsOrDuration('fast', 'step')).toThrow(/cannot parse "fast" to a valid duration/);
    expect(defaultStep(0n, 3600n * S)).toBe(14n * S);
    expect(defaultStep(0n, 60n * S)).toBe(S);
  });

  it('limit and direction', () => {
    expect(parseLimit({}, 100)).toBe(100);
    expect(parseLimit({ limit: '30' }, 100)).toBe(30);
    expect(() => parseLimit({ limit: '0' }, 100)).toThrow('limit must be a positive value');
    expect(() => parseLimit({ limit: 'x' }, 100)).toThrow(ObservabilityQueryError);
    expect(parseDirection({})).toBe('backward');
    expect(parseDirection({ direction: 'FORWARD' })).toBe('forward');
    expect(() => parseDirection({ direction: 'up' })).toThrow("invalid direction 'up'");
  });

  it('literals: durations, Go duration formatting, sample values, Go strings', () => {
    expect(parseDurationNs('1h30m')).toBe(5400n * S);
    expect(parseDurationNs('1.5s')).toBe(1500n * 1_000_000n);
    expect(parseDurationNs('2d')).toBe(172_800n * S);
    expect(parseDurationNs('1d', 'go')).toBeUndefined();
    expect(parseDurationNs('5x')).toBeUndefined();
    expect(formatGoDuration(721n * 3600n * S)).toBe('721h0m0s');
    expect(formatGoDuration(90n * S)).toBe('1m30s');
    expect(formatGoDuration(1500n * 1_000_000n)).toBe('1.5s');
    expect(formatGoDuration(500n * 1_000_000n)).toBe('500ms');
    expect(formatSampleValue(2)).toBe('2');
    expect(formatSampleValue(0.5)).toBe('0.5');
    expect(formatSampleValue(1e21)).toBe('1000000000000000000000');
    expect(formatSampleValue(1.5e-7)).toBe('0.00000015');
    expect(formatSampleValue(Infinity)).toBe('+Inf');
    expect(formatSampleValue(NaN)).toBe('NaN');
    expect(unquote('"a\\tb\\"c\\u00e9\\x41"')).toBe('a\tb"céA');
    expect(unquote('`raw \\n`')).toBe('raw \\n');
    expect(() => unquote('"bad \\q"')).toThrow(ObservabilityQueryError);
  });
});
