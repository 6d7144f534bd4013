import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAwakeableId } from '../../../runtime/src/ids/awakeable-id.ts';
import { stateVersion } from '../../../runtime/src/ids/state-version.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call } from '../support/runtime.ts';

/**
 * `POST /services/{s}/state` replaces a key's whole state, in the key's order: after the exclusive invocations queued
 * before it, before those queued after it; with `version` only if the state still has that version. A queued
 * replacement survives a SIGKILL of the runtime.
 */
const awakeables = new Map<string, string>();

const box = restate.object({
  name: 'Box',
  handlers: {
    put: async (ctx: restate.ObjectContext, value: string) => {
      ctx.set('value', value);
      return value;
    },
    append: async (ctx: restate.ObjectContext, entry: string) => {
      ctx.set('log', [...((await ctx.get<string[]>('log')) ?? []), entry]);
    },
    hold: async (ctx: restate.ObjectContext) => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('publish', () => void awakeables.set(ctx.key, id));
      ctx.set('log', [await promise]);
    },
    get: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext) => {
      const keys = (await ctx.stateKeys()).sort();
      const out: Record<string, unknown> = {};
      for (const k of keys) out[k] = await ctx.get(k);
      return out;
    }),
  },
});
const greeter = restate.service({ name: 'Plain', handlers: { hi: async () => 'hi' } });

const bytes = (json: unknown): number[] => [...Buffer.from(JSON.stringify(json))];

describe('admin state replacement', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  const env = { RATCHET_NODE_NAME: 'state-admin-node' };

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [box, greeter], transport: 'h2' });
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  const post = (body: unknown, service = 'Box', contentType = 'application/json') =>
    fetch(`${runtime!.adminUrl}/services/${service}/state`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const get = async (key: string) => (await call(runtime!.ingressUrl, `/Box/${key}/get`)).json;

  it('replaces the state of an idle key at once, and checks the version when given', async () => {
    await call(runtime!.ingressUrl, '/Box/idle/put', 'old');
    const replaced = await post({ object_key: 'idle', new_state: { value: bytes('new'), extra: bytes(1) } });
    expect(replaced.status).toBe(202);
    expect(await get('idle')).toEqual({ extra: 1, value: 'new' });

    const current = stateVersion([
      ['extra', Buffer.from('1')],
      ['value', Buffer.from('"new"')],
    ]);
    expect((await post({ object_key: 'idle', version: 'stale', new_state: { value: bytes('x') } })).status).toBe(202);
    expect(await get('idle')).toEqual({ extra: 1, value: 'new' }); // version mismatch: nothing changed
    expect((await post({ object_key: 'idle', version: current, new_state: { value: bytes('y') } })).status).toBe(202);
    expect(await get('idle')).toEqual({ value: 'y' });
  });

  it('waits behind queued exclusive invocations, across a SIGKILL, and goes before later ones', async () => {
    await call(runtime!.ingressUrl, '/Box/busy/hold/send');
    await expect.poll(() => awakeables.has('busy'), { timeout: 15_000 }).toBe(true);
    await call(runtime!.ingressUrl, '/Box/busy/append/send', 'queued before');
    expect((await post({ object_key: 'busy', new_state: { log: bytes(['admin']), note: bytes('n') } })).status).toBe(
      202,
    );
    const after = await call(runtime!.ingressUrl, '/Box/busy/append/send', 'queued after');
    const afterId = (after.json as { invocationId: string }).invocationId;
    expect(await get('busy')).toEqual({}); // nothing applied yet: the key is held

    await runtime!.kill('SIGKILL');
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports: runtime!.ports });

    const aw = awakeables.get('busy')!;
    expect(parseAwakeableId(aw).kind).toBe('signal');
    const resolved = await fetch(`${runtime.ingressUrl}/restate/awakeables/${aw}/resolve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify('from awakeable'),
    });
    expect(resolved.status).toBe(202);
    await fetch(`${runtime.ingressUrl}/restate/invocation/${afterId}/attach`);
    // hold, then the append queued before, then the replacement, then the append queued after.
    expect(await get('busy')).toEqual({ log: ['admin', 'queued after'], note: 'n' });
  });

  it('refuses what it cannot apply', async () => {
    const plain = await post({ object_key: 'k', new_state: {} }, 'Plain');
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ message: 'Cannot modify state for service type Service' });
    const unknown = await post({ object_key: 'k', new_state: {} }, 'Nope');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ message: "The requested service 'Nope' does not exist" });
    expect((await post({ new_state: {} })).status).toBe(422);
    expect((await post({ object_key: 'k', new_state: { v: [256] } })).status).toBe(422);
    expect((await post({ object_key: 'k', new_state: {} }, 'Box', 'text/plain')).status).toBe(415);
    expect((await post('{nope', 'Box')).status).toBe(400);
    const scoped = await post({ object_key: 'k', scope: 's1', new_state: {} });
    expect(scoped.status).toBe(400);
    expect(await scoped.json()).toMatchObject({ restate_code: 'RT0024' });
  });
});
