import type pg from 'pg';
import { CHUNK_WINDOW_NS, chunkWindow } from '../../../observability/chunks.ts';
import { inTransaction } from '../pool.ts';

/**
 * The time partitions of the observability tables (`ratchet.log_chunk` and `ratchet.span_chunk`, both by `start_ns`):
 * one table per fixed window, created before a writer inserts into it and dropped as a whole once it is past the
 * retention or the tables are over their size bound (dropping a partition is instant and leaves no bloat, unlike
 * DELETE). A chunk never spans two windows (the writers split them). Every node runs this; an advisory lock per table
 * serialises the DDL of concurrent nodes.
 */

/**
 * Six hours (the writer's chunks never cross one): 28 partitions per table for the default 7 days, and a size bound
 * kept to within a quarter day.
 */
export const WINDOW_NS = CHUNK_WINDOW_NS;

export type ObservabilityTable = 'log_chunk' | 'span_chunk';

const LOCK_KEYS: Record<ObservabilityTable, string> = {
  log_chunk: '7308432957233170101',
  span_chunk: '7308432957233170102',
};

export const windowStart = chunkWindow;

function partitionName(table: ObservabilityTable, start: bigint): string {
  // Window starts are multiples of WINDOW_NS: the window number names the partition.
  return `${table}_w${start / WINDOW_NS}`;
}

export interface PartitionInfo {
  readonly name: string;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly bytes: number;
}

export class Partitions {
  /** Window starts known to exist, per table (a cache: a missing entry costs one idempotent statement). */
  private readonly known: Record<ObservabilityTable, Set<bigint>> = { log_chunk: new Set(), span_chunk: new Set() };

  constructor(private readonly pool: pg.Pool) {}

  /** Makes sure the partitions holding these times exist. */
  async ensure(table: ObservabilityTable, times: Iterable<bigint>): Promise<void> {
    const missing = new Set<bigint>();
    for (const t of times) {
      const start = windowStart(t);
      if (!this.known[table].has(start)) missing.add(start);
    }
    if (missing.size === 0) return;
    await inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [LOCK_KEYS[table]]);
      for (const start of missing) {
        await client.query(
          `CREATE TABLE IF NOT EXISTS ratchet.${partitionName(table, start)} PARTITION OF ratchet.${table}
         FOR VALUES FROM (${start}) TO (${start + WINDOW_NS})`,
        );
      }
    });
    for (const start of missing) this.known[table].add(start);
  }

  /** The partitions of `table`, oldest first, with their sizes on disk. */
  async list(table: ObservabilityTable): Promise<PartitionInfo[]> {
    const { rows } = await this.pool.query<{ name: string; bytes: string }>(
      `SELECT c.relname AS name, pg_total_relation_size(c.oid)::text AS bytes
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = $1::regclass`,
      [`ratchet.${table}`],
    );
    const prefix = `${table}_w`;
    return rows
      .filter((r) => r.name.startsWith(prefix) && /^\d+$/.test(r.name.slice(prefix.length)))
      .map((r) => {
        const startNs = BigInt(r.name.slice(prefix.length)) * WINDOW_NS;
        return { name: r.name, startNs, endNs: startNs + WINDOW_NS, bytes: Number(r.bytes) };
      })
      .sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
  }

  /**
   * Drops the partitions whose window ended before `olderThanNs`, then the oldest ones while the table is over
   * `maxBytes` (never the newest one: what is being written now). Returns the names dropped.
   */
  async enforce(table: ObservabilityTable, olderThanNs: bigint, maxBytes: number): Promise<string[]> {
    const parts = await this.list(table);
    const drop: PartitionInfo[] = [];
    let total = parts.reduce((s, p) => s + p.bytes, 0);
    for (const [i, p] of parts.entries()) {
      if (i === parts.length - 1) break;
      if (p.endNs <= olderThanNs || total > maxBytes) {
        drop.push(p);
        total -= p.bytes;
      }
    }
    if (drop.length === 0) return [];
    await inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [LOCK_KEYS[table]]);
      for (const p of drop) await client.query(`DROP TABLE IF EXISTS ratchet.${p.name}`);
    });
    for (const p of drop) this.known[table].delete(p.startNs);
    return drop.map((p) => p.name);
  }
}
