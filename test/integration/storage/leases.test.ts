import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencingError, GroupCommitter } from '../../../runtime/src/storage/pg/group-commit.ts';
import { PartitionLeases, partitionFor } from '../../../runtime/src/storage/pg/leases.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { RetentionCleaner } from '../../../runtime/src/storage/pg/retention-cleaner.ts';
import { pino } from 'pino';

/**
 * Several runtime processes can share one database: a partition has one owner at a time, and a process that lost
 * its lease can never commit into that partition again (fencing), even if it does not know yet that it lost it.
 */
describe('partition leases and fencing', () => {
  let db: TestDatabase;
  let pool: pg.Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, max: 4, applicationName: 'leases-test' });
    const client = await pool.connect();
    try {
      await migrate(client);
    } finally {
      client.release();
    }
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const write = (partition: number, value: string) => ({
    partitions: [partition],
    stmts: [
      {
        text: `INSERT INTO ratchet.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
        values: [`fencing-test-${partition}`, value],
      },
    ],
    journal: [],
  });
  const read = async (partition: number): Promise<string | undefined> =>
    (
      await pool.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = $1`, [
        `fencing-test-${partition}`,
      ])
    ).rows[0]?.value;

  it('gives each partition to one owner, fences the old owner after a takeover, and lets a restarted node back in', async () => {
    const a = new PartitionLeases(pool, { node: 'node-a', partitions: 4, ttlMs: 60_000 });
    const b = new PartitionLeases(pool, { node: 'node-b', partitions: 4, ttlMs: 60_000 });
    expect((await a.acquireAll()).sort()).toEqual([0, 1, 2, 3]);
    expect(await b.acquireAll()).toEqual([]);

    const committerA = new GroupCommitter(pool, a, { maxBatch: 16, maxDelayMs: 0, concurrency: 2 });
    const committerB = new GroupCommitter(pool, b, { maxBatch: 16, maxDelayMs: 0, concurrency: 2 });
    await committerA.submit(write(1, 'a1'));
    expect(await read(1)).toBe('a1');
    // B owns nothing yet: its writes are refused.
    await expect(committerB.submit(write(1, 'b1'))).rejects.toBeInstanceOf(FencingError);

    // A stalls (no renewals) until its leases expire; B takes over with higher epochs.
    await pool.query(`UPDATE ratchet.partition_lease SET expires_at = now() - interval '1 second'`);
    expect((await b.acquireAll()).sort()).toEqual([0, 1, 2, 3]);
    await committerB.submit(write(1, 'b1'));
    // A wakes up and tries to write: fenced, and its renewal reports the loss.
    await expect(committerA.submit(write(1, 'a2'))).rejects.toBeInstanceOf(FencingError);
    expect(await read(1)).toBe('b1');
    expect((await a.renew()).sort()).toEqual([0, 1, 2, 3]);
    expect(await b.renew()).toEqual([]);

    // B is restarted (same node name, new process): it reclaims its partitions at once, and the old incarnation's
    // epochs are fenced.
    const b2 = new PartitionLeases(pool, { node: 'node-b', partitions: 4, ttlMs: 60_000 });
    expect((await b2.acquireAll()).sort()).toEqual([0, 1, 2, 3]);
    await expect(committerB.submit(write(2, 'stale'))).rejects.toBeInstanceOf(FencingError);
    const committerB2 = new GroupCommitter(pool, b2, { maxBatch: 16, maxDelayMs: 0, concurrency: 2 });
    await committerB2.submit(write(2, 'b2'));
    expect(await read(2)).toBe('b2');

    await b2.releaseAll();
    const free = await pool.query(`SELECT count(*)::int AS n FROM ratchet.partition_lease WHERE owner IS NULL`);
    expect(free.rows[0]).toEqual({ n: 4 });
  });

  it('maps the u64 partition-key space onto equal ranges', () => {
    expect(partitionFor(0n, 64)).toBe(0);
    expect(partitionFor((1n << 64n) - 1n, 64)).toBe(63);
    expect(partitionFor(1n << 63n, 64)).toBe(32);
  });

  it('commits a batch of writes atomically: one failing write does not take its neighbours down', async () => {
    const leases = new PartitionLeases(pool, { node: 'node-c', partitions: 4, ttlMs: 60_000 });
    await pool.query(`UPDATE ratchet.partition_lease SET owner = NULL, expires_at = NULL`);
    await leases.acquireAll();
    const committer = new GroupCommitter(pool, leases, { maxBatch: 16, maxDelayMs: 5, concurrency: 2 });
    const bad = { partitions: [0], stmts: [{ text: 'SELECT 1/0', values: [] }], journal: [] };
    const results = await Promise.allSettled([
      committer.submit(write(0, 'x0')),
      committer.submit(bad),
      committer.submit(write(3, 'x3')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await read(0)).toBe('x0');
    expect(await read(3)).toBe('x3');
  });

  it('fences the retention cleaner: a process that lost a partition removes nothing of it', async () => {
    await pool.query(`UPDATE ratchet.partition_lease SET owner = NULL, expires_at = NULL`);
    const expired = async (id: string, partition: number): Promise<void> => {
      await pool.query(
        `INSERT INTO ratchet.invocation (id, partition_key, partition_id, service_name, handler_name, service_ty, status,
           invoked_by, random_seed, created_at, modified_at, completed_at, expires_at)
         VALUES ($1, 0, $2, 'Greeter', 'greet', 'Service', 'completed', 'ingress', 0, now(), now(), now(),
                 now() - interval '1 second')`,
        [id, partition],
      );
    };
    const exists = async (id: string): Promise<boolean> =>
      (await pool.query(`SELECT 1 FROM ratchet.invocation WHERE id = $1`, [id])).rowCount === 1;
    const stale = new PartitionLeases(pool, { node: 'node-stale', partitions: 4, ttlMs: 60_000 });
    expect((await stale.acquireAll()).sort()).toEqual([0, 1, 2, 3]);
    await expired('inv_retention_fenced', 1);
    // Another node takes every partition over while the stale one still believes it owns them.
    await pool.query(`UPDATE ratchet.partition_lease SET expires_at = now() - interval '1 second'`);
    const owner = new PartitionLeases(pool, { node: 'node-owner', partitions: 4, ttlMs: 60_000 });
    expect((await owner.acquireAll()).sort()).toEqual([0, 1, 2, 3]);
    const logger = pino({ level: 'silent' });
    const staleCleaner = new RetentionCleaner(stale, logger, { intervalMs: 60_000, batchSize: 10 });
    await expect(staleCleaner.runOnce()).rejects.toBeInstanceOf(FencingError);
    expect(await exists('inv_retention_fenced')).toBe(true);
    const ownerCleaner = new RetentionCleaner(owner, logger, { intervalMs: 60_000, batchSize: 10 });
    expect(await ownerCleaner.runOnce()).toEqual({ invocations: 1, journals: 0 });
    expect(await exists('inv_retention_fenced')).toBe(false);
    await owner.releaseAll();
  });
});
