import { mkdtemp, readdir, readFile, rm, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../../../runtime/src/storage/pg/embedded.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { counter } from '../../support/services/counter.ts';
import { waitFor } from '../../support/wait.ts';
import { call } from '../support/runtime.ts';
import { CLUSTER_TEST_ENV, CounterLoad, checkCounters, type LoadReport } from './support.ts';

/**
 * PostgreSQL goes away and comes back under load — its postmaster SIGKILLed, then a fast shutdown — while sleeps and
 * delayed sends come due during the outage: no runtime process crashes, nothing acknowledged is lost or applied twice,
 * and no invocation is stuck afterwards. Once with an external PostgreSQL (two runtime processes), once with the
 * embedded one that the runtime supervises in dev mode.
 */

const sleeper = restate.service({
  name: 'Sleeper',
  handlers: {
    nap: async (ctx: restate.Context, ms: number): Promise<string> => {
      await ctx.sleep(ms);
      return 'woke';
    },
  },
});

const silent = pino({ level: 'silent' });

/** A data directory the postgres system user can reach when the tests run as root. */
async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(process.getuid?.() === 0 ? '/tmp' : tmpdir(), 'ratchet-pg-restart-'));
  await chmod(dir, 0o755);
  return dir;
}

async function postmasterPid(pgDir: string): Promise<number> {
  return Number((await readFile(join(pgDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

/** Work that comes due while the database is down: sleeps and delayed sends, started just before the outage. */
async function dueDuringOutage(ingressUrl: string, tag: string): Promise<{ sleepers: string[]; delayedKey: string }> {
  const sleepers: string[] = [];
  for (let i = 0; i < 4; i++) {
    const r = await accepted(() => call(ingressUrl, '/Sleeper/nap/send', 1200));
    sleepers.push((r.json as { invocationId: string }).invocationId);
  }
  const delayedKey = `${tag}-delayed`;
  // Exactly three adds must run: a send refused with 503 and sent again must not count twice (checked later).
  for (let i = 0; i < 3; i++) await accepted(() => call(ingressUrl, `/Counter/${delayedKey}/add/send?delay=1200ms`, 1));
  return { sleepers, delayedKey };
}

/**
 * A request sent again while it is answered 503 (a node still taking its partitions back after the database returned
 * says so, and clients retry it), for at most 20 s; then it must be accepted.
 */
async function accepted(send: () => Promise<{ status: number; json: unknown }>): Promise<{ json: unknown }> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await send();
    if (r.status !== 503 || Date.now() > deadline) {
      expect(r.status).toBe(202);
      return r;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** How long `f` took, in ms (less the second it waits at its end). */
async function timed(f: () => Promise<void>): Promise<number> {
  const started = Date.now();
  await f();
  return Date.now() - started - 1000;
}

/** PIDs of postmasters (`postgres -D <pgDir>`) alive now, zombies aside. */
async function postgresRunningOn(pgDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      if (/\) [ZX] /.test(stat)) continue;
      const args = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0');
      if (args.some((a) => a.endsWith('/postgres')) && args[args.indexOf('-D') + 1] === pgDir) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/**
 * A PostgreSQL still running on the test's data once everything was stopped (a runtime stopped with SIGKILL when its
 * graceful stop took too long leaves its embedded one running, by design): said, and stopped, so no test leaves one.
 */
async function stopLeftovers(dir: string): Promise<void> {
  for (const pid of await postgresRunningOn(join(dir, 'pg'))) {
    console.log(`PostgreSQL ${pid} was left running on ${dir}; stopping it`);
    process.kill(pid, 'SIGKILL');
  }
}

async function outage(kill: () => Promise<void>, ready: () => Promise<void>): Promise<number> {
  const started = Date.now();
  await kill();
  await ready();
  return Date.now() - started;
}

/** Every invocation finished (nothing stuck in scheduled, inboxed, invoked, suspended or paused). */
async function expectNothingStuck(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await waitFor(async () => {
      const res = await client.query<{ status: string; n: string }>(
        `SELECT status, count(*)::text AS n FROM ratchet.invocation WHERE status <> 'completed' GROUP BY status`,
      );
      expect(res.rows).toEqual([]);
    }, 40_000);
  } finally {
    await client.end();
  }
}

function expectNoUnexpectedErrors(output: string): void {
  // Warnings are expected (each failed write, the lost connections), and so is the error that reports the embedded
  // PostgreSQL's death; any other error, and any crash, is not.
  const lines = output
    .split('\n')
    .filter((l) => /"level":"(error|fatal)"|unhandled promise rejection|uncaughtException/.test(l))
    .filter((l) => !l.includes('the embedded PostgreSQL exited unexpectedly'));
  expect(lines).toEqual([]);
}

describe('PostgreSQL restarts under load', () => {
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    endpoint = await startEndpoint({ services: [counter, sleeper], transport: 'h2' });
  });

  afterAll(async () => {
    await endpoint?.close();
  });

  it('external PostgreSQL: two runtime processes ride out a SIGKILL of the postmaster and a fast shutdown', async () => {
    const dir = await dataDir();
    let db: EmbeddedDatabase = await startEmbeddedDatabase(dir, silent, { restart: true });
    const port = Number(new URL(db.url).port);
    const nodes: RuntimeProcess[] = [];
    let report: LoadReport | undefined;
    // Where it got to, and what the nodes said, when it fails (a timeout too, which skips the catch below).
    const stages: string[] = [];
    const stage = (name: string): void => void stages.push(`${new Date().toISOString()} ${name}`);
    onTestFailed(() => {
      console.log(`stages reached:\n${stages.join('\n')}`);
      for (const n of nodes) console.log(n.output());
    });
    try {
      for (const name of ['pg-a', 'pg-b']) {
        nodes.push(
          await startRuntimeProcess({
            databaseUrl: db.url,
            env: { ...CLUSTER_TEST_ENV, RATCHET_NODE_NAME: name, RATCHET_PARTITIONS: '8' },
          }),
        );
      }
      await registerEndpoint(nodes[0]!, endpoint);
      await waitFor(async () => expect((await fetch(`${nodes[1]!.adminUrl}/services/Counter`)).status).toBe(200));
      const keys = Array.from({ length: 8 }, (_, i) => `ext-k${i}`);
      const load = new CounterLoad(() => nodes.map((n) => n.ingressUrl), keys, 6, 'ext');
      await new Promise((r) => setTimeout(r, 1000));

      const due1 = await dueDuringOutage(nodes[0]!.ingressUrl, 'ext1');
      // Both nodes ready again (they say so once they hold partitions again), and a moment for the load to resume.
      const nodesReady = async (): Promise<void> => {
        await waitFor(async () => {
          for (const n of nodes) expect((await fetch(`${n.metricsUrl}/ready`)).status).toBe(200);
        }, 30_000);
        await new Promise((r) => setTimeout(r, 1000));
        stage('both nodes ready');
      };
      const pgReady = async (): Promise<void> => {
        await waitFor(async () => {
          const c = new pg.Client({ connectionString: db.url });
          await c.connect();
          await c.end();
        }, 60_000);
      };
      stage('SIGKILL of the postmaster');
      const killMs = await outage(async () => void process.kill(db.pid, 'SIGKILL'), pgReady);
      const killReadyMs = killMs + (await timed(nodesReady));
      const due2 = await dueDuringOutage(nodes[1]!.ingressUrl, 'ext2');
      stage('fast shutdown');
      const shutdownMs = await outage(async () => void process.kill(db.pid, 'SIGINT'), pgReady);
      const shutdownReadyMs = shutdownMs + (await timed(nodesReady));
      // A long outage (maintenance, a failover): down for longer than the lease timeout, so every lease runs out.
      const due3 = await dueDuringOutage(nodes[0]!.ingressUrl, 'ext3');
      const longStarted = Date.now();
      stage('long outage');
      await db.stop();
      await new Promise((r) => setTimeout(r, 4000));
      await waitFor(async () => {
        for (const n of nodes) expect((await fetch(`${n.metricsUrl}/ready`)).status).toBe(503);
      });
      db = await startEmbeddedDatabase(dir, silent, { restart: true, port });
      await waitFor(async () => {
        for (const n of nodes) expect((await fetch(`${n.metricsUrl}/ready`)).status).toBe(200);
      }, 30_000);
      const longMs = Date.now() - longStarted;
      stage('both nodes ready again');
      await new Promise((r) => setTimeout(r, 2000));
      report = await load.stop();

      for (const n of nodes) {
        expect(n.pid).toBeGreaterThan(0);
        // Still running: no crash.
        expect(await Promise.race([n.exited.then(() => 'exited'), Promise.resolve('running')])).toBe('running');
      }
      stage('load stopped');
      const total = await checkCounters(nodes[0]!.ingressUrl, report);
      stage('counters checked');
      for (const due of [due1, due2, due3]) {
        for (const id of due.sleepers) {
          await waitFor(async () => {
            const r = await fetch(`${nodes[1]!.ingressUrl}/restate/invocation/${id}/output`);
            expect(await r.text()).toBe('"woke"');
          }, 40_000);
        }
        await waitFor(async () => {
          expect((await call(nodes[0]!.ingressUrl, `/Counter/${due.delayedKey}/get`)).text).toBe('3');
        }, 40_000);
      }
      stage('sleepers and delayed sends ran');
      await expectNothingStuck(db.url);
      for (const n of nodes) expectNoUnexpectedErrors(n.output());
      console.log(
        `external PostgreSQL: back ${killMs} ms after SIGKILL (both nodes ready again after ${killReadyMs} ms), ` +
          `${shutdownMs} ms after a fast shutdown (ready after ${shutdownReadyMs} ms), both nodes ` +
          `ready ${longMs} ms after the start of a 4 s outage; ` +
          `${report.requests} requests, ${total} acknowledged (lost 0, duplicates 0), ${report.firstTryFailures} ` +
          'needed a retry; every sleep and delayed send that came due during the outages ran',
      );
    } catch (err) {
      for (const n of nodes) console.log(n.output());
      throw err;
    } finally {
      for (const n of nodes) await n.stop();
      await db.stop();
      await stopLeftovers(dir);
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it('a stop while the embedded PostgreSQL is being restarted leaves no PostgreSQL running', async () => {
    const dir = await dataDir();
    const pgDir = join(dir, 'pg');
    try {
      // The supervisor retries 250 ms after the postmaster died, then spawns and waits for it: stop at every stage.
      for (const delayMs of [0, 150, 250, 270, 300, 350, 450, 700]) {
        const db = await startEmbeddedDatabase(dir, silent, { restart: true });
        process.kill(db.pid, 'SIGKILL');
        await new Promise((r) => setTimeout(r, delayMs));
        await db.stop();
        // Whatever the supervisor had started is gone once stop() resolves.
        expect(await postgresRunningOn(pgDir), `stopped ${delayMs} ms after the SIGKILL`).toEqual([]);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('embedded PostgreSQL (dev mode): the runtime restarts it on the same data and carries on', async () => {
    const dir = await dataDir();
    let runtime: RuntimeProcess | undefined;
    try {
      runtime = await startRuntimeProcess({
        databaseUrl: '',
        env: { ...CLUSTER_TEST_ENV, RATCHET_DATA_DIR: dir, RATCHET_NODE_NAME: 'dev-node', RATCHET_LOG_LEVEL: 'info' },
      });
      const rt = runtime;
      await registerEndpoint(rt, endpoint);
      const keys = Array.from({ length: 4 }, (_, i) => `dev-k${i}`);
      const load = new CounterLoad(() => [rt.ingressUrl], keys, 4, 'dev');
      await new Promise((r) => setTimeout(r, 1000));
      const pgDir = join(dir, 'pg');
      const ready = async (): Promise<void> => {
        await waitFor(async () => {
          expect((await fetch(`${rt.metricsUrl}/ready`)).status).toBe(200);
        }, 60_000);
      };
      const due1 = await dueDuringOutage(rt.ingressUrl, 'dev1');
      const killMs = await outage(
        async () => void process.kill(await postmasterPid(pgDir), 'SIGKILL'),
        async () => {
          await waitFor(async () => expect((await fetch(`${rt.metricsUrl}/ready`)).status).toBe(503), 10_000).catch(
            () => undefined,
          );
          await ready();
        },
      );
      const due2 = await dueDuringOutage(rt.ingressUrl, 'dev2');
      const shutdownMs = await outage(
        async () => void process.kill(await postmasterPid(pgDir), 'SIGINT'),
        async () => {
          await new Promise((r) => setTimeout(r, 500));
          await ready();
        },
      );
      await new Promise((r) => setTimeout(r, 1500));
      const report = await load.stop();
      expect(await Promise.race([rt.exited.then(() => 'exited'), Promise.resolve('running')])).toBe('running');
      const total = await checkCounters(rt.ingressUrl, report);
      for (const due of [due1, due2]) {
        for (const id of due.sleepers) {
          await waitFor(async () => {
            const r = await fetch(`${rt.ingressUrl}/restate/invocation/${id}/output`);
            expect(await r.text()).toBe('"woke"');
          }, 40_000);
        }
        await waitFor(async () => {
          expect((await call(rt.ingressUrl, `/Counter/${due.delayedKey}/get`)).text).toBe('3');
        }, 40_000);
      }
      expect(rt.output()).toMatch(/embedded PostgreSQL restarted on the same data/);
      expectNoUnexpectedErrors(rt.output());
      console.log(
        `embedded PostgreSQL: ready again ${killMs} ms after SIGKILL of the postmaster, ${shutdownMs} ms after a fast ` +
          `shutdown; ${report.requests} requests, ${total} acknowledged (lost 0, duplicates 0)`,
      );
    } catch (err) {
      if (runtime !== undefined) console.log(runtime.output().slice(-20_000));
      throw err;
    } finally {
      await runtime?.stop();
      await stopLeftovers(dir);
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
