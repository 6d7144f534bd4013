import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call } from '../support/runtime.ts';

/**
 * Durability: the runtime is SIGKILLed while invocations sleep, back off between retries, or wait for a delayed
 * start. After a restart every accepted invocation completes exactly once, and no acked ctx.run runs again.
 */
const effects = new Map<string, number>();
const bump = (k: string): number => {
  const n = (effects.get(k) ?? 0) + 1;
  effects.set(k, n);
  return n;
};
const attempts = new Map<string, number>();

const durable = restate.service({
  name: 'Durable',
  handlers: {
    sleeper: async (ctx: restate.Context, key: string) => {
      await ctx.run('before', () => bump(`before:${key}`));
      await ctx.sleep(1500);
      await ctx.run('after', () => bump(`after:${key}`));
      return `slept ${key}`;
    },
    retrier: async (ctx: restate.Context, key: string) => {
      await ctx.run('side-effect', () => bump(`retrier-run:${key}`));
      const n = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, n);
      if (n < 3) throw new Error(`attempt ${n} fails`);
      bump(`retrier-done:${key}`);
      return n;
    },
    delayed: async (ctx: restate.Context, key: string) => {
      await ctx.run('delayed', () => bump(`delayed:${key}`));
      return key;
    },
  },
});

describe('restart after SIGKILL', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  const env = {
    RATCHET_NODE_NAME: 'restart-test-node',
    RATCHET_RETRY_INITIAL_INTERVAL: '1500ms',
    RATCHET_RETRY_EXPONENTIATION_FACTOR: '1',
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [durable], transport: 'h2' });
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('completes every accepted invocation exactly once, without re-running acked side effects', async () => {
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env });
    await registerEndpoint(runtime, endpoint);

    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await call(runtime.ingressUrl, '/Durable/sleeper/send', `s${i}`);
      expect(r.status, r.text).toBe(202);
      ids.push((r.json as { invocationId: string }).invocationId);
    }
    for (let i = 0; i < 3; i++) {
      const r = await call(runtime.ingressUrl, '/Durable/retrier/send', `r${i}`);
      expect(r.status).toBe(202);
      ids.push((r.json as { invocationId: string }).invocationId);
    }
    for (let i = 0; i < 2; i++) {
      const r = await call(runtime.ingressUrl, '/Durable/delayed/send?delay=1s', `d${i}`);
      expect(r.status).toBe(202);
      ids.push((r.json as { invocationId: string }).invocationId);
    }

    // Kill once every sleeper is asleep and every retrier has failed at least once (and is backing off).
    await expect
      .poll(
        () =>
          [0, 1, 2, 3, 4].every((i) => effects.get(`before:s${i}`) === 1) &&
          [0, 1, 2].every((i) => (attempts.get(`r${i}`) ?? 0) >= 1),
        {
          timeout: 20_000,
        },
      )
      .toBe(true);
    await runtime.kill('SIGKILL');
    const ports = runtime.ports;
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports });

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await expect
        .poll(
          async () => {
            const res = await client.query<{ n: string }>(
              `SELECT count(*)::text AS n FROM ratchet.invocation WHERE id = ANY($1) AND status = 'completed'`,
              [ids],
            );
            return Number(res.rows[0]!.n);
          },
          { timeout: 30_000, interval: 200 },
        )
        .toBe(ids.length);
      const failed = await client.query(
        `SELECT id FROM ratchet.invocation WHERE id = ANY($1) AND result_kind <> 'success'`,
        [ids],
      );
      expect(failed.rows).toEqual([]);
    } finally {
      await client.end();
    }
    for (let i = 0; i < 5; i++) {
      expect(effects.get(`before:s${i}`)).toBe(1);
      expect(effects.get(`after:s${i}`)).toBe(1);
    }
    for (let i = 0; i < 3; i++) {
      expect(effects.get(`retrier-run:r${i}`)).toBe(1);
      expect(effects.get(`retrier-done:r${i}`)).toBe(1);
    }
    for (let i = 0; i < 2; i++) expect(effects.get(`delayed:d${i}`)).toBe(1);
  });
});
