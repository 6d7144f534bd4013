import type pg from 'pg';
import type { Stmt } from './sql.ts';
import { FencingError, LEASE_LOST, type Fencing } from './group-commit.ts';
import { partitionFor } from '../../ids/partition-key.ts';

export { partitionFor };

export interface LeaseOptions {
  node: string;
  partitions: number;
  ttlMs: number;
}

/** One partition's lease as the table holds it (for placement decisions and cluster health). */
export interface LeaseRow {
  partition: number;
  owner: string | null;
  epoch: string;
  /** False when the lease ran out (or was released): the partition may be taken. */
  live: boolean;
}

/**
 * Partition leases. A process owns a partition while its lease row names it with the epoch it acquired; every write
 * transaction re-reads those rows FOR SHARE (see `guard`), and a takeover UPDATE bumps the epoch, so a process that
 * lost a lease can never commit into that partition again. Expiry is judged by the database's clock only.
 *
 * A partition can also be dropped locally (`forget`): from then on this process refuses its writes before sending
 * them, while the row still names it, so no other process takes the partition before it is released or re-taken.
 */
export class PartitionLeases implements Fencing {
  private readonly epochs = new Map<number, string>();
  /** Partitions forgotten locally whose rows still name this process, with the epoch they were held at. */
  private readonly dormant = new Map<number, string>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: LeaseOptions,
  ) {}

  get node(): string {
    return this.options.node;
  }

  owned(): number[] {
    return [...this.epochs.keys()];
  }

  holds(partition: number): boolean {
    return this.epochs.has(partition);
  }

  epochOf(partition: number): string | undefined {
    return this.epochs.get(partition);
  }

  /** Creates the partition rows on first start (idempotent). */
  async ensureRows(): Promise<void> {
    await this.pool.query(
      `INSERT INTO ratchet.partition_lease (partition_id) SELECT g FROM generate_series(0, $1::int - 1) g
       ON CONFLICT DO NOTHING`,
      [this.options.partitions],
    );
  }

  /**
   * Takes every partition that is free, expired, or held by an earlier incarnation of this node (same node name: the
   * previous process is gone, so waiting for expiry would only delay recovery). For a process alone.
   */
  async acquireAll(): Promise<number[]> {
    await this.ensureRows();
    return this.acquire(this.options.partitions, true);
  }

  /**
   * Takes back every partition whose row still names this node: an earlier incarnation of it held them and is gone
   * (a node name belongs to one process at a time), so waiting for their expiry would only delay recovery.
   */
  async reclaim(): Promise<number[]> {
    const res = await this.pool.query<{ partition_id: number; epoch: string }>(
      `UPDATE ratchet.partition_lease SET epoch = epoch + 1, expires_at = now() + ($2::int * interval '1 millisecond')
       WHERE owner = $1 AND NOT (partition_id = ANY($3::int[]))
       RETURNING partition_id, epoch::text`,
      [this.options.node, this.options.ttlMs, [...this.epochs.keys(), ...this.dormant.keys()]],
    );
    for (const r of res.rows) this.epochs.set(r.partition_id, r.epoch);
    return res.rows.map((r) => r.partition_id).sort((a, b) => a - b);
  }

  /**
   * Takes up to `limit` partitions that are free or whose lease ran out (and, with `own`, those whose row still names
   * this node from an earlier incarnation), lowest ids first. Rows another process is taking at the same moment are
   * skipped, never waited for.
   */
  async acquire(limit: number, own: boolean): Promise<number[]> {
    if (limit <= 0) return [];
    const res = await this.pool.query<{ partition_id: number; epoch: string }>(
      `UPDATE ratchet.partition_lease l SET owner = $1, epoch = l.epoch + 1,
         expires_at = now() + ($2::int * interval '1 millisecond')
       WHERE l.partition_id IN (
         SELECT partition_id FROM ratchet.partition_lease
         WHERE (owner IS NULL OR expires_at IS NULL OR expires_at < now() OR ($4::bool AND owner = $1))
           AND NOT (partition_id = ANY($5::int[]))
         ORDER BY partition_id LIMIT $3 FOR UPDATE SKIP LOCKED)
       RETURNING l.partition_id, l.epoch::text`,
      [this.options.node, this.options.ttlMs, limit, own, this.owned()],
    );
    for (const r of res.rows) {
      this.epochs.set(r.partition_id, r.epoch);
      this.dormant.delete(r.partition_id);
    }
    return res.rows.map((r) => r.partition_id).sort((a, b) => a - b);
  }

  /**
   * Stops writing `partitions` at once (their queued writes are refused before they are sent) while their rows keep
   * naming this process: `retake` or `release` follows.
   */
  forget(partitions: Iterable<number>): void {
    for (const p of partitions) {
      const epoch = this.epochs.get(p);
      if (epoch === undefined) continue;
      this.epochs.delete(p);
      this.dormant.set(p, epoch);
    }
  }

  /**
   * Takes a forgotten partition back with a new epoch, so that no write sent before can commit after it (the UPDATE
   * waits for the transactions holding the row FOR SHARE). False when another process owns it now.
   */
  async retake(partition: number): Promise<boolean> {
    const epoch = this.dormant.get(partition);
    if (epoch === undefined) return this.epochs.has(partition);
    const res = await this.pool.query<{ epoch: string }>(
      `UPDATE ratchet.partition_lease SET epoch = epoch + 1, expires_at = now() + ($3::int * interval '1 millisecond')
       WHERE partition_id = $2 AND owner = $1 AND epoch = $4::bigint RETURNING epoch::text`,
      [this.options.node, partition, this.options.ttlMs, epoch],
    );
    this.dormant.delete(partition);
    const row = res.rows[0];
    if (row === undefined) return false;
    this.epochs.set(partition, row.epoch);
    return true;
  }

  /** Extends the leases this process holds (and the rows of forgotten ones); returns the partitions it lost. */
  async renew(): Promise<number[]> {
    const held = [...this.epochs, ...this.dormant];
    if (held.length === 0) return [];
    const res = await this.pool.query<{ partition_id: number }>(
      `UPDATE ratchet.partition_lease l SET expires_at = now() + ($2::int * interval '1 millisecond')
       FROM unnest($3::int[], $4::bigint[]) AS p(id, epoch)
       WHERE l.partition_id = p.id AND l.epoch = p.epoch AND l.owner = $1
       RETURNING l.partition_id`,
      [this.options.node, this.options.ttlMs, held.map(([id]) => id), held.map(([, epoch]) => epoch)],
    );
    const kept = new Set(res.rows.map((r) => r.partition_id));
    const lost: number[] = [];
    for (const [id] of held) {
      if (kept.has(id)) continue;
      if (this.epochs.delete(id)) lost.push(id);
      this.dormant.delete(id);
    }
    return lost;
  }

  /**
   * Gives partitions up: they are forgotten at once, then their rows are freed (waiting for transactions that still
   * hold them FOR SHARE), so another process may take them right away.
   */
  async release(partitions: number[]): Promise<void> {
    this.forget(partitions);
    const rows = partitions.filter((p) => this.dormant.has(p));
    if (rows.length === 0) return;
    await this.pool.query(
      `UPDATE ratchet.partition_lease l SET owner = NULL, expires_at = NULL
       FROM unnest($2::int[], $3::bigint[]) AS p(id, epoch)
       WHERE l.partition_id = p.id AND l.epoch = p.epoch AND l.owner = $1`,
      [this.options.node, rows, rows.map((p) => this.dormant.get(p))],
    );
    for (const p of rows) this.dormant.delete(p);
  }

  async releaseAll(): Promise<void> {
    await this.release([...this.epochs.keys(), ...this.dormant.keys()]);
  }

  /** Every partition's lease (ordered by partition). */
  async list(): Promise<LeaseRow[]> {
    const res = await this.pool.query<{ partition_id: number; owner: string | null; epoch: string; live: boolean }>(
      `SELECT partition_id, owner, epoch::text,
              (owner IS NOT NULL AND expires_at IS NOT NULL AND expires_at >= now()) AS live
       FROM ratchet.partition_lease ORDER BY partition_id`,
    );
    return res.rows.map((r) => ({ partition: r.partition_id, owner: r.owner, epoch: r.epoch, live: r.live }));
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

  /**
   * Runs `work` in a transaction that first takes the same lease guard as the group committer's: it commits only if
   * this process still holds every partition in `partitions` at the epoch it knows, and fails with a FencingError
   * otherwise. For writers that stay off the group committer (the retention cleaner's long batches).
   */
  async fenced<T>(partitions: ReadonlySet<number>, work: (db: pg.ClientBase) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        await this.check(client, partitions);
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((e: unknown) => (broken = e as Error));
        throw err;
      }
    } finally {
      client.release(broken);
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
