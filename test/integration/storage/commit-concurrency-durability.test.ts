import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';

/**
 * Group commits overlap (several transactions in flight, `RATCHET_GROUP_COMMIT_CONCURRENCY`): the runtime is
 * SIGKILLed while a few hundred virtual-object `add` calls over a handful of keys and plain service calls are in
 * flight. Every call carries an idempotency key and the client retries it until it gets an answer, as a real client
 * would. Exactly once means: per key the answers are exactly 1..n (no increment lost, none applied twice), the final
 * state is n, and every answer given before the kill is the answer the same idempotency key gets afterwards. The
 * adds start from the engine's in-memory copy of the key's state, so this checks that copy too.
 */

const counter = restate.object({
  name: 'CommitCounter',
  handlers: {
    add: async (ctx: restate.ObjectContext, delta: number): Promise<number> => {
      const next = ((await ctx.get<number>('value')) ?? 0) + delta;
      ctx.set('value', next);
      return next;
    },
    get: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext): Promise<number> => (await ctx.get<number>('value')) ?? 0,
    ),
  },
});

const echo = restate.service({
  name: 'CommitEcho',
  handlers: {
    twice: async (ctx: restate.Context, n: number): Promise<number> => ctx.run('double', () => n * 2),
  },
});

const KEYS = 6;
const CALLS_PER_KEY = 40;
const ECHO_CALLS = 60;

interface Call {
  readonly path: string;
  readonly body: string;
  readonly idempotencyKey: string;
  readonly key?: string;
  /** Answers received, in order (a retry of an answered call must repeat the answer). */
  readonly answers: number[];
}

async function attempt(ingressUrl: string, c: Call): Promise<number | undefined> {
  try {
    const res = await fetch(`${ingressUrl}${c.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': c.idempotencyKey },
      body: c.body,
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    if (res.status !== 200) return undefined;
    return JSON.parse(text) as number;
  } catch {
    return undefined; // connection refused or reset: the runtime is down, retry later
  }
}

describe('overlapping group commits across a SIGKILL', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  const env = { RATCHET_NODE_NAME: 'commit-concurrency-node', RATCHET_GROUP_COMMIT_CONCURRENCY: '3' };

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [counter, echo], transport: 'h2' });
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('answers every call exactly once, and the answers given before the kill stand', async () => {
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env });
    await registerEndpoint(runtime, endpoint);

    const calls: Call[] = [];
    for (let i = 0; i < CALLS_PER_KEY; i++) {
      for (let k = 0; k < KEYS; k++) {
        calls.push({
          path: `/CommitCounter/k${k}/add`,
          body: '1',
          idempotencyKey: `add-${k}-${i}`,
          key: `k${k}`,
          answers: [],
        });
      }
    }
    for (let i = 0; i < ECHO_CALLS; i++) {
      calls.push({ path: '/CommitEcho/twice', body: String(i), idempotencyKey: `echo-${i}`, answers: [] });
    }

    // Every call is sent at once; the kill comes once a third of them were answered.
    let current = runtime;
    let killed = false;
    const answeredBeforeKill = new Map<Call, number>();
    const killWhen = Math.floor(calls.length / 3);
    let answered = 0;
    const restarted = (async () => {
      await expect.poll(() => answered >= killWhen, { timeout: 60_000, interval: 5 }).toBe(true);
      await current.kill('SIGKILL');
      killed = true;
      for (const c of calls) if (c.answers.length > 0) answeredBeforeKill.set(c, c.answers[0]!);
      current = await startRuntimeProcess({ databaseUrl: db.url, env, ports: current.ports });
      runtime = current;
    })();
    // Should a call never be answered, say which and why before the test times out.
    const watchdog = setTimeout(() => void explainStuck(db.url, calls, current), 45_000);
    await Promise.all(
      calls.map(async (c) => {
        for (;;) {
          const answer = await attempt(current.ingressUrl, c);
          if (answer !== undefined) {
            c.answers.push(answer);
            answered += 1;
            return;
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      }),
    );
    clearTimeout(watchdog);
    await restarted;
    expect(killed).toBe(true);
    expect(answeredBeforeKill.size).toBeGreaterThanOrEqual(killWhen);
    expect(answeredBeforeKill.size).toBeLessThan(calls.length);

    // Every answer was durable, those given before the kill included: the same idempotency key answers the same.
    for (const c of calls) {
      const again = await attempt(current.ingressUrl, c);
      expect(again, `${c.idempotencyKey} first answered ${c.answers[0]}`).toBe(c.answers[0]);
    }

    for (let k = 0; k < KEYS; k++) {
      const answers = calls
        .filter((c) => c.key === `k${k}`)
        .map((c) => c.answers[0]!)
        .sort((a, b) => a - b);
      expect(answers).toEqual(Array.from({ length: CALLS_PER_KEY }, (_, i) => i + 1));
      const res = await fetch(`${current.ingressUrl}/CommitCounter/k${k}/get`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(await res.json()).toBe(CALLS_PER_KEY);
    }
    calls.filter((c) => c.key === undefined).forEach((c) => expect(c.answers[0]).toBe(Number(c.body) * 2));

    // The adds after the restart started from cached state (so this also checks the cache's correctness): the
    // counter of attempts whose state came from memory moved.
    const metrics = await (await fetch(`${current.metricsUrl}/metrics`)).text();
    const hits = /^ratchet_engine_state_cache_reads_total\{result="hit"\} (\d+)/m.exec(metrics);
    expect(Number(hits?.[1] ?? 0)).toBeGreaterThan(0);
  });
});

/** Prints the unanswered calls, the unfinished invocations in the database and the runtime's recent output. */
async function explainStuck(url: string, calls: readonly Call[], runtime: RuntimeProcess): Promise<void> {
  const open = calls.filter((c) => c.answers.length === 0).map((c) => c.idempotencyKey);
  const client = new pg.Client({ connectionString: url });
  let rows: unknown[] = [];
  try {
    await client.connect();
    rows = (
      await client.query(
        `SELECT id, service_name, service_key, handler_name, status, idempotency_key, retry_count, inbox_seq,
                last_failure, modified_at FROM ratchet.invocation WHERE status <> 'completed' ORDER BY created_at`,
      )
    ).rows;
  } catch (err) {
    rows = [String(err)];
  } finally {
    await client.end().catch(() => undefined);
  }
  process.stderr.write(
    `stuck: ${open.length} call(s) unanswered: ${open.join(', ')}\n` +
      `unfinished invocations: ${JSON.stringify(rows, null, 1)}\n` +
      `runtime output (tail):\n${runtime.output().slice(-20_000)}\n`,
  );
}
