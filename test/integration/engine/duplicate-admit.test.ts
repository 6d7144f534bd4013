import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * A retry of a completed idempotent call on a busy virtual-object key is admitted in memory (queued behind the
 * key's holder) before its insert finds the existing row. If the holder finishes in that window, the key's lock
 * must not go to that duplicate: handing it over would mark the completed invocation running again (a call that
 * never answers, a result that is no longer served). The window is held open here by locking the partition's lease
 * row, which every commit of that partition waits for (its lease guard reads it FOR SHARE).
 */

const counter = restate.object({
  name: 'DupCounter',
  handlers: {
    add: async (ctx: restate.ObjectContext, delta: number): Promise<number> => {
      const next = ((await ctx.get<number>('value')) ?? 0) + delta;
      ctx.set('value', next);
      return next;
    },
    // Holds the key's lock for a while without writing anything (a plain timer, not ctx.sleep).
    hold: async (): Promise<string> => {
      await new Promise((r) => setTimeout(r, 1500));
      return 'held';
    },
  },
});

describe('an idempotent retry of a completed call on a busy key', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: TestRuntime;

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [counter], transport: 'h2' });
    runtime = await startTestRuntime(db.url);
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('gets the stored result, and the completed invocation stays completed when the key is handed over', async () => {
    const first = await call(runtime.ingressUrl, '/DupCounter/k/add', 1, { 'idempotency-key': 'a' });
    expect(first.status).toBe(200);
    expect(first.json).toBe(1);

    const held = await call(runtime.ingressUrl, '/DupCounter/k/hold/send', undefined);
    expect(held.status).toBe(202);
    await new Promise((r) => setTimeout(r, 300));

    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    let retry: Promise<Awaited<ReturnType<typeof call>>>;
    try {
      await blocker.query('BEGIN');
      await blocker.query(
        `SELECT 1 FROM ratchet.partition_lease WHERE partition_id =
           (SELECT partition_id FROM ratchet.invocation WHERE idempotency_key = 'a') FOR UPDATE`,
      );
      // The retry is admitted behind `hold` and its insert waits; `hold` ends meanwhile and the key is handed over.
      retry = call(runtime.ingressUrl, '/DupCounter/k/add', 1, { 'idempotency-key': 'a' });
      await new Promise((r) => setTimeout(r, 2000));
    } finally {
      await blocker.query('COMMIT').catch(() => undefined);
      await blocker.end();
    }

    const again = await retry;
    expect(again.status).toBe(200);
    expect(again.json).toBe(1);
    const check = new pg.Client({ connectionString: db.url });
    await check.connect();
    try {
      const { rows } = await check.query(`SELECT status FROM ratchet.invocation WHERE idempotency_key = 'a'`);
      expect(rows).toEqual([{ status: 'completed' }]);
    } finally {
      await check.end();
    }

    // The key is free for the next call, and the retry did not add anything.
    const next = await call(runtime.ingressUrl, '/DupCounter/k/add', 1, { 'idempotency-key': 'c' });
    expect(next.status).toBe(200);
    expect(next.json).toBe(2);
    const repeat = await call(runtime.ingressUrl, '/DupCounter/k/add', 1, { 'idempotency-key': 'a' });
    expect(repeat.json).toBe(1);
  });
});
