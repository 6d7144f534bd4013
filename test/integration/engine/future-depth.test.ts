import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Db } from './helpers.ts';

/**
 * RT0025: an invocation awaiting a future nested deeper than `invoker.max-awaited-future-depth` is paused (not failed
 * and not retried). Resumed once what it waits for has arrived, it continues from its journal.
 */
let runs = 0;
const nested = restate.service({
  name: 'Nested',
  handlers: {
    deep: async (ctx: restate.Context) => {
      await ctx.run('count', () => ++runs);
      const { promise } = ctx.awakeable<string>();
      // FIRST_COMPLETED(cancel) ⊃ ALL ⊃ FIRST_COMPLETED: three levels.
      const [first, second] = await restate.RestatePromise.all([
        restate.RestatePromise.race([ctx.sleep(300).map(() => 'slept'), promise]),
        ctx.sleep(300).map(() => 'also slept'),
      ]);
      return `${first}, ${second}`;
    },
  },
});

describe('awaited future depth above the limit (RT0025)', () => {
  let db: TestDatabase;
  let reader: Db;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    reader = await Db.connect(db.url);
    runtime = await startTestRuntime(db.url, { RATCHET_INVOKER_MAX_AWAITED_FUTURE_DEPTH: '2' });
    endpoint = await startEndpoint({ services: [nested], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await reader?.close();
    await db?.drop();
  });

  it('pauses the invocation, and a resume after its timers fired completes it from the journal', async () => {
    const sent = await call(runtime.ingressUrl, '/Nested/deep/send');
    const id = (sent.json as { invocationId: string }).invocationId;
    await expect.poll(async () => (await reader.row(id))?.status, { timeout: 15_000 }).toBe('paused');
    const row = await reader.row(id);
    expect(row?.last_failure_code).toBe('RT0025');
    expect(row?.last_failure).toMatch(/awaited future depth exceeds 2/);

    // Both sleeps fire while it is paused: their completions are journaled, it stays paused.
    await expect
      .poll(async () => (await reader.journalTypes(id)).filter((t) => t === 0x800c).length, { timeout: 15_000 })
      .toBe(2);
    expect((await reader.row(id))?.status).toBe('paused');

    const resumed = await fetch(`${runtime.adminUrl}/invocations/${id}/resume`, { method: 'PATCH' });
    expect(resumed.status).toBe(200);
    const out = await runtime.handle.engine.awaitCompletion(id);
    expect(out?.outcome).toEqual({ kind: 'success', value: Buffer.from('"slept, also slept"') });
    expect(runs).toBe(1); // the journaled run was not executed again
  });
});
