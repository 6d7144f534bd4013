import { describe, expect, it } from 'vitest';
import { parseDeploymentChoice } from '../../../runtime/src/admin/routes/invocations.ts';
import { readJsonBody } from '../../../runtime/src/admin/request.ts';
import { parseTargetBody } from '../../../runtime/src/ingress/target-body.ts';
import { parseLogQL } from '../../../runtime/src/observability/logql/parse.ts';
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

  it('U+0000 in an admin request body is a 400 naming the field, not a 500 from PostgreSQL', () => {
    const body = Buffer.from('{"object_key":"a","new_state":{"k\\u0000":[1]},"metadata":{"x":"\\u0000"}}');
    expect(() => readJsonBody('application/json', body)).toThrow(
      "The request field 'new_state.k\u0000' is invalid. Reason: it contains U+0000 (NUL), which cannot be stored",
    );
    expect(readJsonBody('application/json', Buffer.from('{"a":"\\u0001"}'))).toEqual({ a: '\u0001' });
  });

  it('a LogQL json expression with a control character in a quoted field is a parse error, not a SyntaxError', () => {
    expect(() => parseLogQL('{a="b"} | json y=`a["\nb"]`')).toThrow(/invalid JSON expression/);
  });

  it('U+0000 in an ingress lookup target is a 400, not a 503 from PostgreSQL', () => {
    const body = Buffer.from('{"target":"Service","service":"A\\u0000","handler":"h"}');
    expect(() => parseTargetBody(body, 'lookup')).toThrow(/invalid lookup body: it contains U\+0000/);
  });
});
