import * as restate from '@restatedev/restate-sdk';
import * as clients from '@restatedev/restate-sdk-clients';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { WAIT_TIMEOUT_MS } from '../../support/wait.ts';
import { call } from '../support/runtime.ts';
import { Awakeables, Entry, ObjectsDb } from './support.ts';

/**
 * The per-key inbox is durable: the runtime is SIGKILLed while invocations wait behind an exclusive handler blocked
 * on an awakeable. After a restart the holder keeps the key, and once it is released every inboxed invocation runs
 * exactly once, in arrival order.
 */

const awakeables = new Awakeables();
/** Per key, each `append` side effect that really ran, in the order it ran. */
const executed = new Map<string, string[]>();
const executedOn = (key: string): string[] => executed.get(key) ?? [];

const queue = restate.object({
  name: 'Queue',
  handlers: {
    hold: async (ctx: restate.ObjectContext, tag: string): Promise<string> => {
      ctx.set('phase', 'held');
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => awakeables.publish(tag, id));
      const value = await promise;
      ctx.set('phase', `released by ${value}`);
      return value;
    },
    append: async (ctx: restate.ObjectContext, item: string): Promise<number> => {
      await ctx.run('record', () => {
        executed.set(ctx.key, [...executedOn(ctx.key), item]);
      });
      const items = [...((await ctx.get<string[]>('items')) ?? []), item];
      ctx.set('items', items);
      return items.length;
    },
    snapshot: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext): Promise<{ phase: string | null; items: string[] }> => ({
        phase: await ctx.get<string>('phase'),
        items: (await ctx.get<string[]>('items')) ?? [],
      }),
    ),
  },
});

// Over h2 the holder's attempt is still open when the runtime dies; over h1 it has suspended.
describe.each(['h2', 'h1'] as const)('virtual object inbox across a SIGKILL of the runtime (%s)', (transport) => {
  let database: TestDatabase;
  let db: ObjectsDb;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  const env = { RATCHET_NODE_NAME: `objects-durability-${transport}` };

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await ObjectsDb.connect(database.url);
    endpoint = await startEndpoint({ services: [queue], transport });
  });

  afterAll(async () => {
    await runtime?.stop();
    await db?.close();
    await endpoint?.close();
    await database?.drop();
  });

  it('runs every inboxed invocation exactly once, in order, after a restart', async () => {
    runtime = await startRuntimeProcess({ databaseUrl: database.url, env });
    await registerEndpoint(runtime, endpoint);
    let ingress = clients.connect({ url: runtime.ingressUrl });
    const key = `orders/${transport}`;

    const hold = await ingress.objectSendClient(queue, key).hold(key);
    const awakeable = await awakeables.get(key);
    // Kill only once the publishing run is durable: a replay after the restart must not publish again.
    await expect
      .poll(() => db.journalTypes(hold.invocationId), { timeout: WAIT_TIMEOUT_MS })
      .toContain(Entry.RunCompletion);

    const before = ['a', 'b', 'c', 'd', 'e'];
    const ids: string[] = [];
    for (const item of before) ids.push((await ingress.objectSendClient(queue, key).append(item)).invocationId);
    expect(await db.statuses(ids)).toEqual(before.map(() => 'inboxed'));
    expect(await db.lockHolder('Queue', key)).toBe(hold.invocationId);

    await runtime.kill('SIGKILL');
    runtime = await startRuntimeProcess({ databaseUrl: database.url, env, ports: runtime.ports });
    ingress = clients.connect({ url: runtime.ingressUrl });

    // The restarted runtime still knows who holds the key: a new arrival queues behind the old ones.
    const late = await ingress.objectSendClient(queue, key).append('f');
    ids.push(late.invocationId);
    expect(await db.statuses(ids)).toEqual([...before, 'f'].map(() => 'inboxed'));
    expect(await db.lockHolder('Queue', key)).toBe(hold.invocationId);
    expect(await ingress.objectClient(queue, key).snapshot()).toEqual({ phase: 'held', items: [] });
    expect(executedOn(key)).toEqual([]);

    // Both spellings of restate's route: `/restate/awakeables/{id}/resolve`, and `/restate/a/{id}/resolve`, which the
    // typed client uses.
    if (transport === 'h2') {
      const res = await call(runtime.ingressUrl, `/restate/awakeables/${awakeable}/resolve`, 'resolver');
      expect(res.status).toBe(202);
    } else {
      await ingress.resolveAwakeable(awakeable, 'resolver');
    }
    await expect
      .poll(() => db.results([hold.invocationId, ...ids]), { timeout: 30_000, interval: 100 })
      .toEqual([hold.invocationId, ...ids].map(() => 'success'));

    expect(executedOn(key)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(awakeables.count(key)).toBe(1);
    expect(await ingress.objectClient(queue, key).snapshot()).toEqual({
      phase: 'released by resolver',
      items: ['a', 'b', 'c', 'd', 'e', 'f'],
    });
    expect(await db.lockHolder('Queue', key)).toBeUndefined();
  });
});
