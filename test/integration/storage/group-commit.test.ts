import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stmt, WriteOp } from '../../../runtime/src/storage/pg/sql.ts';
import { GroupCommitter } from '../../../runtime/src/storage/pg/group-commit.ts';
import { PartitionLeases } from '../../../runtime/src/storage/pg/leases.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * A commit goes to PostgreSQL as one pipeline (lease guard and statements, one Sync; see pipeline.ts): a write that
 * fails must fail alone, statements that depend on earlier results must see them, and a failure must not
 * leave a pooled connection whose prepared statements the committer no longer knows. Transactions overlap (two in
 * flight here) only for writes whose ordering keys are disjoint; a write without keys is a barrier.
 */
describe('group commit', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let committer: GroupCommitter;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, max: 4, applicationName: 'group-commit-test' });
    const client = await pool.connect();
    try {
      await migrate(client);
    } finally {
      client.release();
    }
    const leases = new PartitionLeases(pool, { node: 'node-gc', partitions: 4, ttlMs: 60_000 });
    await leases.acquireAll();
    committer = new GroupCommitter(pool, leases, { maxBatch: 64, maxDelayMs: 0, concurrency: 2 });
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

  /** A statement that keeps its transaction open for `seconds`. */
  const sleep = (seconds: number): Stmt => ({ text: `SELECT pg_sleep(${seconds})`, values: [] });
  /** Inserts `key` with the value `key2` has as seen by this transaction ('missing' if it cannot see it). */
  const copy = (key: string, from: string): Stmt => ({
    name: 'test_meta_copy',
    text: `INSERT INTO ratchet.meta (key, value)
           SELECT $1, coalesce((SELECT value FROM ratchet.meta WHERE key = $2), 'missing')`,
    values: [`gc-test-${key}`, `gc-test-${from}`],
  });
  const keyed = (keys: string[] | undefined, ...stmts: Stmt[]): WriteOp => {
    const o = op(...stmts);
    if (keys !== undefined) o.keys = keys;
    return o;
  };
  /**
   * Submits the writes in order, 50 ms apart (so that each finds the ones before it in flight rather than joining
   * their batch), and returns the order in which their promises settled.
   */
  const settleOrder = async (ops: WriteOp[]): Promise<{ order: number[]; results: PromiseSettledResult<void>[] }> => {
    const order: number[] = [];
    const pending: Promise<void>[] = [];
    for (const [i, o] of ops.entries()) {
      if (i > 0) await new Promise((r) => setTimeout(r, 50));
      pending.push(
        committer.submit(o).finally(() => {
          order.push(i);
        }),
      );
    }
    return { order, results: await Promise.allSettled(pending) };
  };

  it('commits writes with disjoint ordering keys in overlapping transactions', async () => {
    const { order } = await settleOrder([
      keyed(['slow'], sleep(0.4), put('overlap-slow', 'done')),
      keyed(['fast'], put('overlap-fast', 'done')),
    ]);
    // The second did not wait for the first transaction.
    expect(order).toEqual([1, 0]);
    expect(await read('overlap-slow')).toBe('done');
    expect(await read('overlap-fast')).toBe('done');
  });

  it('never lets a write overtake an earlier write that shares one of its keys', async () => {
    const { order } = await settleOrder([
      keyed(['x'], sleep(0.3), put('same-first', 'v1')),
      keyed(['y'], put('same-other', 'v2')),
      // Shares 'x' with the first: runs after it committed, so it sees its write.
      keyed(['y', 'x'], copy('same-second', 'same-first')),
    ]);
    expect(order).toEqual([1, 0, 2]);
    expect(await read('same-second')).toBe('v1');
  });

  it('orders a write without keys after everything before it and before everything after it', async () => {
    const { order } = await settleOrder([
      keyed(['a'], sleep(0.3), put('barrier-before', 'b0')),
      keyed(undefined, copy('barrier', 'barrier-before')),
      keyed(['c'], copy('barrier-after', 'barrier')),
    ]);
    expect(order).toEqual([0, 1, 2]);
    expect(await read('barrier')).toBe('b0');
    expect(await read('barrier-after')).toBe('b0');
  });

  it('holds back the later writes of a key until an earlier transaction of it failed', async () => {
    const bad: Stmt = { text: `INSERT INTO ratchet.meta (key, value) VALUES (NULL, 'x')`, values: [] };
    const { order, results } = await settleOrder([
      keyed(['f'], sleep(0.3), bad),
      keyed(['f'], copy('after-failure', 'after-failure-missing')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(order).toEqual([0, 1]);
    expect(await read('after-failure')).toBe('missing');
  });

  it('reports an unknown outcome, and retries nothing, when the connection dies during the commit', async () => {
    // The backend running the commit is terminated while the transaction runs (its pg_sleep): the outcome of a
    // commit whose connection failed is unknown in general, so neither write may be reported committed or retried
    // alone (a retry could apply a write twice).
    const killer = setInterval(() => {
      void pool
        .query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE pid <> pg_backend_pid() AND datname = current_database() AND state = 'active'
             AND query LIKE '%pg_sleep(0.4)%' AND query NOT LIKE '%pg_stat_activity%'`,
        )
        .catch(() => undefined);
    }, 50);
    try {
      const results = await Promise.allSettled([
        committer.submit(op(put('unknown-a', 'a'), { text: 'SELECT pg_sleep(0.4)', values: [] })),
        committer.submit(op(put('unknown-b', 'b'))),
      ]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      for (const r of results) {
        expect((r as PromiseRejectedResult).reason).toMatchObject({ name: 'CommitOutcomeUnknownError' });
      }
    } finally {
      clearInterval(killer);
    }
    // Terminated before its commit, so here nothing of it is durable; and the committer goes on with a new connection.
    expect(await read('unknown-a')).toBeUndefined();
    expect(await read('unknown-b')).toBeUndefined();
    await committer.submit(op(put('after-unknown', 'ok')));
    expect(await read('after-unknown')).toBe('ok');
  });
  describe('splitting the writes gathered at once over idle connections', () => {
    /** A committer splitting from `splitMin` writes per transaction; `sizes` records each transaction's writes. */
    const splitting = async (splitMin: number): Promise<{ c: GroupCommitter; sizes: number[] }> => {
      const leases = new PartitionLeases(pool, { node: 'node-gc', partitions: 4, ttlMs: 60_000 });
      await leases.acquireAll();
      const sizes: number[] = [];
      const c = new GroupCommitter(pool, leases, {
        maxBatch: 64,
        maxDelayMs: 0,
        concurrency: 2,
        splitMin,
        onCommit: (writes) => sizes.push(writes),
      });
      return { c, sizes };
    };
    /** Submits the writes in one turn of the event loop and returns the order in which they settled. */
    const atOnce = async (c: GroupCommitter, ops: WriteOp[]): Promise<number[]> => {
      const order: number[] = [];
      await Promise.all(ops.map((o, i) => c.submit(o).finally(() => order.push(i))));
      return order;
    };

    it('commits disjoint halves side by side: the fast half does not wait for the slow one', async () => {
      const { c, sizes } = await splitting(2);
      const order = await atOnce(c, [
        keyed(['s1'], sleep(0.3), put('split-s1', '1')),
        keyed(['s2'], put('split-s2', '2')),
        keyed(['s3'], put('split-s3', '3')),
        keyed(['s4'], put('split-s4', '4')),
      ]);
      expect(sizes).toEqual([2, 2]);
      expect(order.slice(0, 2).sort()).toEqual([2, 3]);
      for (const k of ['s1', 's2', 's3', 's4']) expect(await read(`split-${k}`)).toBe(k.slice(1));
    });

    it('keeps the writes of one key in one transaction, in submission order', async () => {
      const { c, sizes } = await splitting(2);
      await atOnce(c, [
        keyed(['k1'], sleep(0.2), put('split-k1', 'first')),
        keyed(['k2'], put('split-k2', 'x')),
        keyed(['k3'], put('split-k3', 'y')),
        // Shares k1 with the first: same transaction, after it, so it reads its value.
        keyed(['k1'], copy('split-k1-copy', 'split-k1')),
      ]);
      expect(sizes.sort()).toEqual([1, 3]);
      expect(await read('split-k1-copy')).toBe('first');
    });

    it('keeps a batch whole below twice the minimum, and always when splitting is off', async () => {
      const few = await splitting(4);
      await atOnce(
        few.c,
        ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((k) => keyed([`f-${k}`], put(`few-${k}`, k))),
      );
      expect(few.sizes).toEqual([7]);
      const off = await splitting(0);
      await atOnce(
        off.c,
        ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((k) => keyed([`o-${k}`], put(`off-${k}`, k))),
      );
      expect(off.sizes).toEqual([8]);
    });

    it('keeps a batch whole when one write joins keys already in two parts', async () => {
      const { c, sizes } = await splitting(1);
      await atOnce(c, [
        keyed(['j1'], put('join-1', '1')),
        keyed(['j2'], put('join-2', '2')),
        keyed(['j1', 'j2'], copy('join-both', 'join-1')),
      ]);
      expect(sizes).toEqual([3]);
      expect(await read('join-both')).toBe('1');
    });
  });
});
