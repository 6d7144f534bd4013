import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Awakeables } from '../objects/support.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { WAIT_TIMEOUT_MS } from '../../support/wait.ts';
import { call } from '../support/runtime.ts';

/**
 * Flow control survives a SIGKILL of the runtime at its worst moment: one invocation holds the only permit of a
 * limit key (blocked on an awakeable, its attempt open), four more wait for it, and a paused queue holds another.
 * After the restart the holder keeps its permit, nobody else starts, the pause holds; once the holder completes the
 * others run one at a time, in arrival order, each exactly once, and the resumed queue's invocation runs.
 */

const awakeables = new Awakeables();
/** Each `record` side effect that really ran, in order. */
const executed: string[] = [];
let running = 0;
let peak = 0;

const jobs = restate.service({
  name: 'Jobs',
  handlers: {
    hold: async (ctx: restate.Context, tag: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => awakeables.publish(tag, id));
      return promise;
    },
    run: async (ctx: restate.Context, tag: string): Promise<string> => {
      await ctx.run('record', async () => {
        running++;
        peak = Math.max(peak, running);
        executed.push(tag);
        await new Promise((r) => setTimeout(r, 150));
        running--;
      });
      return tag;
    },
  },
});

describe('flow control across a SIGKILL of the runtime', () => {
  let database: TestDatabase;
  let client: pg.Client;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  const env = { RATCHET_NODE_NAME: 'flow-durability', RATCHET_EXPERIMENTAL_ENABLE_VQUEUES: 'true' };

  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    endpoint = await startEndpoint({ services: [jobs], transport: 'h2' });
  });

  afterAll(async () => {
    await runtime?.stop();
    await client?.end();
    await endpoint?.close();
    await database?.drop();
  });

  async function statuses(ids: string[]): Promise<string[]> {
    const res = await client.query<{ id: string; status: string }>(
      'SELECT id, status FROM ratchet_sql.sys_invocation WHERE id = ANY($1::text[])',
      [ids],
    );
    const by = new Map(res.rows.map((r) => [r.id, r.status]));
    return ids.map((id) => by.get(id) ?? 'missing');
  }

  async function send(path: string, tag: string, limitKey: string): Promise<string> {
    const res = await call(runtime!.ingressUrl, path, tag, { 'x-restate-limit-key': limitKey });
    expect(res.status, res.text).toBe(202);
    return (res.json as { invocationId: string }).invocationId;
  }

  it('keeps permits, waiters and pauses, then runs everything exactly once and in order', async () => {
    runtime = await startRuntimeProcess({ databaseUrl: database.url, env });
    await registerEndpoint(runtime, endpoint);
    const rules = await fetch(`${runtime.adminUrl}/limits/rules`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ pattern: 'acme/*', limits: { concurrency: 1 } }]),
    });
    expect(rules.status).toBe(200);

    const holder = await send('/restate/scope/acme/send/Jobs/hold', 'holder', 'orders');
    const awakeable = await awakeables.get('holder');
    // Only once the publishing run is durable: a replay after the restart must not publish again.
    await expect
      .poll(
        async () => (await client.query('SELECT 1 FROM ratchet.journal WHERE invocation_id = $1', [holder])).rowCount,
        {
          timeout: WAIT_TIMEOUT_MS,
        },
      )
      .toBeGreaterThanOrEqual(3);
    const waiting: string[] = [];
    for (const tag of ['w0', 'w1', 'w2', 'w3'])
      waiting.push(await send('/restate/scope/acme/send/Jobs/run', tag, 'orders'));
    expect(await statuses([holder, ...waiting])).toEqual(['running', 'pending', 'pending', 'pending', 'pending']);

    // A paused queue of another key holds its invocation.
    const probe = await send('/restate/scope/acme/send/Jobs/run', 'p0', 'billing');
    await expect.poll(() => statuses([probe]), { timeout: WAIT_TIMEOUT_MS }).toEqual(['completed']);
    const queue = (
      await client.query<{ vqueue_id: string }>('SELECT vqueue_id FROM ratchet.invocation WHERE id = $1', [probe])
    ).rows[0]!.vqueue_id;
    expect((await fetch(`${runtime.adminUrl}/vqueues/${queue}/pause`, { method: 'POST' })).status).toBe(202);
    const paused = await send('/restate/scope/acme/send/Jobs/run', 'p1', 'billing');

    await runtime.kill('SIGKILL');
    runtime = await startRuntimeProcess({ databaseUrl: database.url, env, ports: runtime.ports });

    // The holder still holds the key's only permit: nothing else of it starts; the paused queue stays paused.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await statuses([...waiting, paused])).toEqual(['pending', 'pending', 'pending', 'pending', 'pending']);
    expect(executed).toEqual(['p0']);
    const meta = await client.query<{ queue_is_paused: boolean; num_inbox: string }>(
      'SELECT queue_is_paused, num_inbox FROM ratchet_sql.sys_vqueue_meta WHERE id = $1',
      [queue],
    );
    expect(meta.rows[0]).toEqual({ queue_is_paused: true, num_inbox: '1' });
    const limits = await client.query<{ l1: string; usage: string; concurrency_limit: string; num_waiters: string }>(
      `SELECT l1, usage, concurrency_limit, num_waiters FROM ratchet_sql.sys_user_limits WHERE scope = 'acme' AND level = 'Level1' ORDER BY l1`,
    );
    expect(limits.rows).toEqual([
      { l1: 'billing', usage: '0', concurrency_limit: '1', num_waiters: '1' },
      { l1: 'orders', usage: '1', concurrency_limit: '1', num_waiters: '4' },
    ]);

    const resolved = await call(runtime.ingressUrl, `/restate/awakeables/${awakeable}/resolve`, 'done');
    expect(resolved.status).toBe(202);
    await expect
      .poll(() => statuses([holder, ...waiting]), { timeout: 30_000, interval: 100 })
      .toEqual(['completed', 'completed', 'completed', 'completed', 'completed']);
    expect(executed).toEqual(['p0', 'w0', 'w1', 'w2', 'w3']);
    expect(peak).toBe(1);
    expect(awakeables.count('holder')).toBe(1);

    expect((await fetch(`${runtime.adminUrl}/vqueues/${queue}/resume`, { method: 'POST' })).status).toBe(202);
    await expect.poll(() => statuses([paused]), { timeout: 30_000, interval: 100 }).toEqual(['completed']);
    expect(executed).toEqual(['p0', 'w0', 'w1', 'w2', 'w3', 'p1']);
  });
});
