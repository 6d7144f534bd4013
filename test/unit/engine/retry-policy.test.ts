import { describe, expect, it } from 'vitest';
import { decideRetry, type RetryPolicy } from '../../../runtime/src/invoker/retry-policy.ts';

const server: RetryPolicy = {
  initialIntervalMs: 500,
  exponentiationFactor: 2,
  maxIntervalMs: 60_000,
  maxAttempts: 70,
  onMaxAttempts: 'Pause',
};

describe('retry policy', () => {
  it('backs off exponentially from the initial interval up to the maximum', () => {
    expect([1, 2, 3, 4].map((n) => decideRetry(server, n))).toEqual([
      { kind: 'retry', delayMs: 500 },
      { kind: 'retry', delayMs: 1000 },
      { kind: 'retry', delayMs: 2000 },
      { kind: 'retry', delayMs: 4000 },
    ]);
    expect(decideRetry(server, 30)).toEqual({ kind: 'retry', delayMs: 60_000 });
  });

  it('stops after max attempts with the configured action, even when a delay was requested', () => {
    expect(decideRetry(server, 70)).toEqual({ kind: 'exhausted', onMaxAttempts: 'Pause' });
    expect(decideRetry({ ...server, maxAttempts: 2, onMaxAttempts: 'Kill' }, 2, 10)).toEqual({
      kind: 'exhausted',
      onMaxAttempts: 'Kill',
    });
  });

  it('honours a delay requested in front of the deployment (Retry-After on 429/503)', () => {
    expect(decideRetry(server, 1, 7000)).toEqual({ kind: 'retry', delayMs: 7000 });
  });
});
