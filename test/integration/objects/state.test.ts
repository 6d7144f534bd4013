import * as restate from '@restatedev/restate-sdk';
import * as clients from '@restatedev/restate-sdk-clients';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { WAIT_TIMEOUT_MS } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Awakeables, Entry, ObjectsDb, resolver } from './support.ts';

/**
 * Virtual object state with eager state (the whole map travels in Start) and lazy state (`enableLazyState`: each read
 * is a journaled command the runtime answers): set, clear, clearAll, stateKeys; across suspension and replay; and only
 * exclusive handlers may write.
 */

const awakeables = new Awakeables();

interface Snapshot {
  keys: string[];
  values: Record<string, unknown>;
}

async function snapshot(ctx: restate.ObjectSharedContext): Promise<Snapshot> {
  const keys = (await ctx.stateKeys()).sort();
  const values: Record<string, unknown> = {};
  for (const k of keys) values[k] = await ctx.get(k);
  return { keys, values };
}

/** A shared handler that fails its attempts gives up fast: the test waits for the kill, not for a minute of retries. */
const giveUpFast = { retryPolicy: { maxAttempts: 3, onMaxAttempts: 'kill', initialInterval: 20 } } as const;

function ledger(name: string, enableLazyState: boolean) {
  return restate.object({
    name,
    handlers: {
      put: async (ctx: restate.ObjectContext, entries: Record<string, unknown>): Promise<void> => {
        for (const [k, v] of Object.entries(entries)) ctx.set(k, v);
      },
      drop: async (ctx: restate.ObjectContext, key: string): Promise<void> => {
        ctx.clear(key);
      },
      wipe: async (ctx: restate.ObjectContext): Promise<void> => {
        ctx.clearAll();
      },
      snapshot: restate.handlers.object.shared(snapshot),
      read: restate.handlers.object.shared(
        async (ctx: restate.ObjectSharedContext, key: string): Promise<unknown> => (await ctx.get(key)) ?? null,
      ),
      /** Writes, suspends on an awakeable, then reads its writes back in the attempt that replays them. */
      stage: async (ctx: restate.ObjectContext, tag: string) => {
        ctx.set('stage', `staged ${tag}`);
        ctx.set('visits', ((await ctx.get<number>('visits')) ?? 0) + 1);
        const { id, promise } = ctx.awakeable<string>();
        await ctx.run('publish', () => awakeables.publish(tag, id));
        const value = await promise;
        return {
          value,
          stage: await ctx.get<string>('stage'),
          visits: await ctx.get<number>('visits'),
          keys: (await ctx.stateKeys()).sort(),
        };
      },
      // The SDK's shared context has no set/clearAll in its type, but the object behind it sends the command anyway.
      sneakySet: restate.handlers.object.shared(
        giveUpFast,
        async (ctx: restate.ObjectSharedContext): Promise<string> => {
          (ctx as unknown as restate.ObjectContext).set('stage', 'sneaky');
          return 'wrote';
        },
      ),
      sneakyClearAll: restate.handlers.object.shared(
        giveUpFast,
        async (ctx: restate.ObjectSharedContext): Promise<string> => {
          (ctx as unknown as restate.ObjectContext).clearAll();
          return 'cleared';
        },
      ),
    },
    options: { enableLazyState },
  });
}

const eagerLedger = ledger('EagerLedger', false);
const lazyLedger = ledger('LazyLedger', true);

const LAZY_READS: number[] = [
  Entry.GetLazyState,
  Entry.GetLazyStateKeys,
  Entry.GetLazyStateCompletion,
  Entry.GetLazyStateKeysCompletion,
];
const EAGER_READS: number[] = [Entry.GetEagerState, Entry.GetEagerStateKeys];

describe.each(['h2', 'h1'] as const)('virtual object state over %s', (transport) => {
  let database: TestDatabase;
  let db: ObjectsDb;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let ingress: clients.Ingress;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await ObjectsDb.connect(database.url);
    // Over h2 a short inactivity timeout makes a waiting handler suspend, as it does at once over h1.
    runtime = await startTestRuntime(database.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '300ms' });
    endpoint = await startEndpoint({ services: [eagerLedger, lazyLedger, resolver], transport });
    await registerEndpoint(runtime, endpoint);
    ingress = clients.connect({ url: runtime.ingressUrl });
  });

  afterAll(async () => {
    await db?.close();
    await runtime?.stop();
    await endpoint?.close();
    await database?.drop();
  });

  describe.each([
    ['eager', eagerLedger, EAGER_READS, LAZY_READS],
    ['lazy', lazyLedger, LAZY_READS, EAGER_READS],
  ] as const)('%s state', (mode, object, reads, foreignReads) => {
    const name = object.name;

    it('sets, reads, lists, clears and clears all', async () => {
      const key = `crud-${mode}`;
      const client = ingress.objectClient(object, key);
      await client.put({ a: 1, b: 'two', c: [3, { d: null }] });
      expect(await db.state(name, key)).toEqual({ a: 1, b: 'two', c: [3, { d: null }] });

      const read = await call(runtime.ingressUrl, `/${name}/${key}/snapshot`);
      expect(read.status).toBe(200);
      expect(read.json).toEqual({ keys: ['a', 'b', 'c'], values: { a: 1, b: 'two', c: [3, { d: null }] } });
      // Eager: the SDK answers from the map in Start and journals what it read. Lazy: each read is a command the
      // runtime answers with a completion.
      const types = await db.journalTypes(read.headers.get('x-restate-id')!);
      expect(types.filter((t) => reads.includes(t)).length).toBeGreaterThan(0);
      expect(types.filter((t) => foreignReads.includes(t))).toEqual([]);

      expect(await client.read('missing')).toBeNull();
      expect(await client.read('b')).toBe('two');

      await client.drop('b');
      expect(await client.snapshot()).toEqual({ keys: ['a', 'c'], values: { a: 1, c: [3, { d: null }] } });
      await client.drop('never-set');
      expect(await db.state(name, key)).toEqual({ a: 1, c: [3, { d: null }] });

      await client.put({ a: 'replaced' });
      expect(await client.read('a')).toBe('replaced');

      await client.wipe();
      expect(await client.snapshot()).toEqual({ keys: [], values: {} });
      expect(await db.state(name, key)).toEqual({});
      // State is per key: another key of the same object never saw any of it.
      expect(await ingress.objectClient(object, `${key}-other`).snapshot()).toEqual({ keys: [], values: {} });
    });

    it('shows what a suspended exclusive handler wrote to shared handlers, and replays it to the handler', async () => {
      const key = `stage-${mode}`;
      const tag = `${transport}-${mode}-stage`;
      await ingress.objectClient(object, key).put({ visits: 41 });

      const pending = call(runtime.ingressUrl, `/${name}/${key}/stage`, tag);
      const awakeable = await awakeables.get(tag);
      const holder = await db.lockHolder(name, key);
      expect(holder).toBeDefined();
      await expect.poll(async () => (await db.row(holder!))?.status, { timeout: WAIT_TIMEOUT_MS }).toBe('suspended');

      // The writer holds the key and waits; a shared handler runs meanwhile and reads its writes.
      expect(await ingress.objectClient(object, key).snapshot()).toEqual({
        keys: ['stage', 'visits'],
        values: { stage: `staged ${tag}`, visits: 42 },
      });

      await ingress.serviceClient(resolver).resolve({ id: awakeable, value: 'go' });
      const res = await pending;
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ value: 'go', stage: `staged ${tag}`, visits: 42, keys: ['stage', 'visits'] });
      expect(res.headers.get('x-restate-id')).toBe(holder);
      // Published once: the attempt after the resume replayed the run instead of running it again.
      expect(awakeables.count(tag)).toBe(1);

      const types = await db.journalTypes(holder!);
      expect(types.filter((t) => t === Entry.SetState)).toHaveLength(2);
      // Lazy: the read of `visits` went to the runtime. (Reads of keys the handler wrote itself are answered by the
      // SDK in both modes, journaled as eager reads.) Eager: nothing went to the runtime.
      expect(types.some((t) => LAZY_READS.includes(t))).toBe(mode === 'lazy');
      expect(await db.state(name, key)).toEqual({ stage: `staged ${tag}`, visits: 42 });
      expect(await db.lockHolder(name, key)).toBeUndefined();
    });

    it('refuses state writes from shared handlers (RT0017) and leaves the state as it was', async () => {
      const key = `sneaky-${mode}`;
      await ingress.objectClient(object, key).put({ stage: 'original' });

      for (const handler of ['sneakySet', 'sneakyClearAll']) {
        const res = await call(runtime.ingressUrl, `/${name}/${key}/${handler}`);
        expect(res.status).toBe(500);
        const body = res.json as { code: number; message: string };
        expect(body.code).toBe(500);
        expect(body.message).toContain('cannot write state');
        const row = await db.row(res.headers.get('x-restate-id')!);
        expect(row).toMatchObject({ status: 'completed', result_kind: 'failure', last_failure_code: 'RT0017' });
        expect(row?.retry_count).toBe(3);
      }

      expect(await ingress.objectClient(object, key).snapshot()).toEqual({
        keys: ['stage'],
        values: { stage: 'original' },
      });
      expect(await db.state(name, key)).toEqual({ stage: 'original' });
    });
  });
});
