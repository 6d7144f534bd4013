import type pg from 'pg';

/**
 * `ratchet.ingress_budget`: the cluster-wide token bucket of the ingress limit. A lease takes up to `want` whole
 * tokens in one statement (the refill since the last lease is added first, capped at the bucket's size), so nodes
 * leasing at the same time are serialised by the row lock and never hand out a token twice.
 */

export interface BudgetLease {
  /** Whole tokens granted (0 when the bucket is empty). */
  granted: number;
  /** Tokens left in the bucket after the lease. */
  left: number;
}

export class PgIngressBudget {
  constructor(private readonly pool: pg.Pool) {}

  async lease(want: number, capacity: number, perSecond: number): Promise<BudgetLease> {
    const res = await this.pool.query<{ granted: number; left: number }>(
      `WITH cur AS (
         SELECT LEAST($1::float8, tokens + $2::float8 * EXTRACT(EPOCH FROM (clock_timestamp() - updated_at))) AS avail
         FROM ratchet.ingress_budget WHERE id = 1 FOR UPDATE
       ), g AS (
         SELECT avail, LEAST($3::float8, GREATEST(0, floor(avail))) AS granted FROM cur
       )
       UPDATE ratchet.ingress_budget b SET tokens = g.avail - g.granted, updated_at = clock_timestamp()
       FROM g WHERE b.id = 1
       RETURNING g.granted::float8 AS granted, (g.avail - g.granted)::float8 AS left`,
      [capacity, perSecond, want],
    );
    const row = res.rows[0];
    if (row !== undefined) return { granted: Number(row.granted), left: Number(row.left) };
    // First lease of the cluster: the bucket starts full.
    await this.pool.query(
      `INSERT INTO ratchet.ingress_budget (id, tokens, updated_at) VALUES (1, $1, clock_timestamp())
       ON CONFLICT (id) DO NOTHING`,
      [capacity],
    );
    return this.lease(want, capacity, perSecond);
  }

  /** The secret that proves a request was forwarded by a node of this cluster. */
  async forwardingSecret(): Promise<string> {
    const res = await this.pool.query<{ value: string }>(
      `SELECT value FROM ratchet.meta WHERE key = 'forwarding_secret'`,
    );
    const value = res.rows[0]?.value;
    if (value === undefined) throw new Error('ratchet.meta has no forwarding_secret (storage not migrated)');
    return value;
  }
}
