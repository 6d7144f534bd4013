import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntimeProcess } from '../../support/runtime-process.ts';
import { waitFor } from '../../support/wait.ts';
import { ingressCall, registerFunction, startLambdaLab, stopLambdaLab, type LambdaLab } from './support.ts';

/**
 * Lambda invocations survive a crash of the runtime: it is SIGKILLed while invocations of a function are under way
 * (one suspended in a sleep after a side effect, an object's queue of state updates half done) and started again on
 * the same database. Every invocation then completes; a ctx.run whose result was journaled is not run again, and
 * each update of the object's state is applied exactly once.
 */

const services = (file: string): string => `
import { appendFileSync } from 'node:fs';
import * as restate from '@restatedev/restate-sdk/lambda';
const steps = restate.service({
  name: 'Steps',
  handlers: {
    go: async (ctx, tag) => {
      await ctx.run('a', () => { appendFileSync(${JSON.stringify(file)}, 'a\\n'); });
      await ctx.sleep(1500);
      await ctx.run('b', () => { appendFileSync(${JSON.stringify(file)}, 'b\\n'); });
      return 'done ' + tag;
    },
  },
});
const accumulator = restate.object({
  name: 'Accumulator',
  handlers: {
    add: async (ctx, n) => {
      const total = ((await ctx.get('total')) ?? 0) + n;
      await ctx.sleep(200);
      ctx.set('total', total);
      return total;
    },
    get: restate.handlers.object.shared(async (ctx) => (await ctx.get('total')) ?? 0),
  },
});
export const handler = restate.createEndpointHandler({ services: [steps, accumulator] });
`;

describe('Lambda deployments: a runtime killed mid-invocation and started again', () => {
  const lab: Partial<LambdaLab> = {};
  let dir: string;
  let file: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ratchet-lambda-durability-'));
    file = join(dir, 'steps.log');
    Object.assign(
      lab,
      await startLambdaLab({
        functions: { services: services(file) },
        env: { RATCHET_RETRY_INITIAL_INTERVAL: '50ms', RATCHET_RETRY_MAX_INTERVAL: '500ms' },
      }),
    );
    await registerFunction(lab.runtime!.adminUrl, { arn: lab.lambda!.arn('services') });
  }, 120_000);

  afterAll(async () => {
    await stopLambdaLab(lab);
    await rm(dir, { recursive: true, force: true });
  });

  const query = async (sql: string): Promise<Record<string, unknown>[]> => {
    const res = await fetch(`${lab.runtime!.adminUrl}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: sql }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    return (JSON.parse(text) as { rows: Record<string, unknown>[] }).rows;
  };

  const send = async (path: string, body: unknown): Promise<string> => {
    const res = await ingressCall(lab.runtime!.ingressUrl, `${path}/send`, body);
    expect(res.status, res.text).toBe(202);
    return (JSON.parse(res.text) as { invocationId: string }).invocationId;
  };

  const attach = async (id: string): Promise<{ status: number; body: unknown }> => {
    const res = await fetch(`${lab.runtime!.ingressUrl}/restate/invocation/${id}/attach`);
    return { status: res.status, body: await res.json() };
  };

  /** SIGKILL, then a new runtime process on the same database, ports and environment. */
  const crashAndRestart = async (): Promise<void> => {
    const { runtime, db, env } = lab as LambdaLab;
    await runtime.kill('SIGKILL');
    lab.runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports: runtime.ports });
  };

  it('a handler killed during its sleep resumes after the restart without running its first step again', async () => {
    const id = await send('Steps/go', 'crash');
    // The side effect's result is journaled and the handler sleeps: the kill lands between the two steps.
    await waitFor(async () => {
      const rows = await query(
        `SELECT i.status, (SELECT count(*) FROM sys_journal j WHERE j.id = i.id AND j.entry_type = 'Command: Sleep') AS sleeps
         FROM sys_invocation i WHERE i.id = '${id}'`,
      );
      expect(rows[0]).toMatchObject({ status: 'suspended' });
      expect(Number(rows[0]!['sleeps'])).toBe(1);
    });
    expect(await readFile(file, 'utf8')).toBe('a\n');
    await crashAndRestart();

    expect(await attach(id)).toEqual({ status: 200, body: 'done crash' });
    expect(await readFile(file, 'utf8')).toBe('a\nb\n');
    const rows = await query(`SELECT status, completion_result FROM sys_invocation WHERE id = '${id}'`);
    expect(rows).toEqual([{ status: 'completed', completion_result: 'success' }]);
  }, 60_000);

  it("an object's queued state updates, killed half way, are each applied exactly once", async () => {
    const ns = [1, 2, 3, 4, 5, 6];
    const ids: string[] = [];
    for (const n of ns) ids.push(await send('Accumulator/acc/add', n));
    const completed = async (): Promise<number> => {
      const rows = await query(
        `SELECT count(*) AS n FROM sys_invocation WHERE target_service_name = 'Accumulator' AND status = 'completed'`,
      );
      return Number(rows[0]!['n']);
    };
    // Some done, one running, the rest in the object's inbox.
    await waitFor(async () => expect(await completed()).toBeGreaterThanOrEqual(2));
    expect(await completed()).toBeLessThan(ns.length);
    await crashAndRestart();

    // In the inbox's order, each add saw the total of those before it.
    const outputs = [];
    for (const id of ids) outputs.push(await attach(id));
    expect(outputs).toEqual([1, 3, 6, 10, 15, 21].map((total) => ({ status: 200, body: total })));
    const got = await ingressCall(lab.runtime!.ingressUrl, 'Accumulator/acc/get');
    expect(JSON.parse(got.text)).toBe(21);
    const rows = await query(
      `SELECT count(*) AS n FROM sys_invocation WHERE target_service_name = 'Accumulator' AND target_handler_name = 'add'`,
    );
    expect(Number(rows[0]!['n'])).toBe(ns.length);
    expect(await completed()).toBe(ns.length + 1);
  }, 60_000);
});
