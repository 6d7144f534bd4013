import { describe, expect, it } from 'vitest';
import { parseDeploymentChoice } from '../../../runtime/src/admin/routes/invocations.ts';
import { timeRange } from '../../../runtime/src/observability/tempo/params.ts';

/** Inputs the fuzzers of issue 17 found answered 5xx; each is now a 4xx that says what is wrong. */
describe('fuzzing findings', () => {
  it('a repeated deployment query parameter is a 400, not a 500', () => {
    expect(() => parseDeploymentChoice({ deployment: ['Keep', 'Keep'] })).toThrow(
      'Failed to deserialize query string: duplicate field `deployment`',
    );
    expect(() => parseDeploymentChoice({ 'deployment[Id]': ['a', 'b'] })).toThrow(/duplicate field/);
    expect(parseDeploymentChoice({ deployment: 'keep' })).toEqual({ kind: 'keep' });
  });

  it('a Tempo start or end past April 2262 is a 400, not a 503 from PostgreSQL', () => {
    expect(() => timeRange({ end: '9223372036' }, 0n)).toThrow(
      'invalid end: strconv.ParseInt: parsing "9223372036": value out of range',
    );
    expect(() => timeRange({ start: '99999999999999999999' }, 0n)).toThrow(/invalid start: .*value out of range/);
    expect(timeRange({ start: '1', end: '9223372035' }, 0n, false).endNs).toBe(9_223_372_036_000_000_000n);
  });
});
