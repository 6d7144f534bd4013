import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { CLUSTER, PASSWORD, prepareIntrospection, startListener } from './support.ts';

/**
 * The real PostgreSQL JDBC driver against 9071 (JdbcProbe.java): server-side prepared statements, a portal fetched
 * with a fetch size, DatabaseMetaData, a refused write and Statement.cancel(). Runs where a JDK and the driver's jar
 * (in the local Maven repository) are present; skipped elsewhere.
 */

function jdbcDriverJar(): string | undefined {
  const dir = join(homedir(), '.m2', 'repository', 'org', 'postgresql', 'postgresql');
  if (!existsSync(dir)) return undefined;
  for (const version of readdirSync(dir).sort().reverse()) {
    const jar = join(dir, version, `postgresql-${version}.jar`);
    if (existsSync(jar)) return jar;
  }
  return undefined;
}

function hasJava(): boolean {
  try {
    execFileSync('java', ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const jar = jdbcDriverJar();
const runnable = jar !== undefined && hasJava();

const greeter = restate.service({
  name: 'JdbcGreeter',
  handlers: {
    greet: async (ctx: restate.Context, name: string): Promise<string> => ctx.run('greet', () => `hi ${name}`),
  },
});

let db: TestDatabase;
let runtime: TestRuntime;
let endpoint: SdkEndpoint;
let listener: PgWireListener;

describe.skipIf(!runnable)('JDBC', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, { RATCHET_INTROSPECTION_BIND: '127.0.0.1:0' });
    endpoint = await startEndpoint({ services: [greeter], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    for (const name of ['a', 'b'])
      expect((await call(runtime.ingressUrl, '/JdbcGreeter/greet', name)).status).toBe(200);
    listener = await startListener(await prepareIntrospection(db.url), {
      RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '5m',
    });
  });

  afterAll(async () => {
    await listener?.stop();
    await endpoint?.close();
    await runtime?.stop();
    await db?.drop();
  });

  it('runs what JDBC applications and tools do', async () => {
    const url = `jdbc:postgresql://${LOOPBACK}:${listener.address.port}/${CLUSTER}?prepareThreshold=1&sslmode=disable`;
    const output = await new Promise<string>((resolve, reject) => {
      execFile(
        'java',
        ['-cp', jar!, join(import.meta.dirname, 'JdbcProbe.java'), url, CLUSTER, PASSWORD],
        { timeout: 120_000 },
        (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`${err.message}\n${stderr}`))),
      );
    });
    expect(output.trim().split('\n')).toEqual([
      'counts: completed=2,running=0,injected=0',
      'fetched: 1,2,3,4,5',
      'views: sys_journal',
      'write: 42501',
      'cancel: 57014',
      `user: ${(await prepareIntrospection(db.url)).role}`,
    ]);
  });
});
