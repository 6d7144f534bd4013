import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenVerifier } from '../../../runtime/src/auth/verifier.ts';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { startPgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { createLogger } from '../../../runtime/src/telemetry/logger.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { jwks, mint, newKey, nowSeconds } from './support.ts';

/**
 * SQL introspection in managed mode: user = cluster name, password = an access token with the role full or admin,
 * asked for in cleartext. The real `psql` logs in with the token as PGPASSWORD; every other token, and any other
 * user, gets PostgreSQL's one answer for bad credentials (FATAL 28P01).
 */

const CLUSTER = 'auth-sql';
const key = newKey('ed25519');
const stranger = newKey('ed25519');

let dir: string;
let db: TestDatabase;
let runtime: TestRuntime;
let port: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ratchet-auth-sql-'));
  const keysFile = join(dir, 'jwks.json');
  writeFileSync(keysFile, jwks({ key, kid: 'k1' }));
  db = await createTestDatabase();
  runtime = await startTestRuntime(db.url, {
    RATCHET_CLUSTER_NAME: CLUSTER,
    RATCHET_AUTH_KEYS_FILE: keysFile,
    // Ignored in managed mode: this password opens nothing.
    RATCHET_INTROSPECTION_PASSWORD: 'configured-password',
  });
  port = runtime.handle.sql.port;
});

afterAll(async () => {
  await runtime?.stop();
  await db?.drop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

interface PsqlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The real psql: `psql -h 127.0.0.1 -p <port> -U <user> -c <sql>` with only PGPASSWORD in its environment. */
function psql(password: string, sql: string, user = CLUSTER): Promise<PsqlResult> {
  return new Promise((resolve) => {
    execFile(
      'psql',
      ['-h', LOOPBACK, '-p', String(port), '-U', user, '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql],
      {
        env: { PATH: process.env['PATH'] ?? '', PGPASSWORD: password, PGCONNECT_TIMEOUT: '20', PGDATABASE: CLUSTER },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
      },
    );
  });
}

/** The first message a bare StartupMessage (user = cluster name) gets back. */
function firstAuthenticationRequest(): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: LOOPBACK, port });
    const body = Buffer.from(`user\0${CLUSTER}\0database\0${CLUSTER}\0\0`);
    const header = Buffer.alloc(8);
    header.writeInt32BE(body.length + 8, 0);
    header.writeInt32BE(196608, 4);
    let received = Buffer.alloc(0);
    socket.on('connect', () => socket.write(Buffer.concat([header, body])));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length >= 9) {
        socket.destroy();
        resolve(received.subarray(0, 9));
      }
    });
    socket.on('error', reject);
  });
}

function expectRefused(result: PsqlResult, user = CLUSTER): void {
  expect(result.code, result.stderr).toBe(2);
  expect(result.stderr).toContain(`FATAL:  password authentication failed for user "${user}"`);
}

describe('SQL introspection with an access token', () => {
  it('lets psql in with a full or admin token as the password', async () => {
    for (const role of ['full', 'admin']) {
      const token = await mint(key, { aud: CLUSTER, role, exp: nowSeconds() + 600 }, 'k1');
      const result = await psql(token, 'SELECT current_user <> $$x$$, count(*) FROM sys_deployment');
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout.trim()).toBe('t|0');
    }
  });

  it('refuses other roles, bad tokens, the configured password and other users with 28P01', async () => {
    const cases: [string, string][] = [
      ['ingress role', await mint(key, { aud: CLUSTER, role: 'ingress' })],
      ['awakeables role', await mint(key, { aud: CLUSTER, role: 'awakeables' })],
      ['unknown key', await mint(stranger, { aud: CLUSTER, role: 'full' })],
      ['other cluster', await mint(key, { aud: 'elsewhere', role: 'full' })],
      ['expired', await mint(key, { aud: CLUSTER, role: 'full', exp: nowSeconds() - 3600 })],
      ['garbage', 'not-a-token'],
      ['configured password', 'configured-password'],
    ];
    for (const [what, password] of cases) {
      const result = await psql(password, 'SELECT 1');
      expect(result.code, what).toBe(2);
      expectRefused(result);
      expect(result.stderr, what).not.toContain(password);
    }
    const valid = await mint(key, { aud: CLUSTER, role: 'full' });
    expectRefused(await psql(valid, 'SELECT 1', 'postgres'), 'postgres');
  });

  it('asks for the password in cleartext, which drivers answer with the token', async () => {
    const token = await mint(key, { aud: CLUSTER, role: 'admin' });
    const client = new pg.Client({ host: LOOPBACK, port, user: CLUSTER, password: token, database: CLUSTER });
    client.on('error', () => undefined);
    await client.connect();
    try {
      expect((await client.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    } finally {
      await client.end();
    }
    // What the server asked for: AuthenticationCleartextPassword ('R', length 8, code 3), not SASL.
    expect(await firstAuthenticationRequest()).toEqual(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]));
  });

  it('warns at startup that tokens travel in cleartext without TLS, and that the configured password is ignored', async () => {
    const lines: { level: string; msg: string }[] = [];
    const logger = createLogger(
      { level: 'info' },
      { destination: { write: (line: string) => void lines.push(JSON.parse(line) as { level: string; msg: string }) } },
    );
    const config = loadConfig({
      env: {
        RATCHET_CLUSTER_NAME: CLUSTER,
        RATCHET_INTROSPECTION_BIND: `${LOOPBACK}:0`,
        RATCHET_INTROSPECTION_PASSWORD: 'configured-password',
        RATCHET_AUTH_KEYS_FILE: join(dir, 'jwks.json'),
      },
    });
    const auth = await TokenVerifier.start({ keysFile: config.auth.keysFile!, clusterName: CLUSTER, logger });
    const listener = await startPgWireListener({
      config: config.introspection,
      clusterName: CLUSTER,
      access: undefined,
      auth,
      logger,
    });
    await listener.stop();
    auth.stop();
    const warnings = lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    expect(warnings).toEqual([
      expect.stringMatching(/access token in cleartext and 9071 has no TLS; set RATCHET_INTROSPECTION_TLS_CERT/),
      expect.stringMatching(/RATCHET_INTROSPECTION_PASSWORD is ignored/),
    ]);
  });
});
