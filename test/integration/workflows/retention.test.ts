import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * Retention: results are kept for the idempotency (or workflow completion) retention and journals for the journal
 * retention; then the background cleaner removes them, and a workflow's state and promises go with its result.
 * An expired result is gone for readers even before the cleaner came.
 */
const effects = new Map<string, number>();
const bump = (k: string): number => {
  const n = (effects.get(k) ?? 0) + 1;
  effects.set(k, n);
  return n;
};

const work = restate.service({
  name: 'Work',
  handlers: {
    once: async (ctx: restate.Context, key: string) => ctx.run('effect', () => bump(`once:${key}`)),
  },
});

const flow = restate.workflow({
  name: 'Flow',
  handlers: {
    run: async (ctx: restate.WorkflowContext) => {
      ctx.set('seen', 'yes');
      return `got ${await ctx.promise<string>('p')}`;
    },
    complete: async (ctx: restate.WorkflowSharedContext, v: string) => {
      await ctx.promise<string>('p').resolve(v);
    },
  },
});

async function count(dbUrl: string, text: string, values: unknown[]): Promise<number> {
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  try {
    const res = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${text}`, values);
    return Number(res.rows[0]!.n);
  } finally {
    await client.end();
  }
}

describe('retention with a running cleaner', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_DEFAULT_IDEMPOTENCY_RETENTION: '1500ms',
      RATCHET_DEFAULT_WORKFLOW_COMPLETION_RETENTION: '1500ms',
      RATCHET_DEFAULT_JOURNAL_RETENTION: '0ms',
      RATCHET_CLEANUP_INTERVAL: '100ms',
    });
    endpoint = await startEndpoint({ services: [work, flow], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('drops the journal at once, the result after the idempotency retention; the key then runs anew', async () => {
    const first = await call(runtime.ingressUrl, '/Work/once', 'k1', { 'idempotency-key': 'k1' });
    expect(first.json).toBe(1);
    const id = first.headers.get('x-restate-id')!;
    // Journal retention 0: the journal goes right after completion, the result stays.
    await expect
      .poll(() => count(db.url, 'ratchet.journal WHERE invocation_id = $1', [id]), { timeout: 10_000 })
      .toBe(0);
    expect(await count(db.url, 'ratchet.invocation WHERE id = $1', [id])).toBe(1);
    const replay = await call(runtime.ingressUrl, '/Work/once', 'k1', { 'idempotency-key': 'k1' });
    expect(replay.json).toBe(1);
    expect(replay.headers.get('idempotency-expires')).not.toBeNull();

    await expect.poll(() => count(db.url, 'ratchet.invocation WHERE id = $1', [id]), { timeout: 10_000 }).toBe(0);
    const again = await call(runtime.ingressUrl, '/Work/once', 'k1', { 'idempotency-key': 'k1' });
    expect(again.json).toBe(2); // a new invocation: the effect ran again
    expect(again.headers.get('x-restate-id')).toBe(id); // same deterministic id
    expect(again.headers.get('idempotency-expires')).toBeNull();
  });

  it("removes a workflow's state and promises with its result, after which the key can run again", async () => {
    expect((await call(runtime.ingressUrl, '/Flow/f1/complete', 'v1')).status).toBe(200);
    const run = await call(runtime.ingressUrl, '/Flow/f1/run');
    expect(run.json).toBe('got v1');
    expect(await count(db.url, `ratchet.state WHERE service_name = 'Flow' AND service_key = 'f1'`, [])).toBe(1);
    expect(await count(db.url, `ratchet.promise WHERE service_name = 'Flow' AND service_key = 'f1'`, [])).toBe(1);

    const id = InvocationId.forWorkflow('Flow', 'f1');
    await expect.poll(() => count(db.url, 'ratchet.invocation WHERE id = $1', [id]), { timeout: 10_000 }).toBe(0);
    expect(await count(db.url, `ratchet.state WHERE service_name = 'Flow' AND service_key = 'f1'`, [])).toBe(0);
    expect(await count(db.url, `ratchet.promise WHERE service_name = 'Flow' AND service_key = 'f1'`, [])).toBe(0);

    const resubmit = await call(runtime.ingressUrl, '/Flow/f1/run/send');
    expect(resubmit.json).toEqual({ invocationId: id, status: 'Accepted' });
    expect((await call(runtime.ingressUrl, '/Flow/f1/complete', 'v2')).status).toBe(200);
    expect((await runtime.handle.engine.awaitCompletion(id))?.outcome).toEqual({
      kind: 'success',
      value: Buffer.from('"got v2"'),
    });
  });
});

describe('an expired result before the cleaner comes', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_DEFAULT_IDEMPOTENCY_RETENTION: '300ms',
      RATCHET_CLEANUP_INTERVAL: '1h',
    });
    endpoint = await startEndpoint({ services: [work], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('is gone for readers and replaced by a new invocation on the next call with the same key', async () => {
    const first = await call(runtime.ingressUrl, '/Work/once', 'k2', { 'idempotency-key': 'k2' });
    expect(first.json).toBe(1);
    const id = first.headers.get('x-restate-id')!;
    await expect.poll(async () => runtime.handle.engine.getCompleted(id), { timeout: 10_000 }).toBeUndefined();
    expect(await count(db.url, 'ratchet.invocation WHERE id = $1', [id])).toBe(1); // still stored
    const again = await call(runtime.ingressUrl, '/Work/once', 'k2', { 'idempotency-key': 'k2' });
    expect(again.json).toBe(2);
    expect(await count(db.url, 'ratchet.journal WHERE invocation_id = $1 AND index = 0', [id])).toBe(1);

    // The second invocation expires too; one pass of the cleaner removes it with its journal.
    await expect.poll(async () => runtime.handle.engine.getCompleted(id), { timeout: 10_000 }).toBeUndefined();
    const removed = await runtime.handle.cleaner.runOnce();
    expect(removed.invocations).toBe(1);
    expect(await count(db.url, 'ratchet.invocation WHERE id = $1', [id])).toBe(0);
    expect(await count(db.url, 'ratchet.journal WHERE invocation_id = $1', [id])).toBe(0);
  });
});
