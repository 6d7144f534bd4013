import type pg from 'pg';
import type { Stmt } from '../api.ts';
import { FencingError, LEASE_LOST, type Fencing } from './group-commit.ts';

export interface LeaseOptions {
  node: string;
  partitions: number;
  ttlMs: number;
}

/**
 * Partition leases. A process owns a partition while its lease row names it with the epoch it acquired; every write
 * transaction re-reads those rows FOR SHARE (see `check`), and a takeover UPDATE bumps the epoch, so a process that
 * lost a lease can never commit into that partition again.
 */
export class PartitionLeases implements Fencing {
  private readonly epochs = new Map<number, string>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: LeaseOptions,
  ) {}

  owned(): number[] {
    return [...this.epochs.keys()];
  }

  /**
   * Creates the partition rows on first start and takes every partition that is free, expired, or held by an
   * earlier incarnation of this node (same node name: the previous process is gone, so waiting for expiry would
   * only delay recovery).
   */
  async acquireAll(): Promise<number[]> {
    await this.pool.query(
      `INSERT INTO ratchet.partition_lease (partition_id) SELECT g FROM generate_series(0, $1::int - 1) g
       ON CONFLICT DO NOTHING`,
      [this.options.partitions],
    );
    const res = await this.pool.query<{ partition_id: number; epoch: string }>(
      `UPDATE ratchet.partition_lease SET owner = $1, epoch = epoch + 1,
         expires_at = now() + ($2::int * interval '1 millisecond')
       WHERE owner IS NULL OR owner = $1 OR expires_at < now()
       RETURNING partition_id, epoch::text`,
      [this.options.node, this.options.ttlMs],
    );
    for (const r of res.rows) this.epochs.set(r.partition_id, r.epoch);
    return res.rows.map((r) => r.partition_id);
  }

  /** Extends the leases this process holds; returns the partitions it lost. */
  async renew(): Promise<number[]> {
    if (this.epochs.size === 0) return [];
    const ids = [...this.epochs.keys()];
    const res = await this.pool.query<{ partition_id: number }>(
      `UPDATE ratchet.partition_lease l SET expires_at = now() + ($2::int * interval '1 millisecond')
       FROM unnest($3::int[], $4::bigint[]) AS p(id, epoch)
       WHERE l.partition_id = p.id AND l.epoch = p.epoch AND l.owner = $1
       RETURNING l.partition_id`,
      [this.options.node, this.options.ttlMs, ids, ids.map((id) => this.epochs.get(id))],
    );
    const kept = new Set(res.rows.map((r) => r.partition_id));
    const lost = ids.filter((id) => !kept.has(id));
    for (const id of lost) this.epochs.delete(id);
    return lost;
  }

  async releaseAll(): Promise<void> {
    if (this.epochs.size === 0) return;
    const ids = [...this.epochs.keys()];
    await this.pool.query(
      `UPDATE ratchet.partition_lease SET owner = NULL, expires_at = NULL WHERE owner = $1 AND partition_id = ANY($2::int[])`,
      [this.options.node, ids],
    );
    this.epochs.clear();
  }

  guard(partitions: ReadonlySet<number>): Stmt {
    const { ids, epochs } = this.held(partitions);
    // The CASE is not constant, so the cast of the message fails only at run time, and only when a lease is lost.
    return {
      name: 'lease_guard',
      text: `SELECT (CASE WHEN count(*) = $4::int THEN '0' ELSE $5::text END)::int AS fence FROM (
               SELECT l.partition_id FROM ratchet.partition_lease l
               JOIN unnest($2::int[], $3::bigint[]) AS p(id, epoch) ON l.partition_id = p.id AND l.epoch = p.epoch
               WHERE l.owner = $1 FOR SHARE OF l) held`,
      values: [this.options.node, ids, epochs, ids.length, LEASE_LOST],
    };
  }

  async check(client: pg.ClientBase, partitions: ReadonlySet<number>): Promise<void> {
    const { ids, epochs } = this.held(partitions);
    const res = await client.query<{ partition_id: number }>({
      name: 'lease_fence',
      text: `SELECT l.partition_id FROM ratchet.partition_lease l
             JOIN unnest($2::int[], $3::bigint[]) AS p(id, epoch) ON l.partition_id = p.id AND l.epoch = p.epoch
             WHERE l.owner = $1 FOR SHARE OF l`,
      values: [this.options.node, ids, epochs],
    });
    if (res.rows.length !== ids.length) {
      const held = new Set(res.rows.map((r) => r.partition_id));
      throw new FencingError(ids.filter((id) => !held.has(id)));
    }
  }

  /** The partitions with the epochs this process holds them at (null: not held). */
  private held(partitions: ReadonlySet<number>): { ids: number[]; epochs: (string | null)[] } {
    const ids: number[] = [];
    const epochs: (string | null)[] = [];
    for (const p of partitions) {
      ids.push(p);
      epochs.push(this.epochs.get(p) ?? null);
    }
    return { ids, epochs };
  }
}

/** Restate splits the u64 partition-key space into equal ranges, one per partition. */
export function partitionFor(partitionKey: bigint, partitions: number): number {
  return Number((partitionKey * BigInt(partitions)) >> 64n);
}
