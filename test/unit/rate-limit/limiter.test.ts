import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { IngressLimiter, parseRateLimit, type BudgetStore } from '../../../runtime/src/rate-limit/limiter.ts';

/** The PostgreSQL bucket's arithmetic, in memory, with the refill frozen (the tests are about leasing). */
class MemoryBudget implements BudgetStore {
  leases = 0;
  fail = false;
  constructor(public tokens: number) {}
  async lease(want: number): Promise<{ granted: number; left: number }> {
    this.leases += 1;
    await Promise.resolve();
    if (this.fail) throw new Error('connection refused');
    const granted = Math.min(want, Math.max(0, Math.floor(this.tokens)));
    this.tokens -= granted;
    return { granted, left: this.tokens };
  }
}

const log = pino({ level: 'silent' });

describe('IngressLimiter', () => {
  it('admits exactly what the shared bucket holds, however many requests wait at once', async () => {
    const budget = new MemoryBudget(25);
    const limiter = new IngressLimiter({ perHour: 36_000, burst: 600 }, budget, log);
    const results = await Promise.all(Array.from({ length: 100 }, () => limiter.admit()));
    expect(results.filter((r) => r.admitted)).toHaveLength(25);
    const refused = results.find((r) => !r.admitted);
    expect(refused).toEqual({ admitted: false, retryAfterSeconds: 1 });
    // Leases come in chunks (here 3 tokens: a quarter of a second's refill at 10/s), not one per request.
    expect(budget.leases).toBeLessThan(25);
  });

  it('refuses without asking PostgreSQL again until the next token is due', async () => {
    const budget = new MemoryBudget(0);
    const limiter = new IngressLimiter({ perHour: 360, burst: 10 }, budget, log);
    const first = await limiter.admit();
    expect(first).toEqual({ admitted: false, retryAfterSeconds: 10 });
    const leases = budget.leases;
    expect((await limiter.admit()).admitted).toBe(false);
    expect(budget.leases).toBe(leases);
  });

  it('admits while PostgreSQL cannot be reached (the request needs it anyway and fails there)', async () => {
    const budget = new MemoryBudget(0);
    budget.fail = true;
    const limiter = new IngressLimiter({ perHour: 3600, burst: 10 }, budget, log);
    expect(await limiter.admit()).toEqual({ admitted: true });
  });

  it('reads limits as <n>/<s|m|h> or off', () => {
    expect(parseRateLimit('36000/h')).toBe(36_000);
    expect(parseRateLimit('600/m')).toBe(36_000);
    expect(parseRateLimit('10/s')).toBe(36_000);
    expect(parseRateLimit('off')).toBeUndefined();
    expect(() => parseRateLimit('36000')).toThrow(/expected <requests>\/<s\|m\|h>/);
    expect(() => parseRateLimit('0/h')).toThrow(/more than 0/);
  });
});
