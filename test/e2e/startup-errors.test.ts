import { createServer, type Server } from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { STORAGE_FORMAT_VERSION, migrate } from '../../runtime/src/storage/pg/migrate.ts';
import { freePort, LOOPBACK } from '../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { START_TIMEOUT_MS, spawnRuntime, stopAllRuntimes, type RuntimeChild } from './support/runtime-child.ts';

/**
 * A runtime that cannot start says why, with the error code and what to fix, and exits 1 — instead of serving
 * half-broken or dumping a stack trace.
 */

const databases: TestDatabase[] = [];

afterEach(async () => {
  await stopAllRuntimes();
});

afterAll(async () => {
  await stopAllRuntimes();
  for (const db of databases) await db.drop();
});

async function database(): Promise<TestDatabase> {
  const db = await createTestDatabase();
  databases.push(db);
  return db;
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The `msg` of the runtime's fatal log line (JSON lines on stdout). */
function fatalMessage(runtime: RuntimeChild): string | undefined {
  for (const line of runtime.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { level?: string; msg?: string };
    if (entry.level === 'fatal') return entry.msg;
  }
  return undefined;
}

async function failedStart(env: Record<string, string>): Promise<RuntimeChild> {
  const runtime = await spawnRuntime({ env });
  expect(await runtime.exit(START_TIMEOUT_MS)).toEqual({ code: 1, signal: null });
  return runtime;
}

describe('startup errors', () => {
  it('names the variable of a bad configuration value (RT0002)', async () => {
    const db = await database();
    const runtime = await failedStart({ RATCHET_DATABASE_URL: db.url, RATCHET_ADMIN_BIND: 'nonsense' });
    expect(fatalMessage(runtime)).toMatch(/^\[RT0002\] invalid value for RATCHET_ADMIN_BIND: .*nonsense/);
  });

  it('names the listener and address of a port in use (RT0004)', async () => {
    const db = await database();
    const port = await freePort();
    const holder: Server = createServer();
    await new Promise<void>((resolve, reject) => {
      holder.once('error', reject);
      holder.listen({ host: LOOPBACK, port, exclusive: true }, resolve);
    });
    try {
      const runtime = await failedStart({ RATCHET_DATABASE_URL: db.url, RATCHET_INGRESS_BIND: `${LOOPBACK}:${port}` });
      expect(fatalMessage(runtime)).toMatch(
        new RegExp(`^\\[RT0004\\] cannot bind the ingress listener to ${LOOPBACK}:${port}: .*EADDRINUSE`),
      );
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  });

  it('refuses a database written by a newer storage format (META0010)', async () => {
    const db = await database();
    await withClient(db.url, async (client) => {
      await migrate(client);
      await client.query(`UPDATE ratchet.meta SET value = '999' WHERE key = 'storage_format_version'`);
    });
    const runtime = await failedStart({ RATCHET_DATABASE_URL: db.url });
    expect(fatalMessage(runtime)).toMatch(
      new RegExp(`^\\[META0010\\] .*storage format 999.*reads formats up to ${STORAGE_FORMAT_VERSION}\\b`),
    );
    // Nothing was changed on the way out.
    const version = await withClient(db.url, (client) =>
      client.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = 'storage_format_version'`),
    );
    expect(version.rows).toEqual([{ value: '999' }]);
  });

  it('refuses a non-empty ratchet schema without a storage version (META0011, RT0009)', async () => {
    const db = await database();
    await withClient(db.url, async (client) => {
      await client.query('CREATE SCHEMA ratchet');
      await client.query('CREATE TABLE ratchet.something_else (x int)');
    });
    const runtime = await failedStart({ RATCHET_DATABASE_URL: db.url });
    const message = fatalMessage(runtime);
    expect(message).toMatch(/^\[META0011\] .*non-empty `ratchet` schema without a storage format version/);
    expect(message).toContain('RT0009');
    const tables = await withClient(db.url, (client) =>
      client.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'ratchet'`),
    );
    expect(tables.rows).toEqual([{ name: 'something_else' }]);
  });

  it('refuses invocation storage without a storage version on its own (RT0009)', async () => {
    const db = await database();
    await withClient(db.url, async (client) => {
      await migrate(client);
      // The version row is gone, the invocation tables are there.
      await client.query(`DELETE FROM ratchet.meta WHERE key = 'storage_format_version'`);
    });
    const runtime = await failedStart({ RATCHET_DATABASE_URL: db.url });
    expect(fatalMessage(runtime)).toMatch(
      /^\[RT0009\] the invocation storage \(ratchet\.invocation, journals, state\) has no storage format version/,
    );
  });

  it('refuses damaged metadata at startup, naming the row (META0005)', async () => {
    const db = await database();
    await withClient(db.url, async (client) => {
      await migrate(client);
      await client.query(
        `INSERT INTO ratchet.deployment (id, uri, protocol_type, min_protocol_version, max_protocol_version, manifest,
           services, created_at)
         VALUES ('dp_damaged', 'http://127.0.0.1:1/', 'BidiStream', 5, 7, '{}', '"not a list"', now())`,
      );
    });
    const runtime = await failedStart({ RATCHET_DATABASE_URL: db.url });
    expect(fatalMessage(runtime)).toMatch(
      /^\[META0005\] the stored metadata cannot be read: deployment dp_damaged \(ratchet\.deployment\): services is "not a list"/,
    );
  });

  it('says which database it cannot reach, without the password', async () => {
    const port = await freePort();
    const runtime = await failedStart({
      RATCHET_DATABASE_URL: `postgres://ratchet:s3cret-pw@${LOOPBACK}:${port}/ratchet`,
    });
    expect(fatalMessage(runtime)).toBe(
      `Ratchet could not start: cannot connect to PostgreSQL at ${LOOPBACK}:${port}/ratchet as ratchet ` +
        `(RATCHET_DATABASE_URL): connect ECONNREFUSED ${LOOPBACK}:${port}`,
    );
    expect(runtime.output()).not.toContain('s3cret-pw');
  });

  it('lets two runtimes migrate the same fresh database at once', async () => {
    const db = await database();
    const [a, b] = await Promise.all([
      spawnRuntime({ env: { RATCHET_DATABASE_URL: db.url, RATCHET_NODE_NAME: 'node-a' } }),
      spawnRuntime({ env: { RATCHET_DATABASE_URL: db.url, RATCHET_NODE_NAME: 'node-b' } }),
    ]);
    await Promise.all([a.ready(), b.ready()]);
    // Exactly one of them applied the migration; the other found it done.
    const applied = [a, b].filter((rt) => rt.output().includes('"msg":"storage migrated"'));
    expect(applied).toHaveLength(1);
    const version = await withClient(db.url, (client) =>
      client.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = 'storage_format_version'`),
    );
    expect(version.rows).toEqual([{ value: String(STORAGE_FORMAT_VERSION) }]);
    for (const rt of [a, b]) {
      rt.child.kill('SIGTERM');
      expect(await rt.exit()).toEqual({ code: 0, signal: null });
    }
  });
});
