import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from 'pino';

/**
 * SQL introspection runs on PostgreSQL itself, as a dedicated read-only role that can see nothing but the views of
 * the introspection schema (`INTROSPECTION_SCHEMA`). The views are owned by the runtime's own user, so they read the
 * `ratchet` tables with its rights while the role itself has none on them.
 *
 * Roles are global to a PostgreSQL cluster while Ratchet owns one database, so the role's name carries the database
 * name. Its password is random, kept in `ratchet.meta` (which the role cannot read) and re-applied at every start.
 * Both `POST /query` and the wire-protocol listener (9071) log in as this role; no session ever runs as the runtime's
 * user, so `SET ROLE` / `RESET ROLE` from a client can gain nothing.
 */

export const INTROSPECTION_SCHEMA = 'ratchet_sql';

export interface IntrospectionAccess {
  /** The login role (NOLOGIN never; NOINHERIT, no other grants than on the introspection schema). */
  readonly role: string;
  readonly password: string;
  readonly database: string;
  /** Connection string for the role, derived from the runtime's database URL. */
  readonly url: string;
}

/** PostgreSQL identifiers are at most 63 bytes. */
function roleName(database: string): string {
  const base = `ratchet_sql_${database}`.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  return base.length <= 63 ? base : base.slice(0, 63);
}

/**
 * Creates (or refreshes) the read-only role and its grants. Needs a runtime user allowed to create roles (CREATEROLE
 * or superuser); returns undefined with a warning when it is not, and introspection is then unavailable.
 */
export async function ensureIntrospectionAccess(
  pool: pg.Pool,
  databaseUrl: string,
  logger: Logger,
): Promise<IntrospectionAccess | undefined> {
  const client = await pool.connect();
  try {
    const db = (await client.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db;
    const role = roleName(db);
    const stored = await client.query<{ value: string }>(
      `SELECT value FROM ratchet.meta WHERE key = 'introspection_password'`,
    );
    let password = stored.rows[0]?.value;
    if (password === undefined) {
      password = randomBytes(24).toString('base64url');
      await client.query(
        `INSERT INTO ratchet.meta (key, value) VALUES ('introspection_password', $1)
                          ON CONFLICT (key) DO NOTHING`,
        [password],
      );
      password = (
        await client.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = 'introspection_password'`)
      ).rows[0]!.value;
    }
    const ident = client.escapeIdentifier(role);
    const literal = client.escapeLiteral(password);
    try {
      // Several runtimes may start together: serialize role creation per database.
      await client.query('BEGIN');
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('ratchet_sql_role'))`);
      const exists = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
      if (exists.rows.length === 0) {
        await client.query(`CREATE ROLE ${ident} LOGIN NOINHERIT PASSWORD ${literal}`);
      } else {
        await client.query(`ALTER ROLE ${ident} LOGIN NOINHERIT PASSWORD ${literal}`);
      }
      await client.query(`REVOKE ALL ON DATABASE ${client.escapeIdentifier(db)} FROM PUBLIC`);
      await client.query(`GRANT CONNECT ON DATABASE ${client.escapeIdentifier(db)} TO ${ident}`);
      await client.query(`REVOKE ALL ON SCHEMA public FROM PUBLIC`);
      await client.query(`REVOKE ALL ON SCHEMA ratchet FROM ${ident}`);
      await client.query(`GRANT USAGE ON SCHEMA ${INTROSPECTION_SCHEMA} TO ${ident}`);
      await client.query(`GRANT SELECT ON ALL TABLES IN SCHEMA ${INTROSPECTION_SCHEMA} TO ${ident}`);
      await client.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ${INTROSPECTION_SCHEMA} TO ${ident}`);
      await client.query(
        `ALTER ROLE ${ident} IN DATABASE ${client.escapeIdentifier(db)} SET search_path = ${INTROSPECTION_SCHEMA}, pg_catalog`,
      );
      await client.query(
        `ALTER ROLE ${ident} IN DATABASE ${client.escapeIdentifier(db)} SET default_transaction_read_only = on`,
      );
      await lockDownSharedFunctions(client, logger);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      const code = (err as { code?: string }).code;
      if (code === '42501') {
        logger.warn(
          { err },
          'SQL introspection is unavailable: the database user may not create roles (grant it CREATEROLE)',
        );
        return undefined;
      }
      throw err;
    }
    const url = new URL(databaseUrl);
    url.username = encodeURIComponent(role);
    url.password = encodeURIComponent(password);
    return { role, password, database: db, url: url.toString() };
  } finally {
    client.release();
  }
}

/**
 * Functions PostgreSQL lets every role run that a read-only SQL session could still hurt the runtime with: holding
 * the runtime's advisory locks (blocking migrations and registrations), notifying its schema channel, creating large
 * objects (writes that read-only transactions do not stop once a client turns them off). In this database they are
 * taken from PUBLIC and given to the runtime's own user. Only a superuser may change grants on pg_catalog functions:
 * without one (an external database) this is skipped with a warning, and the role's sessions can still do those.
 */
async function lockDownSharedFunctions(client: pg.PoolClient, logger: Logger): Promise<void> {
  const su = await client.query<{ su: boolean }>('SELECT rolsuper AS su FROM pg_roles WHERE rolname = current_user');
  if (su.rows[0]?.su !== true) {
    logger.warn(
      'the database user is not a superuser: SQL introspection sessions can still take advisory locks, notify and ' +
        'create large objects; use a superuser, or revoke EXECUTE on those functions from PUBLIC yourself',
    );
    return;
  }
  const fns = await client.query<{ sig: string }>(
    `SELECT p.oid::regprocedure::text AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'pg_catalog' AND (p.proname LIKE 'pg\\_advisory%' OR p.proname LIKE 'pg\\_try\\_advisory%'
       OR p.proname = 'pg_notify' OR p.proname LIKE 'lo\\_%' OR p.proname IN ('lowrite', 'loread'))`,
  );
  for (const { sig } of fns.rows) {
    await client.query(`REVOKE EXECUTE ON FUNCTION ${sig} FROM PUBLIC`);
    await client.query(`GRANT EXECUTE ON FUNCTION ${sig} TO CURRENT_USER`);
  }
}
