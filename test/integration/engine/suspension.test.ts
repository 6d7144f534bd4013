import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Db, T } from './helpers.ts';

/**
 * Suspension and resumption: a bidi attempt closed for inactivity, request/response attempts that end at every await
 * (an awakeable resolved by another handler, a sleep), and virtual object state across those attempts.
 */

const awakeableIds = new Map<string, string>();
const counts = new Map<string, number>();
const bump = (k: string): number => {
  const n = (counts.get(k) ?? 0) + 1;
  counts.set(k, n);
  return n;
};

const sleeper = restate.service({
  name: 'Sleeper',
  handlers: {
    nap: async (ctx: restate.Context, key: string): Promise<string> => {
      await ctx.run('before', () => bump(`nap:${key}`));
      await ctx.sleep(2000);
      return `rested ${key}`;
    },
  },
});

const waiter = restate.service({
  name: 'Waiter',
  handlers: {
    awaitSignal: async (ctx: restate.Context, key: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => {
        awakeableIds.set(key, id);
      });
      const value = await promise;
      await ctx.sleep(100);
      return `got ${value}`;
    },
    /** The resolver may run before or after this attempt ends: both orders must resume the waiter. */
    resolveItself: async (ctx: restate.Context, value: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      ctx.serviceSendClient(waiterRef).resolve({ id, value });
      return `self ${await promise}`;
    },
    resolve: async (ctx: restate.Context, req: { id: string; value: string }): Promise<void> => {
      ctx.resolveAwakeable(req.id, req.value);
    },
  },
});

const waiterRef = { name: 'Waiter' } as typeof waiter;

const account = restate.object({
  name: 'Account',
  handlers: {
    add: async (ctx: restate.ObjectContext, n: number): Promise<number> => {
      const balance = ((await ctx.get<number>('balance')) ?? 0) + n;
      ctx.set('balance', balance);
      return balance;
    },
    /** Writes, suspends on a sleep (request/response) and reads its own write back after the replay. */
    note: async (ctx: restate.ObjectContext, text: string): Promise<{ note: string | null; keys: string[] }> => {
      ctx.set('note', text);
      await ctx.sleep(50);
      return { note: await ctx.get<string>('note'), keys: (await ctx.stateKeys()).sort() };
    },
    // (No stateKeys() after a clear in the same handler: the SDK answers it from its eager map, which keeps cleared
    // keys; that is SDK behaviour, the same on restate-server.)
    forget: async (ctx: restate.ObjectContext): Promise<string[]> => {
      const before = (await ctx.stateKeys()).sort();
      ctx.clear('note');
      return before;
    },
    wipe: async (ctx: restate.ObjectContext): Promise<void> => {
      ctx.clearAll();
    },
    balance: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext): Promise<number | null> => (await ctx.get<number>('balance')) ?? null,
    ),
  },
});

describe('suspension over h2 (inactivity timeout)', () => {
  let database: TestDatabase;
  let db: Db;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await Db.connect(database.url);
    runtime = await startTestRuntime(database.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '300ms' });
    endpoint = await startEndpoint({ services: [sleeper], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await db?.close();
    await runtime?.stop();
    await endpoint?.close();
    await database?.drop();
  });

  it('closes an idle bidi stream so the SDK suspends, and resumes when the timer fires', async () => {
    const pending = call(runtime.ingressUrl, '/Sleeper/nap', 'z');
    await expect.poll(async () => (await db.idsOf('Sleeper', 'nap')).length, { timeout: 10_000 }).toBe(1);
    const [id] = await db.idsOf('Sleeper', 'nap');
    await expect.poll(async () => (await db.row(id!))?.status, { timeout: 10_000 }).toBe('suspended');
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.json).toBe('rested z');
    expect(counts.get('nap:z')).toBe(1);
    // Suspension (and AwaitingOn) are control messages: the journal has only commands and notifications.
    expect(await db.journalTypes(id!)).toEqual([T.Input, T.Run, T.RunCompletion, T.Sleep, T.SleepCompletion, T.Output]);
    expect((await db.row(id!))?.retry_count).toBe(0);
  });
});

describe.each(['h1', 'h2'] as const)('suspension and state over %s', (transport) => {
  let database: TestDatabase;
  let db: Db;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = await Db.connect(database.url);
    // Over h2 a short inactivity timeout makes the waiting invocation suspend, as it must over h1.
    runtime = await startTestRuntime(database.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '300ms' });
    endpoint = await startEndpoint({ services: [waiter, account], transport });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await db?.close();
    await runtime?.stop();
    await endpoint?.close();
    await database?.drop();
  });

  it('suspends on an awakeable, resumes when another handler resolves it, then sleeps and completes', async () => {
    const key = `awk-${transport}`;
    const pending = call(runtime.ingressUrl, '/Waiter/awaitSignal', key);
    await expect.poll(() => awakeableIds.get(key), { timeout: 10_000 }).toBeDefined();
    await expect.poll(async () => (await db.idsOf('Waiter', 'awaitSignal')).length, { timeout: 10_000 }).toBe(1);
    const [id] = await db.idsOf('Waiter', 'awaitSignal');
    await expect.poll(async () => (await db.row(id!))?.status, { timeout: 10_000 }).toBe('suspended');

    const resolved = await call(runtime.ingressUrl, '/Waiter/resolve', { id: awakeableIds.get(key), value: 'hi' });
    expect(resolved.status).toBe(200);
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.json).toBe('got hi');

    // The signal went through the resolver's journal (CompleteAwakeable) into the waiter's (signal 17).
    const [resolverId] = await db.idsOf('Waiter', 'resolve');
    expect(await db.journalTypes(resolverId!)).toEqual([T.Input, T.CompleteAwakeable, T.Output]);
    const journal = await db.journal(id!);
    expect(journal.map((e) => e.entry_type)).toEqual([
      T.Input,
      T.Run,
      T.RunCompletion,
      T.Signal,
      T.Sleep,
      T.SleepCompletion,
      T.Output,
    ]);
    expect(journal[3]?.signal_idx).toBe(17);
    expect(await db.outboxSize()).toBe(0);
  });

  it('resumes a waiter whose awakeable is resolved while its attempt is still ending (suspension race)', async () => {
    const results = await Promise.all(
      ['a', 'b', 'c', 'd'].map((v) => call(runtime.ingressUrl, '/Waiter/resolveItself', `${transport}-${v}`)),
    );
    expect(results.map((r) => r.json)).toEqual(['a', 'b', 'c', 'd'].map((v) => `self ${transport}-${v}`));
    expect(await db.outboxSize()).toBe(0);
  });

  it('keeps virtual object state: eager state in Start, writes replayed after suspension, clear and clearAll', async () => {
    const key = `acct-${transport}`;
    expect((await call(runtime.ingressUrl, `/Account/${key}/add`, 1)).json).toBe(1);
    const second = await call(runtime.ingressUrl, `/Account/${key}/add`, 2);
    expect(second.json).toBe(3);
    // The whole state travelled in Start: the read is answered by the SDK (GetEagerState), never lazily.
    expect(await db.journalTypes(second.headers.get('x-restate-id')!)).toEqual([
      T.Input,
      T.GetEagerState,
      T.SetState,
      T.Output,
    ]);
    expect(await db.state('Account', key)).toEqual({ balance: 3 });
    expect((await call(runtime.ingressUrl, `/Account/${key}/balance`)).json).toBe(3);

    const note = await call(runtime.ingressUrl, `/Account/${key}/note`, 'remember me');
    expect(note.json).toEqual({ note: 'remember me', keys: ['balance', 'note'] });
    expect(await db.state('Account', key)).toEqual({ balance: 3, note: 'remember me' });

    const reset = await call(runtime.ingressUrl, `/Account/${key}/forget`);
    expect(reset.json).toEqual(['balance', 'note']);
    expect(await db.state('Account', key)).toEqual({ balance: 3 });
    expect((await call(runtime.ingressUrl, `/Account/${key}/note`, 'again')).json).toEqual({
      note: 'again',
      keys: ['balance', 'note'],
    });

    const wipe = await call(runtime.ingressUrl, `/Account/${key}/wipe`);
    expect(wipe.status).toBe(200);
    expect(await db.journalTypes(wipe.headers.get('x-restate-id')!)).toEqual([T.Input, T.ClearAllState, T.Output]);
    expect(await db.state('Account', key)).toEqual({});
    expect((await call(runtime.ingressUrl, `/Account/${key}/balance`)).json).toBeNull();
  });
});
