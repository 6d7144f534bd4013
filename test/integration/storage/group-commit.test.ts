import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stmt, WriteOp } from '../../../runtime/src/storage/api.ts';
import { GroupCommitter } from '../../../runtime/src/storage/pg/group-commit.ts';
import { PartitionLeases } from '../../../runtime/src/storage/pg/leases.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * A commit goes to PostgreSQL as one message (BEGIN, lease guard, PREPARE/EXECUTE of named statements, COMMIT): a
 * write that fails must fail alone, statements that depend on earlier results must see them, and a failure must not
 * leave a pooled connection whose prepared statements the committer no longer knows.
 */
describe('group commit', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let committer: GroupCommitter;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, max: 2, applicationName: 'group-commit-test' });
    const client = await pool.connect();
    try {
      await migrate(client);
    } finally {
      client.release();
    }
    const leases = new PartitionLeases(pool, { node: 'node-gc', partitions: 4, ttlMs: 60_000 });
    await leases.acquireAll();
    committer = new GroupCommitter(pool, leases, { maxBatch: 64, maxDelayMs: 0 });
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const put = (key: string, value: string): Stmt => ({
    name: 'test_meta_put',
    text: `INSERT INTO ratchet.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
    values: [`gc-test-${key}`, value],
  });
  const op = (...stmts: Stmt[]): WriteOp => ({ partitions: [1], stmts, journal: [] });
  const read = async (key: string): Promise<string | undefined> =>
    (await pool.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = $1`, [`gc-test-${key}`])).rows[0]
      ?.value;

  it('fails only the bad write of a batch and keeps committing on the same statements afterwards', async () => {
    const bad: Stmt = {
      name: 'test_bad',
      text: `INSERT INTO ratchet.meta (key, value) VALUES (NULL, $1)`,
      values: ['x'],
    };
    for (let round = 0; round < 3; round++) {
      const results = await Promise.allSettled([
        committer.submit(op(put(`a${round}`, `it's "a" \\ ${round}`))),
        committer.submit(op(bad)),
        // Its statement is first prepared in the message that fails before reaching it.
        committer.submit(op({ ...put(`b${round}`, 'b'), name: 'test_meta_put_late' })),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(await read(`a${round}`)).toBe(`it's "a" \\ ${round}`);
      expect(await read(`b${round}`)).toBe('b');
    }
    await committer.submit(op(put('after', 'ok')));
    expect(await read('after')).toBe('ok');
  });

  it('runs a statement that depends on an earlier result of the same transaction after that result', async () => {
    let found: string | undefined;
    const get: Stmt = {
      name: 'test_meta_get',
      text: `SELECT value FROM ratchet.meta WHERE key = $1`,
      values: ['gc-test-dep'],
      onResult: (rows) => (found = rows[0]?.value as string | undefined),
    };
    await committer.submit(
      op(
        put('dep', 'first'),
        get,
        { ...put('dep-seen', 'yes'), when: () => found === 'first' },
        { ...put('dep-not-seen', 'no'), when: () => found !== 'first' },
      ),
    );
    expect(await read('dep-seen')).toBe('yes');
    expect(await read('dep-not-seen')).toBeUndefined();
  });
});
