import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import type { IntrospectionAccess } from '../../../runtime/src/introspection/access.ts';
import type { PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
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
  rawSocket,
  sendCancelRequest,
  sqlState,
  startListener,
} from './support.ts';

/** TLS on 9071 when a certificate is configured: SSLRequest answered 'S', verified by real clients. */

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const openssl = hasOpenssl();

let dir: string;
let certFile: string;
let keyFile: string;
let db: TestDatabase;
let superuser: pg.Pool;
let access: IntrospectionAccess;
let secure: PgWireListener;
let plain: PgWireListener;

describe.skipIf(!openssl)('TLS', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratchet-pgwire-tls-'));
    certFile = join(dir, 'cert.pem');
    keyFile = join(dir, 'key.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        keyFile,
        '-out',
        certFile,
      ],
      { stdio: 'ignore' },
    );
    db = await createTestDatabase();
    superuser = new pg.Pool({ connectionString: db.url, max: 2 });
    const client = await superuser.connect();
    try {
      await migrate(client);
    } finally {
      client.release();
    }
    access = await prepareIntrospection(db.url);
    secure = await startListener(access, {
      RATCHET_INTROSPECTION_TLS_CERT: certFile,
      RATCHET_INTROSPECTION_TLS_KEY: keyFile,
      RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '5m',
    });
    plain = await startListener(access);
  });

  afterAll(async () => {
    await secure?.stop();
    await plain?.stop();
    await superuser?.end();
    await db?.drop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('serves node-postgres over verified TLS', async () => {
    const client = await connectClient(secure, { ssl: { ca: readFileSync(certFile), rejectUnauthorized: true } });
    try {
      const stream = (client as unknown as { connection: { stream: TLSSocket } }).connection.stream;
      expect(stream.encrypted).toBe(true);
      expect(stream.authorized).toBe(true);
      const res = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM sys_invocation WHERE id = $1', [
        'inv_1',
      ]);
      expect(res.rows).toEqual([{ n: 0 }]);
    } finally {
      await client.end();
    }
  });

  it('serves psql with sslmode=verify-full, and still plaintext clients', async () => {
    const verified = await psql(secure.address.port, ['-c', '\\conninfo', '-c', 'SELECT 40 + 2 AS answer'], {
      PGSSLMODE: 'verify-full',
      PGSSLROOTCERT: certFile,
    });
    expect(verified.stderr).toBe('');
    expect(verified.code).toBe(0);
    expect(verified.stdout).toMatch(/SSL connection \(protocol: TLSv1\.[23]/);
    expect(verified.stdout).toContain('42');
    const plaintext = await psql(secure.address.port, ['-A', '-t', '-c', 'SELECT 1'], { PGSSLMODE: 'disable' });
    expect(plaintext.code).toBe(0);
    expect(plaintext.stdout.trim()).toBe('1');
  });

  it('binds SCRAM to the TLS channel (SCRAM-SHA-256-PLUS) when the client asks for it', async () => {
    const bound = await psql(secure.address.port, ['-A', '-t', '-c', 'SELECT 7'], {
      PGSSLMODE: 'require',
      PGCHANNELBINDING: 'require',
    });
    expect(bound.stderr).toBe('');
    expect(bound.stdout.trim()).toBe('7');
    const client = await connectClient(secure, { ssl: { ca: readFileSync(certFile) }, enableChannelBinding: true });
    expect((await client.query('SELECT 8 AS n')).rows).toEqual([{ n: 8 }]);
    await client.end();
    // Without TLS there is no channel to bind to.
    const unbound = await psql(secure.address.port, ['-c', 'SELECT 1'], {
      PGSSLMODE: 'disable',
      PGCHANNELBINDING: 'require',
    });
    expect(unbound.code).not.toBe(0);
    expect(unbound.stderr).toContain('channel binding');
  });

  it('says no to TLS when no certificate is configured', async () => {
    const res = await psql(plain.address.port, ['-c', 'SELECT 1'], { PGSSLMODE: 'require' });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('server does not support SSL');
    await expect(connectClient(plain, { ssl: { rejectUnauthorized: false } })).rejects.toThrow(/does not support SSL/);
  });

  it('survives a client that asks for TLS and then fails the handshake', async () => {
    const socket = await rawSocket(secure.address.port);
    const received: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      // 'S': TLS accepted; what follows is not a ClientHello.
      socket.write('this is not TLS at all, just some bytes to trip the handshake\r\n');
    });
    const sslRequest = Buffer.alloc(8);
    sslRequest.writeInt32BE(8, 0);
    sslRequest.writeInt32BE(80877103, 4);
    socket.write(sslRequest);
    await closed;
    expect(Buffer.concat(received).subarray(0, 1).toString()).toBe('S');
    await waitFor(() => expect(secure.sessions).toBe(0));
    const client = await connectClient(secure, { ssl: { ca: readFileSync(certFile) } });
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await client.end();
  });

  it('reaches its database over verified TLS when the database URL asks for it', async () => {
    // The TLS listener stands in for a PostgreSQL server that requires TLS: a second listener logs into it.
    const viaTls: IntrospectionAccess = {
      role: CLUSTER,
      password: PASSWORD,
      database: CLUSTER,
      url: `postgres://${CLUSTER}:${PASSWORD}@localhost:${secure.address.port}/${CLUSTER}?sslmode=verify-full&sslrootcert=${encodeURIComponent(certFile)}`,
    };
    const chained = await startListener(viaTls, { RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '5m' });
    try {
      const client = await connectClient(chained);
      try {
        expect((await client.query<{ u: string }>('SELECT current_user AS u')).rows).toEqual([{ u: access.role }]);
        // A cancel travels both hops, the second one over TLS.
        const sleeping = sqlState(client.query(`SELECT pg_sleep(60), 'chained' AS marker`));
        await waitFor(async () => {
          expect(await activeStatements(superuser, access.role)).toContain(`SELECT pg_sleep(60), 'chained' AS marker`);
        });
        const key = backendKey(client);
        await sendCancelRequest(chained.address.port, key.processId, key.secretKey);
        expect(await sleeping).toBe('57014');
      } finally {
        await client.end();
      }
      // A database that does not speak TLS is refused when the URL requires it.
      const noTls = await startListener({
        ...viaTls,
        url: `postgres://x:y@127.0.0.1:${plain.address.port}/x?sslmode=require`,
      });
      try {
        const err = await connectClient(noTls).then(
          () => undefined,
          (e: unknown) => e as { code?: string; detail?: string },
        );
        expect(err?.code).toBe('08006');
        expect(err?.detail).toContain('does not accept TLS');
      } finally {
        await noTls.stop();
      }
    } finally {
      await chained.stop();
    }
  });

  it('cancels a statement of a TLS session', async () => {
    const client = await connectClient(secure, { ssl: { ca: readFileSync(certFile) } });
    try {
      const sleeping = sqlState(client.query(`SELECT pg_sleep(60), 'tls' AS marker`));
      await waitFor(async () => {
        expect(await activeStatements(superuser, access.role)).toContain(`SELECT pg_sleep(60), 'tls' AS marker`);
      });
      const key = backendKey(client);
      await sendCancelRequest(secure.address.port, key.processId, key.secretKey);
      expect(await sleeping).toBe('57014');
    } finally {
      await client.end();
    }
  });
});

describe('TLS settings', () => {
  it('needs both the certificate and the key (RT0002)', () => {
    expect(() => loadConfig({ env: { RATCHET_INTROSPECTION_TLS_CERT: '/nowhere/cert.pem' } })).toThrow(
      expect.objectContaining({ code: 'RT0002', key: 'RATCHET_INTROSPECTION_TLS_CERT' }),
    );
  });

  it('refuses to start with files it cannot read (RT0002)', async () => {
    await expect(
      startListener(undefined, {
        RATCHET_INTROSPECTION_TLS_CERT: '/nowhere/cert.pem',
        RATCHET_INTROSPECTION_TLS_KEY: '/nowhere/key.pem',
      }),
    ).rejects.toMatchObject({ code: 'RT0002', key: 'RATCHET_INTROSPECTION_TLS_CERT' });
  });
});
