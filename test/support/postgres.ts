import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the run's one embedded PostgreSQL (see `global-setup.ts`). */
    pgAdminUrl: string;
  }
}

export interface TestDatabase {
  /** Connection string for the new database (same server and credentials as the admin URL). */
  readonly url: string;
  readonly name: string;
  /** Drops the database, ending any connections still open to it. Safe to call twice. */
  drop(): Promise<void>;
}

export interface CreateTestDatabaseOptions {
  /** Clone this database (`CREATE DATABASE … TEMPLATE`), e.g. one with the migrations already applied. */
  readonly template?: string;
  /** Defaults to the run's embedded server (`inject('pgAdminUrl')`). */
  readonly adminUrl?: string;
}

/** The run's admin connection string; only valid inside a test worker. */
export function pgAdminUrl(): string {
  return inject('pgAdminUrl');
}

export async function withAdminClient<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Lowercase, so it needs no quoting anywhere (psql, URLs, logs); unique across parallel test files. */
function uniqueName(): string {
  return `test_${Date.now().toString(36)}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A fresh, empty database on the shared server. Create it in `beforeAll` and `drop()` it in `afterAll`. */
export async function createTestDatabase(options: CreateTestDatabaseOptions = {}): Promise<TestDatabase> {
  const adminUrl = options.adminUrl ?? pgAdminUrl();
  const name = uniqueName();
  await withAdminClient(adminUrl, async (client) => {
    const template = options.template === undefined ? '' : ` TEMPLATE ${client.escapeIdentifier(options.template)}`;
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}${template}`);
  });
  let dropped: Promise<void> | undefined;
  return {
    url: databaseUrl(adminUrl, name),
    name,
    drop() {
      dropped ??= withAdminClient(adminUrl, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
      });
      return dropped;
    },
  };
}
