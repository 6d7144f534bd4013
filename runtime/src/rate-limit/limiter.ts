import type { Logger } from 'pino';
import type { BudgetLease } from '../storage/pg/tables/ingress-budget.ts';

/**
 * The ingress limit of a cluster (specification section 8: a managed ingress takes 36 000 requests per hour): one
 * token bucket in PostgreSQL shared by every node, refilled at `perHour / 3600` tokens a second up to `burst`. Each
 * node leases a few tokens at a time and admits requests from its local share without a round trip; when the share is
 * used up it leases again (in the background as soon as it runs low). So replicas share the budget rather than
 * multiply it; what the nodes hold unused at any moment (a few tokens each) is the only slack.
 *
 * When the bucket is empty a request is refused with the time until the next token. When PostgreSQL cannot be reached
 * requests are admitted (they need the database anyway, and fail there with a clear 503).
 */

export interface IngressLimit {
  readonly perHour: number;
  /** The bucket's size: how many requests may come at once after a quiet period. */
  readonly burst: number;
}

export interface BudgetStore {
  lease(want: number, capacity: number, perSecond: number): Promise<BudgetLease>;
}

export type Admission = { admitted: true } | { admitted: false; retryAfterSeconds: number };

const ADMITTED: Admission = { admitted: true };

export class IngressLimiter {
  private local = 0;
  private leasing: Promise<boolean> | undefined;
  /** Requests waiting for the lease under way. */
  private waiting = 0;
  /** Until when the cluster's bucket is known to be empty (no lease is tried before). */
  private emptyUntil = 0;
  private readonly perSecond: number;
  private readonly chunk: number;
  private lastWarning = 0;

  constructor(
    readonly limit: IngressLimit,
    private readonly budget: BudgetStore,
    private readonly log: Logger,
  ) {
    this.perSecond = limit.perHour / 3600;
    // Small enough that the shares nodes hold unused stay a rounding error of the budget, large enough that a busy
    // node leases a few times a second at most.
    this.chunk = Math.max(1, Math.min(Math.floor(limit.burst / 10), Math.ceil(this.perSecond / 4)));
  }

  async admit(): Promise<Admission> {
    if (this.take()) return ADMITTED;
    this.waiting += 1;
    try {
      // A lease is sized for everyone waiting; one that still falls short (more came meanwhile) is followed by another.
      for (let round = 0; round < 16; round++) {
        const now = Date.now();
        if (now < this.emptyUntil) return refused(this.emptyUntil - now);
        if (!(await this.refill())) return ADMITTED; // PostgreSQL unreachable: fail open
        if (this.take()) return ADMITTED;
      }
      return refused(1000);
    } finally {
      this.waiting -= 1;
    }
  }

  private take(): boolean {
    if (this.local < 1) return false;
    this.local -= 1;
    // Running low: lease the next share before it is needed.
    if (this.local < 1 && Date.now() >= this.emptyUntil) void this.refill();
    return true;
  }

  /** Leases the next share (one lease at a time, shared by whoever waits); false when PostgreSQL failed. */
  private refill(): Promise<boolean> {
    this.leasing ??= this.budget
      .lease(Math.min(this.limit.burst, Math.max(this.chunk, this.waiting)), this.limit.burst, this.perSecond)
      .then(
        (lease) => {
          this.local += lease.granted;
          this.emptyUntil = lease.granted > 0 ? 0 : Date.now() + ((1 - lease.left) / this.perSecond) * 1000;
          return true;
        },
        (err: unknown) => {
          this.emptyUntil = 0;
          if (Date.now() - this.lastWarning > 10_000) {
            this.lastWarning = Date.now();
            this.log.warn({ err }, 'cannot lease ingress budget from PostgreSQL; admitting requests meanwhile');
          }
          return false;
        },
      )
      .finally(() => {
        this.leasing = undefined;
      });
    return this.leasing;
  }
}

function refused(waitMs: number): Admission {
  return { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
}

/** `36000/h`, `600/m`, `10/s` → requests per hour; `off` → undefined. */
export function parseRateLimit(value: string): number | undefined {
  const v = value.trim();
  if (v === 'off') return undefined;
  const match = /^(\d+(?:\.\d+)?)\s*\/\s*(s|m|h)$/.exec(v);
  if (match === null) throw new Error(`expected <requests>/<s|m|h> (e.g. 36000/h) or off, got "${value}"`);
  const n = Number(match[1]);
  if (!(n > 0)) throw new Error(`the limit must be more than 0 requests, got "${value}"`);
  return n * { s: 3600, m: 60, h: 1 }[match[2] as 's' | 'm' | 'h'];
}
