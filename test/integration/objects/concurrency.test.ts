import * as restate from '@restatedev/restate-sdk';
import * as clients from '@restatedev/restate-sdk-clients';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { WAIT_TIMEOUT_MS } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Awakeables, ObjectsDb, resolver } from './support.ts';

/**
 * Virtual objects through the ingress, driven by the typed client: keyed paths, sends and delays, idempotency, and
 * the concurrency rules (exclusive handlers of one key one at a time in arrival order; shared handlers and other keys
 * never wait for them). Blocking is made deterministic with awakeables the test resolves, never with sleeps.
 */

const awakeables = new Awakeables();
/** `key:item` each time an `append` side effect really ran, in the order it ran. */
const executed: string[] = [];

const counter = restate.object({
  name: 'Counter',
  handlers: {
    add: async (ctx: restate.ObjectContext, n: number): Promise<number> => {
      const count = ((await ctx.get<number>('count')) ?? 0) + n;
      ctx.set('count', count);
      return count;
    },
    count: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext): Promise<number> => (await ctx.get<number>('count')) ?? 0,
    ),
    whoAmI: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext): Promise<string> => ctx.key),
    append: async (ctx: restate.ObjectContext, item: string): Promise<string[]> => {
      await ctx.run('record', () => {
        executed.push(`${ctx.key}:${item}`);
      });
      const items = [...((await ctx.get<string[]>('items')) ?? []), item];
      ctx.set('items', items);
      return items;
    },
    items: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext): Promise<string[]> => (await ctx.get<string[]>('items')) ?? [],
    ),
    /** Holds the key's exclusive lock until the test resolves the awakeable it publishes under `tag`. */
    hold: async (ctx: restate.ObjectContext, tag: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => awakeables.publish(tag, id));
      return `${tag} released by ${await promise}`;
    },
    /** The same, from a shared handler: it runs beside the exclusive one. */
    watch: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext, tag: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => awakeables.publish(tag, id));
      return `${tag} released by ${await promise}`;
    }),
  },
});

const executedOn = (key: string): string[] => executed.filter((e) => e.startsWith(`${key}:`));

describe.each(['h2', 'h1'] as const)('virtual object concurrency over %s', (transport) => {
  let database: TestDatabase;
  let db: ObjectsDb;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let ingress: clients.Ingress;

  const resolve = (id: string, value: string): PromiseLike<void> =>
    ingress.serviceClient(resolver).resolve({ id, value });

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await ObjectsDb.connect(database.url);
    runtime = await startTestRuntime(database.url);
    endpoint = await startEndpoint({ services: [counter, resolver], transport });
    await registerEndpoint(runtime, endpoint);
    ingress = clients.connect({ url: runtime.ingressUrl });
  });

  afterAll(async () => {
    await db?.close();
    await runtime?.stop();
    await endpoint?.close();
    await database?.drop();
  });

  it('routes /{object}/{key}/{handler} with the key URL-decoded, and keeps state per decoded key', async () => {
    expect(await ingress.objectClient(counter, 'a/b').whoAmI()).toBe('a/b');
    expect(await ingress.objectClient(counter, 'grüße welt ✓ ?&#').whoAmI()).toBe('grüße welt ✓ ?&#');

    const raw = await call(runtime.ingressUrl, '/Counter/a%2Fb/whoAmI');
    expect(raw.status).toBe(200);
    expect(raw.json).toBe('a/b');
    // An encoded percent sign is decoded once: the key is the literal `a%2Fb`, another object.
    expect((await call(runtime.ingressUrl, '/Counter/a%252Fb/whoAmI')).json).toBe('a%2Fb');

    expect(await ingress.objectClient(counter, 'a/b').add(2)).toBe(2);
    expect((await call(runtime.ingressUrl, '/Counter/a%2Fb/count')).json).toBe(2);
    expect((await call(runtime.ingressUrl, '/Counter/a%252Fb/count')).json).toBe(0);
    expect(await db.state('Counter', 'a/b')).toEqual({ count: 2 });

    const added = await call(runtime.ingressUrl, '/Counter/a%2Fb/add', 3);
    expect(added.json).toBe(5);
    expect((await db.row(added.headers.get('x-restate-id')!))?.service_key).toBe('a/b');
  });

  it('accepts /send and /send?delay= on keyed paths and runs the invocation later', async () => {
    const key = 'sent/key';
    const now = await ingress.objectSendClient(counter, key).append('now');
    expect(now.status).toBe('Accepted');
    expect(now.invocationId).toMatch(/^inv_1[0-9a-zA-Z]{33}$/);
    await expect.poll(() => ingress.objectClient(counter, key).items(), { timeout: WAIT_TIMEOUT_MS }).toEqual(['now']);

    // The typed client sends `/Counter/sent%2Fkey/append/send?delay=1500ms`.
    const later = await ingress.objectSendClient(counter, key).append('later', clients.rpc.sendOpts({ delay: 1500 }));
    expect(later.status).toBe('Accepted');
    const row = await db.row(later.invocationId);
    expect(row?.service_key).toBe(key);
    expect(row!.scheduled_start_at!.getTime() - row!.created_at.getTime()).toBe(1500);
    await expect
      .poll(() => ingress.objectClient(counter, key).items(), { timeout: WAIT_TIMEOUT_MS })
      .toEqual(['now', 'later']);

    const raw = await call(runtime.ingressUrl, `/Counter/${encodeURIComponent(key)}/append/send?delay=10ms`, 'raw');
    expect(raw.status).toBe(202);
    expect(raw.json).toMatchObject({ status: 'Accepted', invocationId: raw.headers.get('x-restate-id') });
    expect((raw.json as { executionTime?: string }).executionTime).toMatch(/^\d{4}-\d\d-\d\dT/);
    await expect
      .poll(() => ingress.objectClient(counter, key).items(), { timeout: WAIT_TIMEOUT_MS })
      .toEqual(['now', 'later', 'raw']);

    // Delays are for sends only.
    const bad = await call(runtime.ingressUrl, `/Counter/${encodeURIComponent(key)}/append?delay=1s`, 'x');
    expect(bad.status).toBe(400);
  });

  // FAILS against the engine as of this writing (a runtime bug, not a flaky test): an add that arrives while the
  // previous holder of the key is completing can start before the holder's state write is durable, reads the old
  // count and loses an update (results 1, 1, 2, …, 99). See Engine.accept → afterAdmit vs complete → handOver.
  it('gives 100 concurrent add(1) on one key the exact count, one at a time', async () => {
    const key = 'hundred';
    const client = ingress.objectClient(counter, key);
    const results = await Promise.all(Array.from({ length: 100 }, () => client.add(1)));
    // Each add saw the result of the one before it: the returns are exactly 1..100, no value twice.
    expect([...results].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(await client.count()).toBe(100);
    expect(await db.lockHolder('Counter', key)).toBeUndefined();
  });

  it('runs exclusive handlers of one key in arrival order, each exactly once, after the holder is done', async () => {
    // `executed` is shared by both transports' runs: the key tells them apart.
    const key = `fifo-${transport}`;
    const hold = await ingress.objectSendClient(counter, key).hold(key);
    const awakeable = await awakeables.get(key);

    const items = 'abcdefghij'.split('');
    const ids: string[] = [];
    for (const item of items) ids.push((await ingress.objectSendClient(counter, key).append(item)).invocationId);
    // Every append is waiting in the key's inbox behind the holder.
    expect(await db.statuses(ids)).toEqual(items.map(() => 'inboxed'));
    expect(await db.lockHolder('Counter', key)).toBe(hold.invocationId);
    expect(executedOn(key)).toEqual([]);

    await resolve(awakeable, 'test');
    await expect
      .poll(() => db.results([hold.invocationId, ...ids]), { timeout: WAIT_TIMEOUT_MS })
      .toEqual([hold.invocationId, ...ids].map(() => 'success'));
    expect(await ingress.objectClient(counter, key).items()).toEqual(items);
    expect(executedOn(key)).toEqual(items.map((i) => `${key}:${i}`));
    expect(await db.lockHolder('Counter', key)).toBeUndefined();
  });

  it('lets other keys and shared handlers run while an exclusive handler of the key is blocked', async () => {
    const key = 'busy';
    const holdTag = `${transport}-busy`;
    const hold = await ingress.objectSendClient(counter, key).hold(holdTag);
    const holdAwakeable = await awakeables.get(holdTag);
    const queued = await ingress.objectSendClient(counter, key).add(1);

    // Another key does not wait for this one.
    expect(await ingress.objectClient(counter, 'idle').add(1)).toBe(1);
    expect(await ingress.objectClient(counter, 'idle').add(1)).toBe(2);

    // Two shared handlers of the busy key run at the same time: each publishes its awakeable before either is
    // resolved, so both are in flight together, beside the blocked exclusive handler.
    const first = ingress.objectClient(counter, key).watch(`${transport}-watch-1`);
    const second = ingress.objectClient(counter, key).watch(`${transport}-watch-2`);
    const firstAwakeable = await awakeables.get(`${transport}-watch-1`);
    const secondAwakeable = await awakeables.get(`${transport}-watch-2`);
    expect(await ingress.objectClient(counter, key).count()).toBe(0);

    await resolve(secondAwakeable, 'second');
    expect(await second).toBe(`${transport}-watch-2 released by second`);
    await resolve(firstAwakeable, 'first');
    expect(await first).toBe(`${transport}-watch-1 released by first`);

    // All of that happened while the holder kept the key and the exclusive add waited behind it.
    const [holdStatus, queuedStatus] = await db.statuses([hold.invocationId, queued.invocationId]);
    expect(holdStatus).not.toBe('completed');
    expect(queuedStatus).toBe('inboxed');
    expect(await db.lockHolder('Counter', key)).toBe(hold.invocationId);

    await resolve(holdAwakeable, 'test');
    await expect.poll(() => ingress.objectClient(counter, key).count(), { timeout: WAIT_TIMEOUT_MS }).toBe(1);
    expect(await db.results([hold.invocationId, queued.invocationId])).toEqual(['success', 'success']);
  });

  it('answers a repeated idempotency key with the first result, without running the handler again', async () => {
    const key = 'idem';
    const client = ingress.objectClient(counter, key);
    const once = clients.rpc.opts<number, number>({ idempotencyKey: 'deposit-1' });
    expect(await client.add(5, once)).toBe(5);
    expect(await client.add(5, once)).toBe(5);
    // The key is free again for everyone else.
    expect(await client.add(1)).toBe(6);

    const twice = clients.rpc.opts<number, number>({ idempotencyKey: 'deposit-2' });
    expect(await Promise.all([client.add(10, twice), client.add(10, twice), client.add(10, twice)])).toEqual([
      16, 16, 16,
    ]);
    expect(await client.add(1)).toBe(17);
    expect(await client.count()).toBe(17);
  });
});
