import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { connectClient, prepareIntrospection, sqlState, startListener } from './support.ts';

/**
 * Functions every PostgreSQL role may run by default, which an introspection session could use against the runtime
 * even in a read-only transaction: the runtime's advisory locks, its notification channel, large objects. They are
 * taken from PUBLIC in Ratchet's database (the runtime's user keeps them).
 */
let db: TestDatabase;
let superuser: pg.Pool;
let listener: PgWireListener;

beforeAll(async () => {
  db = await createTestDatabase();
  superuser = new pg.Pool({ connectionString: db.url, max: 2 });
  const client = await superuser.connect();
  try {
    await migrate(client);
  } finally {
    client.release();
  }
  listener = await startListener(await prepareIntrospection(db.url));
});

afterAll(async () => {
  await listener?.stop();
  await superuser?.end();
  await db?.drop();
});

describe('functions an introspection session may not run', () => {
  it.each([
    ['an advisory lock', 'SELECT pg_advisory_lock(7308432957233170001)'],
    ['a transaction advisory lock', 'SELECT pg_advisory_xact_lock(1)'],
    ['a try-lock', 'SELECT pg_try_advisory_lock(1, 2)'],
    ['a notification', `SELECT pg_notify('ratchet_schema', 'x')`],
    ['a large object', `SELECT lo_from_bytea(0, 'x'::bytea)`],
  ])('refuses %s with 42501, even with read-only transactions turned off', async (_what, sql) => {
    const client = await connectClient(listener);
    try {
      await client.query('SET default_transaction_read_only = off');
      expect(await sqlState(client.query(sql))).toBe('42501');
      // The session stays usable.
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('leaves them to the runtime user', async () => {
    const res = await superuser.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(42) AS ok');
    expect(res.rows).toEqual([{ ok: true }]);
  });
});
