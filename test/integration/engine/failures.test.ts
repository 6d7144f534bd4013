import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Db, T, send } from './helpers.ts';

/**
 * How attempts fail and what the engine does next: the retry policy from the manifest and from the server config
 * (pause or kill on max attempts), delays the SDK asks for, terminal failures, journal mismatches and calls to
 * unknown services. Two runtimes share one SDK endpoint: their server default policies differ only in what happens
 * on the last attempt (kill / pause).
 */

/** Per-key counters and timestamps written by the handlers: how often user code really ran, and when. */
const counts = new Map<string, number>();
const stamps = new Map<string, number[]>();
const bump = (k: string): number => {
  const n = (counts.get(k) ?? 0) + 1;
  counts.set(k, n);
  return n;
};
const stamp = (k: string): number => {
  const list = stamps.get(k) ?? [];
  list.push(Date.now());
  stamps.set(k, list);
  return list.length;
};

/** Service-level policy (pause after 2 attempts); `alwaysKill` overrides what happens on the last attempt. */
const boom = restate.service({
  name: 'Boom',
  handlers: {
    always: async (_ctx: restate.Context, key: string): Promise<string> => {
      throw new Error(`boom ${key} #${bump(`always:${key}`)}`);
    },
    alwaysKill: restate.handlers.handler(
      { retryPolicy: { onMaxAttempts: 'kill' } },
      async (_ctx: restate.Context, key: string): Promise<string> => {
        throw new Error(`boom ${key} #${bump(`alwaysKill:${key}`)}`);
      },
    ),
  },
  options: { retryPolicy: { maxAttempts: 2, initialInterval: 50, onMaxAttempts: 'pause' } },
});

/** No policy in the manifest: the server default applies. */
const plain = restate.service({
  name: 'Plain',
  handlers: {
    fail: async (_ctx: restate.Context, key: string): Promise<string> => {
      throw new Error(`plain ${key} #${bump(`plain:${key}`)}`);
    },
  },
});

/** A service that is never bound to an endpoint: calling it is RT0018. */
const missing = restate.service({
  name: 'Missing',
  handlers: { hello: async (_ctx: restate.Context, name: string) => `hello ${name}` },
});

const pauseAfter = (maxAttempts: number): { retryPolicy: restate.RetryPolicy } => ({
  retryPolicy: { maxAttempts, initialInterval: 50, onMaxAttempts: 'pause' },
});

const behaviour = restate.service({
  name: 'Behaviour',
  handlers: {
    runRetry: async (ctx: restate.Context, key: string): Promise<string> => {
      try {
        await ctx.run(
          'flaky',
          () => {
            stamp(`runRetry:${key}`);
            throw new Error('not yet');
          },
          { initialRetryInterval: 1000, maxRetryAttempts: 2 },
        );
        return 'unreachable';
      } catch (e) {
        if (e instanceof restate.TerminalError) return `gave up: ${e.message}`;
        throw e;
      }
    },
    /** More ctx.run attempts than the server policy allows invocation attempts (3). */
    runRetryLong: async (ctx: restate.Context, key: string): Promise<string> => {
      try {
        await ctx.run(
          'flaky',
          () => {
            stamp(`runRetryLong:${key}`);
            throw new Error('still not');
          },
          { initialRetryInterval: 10, maxRetryAttempts: 5 },
        );
        return 'unreachable';
      } catch (e) {
        if (e instanceof restate.TerminalError) return `gave up: ${e.message}`;
        throw e;
      }
    },
    retryAfter: async (ctx: restate.Context, key: string): Promise<string> =>
      ctx.run('later', () => {
        const n = stamp(`retryAfter:${key}`);
        if (n === 1) throw new restate.RetryableError('try later', { retryAfter: 1500 });
        return `ok on attempt ${n}`;
      }),
    charge: async (ctx: restate.Context, key: string): Promise<string> => {
      await ctx.run('charge', () => {
        bump(`charge:${key}`);
        throw new restate.TerminalError('card declined', { errorCode: 402 });
      });
      return 'charged';
    },
    pauseMe: async (ctx: restate.Context, key: string): Promise<string> =>
      ctx.run('needs-a-human', () => {
        bump(`pause-me:${key}`);
        throw new restate.PauseError('waiting for an operator');
      }),
    mismatch: restate.handlers.handler(pauseAfter(3), async (ctx: restate.Context, key: string): Promise<string> => {
      // Code that changes between attempts (a deployment updated in place): the first attempt journals a Run and
      // fails, the next ones sleep where the journal says a Run happened.
      if (bump(`mismatch:${key}`) === 1) {
        await ctx.run('a', () => 'a');
        throw new Error('first attempt fails after the run');
      }
      await ctx.sleep(10);
      return 'never';
    }),
    callMissing: restate.handlers.handler(pauseAfter(2), async (ctx: restate.Context, key: string): Promise<string> => {
      await ctx.run('before', () => bump(`before-missing:${key}`));
      return ctx.serviceClient(missing).hello(key);
    }),
  },
});

const BASE_ENV = {
  RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
  RATCHET_RETRY_MAX_INTERVAL: '200ms',
  RATCHET_RETRY_MAX_ATTEMPTS: '3',
};

describe.each(['h2', 'h1'] as const)('attempt failures over %s', (transport) => {
  let endpoint: SdkEndpoint;
  const dbs: TestDatabase[] = [];
  let killer: TestRuntime;
  let pauser: TestRuntime;
  let killerDb: Db;
  let pauserDb: Db;

  beforeAll(async () => {
    endpoint = await startEndpoint({ services: [boom, plain, behaviour], transport });
    const start = async (onMax: string): Promise<[TestRuntime, Db]> => {
      const db = await createTestDatabase();
      dbs.push(db);
      const runtime = await startTestRuntime(db.url, { ...BASE_ENV, RATCHET_RETRY_ON_MAX_ATTEMPTS: onMax });
      await registerEndpoint(runtime, endpoint);
      return [runtime, await Db.connect(db.url)];
    };
    [killer, killerDb] = await start('kill');
    [pauser, pauserDb] = await start('pause');
  });

  afterAll(async () => {
    await killerDb?.close();
    await pauserDb?.close();
    await killer?.stop();
    await pauser?.stop();
    await endpoint?.close();
    for (const db of dbs) await db.drop();
  });

  it('pauses after the maxAttempts of the manifest retry policy, keeping the last failure', async () => {
    const key = `pause-${transport}`;
    const id = await send(killer.ingressUrl, '/Boom/always', key);
    await expect.poll(async () => (await killerDb.row(id))?.status, { timeout: 10_000 }).toBe('paused');
    const row = await killerDb.row(id);
    expect(row).toMatchObject({ retry_count: 2, last_failure_code: 'RT0007', next_retry_at: null, result_kind: null });
    expect(row?.last_failure).toContain(`boom ${key} #2`);
    expect(counts.get(`always:${key}`)).toBe(2);
  });

  it('kills after the maxAttempts of the manifest retry policy: the caller gets the last error', async () => {
    // restate-server fails the invocation with the error of the last attempt (invoker `OnTaskError::Kill` →
    // `EffectKind::Failed(last error)`), not with the 409 "killed" of an explicit kill: an uncaught exception is
    // code 500 with the exception's message.
    const key = `kill-${transport}`;
    const res = await call(killer.ingressUrl, '/Boom/alwaysKill', key);
    expect(res.status).toBe(500);
    expect(res.json).toEqual({ code: 500, message: `boom ${key} #2`, source: 'invocation' });
    expect(counts.get(`alwaysKill:${key}`)).toBe(2);
    const id = res.headers.get('x-restate-id')!;
    expect(await killerDb.row(id)).toMatchObject({
      status: 'completed',
      result_kind: 'failure',
      failure_code: 500,
      failure_message: `boom ${key} #2`,
      retry_count: 2,
      last_failure_code: 'RT0007',
    });
  });

  it('applies the server default policy when the manifest has none (kill / pause after 3 attempts)', async () => {
    const killKey = `default-kill-${transport}`;
    const res = await call(killer.ingressUrl, '/Plain/fail', killKey);
    expect(res.status).toBe(500);
    expect(res.json).toEqual({ code: 500, message: `plain ${killKey} #3`, source: 'invocation' });
    expect(counts.get(`plain:${killKey}`)).toBe(3);

    const pauseKey = `default-pause-${transport}`;
    const id = await send(pauser.ingressUrl, '/Plain/fail', pauseKey);
    await expect.poll(async () => (await pauserDb.row(id))?.status, { timeout: 10_000 }).toBe('paused');
    expect(await pauserDb.row(id)).toMatchObject({ retry_count: 3, last_failure_code: 'RT0007' });
    expect(counts.get(`plain:${pauseKey}`)).toBe(3);
  });

  it('waits the next_retry_delay of ctx.run retry options, and the SDK gives up after maxRetryAttempts', async () => {
    // The server policy would retry after 50 ms; the SDK asks for 1 s. After the second failure the SDK proposes a
    // terminal failure itself, which only works if Start carries the right retry count since the last entry.
    const key = `run-retry-${transport}`;
    const res = await call(killer.ingressUrl, '/Behaviour/runRetry', key);
    expect(res.status).toBe(200);
    expect(res.json).toMatch(/^gave up: /);
    const at = stamps.get(`runRetry:${key}`) ?? [];
    expect(at).toHaveLength(2);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(1000);
  });

  it('lets the ctx.run retry policy govern its retries: they spend no attempt of the invocation retry policy', async () => {
    // restate-server takes an SDK-requested delay instead of advancing the invocation's retry policy
    // (`next_retry_interval_override.or_else(|| retry_iter.next())`), so a run may retry more often than the policy's
    // maxAttempts (3 here) and then fail terminally inside the handler, which can handle it.
    const key = `run-retry-long-${transport}`;
    const res = await call(killer.ingressUrl, '/Behaviour/runRetryLong', key);
    expect(res.status).toBe(200);
    expect(res.json).toMatch(/^gave up: /);
    expect(stamps.get(`runRetryLong:${key}`)).toHaveLength(5);
  });

  it('waits the retryAfter of a RetryableError, and records it as the next retry time', async () => {
    const key = `retry-after-${transport}`;
    const id = await send(killer.ingressUrl, '/Behaviour/retryAfter', key);
    await expect.poll(async () => (await killerDb.row(id))?.next_retry_at ?? null, { timeout: 10_000 }).not.toBeNull();
    const waiting = await killerDb.row(id);
    expect(waiting).toMatchObject({ status: 'invoked', retry_count: 1, last_failure_code: 'RT0007' });
    expect(waiting!.next_retry_at!.getTime() - waiting!.modified_at.getTime()).toBeGreaterThanOrEqual(1500);

    await expect.poll(async () => (await killerDb.row(id))?.status, { timeout: 10_000 }).toBe('completed');
    const done = await killerDb.row(id);
    expect(done?.result_kind).toBe('success');
    expect(JSON.parse(done!.output!.toString('utf8'))).toBe('ok on attempt 2');
    const at = stamps.get(`retryAfter:${key}`) ?? [];
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(1500);
  });

  it('completes with the failure a ctx.run closure proposed as terminal, without retrying', async () => {
    const key = `charge-${transport}`;
    const res = await call(killer.ingressUrl, '/Behaviour/charge', key);
    expect(res.status).toBe(402);
    expect(res.json).toEqual({ code: 402, message: 'card declined', source: 'invocation' });
    expect(counts.get(`charge:${key}`)).toBe(1);
    const id = res.headers.get('x-restate-id')!;
    expect(await killerDb.row(id)).toMatchObject({ retry_count: 0, failure_code: 402, last_failure_code: null });
    expect(await killerDb.journalTypes(id)).toEqual([T.Input, T.Run, T.RunCompletion, T.Output]);
  });

  it('pauses at once when the SDK asks for it (PauseError, error behavior PAUSE)', async () => {
    const key = `pause-me-${transport}`;
    const id = await send(killer.ingressUrl, '/Behaviour/pauseMe', key);
    await expect.poll(async () => (await killerDb.row(id))?.status, { timeout: 10_000 }).toBe('paused');
    const row = await killerDb.row(id);
    expect(row).toMatchObject({ last_failure_code: 'RT0007', next_retry_at: null });
    expect(row?.last_failure).toContain('waiting for an operator');
    expect(counts.get(`pause-me:${key}`)).toBe(1);
  });

  it('records a journal mismatch (SDK 570) as RT0016 and keeps the journal as it was', async () => {
    const key = `mismatch-${transport}`;
    const id = await send(killer.ingressUrl, '/Behaviour/mismatch', key);
    await expect.poll(async () => (await killerDb.row(id))?.status, { timeout: 10_000 }).toBe('paused');
    expect(await killerDb.row(id)).toMatchObject({ retry_count: 3, last_failure_code: 'RT0016' });
    // Over HTTP/1.1 the first attempt already ends at the run (Suspension until the runtime stored its result), so the
    // handler code runs once more than the attempts that failed.
    expect(counts.get(`mismatch:${key}`)).toBe(transport === 'h1' ? 4 : 3);
    expect(await killerDb.journalTypes(id)).toEqual([T.Input, T.Run, T.RunCompletion]);
  });

  it('rejects a call to a service that is not registered (RT0018) without journaling the Call', async () => {
    const key = `missing-${transport}`;
    const id = await send(killer.ingressUrl, '/Behaviour/callMissing', key);
    await expect.poll(async () => (await killerDb.row(id))?.status, { timeout: 10_000 }).toBe('paused');
    const row = await killerDb.row(id);
    expect(row).toMatchObject({ retry_count: 2, last_failure_code: 'RT0018' });
    expect(row?.last_failure).toContain('Missing/hello');
    // Entries before the rejected command stay; the rejected Call and its invocation id notification do not exist.
    expect(await killerDb.journalTypes(id)).toEqual([T.Input, T.Run, T.RunCompletion]);
    expect(counts.get(`before-missing:${key}`)).toBe(1);
    expect(await killerDb.idsOf('Missing', 'hello')).toEqual([]);
  });
});
