import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IntrospectionAccess } from '../../../runtime/src/introspection/access.ts';
import type { PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import {
  activeStatements,
  connectClient,
  prepareIntrospection,
  rawSocket,
  sqlState,
  startListener,
} from './support.ts';

/**
 * Many sessions, a full listener, clients that vanish mid-statement or speak garbage, and a shutdown: the listener
 * stays healthy, PostgreSQL is left with no stray statements, and the runtime keeps serving invocations.
 */

const echo = restate.service({
  name: 'Echo',
  handlers: {
    say: async (ctx: restate.Context, text: string): Promise<string> => ctx.run('say', () => text),
  },
});

let db: TestDatabase;
let runtime: TestRuntime;
let endpoint: SdkEndpoint;
let superuser: pg.Pool;
let access: IntrospectionAccess;
let listener: PgWireListener;

beforeAll(async () => {
  db = await createTestDatabase();
  runtime = await startTestRuntime(db.url, { RATCHET_INTROSPECTION_BIND: '127.0.0.1:0' });
  endpoint = await startEndpoint({ services: [echo], transport: 'h2' });
  await registerEndpoint(runtime, endpoint);
  superuser = new pg.Pool({ connectionString: db.url, max: 2 });
  access = await prepareIntrospection(db.url);
  listener = await startListener(access, { RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '5m' });
});

afterAll(async () => {
  await listener?.stop();
  await superuser?.end();
  await endpoint?.close();
  await runtime?.stop();
  await db?.drop();
});

async function invokeEcho(text: string): Promise<void> {
  const res = await call(runtime.ingressUrl, '/Echo/say', text);
  expect(res.status).toBe(200);
  expect(res.json).toBe(text);
}

describe('many sessions', () => {
  it('serves many concurrent sessions, each with its own backend', async () => {
    await invokeEcho('before');
    const sessions = 24;
    const results = await Promise.all(
      Array.from({ length: sessions }, async (_, i) => {
        const client = await connectClient(listener, { application_name: `session-${i}` });
        try {
          const pids = new Set<number>();
          for (let q = 0; q < 5; q++) {
            const res = await client.query<{ pid: number; n: number; app: string }>(
              `SELECT pg_backend_pid() AS pid, $1::int * 2 AS n, current_setting('application_name') AS app,
                      (SELECT count(*) FROM sys_invocation) AS invocations`,
              [i * 10 + q],
            );
            expect(res.rows[0]).toMatchObject({ n: (i * 10 + q) * 2, app: `session-${i}` });
            pids.add(res.rows[0]!.pid);
          }
          expect(pids.size).toBe(1);
          return [...pids][0]!;
        } finally {
          await client.end();
        }
      }),
    );
    expect(new Set(results).size).toBe(sessions);
    await waitFor(() => expect(listener.sessions).toBe(0));
    await invokeEcho('after');
  });

  it('refuses a client over its own session limit with 53300 naming the setting, and counts it', async () => {
    let refusals = 0;
    const small = await startListener(
      access,
      {
        RATCHET_INTROSPECTION_MAX_SESSIONS: '10',
        RATCHET_INTROSPECTION_MAX_SESSIONS_PER_USER: '2',
      },
      undefined,
      () => (refusals += 1),
    );
    try {
      const clients = await Promise.all([1, 2].map(() => connectClient(small)));
      const third = await connectClient(small).then(
        () => 'connected',
        (err: Error & { code?: string }) => `${err.code}: ${err.message}`,
      );
      expect(third).toMatch(
        /^53300: too many SQL sessions for this user: at most 2 at once \(RATCHET_INTROSPECTION_MAX_SESSIONS_PER_USER\)/,
      );
      expect(refusals).toBe(1);
      await clients.pop()!.end();
      const again = await waitFor(() => connectClient(small));
      clients.push(again);
      await Promise.all(clients.map((c) => c.end()));
    } finally {
      await small.stop();
    }
  });

  it('refuses sessions over the limit with 53300 and admits again once one ends', async () => {
    const small = await startListener(access, { RATCHET_INTROSPECTION_MAX_SESSIONS: '3' });
    try {
      const clients = await Promise.all([1, 2, 3].map(() => connectClient(small)));
      expect(await sqlState(connectClient(small))).toBe('53300');
      // The refused attempt harmed none of the admitted sessions.
      for (const client of clients) expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await clients.pop()!.end();
      const again = await waitFor(() => connectClient(small));
      expect((await again.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
      clients.push(again);
      await Promise.all(clients.map((c) => c.end()));
    } finally {
      await small.stop();
    }
  });
});

describe('clients that misbehave', () => {
  it('cancels the statements of clients that disconnect mid-query', async () => {
    const marker = `SELECT pg_sleep(120), 'abandoned' AS marker`;
    const clients = await Promise.all([1, 2, 3, 4].map(() => connectClient(listener)));
    const running = clients.map((c) =>
      c.query(marker).then(
        () => 'finished',
        () => 'failed',
      ),
    );
    await waitFor(async () => {
      expect((await activeStatements(superuser, access.role)).filter((q) => q === marker)).toHaveLength(4);
    });
    for (const client of clients)
      (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    expect(await Promise.all(running)).toEqual(['failed', 'failed', 'failed', 'failed']);
    // PostgreSQL would run a statement whose client vanished until it next writes to it; the listener cancels it.
    await waitFor(async () => expect(await activeStatements(superuser, access.role)).toEqual([]));
    await waitFor(async () => {
      const res = await superuser.query('SELECT 1 FROM pg_stat_activity WHERE usename = $1', [access.role]);
      expect(res.rows).toEqual([]);
    });
    await waitFor(() => expect(listener.sessions).toBe(0));
    const client = await connectClient(listener);
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await client.end();
    await invokeEcho('after disconnects');
  });

  it('survives clients that leave mid-handshake or send garbage', async () => {
    const port = listener.address.port;
    // Half a startup packet, then gone.
    const half = await rawSocket(port);
    half.end(Buffer.from([0, 0, 0, 40, 0, 3]));
    // Not the PostgreSQL protocol at all: answered with a protocol violation, or closed.
    const garbage = await rawSocket(port);
    const answer = new Promise<string>((resolve) => {
      let text = '';
      garbage.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
      garbage.on('close', () => resolve(text));
    });
    garbage.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await answer).toMatch(/08P01/);
    // A startup packet that claims to be enormous.
    const huge = await rawSocket(port);
    const hugeClosed = new Promise<void>((resolve) => huge.on('close', () => resolve()));
    huge.resume();
    huge.write(Buffer.from([0x7f, 0, 0, 0, 0, 3, 0, 0]));
    await hugeClosed;
    // A client that authenticates, then breaks the framing.
    const client = await connectClient(listener);
    const broken = (client as unknown as { connection: { stream: { write(b: Buffer): void } } }).connection.stream;
    const failed = new Promise<void>((resolve) => client.once('end', () => resolve()));
    broken.write(Buffer.from([0x51, 0, 0, 0, 2]));
    await failed;

    await waitFor(() => expect(listener.sessions).toBe(0));
    const healthy = await connectClient(listener);
    expect((await healthy.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await healthy.end();
    await invokeEcho('after garbage');
  });
});

describe('startup and shutdown', () => {
  it('refuses to start on a taken address (RT0004)', async () => {
    await expect(
      startListener(access, { RATCHET_INTROSPECTION_BIND: `127.0.0.1:${listener.address.port}` }),
    ).rejects.toMatchObject({ code: 'RT0004', listener: 'introspection' });
  });

  it('ends open sessions with 57P01 and releases their backends', async () => {
    const closing = await startListener(access);
    const idle = await connectClient(closing);
    const busy = await connectClient(closing);
    const errors: string[] = [];
    idle.on('error', (err: Error & { code?: string }) => errors.push(err.code ?? err.message));
    const sleeping = sqlState(busy.query(`SELECT pg_sleep(120), 'shutdown' AS marker`));
    await waitFor(async () => {
      expect(await activeStatements(superuser, access.role)).toContain(`SELECT pg_sleep(120), 'shutdown' AS marker`);
    });
    await closing.stop();
    expect(closing.sessions).toBe(0);
    expect(await sleeping).toBeDefined();
    await waitFor(() => expect(errors).toContain('57P01'));
    await waitFor(async () => expect(await activeStatements(superuser, access.role)).toEqual([]));
    // Other listeners' sessions are untouched.
    const other = await connectClient(listener);
    expect((await other.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await other.end();
  });
});
