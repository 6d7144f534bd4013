import { readdir, readFile } from 'node:fs/promises';
import type pg from 'pg';
import {
  StorageVersionMismatchError,
  StorageVersionMissingError,
  WorkerStorageVersionMissingError,
} from '../../errors/config-errors.ts';

/** Storage format written by this build. Raise it with every migration that older runtimes cannot read. */
export const STORAGE_FORMAT_VERSION = 12;
/** Any fixed 64-bit key works; it only has to be the same for every Ratchet process sharing the database. */
const MIGRATION_LOCK_KEY = '7308432957233170001';

interface Migration {
  version: number;
  name: string;
  sql: string;
}

async function loadMigrations(): Promise<Migration[]> {
  const dir = new URL('./migrations/', import.meta.url);
  const files = (await readdir(dir)).filter((f) => /^\d{4}_.*\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      version: Number(file.slice(0, 4)),
      name: file,
      sql: await readFile(new URL(file, dir), 'utf8'),
    })),
  );
}

export interface MigrationResult {
  applied: string[];
  storageFormatVersion: number;
}

/**
 * Brings the database to the current storage format. Runs under a session advisory lock so that many replicas
 * starting together apply each migration exactly once; each migration and its record commit in one transaction.
 */
export async function migrate(client: pg.ClientBase): Promise<MigrationResult> {
  await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
  try {
    const current = await readStorageVersion(client);
    if (current !== undefined && current > STORAGE_FORMAT_VERSION) {
      throw new StorageVersionMismatchError(
        `the database holds Ratchet storage format ${current}, but this runtime reads formats up to ${STORAGE_FORMAT_VERSION}; ` +
          'upgrade the runtime or point RATCHET_DATABASE_URL at another database',
        { found: current, supported: STORAGE_FORMAT_VERSION },
      );
    }
    const migrations = await loadMigrations();
    const applied: string[] = [];
    for (const m of migrations) {
      if (current !== undefined && m.version <= current) continue;
      await client.query('BEGIN');
      try {
        if (m.version === 1) await client.query('CREATE SCHEMA ratchet');
        await client.query(m.sql);
        await client.query(
          `INSERT INTO ratchet.meta (key, value) VALUES ('storage_format_version', $1)
           ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
          [String(m.version)],
        );
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
      applied.push(m.name);
    }
    return { applied, storageFormatVersion: Math.max(current ?? 0, ...migrations.map((m) => m.version)) };
  } finally {
    // A failed unlock means a broken connection, which releases the lock with it; the error that got us here matters.
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
  }
}

/** undefined = a fresh database (no `ratchet` schema at all). */
async function readStorageVersion(client: pg.ClientBase): Promise<number | undefined> {
  const schema = await client.query<{ tables: string }>(
    `SELECT count(c.oid)::text AS tables FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid
     WHERE n.nspname = 'ratchet' GROUP BY n.oid`,
  );
  const row = schema.rows[0];
  if (row === undefined) return undefined;
  const hasMeta = await client.query(`SELECT to_regclass('ratchet.meta') IS NOT NULL AS present`);
  const metaPresent = (hasMeta.rows[0] as { present: boolean } | undefined)?.present === true;
  if (metaPresent) {
    const v = await client.query<{ value: string }>(
      `SELECT value FROM ratchet.meta WHERE key = 'storage_format_version'`,
    );
    const value = v.rows[0]?.value;
    if (value !== undefined && /^\d+$/.test(value)) return Number(value);
  }
  const missing = (cause?: unknown): StorageVersionMissingError =>
    new StorageVersionMissingError(
      'the database has a non-empty `ratchet` schema without a storage format version; it was not written by a ' +
        'compatible Ratchet or is damaged. Restore a backup or point RATCHET_DATABASE_URL at an empty database',
      cause === undefined ? {} : { cause },
    );
  if (Number(row.tables) === 0 && !metaPresent) {
    // An empty schema left behind by a failed first migration: safe to start over in it. RESTRICT (the default)
    // refuses if it holds anything pg_class does not list (functions, types): then it is not ours to drop.
    try {
      await client.query('DROP SCHEMA ratchet');
    } catch (err) {
      throw missing(err);
    }
    return undefined;
  }
  const worker = await client.query(`SELECT to_regclass('ratchet.invocation') IS NOT NULL AS present`);
  if ((worker.rows[0] as { present: boolean } | undefined)?.present === true) {
    throw new WorkerStorageVersionMissingError(
      'the invocation storage (ratchet.invocation, journals, state) has no storage format version in ' +
        "ratchet.meta: the row 'storage_format_version' was deleted, the database was restored in part, or the " +
        'tables come from an unknown Ratchet. Restore a complete backup, or point RATCHET_DATABASE_URL at an empty ' +
        'database',
    );
  }
  throw missing();
}
