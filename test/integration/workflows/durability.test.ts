import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call } from '../support/runtime.ts';

/**
 * The programming model across a SIGKILL of the runtime: a workflow waiting on its promise, an awakeable resolved from
 * outside, and an idempotent call that the client retries after the restart. Nothing is lost and nothing runs twice.
 */
const effects = new Map<string, number>();
const bump = (k: string): number => {
  const n = (effects.get(k) ?? 0) + 1;
  effects.set(k, n);
  return n;
};
const awakeables = new Map<string, string>();

const approvals = restate.workflow({
  name: 'Approvals',
  handlers: {
    run: async (ctx: restate.WorkflowContext) => {
      await ctx.run('requested', () => bump(`requested:${ctx.key}`));
      const answer = await ctx.promise<string>('answer');
      await ctx.run('answered', () => bump(`answered:${ctx.key}`));
      return `answer ${answer}`;
    },
    answer: async (ctx: restate.WorkflowSharedContext, value: string) => {
      await ctx.promise<string>('answer').resolve(value);
    },
  },
});

const waiter = restate.service({
  name: 'Waiter',
  handlers: {
    wait: async (ctx: restate.Context, key: string) => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => {
        awakeables.set(key, id);
        bump(`published:${key}`);
      });
      return `woken with ${await promise}`;
    },
    charge: async (ctx: restate.Context, key: string) => {
      const n = await ctx.run('charge', () => bump(`charge:${key}`));
      await ctx.sleep(1500);
      return `charged ${key} (${n})`;
    },
  },
});

describe('programming model across a SIGKILL', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  const env = { RATCHET_NODE_NAME: 'pm-restart-node' };

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [approvals, waiter], transport: 'h2' });
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  async function restart(): Promise<RuntimeProcess> {
    await runtime!.kill('SIGKILL');
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports: runtime!.ports });
    return runtime;
  }

  /** Whether the invocation (by id, or by its idempotency key) has a journal entry of the type, i.e. durably. */
  async function journaled(id: string | { idempotencyKey: string }, entryType: number): Promise<boolean> {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const res = await client.query(
        `SELECT 1 FROM ratchet.journal j JOIN ratchet.invocation i ON i.id = j.invocation_id
         WHERE (i.id = $1 OR i.idempotency_key = $2) AND j.entry_type = $3`,
        typeof id === 'string' ? [id, null, entryType] : [null, id.idempotencyKey, entryType],
      );
      return res.rows.length > 0;
    } finally {
      await client.end();
    }
  }

  it('keeps workflows waiting on promises and awakeables waiting for their signal, and an idempotent result', async () => {
    const rt = runtime!;
    const wf = await call(rt.ingressUrl, '/Approvals/w1/run/send');
    expect(wf.status).toBe(202);
    const wfId = (wf.json as { invocationId: string }).invocationId;
    const aw = await call(rt.ingressUrl, '/Waiter/wait/send', 'a1');
    const awId = (aw.json as { invocationId: string }).invocationId;

    // An idempotent call in flight when the runtime dies: the client sees its connection break.
    const charge = call(rt.ingressUrl, '/Waiter/charge', 'c1', { 'idempotency-key': 'charge-c1' }).catch(
      (err: unknown) => err,
    );

    await expect.poll(() => journaled(wfId, 0x0409), { timeout: 15_000 }).toBe(true); // GetPromise
    await expect.poll(() => awakeables.has('a1'), { timeout: 15_000 }).toBe(true);
    await expect.poll(() => effects.get('charge:c1'), { timeout: 15_000 }).toBe(1);
    // The kill comes once both ctx.run results are durable (RunCompletionNotification): a run whose side effect
    // happened but whose result was not yet stored runs again after a crash, as it should.
    await expect.poll(() => journaled(awId, 0x8011), { timeout: 15_000 }).toBe(true);
    await expect.poll(() => journaled({ idempotencyKey: 'charge-c1' }, 0x8011), { timeout: 15_000 }).toBe(true);

    const after = await restart();
    expect(await charge).toBeInstanceOf(Error);

    // The client retries its idempotent call: the same invocation, run once, its first result.
    const retried = await call(after.ingressUrl, '/Waiter/charge', 'c1', { 'idempotency-key': 'charge-c1' });
    expect(retried.status).toBe(200);
    expect(retried.json).toBe('charged c1 (1)');
    const repeat = await call(after.ingressUrl, '/Waiter/charge', 'other body', { 'idempotency-key': 'charge-c1' });
    expect(repeat.json).toBe('charged c1 (1)');
    expect(repeat.headers.get('x-restate-id')).toBe(retried.headers.get('x-restate-id'));
    expect(repeat.headers.get('idempotency-expires')).not.toBeNull();
    expect(effects.get('charge:c1')).toBe(1);

    // The promise is completed after the restart and reaches the waiting run.
    expect((await call(after.ingressUrl, '/Approvals/w1/answer', 'yes')).status).toBe(200);
    // The awakeable is resolved from outside after the restart.
    const resolved = await fetch(`${after.ingressUrl}/restate/awakeables/${awakeables.get('a1')!}/resolve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify('hello'),
    });
    expect(resolved.status).toBe(202);

    const wfOut = await fetch(`${after.ingressUrl}/restate/invocation/${wfId}/attach`);
    expect(await wfOut.json()).toBe('answer yes');
    const awOut = await fetch(`${after.ingressUrl}/restate/invocation/${awId}/attach`);
    expect(await awOut.json()).toBe('woken with hello');
    expect(effects.get('requested:w1')).toBe(1);
    expect(effects.get('answered:w1')).toBe(1);
    expect(effects.get('published:a1')).toBe(1);
  });
});
