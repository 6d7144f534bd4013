import { spawn } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IntrospectionAccess } from '../../../runtime/src/introspection/access.ts';
import type { PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { waitFor } from '../../support/wait.ts';
import {
  activeStatements,
  backendKey,
  CLUSTER,
  connectClient,
  PASSWORD,
  prepareIntrospection,
  psql,
  sendCancelRequest,
  sqlState,
  startListener,
} from './support.ts';

/**
 * What a session on 9071 may not do, and that trying never hurts it or anyone else: wrong credentials, writes, DDL,
 * COPY, SET ROLE, the runtime's own tables, injection, statements over the timeout, cancellation.
 */

let db: TestDatabase;
let superuser: pg.Pool;
let access: IntrospectionAccess;
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
  access = await prepareIntrospection(db.url);
  // Long enough that nothing here hits it by accident; the timeout tests use their own listener.
  listener = await startListener(access, { RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '5m' });
});

afterAll(async () => {
  await listener?.stop();
  await superuser?.end();
  await db?.drop();
});

async function ratchetTables(): Promise<number> {
  const res = await superuser.query<{ n: string }>(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'ratchet'`);
  return Number(res.rows[0]!.n);
}

describe('authentication', () => {
  it('refuses a wrong password, a wrong user and the role itself with 28P01', async () => {
    const port = listener.address.port;
    const attempt = (user: string, password: string): Promise<string | undefined> =>
      sqlState(connectClient(listener, { user, password }));
    expect(await attempt(CLUSTER, 'wrong')).toBe('28P01');
    expect(await attempt('postgres', PASSWORD)).toBe('28P01');
    // The role's own credentials do not open 9071: clients authenticate against the cluster's password only.
    expect(await attempt(access.role, access.password)).toBe('28P01');
    // And the listener is unharmed.
    const client = await connectClient(listener);
    expect((await client.query('SELECT current_user AS u')).rows).toEqual([{ u: access.role }]);
    await client.end();
    expect(port).toBe(listener.address.port);
  });

  it('runs every session on the introspection database, whatever database the client names', async () => {
    const client = await connectClient(listener, { database: 'postgres' });
    try {
      expect((await client.query('SELECT current_database() AS d')).rows).toEqual([{ d: db.name }]);
    } finally {
      await client.end();
    }
  });

  it('lets the client choose harmless settings but not the ones that bound the session', async () => {
    const client = await connectClient(listener, {
      application_name: "it's me",
      options: '-c default_transaction_read_only=off -c statement_timeout=0 -c search_path=ratchet',
      statement_timeout: 0,
    });
    try {
      const settings = await client.query<{ ro: string; timeout: string; path: string; app: string }>(
        `SELECT current_setting('default_transaction_read_only') AS ro,
                current_setting('statement_timeout') AS timeout,
                current_setting('search_path') AS path,
                current_setting('application_name') AS app`,
      );
      expect(settings.rows).toEqual([{ ro: 'on', timeout: '5min', path: 'ratchet_sql, pg_catalog', app: "it's me" }]);
    } finally {
      await client.end();
    }
    // node-postgres' statement_timeout option may shorten the timeout, never lengthen it.
    const hasty = await connectClient(listener, { statement_timeout: 1500 });
    try {
      expect((await hasty.query(`SELECT current_setting('statement_timeout') AS t`)).rows).toEqual([{ t: '1500ms' }]);
    } finally {
      await hasty.end();
    }
  });

  it("survives a session changing the role's own password (PostgreSQL allows it to every role)", async () => {
    const refreshed = await startListener(access, {}, () => prepareIntrospection(db.url));
    try {
      const attacker = await connectClient(refreshed);
      await attacker.query('SET default_transaction_read_only = off');
      await attacker.query(`ALTER ROLE CURRENT_USER PASSWORD 'hijacked'`);
      await attacker.query(
        `ALTER ROLE CURRENT_USER IN DATABASE ${attacker.escapeIdentifier(db.name)} SET search_path = ratchet`,
      );
      await attacker.end();
      // The listener sets the role up again and logs in anew: clients notice nothing.
      const clients = await Promise.all([1, 2, 3].map(() => connectClient(refreshed)));
      for (const client of clients) {
        expect((await client.query(`SELECT count(*)::int AS n FROM sys_invocation`)).rows).toEqual([{ n: 0 }]);
        await client.end();
      }
    } finally {
      await refreshed.stop();
    }
  });

  it('answers every session with the reason when introspection is unavailable', async () => {
    const unavailable = await startListener(undefined);
    try {
      const err = await connectClient(unavailable).then(
        () => undefined,
        (e: unknown) => e as { code?: string; message: string },
      );
      expect(err?.code).toBe('57P03');
      expect(err?.message).toContain('CREATEROLE');
    } finally {
      await unavailable.stop();
    }
  });

  it('accepts the cluster name without a password when none is configured, and nobody else', async () => {
    const open = await startListener(access, { RATCHET_INTROSPECTION_PASSWORD: '' });
    try {
      const client = await connectClient(open, { password: undefined });
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await client.end();
      expect(await sqlState(connectClient(open, { user: 'postgres', password: undefined }))).toBe('28000');
    } finally {
      await open.stop();
    }
  });
});

describe('a session', () => {
  let client: pg.Client;

  beforeAll(async () => {
    client = await connectClient(listener);
  });

  afterAll(async () => {
    await client?.end();
  });

  /** Each refused statement leaves the session usable. */
  async function refused(sql: string): Promise<string | undefined> {
    const code = await sqlState(client.query(sql));
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    return code;
  }

  it('cannot write, in a read-only transaction or after turning that off', async () => {
    expect(await refused(`INSERT INTO ratchet.meta (key, value) VALUES ('x', 'y')`)).toBe('42501');
    // Large objects are not even executable for the role (access.ts takes them from PUBLIC).
    expect(await refused(`SELECT lo_create(0)`)).toBe('42501');
    expect(await refused(`ALTER ROLE CURRENT_USER SET search_path = public`)).toBe('25006');
    await client.query('SET default_transaction_read_only = off');
    try {
      expect(await refused(`INSERT INTO ratchet.meta (key, value) VALUES ('x', 'y')`)).toBe('42501');
      expect(await refused(`UPDATE ratchet.invocation SET status = 'completed'`)).toBe('42501');
      expect(await refused(`DELETE FROM ratchet.journal`)).toBe('42501');
      // A view over one table is auto-updatable: only its grants stop the write.
      expect(await refused(`DELETE FROM state`)).toBe('42501');
      expect(await refused(`DELETE FROM sys_invocation`)).toMatch(/^(42501|55000)$/);
    } finally {
      await client.query('RESET default_transaction_read_only');
    }
  });

  it('cannot run DDL', async () => {
    await client.query('SET default_transaction_read_only = off');
    try {
      expect(await refused('CREATE TABLE mine (x int)')).toBe('42501');
      expect(await refused('CREATE TEMP TABLE mine (x int)')).toBe('42501');
      expect(await refused('CREATE VIEW mine AS SELECT 1')).toBe('42501');
      expect(await refused('DROP VIEW sys_invocation')).toBe('42501');
      expect(await refused('DROP SCHEMA ratchet CASCADE')).toBe('42501');
      expect(await refused(`CREATE FUNCTION mine() RETURNS int LANGUAGE sql AS 'SELECT 1'`)).toBe('42501');
    } finally {
      await client.query('RESET default_transaction_read_only');
    }
    expect(await ratchetTables()).toBeGreaterThan(10);
  });

  it('cannot COPY into anything, nor from the runtime tables, files or programs', async () => {
    expect(await refused('COPY sys_invocation FROM STDIN')).toMatch(/^(25006|42501|42809)$/);
    expect(await refused('COPY ratchet.invocation TO STDOUT')).toBe('42501');
    expect(await refused(`COPY (SELECT 1) TO PROGRAM 'true'`)).toBe('42501');
    expect(await refused(`COPY (SELECT 1) TO '/tmp/ratchet-pgwire-copy'`)).toBe('42501');
    expect(await refused(`COPY sys_invocation FROM '/etc/hostname'`)).toMatch(/^(25006|42501)$/);
  });

  it('cannot change role or session authorization', async () => {
    expect(await refused('SET ROLE postgres')).toBe('42501');
    expect(await refused('SET SESSION AUTHORIZATION postgres')).toBe('42501');
    expect(await refused(`SELECT set_config('role', 'postgres', false)`)).toBe('42501');
    await client.query('RESET ROLE');
    expect((await client.query('SELECT current_user AS u')).rows).toEqual([{ u: access.role }]);
  });

  it('cannot read the runtime tables or anything private of the server', async () => {
    expect(await refused('SELECT * FROM ratchet.invocation')).toBe('42501');
    expect(await refused('SELECT * FROM ratchet.meta')).toBe('42501');
    expect(await refused('SELECT * FROM pg_authid')).toBe('42501');
    expect(await refused(`SELECT pg_read_file('/etc/hostname')`)).toBe('42501');
    expect(await refused(`SELECT * FROM pg_ls_dir('.')`)).toBe('42501');
  });

  it('shrugs off injection attempts', async () => {
    const injected = `'; DROP SCHEMA ratchet CASCADE; --`;
    expect((await client.query('SELECT id FROM sys_invocation WHERE id = $1', [injected])).rows).toEqual([]);
    expect((await client.query('SELECT $1::text AS v', [injected])).rows).toEqual([{ v: injected }]);
    expect(await refused(`SELECT 1; DROP SCHEMA ratchet CASCADE`)).toMatch(/^(25006|42501)$/);
    expect(await refused(`SELECT 1; SET default_transaction_read_only = off; DROP TABLE ratchet.meta`)).toMatch(
      /^(25006|42501)$/,
    );
    await client.query('BEGIN READ WRITE');
    expect(await sqlState(client.query('DROP TABLE ratchet.meta'))).toBe('42501');
    await client.query('ROLLBACK');
    expect(await ratchetTables()).toBeGreaterThan(10);
    // Nor is the search path: a schema without USAGE is skipped, and named explicitly it is refused.
    await client.query('SET search_path = ratchet, pg_catalog');
    expect(await refused('SELECT * FROM invocation')).toMatch(/^(42P01|42501)$/);
    await client.query('RESET search_path');
  });
});

describe('statement timeout and cancellation', () => {
  it('cancels a statement over the timeout (57014), even when the client turned the timeout off', async () => {
    const short = await startListener(access, { RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '300ms' });
    try {
      const client = await connectClient(short);
      try {
        expect(await sqlState(client.query('SELECT pg_sleep(30)'))).toBe('57014');
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
        // The listener's own watch cancels what PostgreSQL no longer would.
        await client.query('SET statement_timeout = 0');
        expect(await sqlState(client.query('SELECT pg_sleep(30)'))).toBe('57014');
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await client.end();
      }
    } finally {
      await short.stop();
    }
  });

  it("forwards a client's CancelRequest, and ignores one with a wrong key", async () => {
    const client = await connectClient(listener);
    try {
      const key = backendKey(client);
      // A wrong key cancels nothing: this statement finishes.
      const short = client.query<{ marker: number }>('SELECT pg_sleep(1.5), 1 AS marker');
      await waitFor(async () => {
        expect(await activeStatements(superuser, access.role)).toContain('SELECT pg_sleep(1.5), 1 AS marker');
      });
      await sendCancelRequest(listener.address.port, key.processId, key.secretKey ^ 1);
      await sendCancelRequest(listener.address.port, key.processId + 1, key.secretKey);
      expect((await short).rows).toEqual([{ pg_sleep: '', marker: 1 }]);
      // The right key cancels the running statement.
      const long = sqlState(client.query('SELECT pg_sleep(30), 2 AS marker'));
      await waitFor(async () => {
        expect(await activeStatements(superuser, access.role)).toContain('SELECT pg_sleep(30), 2 AS marker');
      });
      await sendCancelRequest(listener.address.port, key.processId, key.secretKey);
      expect(await long).toBe('57014');
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('lets psql cancel its statement with ^C', async () => {
    const child = spawn(
      'psql',
      ['-h', LOOPBACK, '-p', String(listener.address.port), '-U', CLUSTER, '-X', '-c', 'SELECT pg_sleep(45), 2'],
      { env: { PATH: process.env['PATH'] ?? '', PGPASSWORD: PASSWORD }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor(async () => {
        expect(await activeStatements(superuser, access.role)).toContain('SELECT pg_sleep(45), 2');
      });
      child.kill('SIGINT');
      expect(await exited).not.toBe(0);
      expect(stderr).toContain('canceling statement due to user request');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('psql reports a statement over the timeout', async () => {
    const short = await startListener(access, { RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '200ms' });
    try {
      const res = await psql(short.address.port, ['-c', 'SELECT pg_sleep(30)']);
      expect(res.code).not.toBe(0);
      expect(res.stderr).toContain('canceling statement due to statement timeout');
    } finally {
      await short.stop();
    }
  });
});
