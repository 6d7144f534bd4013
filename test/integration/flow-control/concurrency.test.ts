import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * Flow control with the experimental switch on: scoped invocations and limit keys are accepted on the ingress and
 * from handlers, reach the handler (protocol V7 Start), and the rule book's concurrency limits hold: at most N run at
 * once per counter, the others wait (`pending`) and start as permits are released, in arrival order.
 */

/** Per group, how many handler executions run right now and the most seen at once. */
const running = new Map<string, number>();
const peak = new Map<string, number>();
const order: string[] = [];
let holdMs = 300;

function enter(group: string): void {
  const now = (running.get(group) ?? 0) + 1;
  running.set(group, now);
  peak.set(group, Math.max(peak.get(group) ?? 0, now));
}

const work = restate.service({
  name: 'Work',
  handlers: {
    run: async (
      ctx: restate.Context,
      tag: string,
    ): Promise<{ tag: string; scope: string | null; limitKey: string | null }> => {
      const group = tag.split('#')[0]!;
      // Not journaled on purpose: what is observed is how many executions overlap in real time.
      enter(group);
      order.push(tag);
      await new Promise((r) => setTimeout(r, holdMs));
      running.set(group, (running.get(group) ?? 1) - 1);
      const req = ctx.request();
      return { tag, scope: req.scope ?? null, limitKey: req.limitKey ?? null };
    },
  },
});

const caller = restate.service({
  name: 'Caller',
  handlers: {
    fanOut: async (ctx: restate.Context, n: number): Promise<string[]> => {
      const calls = [];
      for (let i = 0; i < n; i++) {
        calls.push(
          ctx
            .scope('tenant-a')
            .serviceClient(work)
            .run(`sdk#${i}`, restate.rpc.opts({ limitKey: 'user-1' })),
        );
      }
      return (await restate.RestatePromise.all(calls)).map((r) => `${r.tag}@${r.scope}/${r.limitKey}`);
    },
    badScope: async (ctx: restate.Context): Promise<string> =>
      (await ctx.scope('bad!').serviceClient(work).run('x#0')).tag,
  },
});

/** Over HTTP/1.1 request/response the SDK suspends on a sleep: a suspended invocation gives its permit back. */
const events: string[] = [];
const napper = restate.service({
  name: 'Napper',
  handlers: {
    nap: async (ctx: restate.Context, tag: string): Promise<string> => {
      await ctx.run('start', () => {
        events.push(`${tag}:start`);
      });
      await ctx.sleep(700);
      await ctx.run('end', () => {
        events.push(`${tag}:end`);
      });
      return tag;
    },
  },
});

async function putRules(adminUrl: string, rules: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${adminUrl}/limits/rules`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(rules),
  });
  return { status: res.status, body: await res.json() };
}

async function clearRules(adminUrl: string, patterns: string[]): Promise<void> {
  await fetch(`${adminUrl}/limits/rules/bulk-delete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(patterns.map((pattern) => ({ pattern }))),
  });
}

async function send(ingressUrl: string, path: string, tag: string, limitKey?: string): Promise<string> {
  const res = await call(ingressUrl, path, tag, limitKey === undefined ? {} : { 'x-restate-limit-key': limitKey });
  expect(res.status, res.text).toBe(202);
  return (res.json as { invocationId: string }).invocationId;
}

describe('flow control (experimental-enable-vqueues)', () => {
  let db: TestDatabase;
  let client: pg.Client;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let h1: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    runtime = await startTestRuntime(db.url, {
      RATCHET_EXPERIMENTAL_ENABLE_VQUEUES: 'true',
      RATCHET_RETRY_INITIAL_INTERVAL: '20ms',
      RATCHET_RETRY_MAX_ATTEMPTS: '2',
      RATCHET_RETRY_ON_MAX_ATTEMPTS: 'kill',
    });
    endpoint = await startEndpoint({ services: [work, caller], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    h1 = await startEndpoint({ services: [napper], transport: 'h1' });
    await registerEndpoint(runtime, h1);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await h1?.close();
    await client?.end();
    await db?.drop();
  });

  beforeEach(() => {
    running.clear();
    peak.clear();
    order.length = 0;
    holdMs = 300;
  });

  async function settled(ids: string[]): Promise<void> {
    await waitFor(async () => {
      const res = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM ratchet.invocation WHERE id = ANY($1::text[]) AND status = 'completed'`,
        [ids],
      );
      expect(Number(res.rows[0]!.n)).toBe(ids.length);
    }, 30_000);
  }

  it('says so in /version', async () => {
    const version = (await (await fetch(`${runtime.adminUrl}/version`)).json()) as { features: unknown };
    expect(version.features).toEqual({ vqueues: true });
  });

  it('limits each first-level key under `scope1/*` while keyless ones of the scope run freely', async () => {
    expect((await putRules(runtime.adminUrl, [{ pattern: 'scope1/*', limits: { concurrency: 1 } }])).status).toBe(200);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/scope1/send/Work/run', `k1#${i}`, 'k1'));
    for (let i = 0; i < 3; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/scope1/send/Work/run', `k2#${i}`, 'k2'));
    for (let i = 0; i < 3; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/scope1/send/Work/run', `none#${i}`));
    // While they run, the waiting ones are `pending` in sys_invocation.
    const pending = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM ratchet_sql.sys_invocation WHERE id = ANY($1::text[]) AND status = 'pending'`,
      [ids],
    );
    expect(Number(pending.rows[0]!.n)).toBeGreaterThanOrEqual(2);
    const entries = await client.query<{ stage: string; status: string; n: string }>(
      `SELECT stage, status, count(*) AS n FROM ratchet_sql.sys_vqueue_entry_status
        WHERE entry_id = ANY($1::text[]) AND stage = 'inbox' GROUP BY stage, status`,
      [ids],
    );
    expect(entries.rows).toEqual([{ stage: 'inbox', status: 'new', n: pending.rows[0]!.n }]);
    await settled(ids);
    expect(peak.get('k1')).toBe(1);
    expect(peak.get('k2')).toBe(1);
    expect(peak.get('none')).toBe(3);
    // In arrival order within a key.
    expect(order.filter((t) => t.startsWith('k1'))).toEqual(['k1#0', 'k1#1', 'k1#2']);
    const rows = await client.query<{ scope: string; limit_key: string | null; vqueue_id: string }>(
      `SELECT scope, limit_key, vqueue_id FROM ratchet.invocation WHERE id = ANY($1::text[])`,
      [ids],
    );
    expect(new Set(rows.rows.map((r) => r.scope))).toEqual(new Set(['scope1']));
    // One queue per limit key (and one for the keyless ones).
    expect(new Set(rows.rows.map((r) => r.vqueue_id)).size).toBe(3);
    for (const r of rows.rows) expect(r.vqueue_id).toMatch(/^vq_1[0-9A-Za-z]{33}$/);
    await clearRules(runtime.adminUrl, ['scope1/*']);
  });

  it('caps a scope as a whole with a scope rule, counting every limit key of it', async () => {
    expect((await putRules(runtime.adminUrl, [{ pattern: 'scope2', limits: { concurrency: 2 } }])).status).toBe(200);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/scope2/send/Work/run', `s2#${i}`, `u${i}`));
    for (let i = 0; i < 2; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/scope2/send/Work/run', `s2#k${i}`));
    // Another scope is not held back by scope2's rule.
    for (let i = 0; i < 3; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/other/send/Work/run', `other#${i}`));
    await settled(ids);
    expect(peak.get('s2')).toBe(2);
    expect(peak.get('other')).toBe(3);
    await clearRules(runtime.adminUrl, ['scope2']);
  });

  it('starts waiting invocations when a rule is raised', async () => {
    holdMs = 1_500;
    await putRules(runtime.adminUrl, [{ pattern: 'scope3/*', limits: { concurrency: 1 } }]);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(await send(runtime.ingressUrl, '/restate/scope/scope3/send/Work/run', `r#${i}`, 'k'));
    await waitFor(() => expect(running.get('r')).toBe(1), 10_000);
    await putRules(runtime.adminUrl, [{ pattern: 'scope3/*', limits: { concurrency: 3 } }]);
    await waitFor(() => expect(running.get('r')).toBe(3), 10_000);
    await settled(ids);
    expect(peak.get('r')).toBe(3);
    await clearRules(runtime.adminUrl, ['scope3/*']);
  });

  it('passes scope and limit key to the handler, from the ingress and from a handler call', async () => {
    const direct = await call(runtime.ingressUrl, '/restate/scope/tenant-a/call/Work/run', 'direct#0', {
      'x-restate-limit-key': 'org/user',
    });
    expect(direct.status, direct.text).toBe(200);
    expect(direct.json).toEqual({ tag: 'direct#0', scope: 'tenant-a', limitKey: 'org/user' });

    await putRules(runtime.adminUrl, [{ pattern: 'tenant-a/user-1', limits: { concurrency: 1 } }]);
    const fan = await call(runtime.ingressUrl, '/Caller/fanOut', 3);
    expect(fan.status, fan.text).toBe(200);
    expect(fan.json).toEqual(['sdk#0@tenant-a/user-1', 'sdk#1@tenant-a/user-1', 'sdk#2@tenant-a/user-1']);
    expect(peak.get('sdk')).toBe(1);
    await clearRules(runtime.adminUrl, ['tenant-a/user-1']);
  });

  it('refuses bad scopes and limit keys with restate’s messages', async () => {
    const cases: [string, Record<string, string>, string][] = [
      [
        '/restate/scope/bad!/call/Work/run',
        {},
        'bad scope value: value contains characters outside the allowed set [a-zA-Z0-9_.-]',
      ],
      [`/restate/scope/${'a'.repeat(37)}/call/Work/run`, {}, 'bad scope value: value too long: 37 bytes (max 36)'],
      [
        '/restate/scope/s/call/Work/run',
        { 'x-restate-limit-key': 'a/b/c' },
        'invalid limit-key: too many path components in the given limit-key (max 2)',
      ],
      [
        '/restate/scope/s/call/Work/run',
        { 'x-restate-limit-key': 'a//b' },
        'invalid limit-key: invalid limit-key component: value cannot be empty',
      ],
      ['/restate/call/Work/run', { 'x-restate-limit-key': 'a' }, 'limit-key requires a scope to be set'],
    ];
    for (const [path, headers, message] of cases) {
      const res = await call(runtime.ingressUrl, path, 'x#0', headers);
      expect(res.status, path).toBe(400);
      expect(res.json).toEqual({ code: 400, message, source: 'ingress' });
    }
    const viaSdk = await call(runtime.ingressUrl, '/Caller/badScope');
    expect(viaSdk.status).toBe(500);
    expect((viaSdk.json as { message: string }).message).toContain("the provided scope 'bad!' is invalid");
  });

  it('pauses and resumes a virtual queue', async () => {
    const first = await send(runtime.ingressUrl, '/restate/scope/scope4/send/Work/run', 'p#0', 'q');
    await (async () => {
      const res = await client.query<{ vqueue_id: string }>('SELECT vqueue_id FROM ratchet.invocation WHERE id = $1', [
        first,
      ]);
      const queue = res.rows[0]!.vqueue_id;
      await settled([first]);
      const paused = await fetch(`${runtime.adminUrl}/vqueues/${queue}/pause`, { method: 'POST' });
      expect(paused.status).toBe(202);
      const held = await send(runtime.ingressUrl, '/restate/scope/scope4/send/Work/run', 'p#1', 'q');
      const meta = await client.query<{ queue_is_paused: boolean; num_inbox: string }>(
        'SELECT queue_is_paused, num_inbox FROM ratchet_sql.sys_vqueue_meta WHERE id = $1',
        [queue],
      );
      expect(meta.rows[0]).toMatchObject({ queue_is_paused: true });
      await new Promise((r) => setTimeout(r, 500));
      expect(order).not.toContain('p#1');
      const resumed = await fetch(`${runtime.adminUrl}/vqueues/${queue}/resume`, { method: 'POST' });
      expect(resumed.status).toBe(202);
      await settled([held]);
      expect(order).toContain('p#1');
    })();
    const bad = await fetch(`${runtime.adminUrl}/vqueues/vq_123/pause`, { method: 'POST' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      message: "The request field 'vqueue_id' is invalid. Reason: bad length",
    });
  });

  it('gives a permit back while an invocation is suspended, and takes one again to resume', async () => {
    await putRules(runtime.adminUrl, [{ pattern: 'naps/*', limits: { concurrency: 1 } }]);
    events.length = 0;
    const a = await send(runtime.ingressUrl, '/restate/scope/naps/send/Napper/nap', 'A', 'k');
    await waitFor(() => expect(events).toContain('A:start'), 10_000);
    const b = await send(runtime.ingressUrl, '/restate/scope/naps/send/Napper/nap', 'B', 'k');
    await settled([a, b]);
    // B started while A slept (suspended), before A went on.
    expect(events.indexOf('B:start')).toBeLessThan(events.indexOf('A:end'));
    expect(events.filter((e) => e.endsWith(':start'))).toHaveLength(2);
    await clearRules(runtime.adminUrl, ['naps/*']);
  });

  it('cancels a waiting invocation at once, without running it', async () => {
    holdMs = 1_500;
    await putRules(runtime.adminUrl, [{ pattern: 'cx/*', limits: { concurrency: 1 } }]);
    const first = await send(runtime.ingressUrl, '/restate/scope/cx/send/Work/run', 'c#0', 'k');
    const second = await send(runtime.ingressUrl, '/restate/scope/cx/send/Work/run', 'c#1', 'k');
    await waitFor(() => expect(order).toContain('c#0'), 10_000);
    const res = await fetch(`${runtime.adminUrl}/invocations/${second}/cancel`, { method: 'PATCH' });
    expect(res.status).toBe(200);
    await waitFor(async () => {
      const row = await client.query<{ status: string; failure_code: number }>(
        `SELECT status, failure_code FROM ratchet.invocation WHERE id = $1`,
        [second],
      );
      expect(row.rows[0]).toMatchObject({ status: 'completed', failure_code: 409 });
    }, 5_000);
    // Long before the holder is done.
    expect(order).not.toContain('c#1');
    expect(running.get('c')).toBe(1);
    await settled([first]);
    expect(order).not.toContain('c#1');
    await clearRules(runtime.adminUrl, ['cx/*']);
  });
});
