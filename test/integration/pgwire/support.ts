import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import pg from 'pg';
import { loadConfig, type LogLevel } from '../../../runtime/src/config/config.ts';
import { ensureIntrospectionAccess, type IntrospectionAccess } from '../../../runtime/src/introspection/access.ts';
import { startPgWireListener, type PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { ensureIntrospectionViews } from '../../../runtime/src/introspection/views.ts';
import { createLogger } from '../../../runtime/src/telemetry/logger.ts';
import { LOOPBACK } from '../../support/ports.ts';

/** Helpers of the wire-protocol tests: the read-only role and views on a migrated database, listeners, clients. */

export const CLUSTER = 'pgwire-test';
export const PASSWORD = 'introspection-secret';

export const logger = createLogger({ level: (process.env['RATCHET_TEST_LOG_LEVEL'] ?? 'silent') as LogLevel });

/** Creates the introspection views and the read-only role on a database the runtime has migrated. */
export async function prepareIntrospection(databaseUrl: string): Promise<IntrospectionAccess> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  try {
    await ensureIntrospectionViews(pool, logger);
    const access = await ensureIntrospectionAccess(pool, databaseUrl, logger);
    if (access === undefined) throw new Error('the test database user cannot create roles');
    return access;
  } finally {
    await pool.end();
  }
}

/** A listener on a free loopback port, configured through the same settings a user would set. */
export async function startListener(
  access: IntrospectionAccess | undefined,
  env: Record<string, string> = {},
  refreshAccess?: () => Promise<IntrospectionAccess | undefined>,
  onRefused?: (reason: 'max_sessions' | 'max_sessions_per_user') => void,
): Promise<PgWireListener> {
  const config = loadConfig({
    env: {
      RATCHET_CLUSTER_NAME: CLUSTER,
      RATCHET_INTROSPECTION_BIND: `${LOOPBACK}:0`,
      RATCHET_INTROSPECTION_PASSWORD: PASSWORD,
      ...env,
    },
  });
  return startPgWireListener({
    config: config.introspection,
    clusterName: config.clusterName,
    access,
    logger,
    ...(refreshAccess === undefined ? {} : { refreshAccess }),
    ...(onRefused === undefined ? {} : { onRefused }),
  });
}

export type ClientOptions = Omit<pg.ClientConfig, 'host' | 'port'>;

/** A connected node-postgres client of the listener (user = cluster name, the configured password). */
export async function connectClient(listener: PgWireListener, options: ClientOptions = {}): Promise<pg.Client> {
  const client = new pg.Client({
    host: LOOPBACK,
    port: listener.address.port,
    user: CLUSTER,
    password: PASSWORD,
    database: CLUSTER,
    ...options,
  });
  // An 'error' event without a listener would crash the test process (e.g. a FATAL on shutdown).
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** The SQLSTATE a promise rejects with (fails the test if it resolves). */
export async function sqlState(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (err) {
    return (err as { code?: string }).code;
  }
  throw new Error('expected the statement to fail');
}

export interface PsqlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the real `psql` against the listener: `psql -h 127.0.0.1 -p <port> -U <user> …args`. */
export function psql(
  port: number,
  args: readonly string[],
  env: Record<string, string> = {},
  user = CLUSTER,
): Promise<PsqlResult> {
  return new Promise((resolve) => {
    execFile(
      'psql',
      ['-h', LOOPBACK, '-p', String(port), '-U', user, '-X', '-v', 'ON_ERROR_STOP=1', ...args],
      {
        // No password file, service file or prompt: the environment given is all psql knows.
        env: { PATH: process.env['PATH'] ?? '', PGPASSWORD: PASSWORD, PGCONNECT_TIMEOUT: '20', ...env },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A raw TCP connection to the listener, for what drivers do not do (abrupt disconnects, cancel requests). */
export function rawSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: LOOPBACK, port });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends a CancelRequest for the key a client received in BackendKeyData. */
export async function sendCancelRequest(port: number, processId: number, secretKey: number): Promise<void> {
  const socket = await rawSocket(port);
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(80877102, 4);
  packet.writeInt32BE(processId, 8);
  packet.writeInt32BE(secretKey, 12);
  await new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.end(packet);
  });
}

/** The key node-postgres received in BackendKeyData (not in its public types). */
export function backendKey(client: pg.Client): { processId: number; secretKey: number } {
  const internal = client as unknown as { processID: number; secretKey: number };
  return { processId: internal.processID, secretKey: internal.secretKey };
}

/** The statements the read-only role runs right now, as the superuser sees them. */
export async function activeStatements(superuser: pg.Pool, role: string): Promise<string[]> {
  const res = await superuser.query<{ query: string }>(
    `SELECT query FROM pg_stat_activity WHERE usename = $1 AND state = 'active'`,
    [role],
  );
  return res.rows.map((r) => r.query);
}
