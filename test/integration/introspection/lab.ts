import * as restate from '@restatedev/restate-sdk';
import { counterObject } from '../../support/services/counter.ts';
import { fail, greeterService } from '../../support/services/greeter.ts';
import { waitFor } from '../../support/wait.ts';
import '../../support/polyfill.ts';

/**
 * The introspection lab: services (named like those of restate's captured transcripts) and a scenario that leaves
 * invocations in every state the introspection tables distinguish. Shared by the /query integration tests, the CLI
 * end-to-end tests and the compatibility suite, which plays it against restate-server 1.7.12 as well.
 */

/** Awakeable ids handed out by `Counter/hold`, by object key (the test resolves them to release the key). */
export const held = new Map<string, string>();

export const greeter = greeterService({
  handlers: {
    /** A durable sleep of `ms` (an hour in the lab: suspended for as long as a test runs). */
    sleep: async (ctx: restate.Context, ms: number): Promise<string> => {
      await ctx.sleep(ms, 'nap');
      return 'rested';
    },
    fail,
  },
});

export const counter = counterObject({
  handlers: {
    /** Holds the key's lock until the awakeable it posts (in `held`) is resolved. */
    hold: async (ctx: restate.ObjectContext): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('post', () => {
        held.set(ctx.key, id);
      });
      return promise;
    },
  },
});

export const signup = restate.workflow({
  name: 'Signup',
  handlers: {
    run: async (ctx: restate.WorkflowContext, email: string): Promise<string> => {
      ctx.set('status', 'waiting');
      const approval = await ctx.promise<string>('approval').get();
      ctx.set('status', 'approved');
      return `${email}: ${approval}`;
    },
    approve: async (ctx: restate.WorkflowSharedContext, value: string): Promise<void> => {
      await ctx.promise<string>('approval').resolve(value);
    },
  },
});

/** Always fails with a retryable error; paused after two attempts. */
export const flaky = restate.service({
  name: 'Flaky',
  handlers: {
    boom: async (): Promise<never> => {
      throw new Error('boom');
    },
  },
  options: { retryPolicy: { maxAttempts: 2, initialInterval: 50, onMaxAttempts: 'pause' } },
});

export const LAB_SERVICES = [greeter, counter, signup, flaky];

export interface LabInvocations {
  /** Greeter/greet with idempotency key `idem-1`: completed with success. */
  readonly greeted: string;
  /** Greeter/fail: completed with failure `[418] this is a terminal failure`. */
  readonly failed: string;
  /** Greeter/sleep for an hour: suspended (running until the deployment's stream idles out). */
  readonly sleeping: string;
  /** Greeter/greet sent with a one-hour delay: scheduled. */
  readonly scheduled: string;
  /** Counter/k2/hold: running, holds k2's lock. */
  readonly holding: string;
  /** Counter/k2/add queued behind it: pending (inboxed). */
  readonly inboxed: string;
  /** Signup/u1/run, waiting for its promise `approval`. */
  readonly workflow: string;
  /** Flaky/boom: paused after its attempts ran out. */
  readonly paused: string;
}

export interface LabTarget {
  readonly ingressUrl: string;
  readonly adminUrl: string;
}

/** Retries `fn` (vi.waitFor) until it returns something other than undefined. */
export async function until<T>(what: string, fn: () => T | undefined | Promise<T | undefined>): Promise<T> {
  return waitFor(async () => {
    const value = await fn();
    if (value === undefined) throw new Error(`still waiting for ${what}`);
    return value;
  }, 60_000);
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

async function send(target: LabTarget, path: string, body: unknown, query = '', headers = {}): Promise<string> {
  const res = await post(`${target.ingressUrl}${path}/send${query}`, body, headers);
  const json = (await res.json()) as { invocationId?: string };
  if (res.status !== 202 || json.invocationId === undefined) throw new Error(`send ${path}: ${res.status}`);
  return json.invocationId;
}

/** Runs a SQL statement through `POST /query` (JSON rows). */
export async function queryRows(adminUrl: string, sql: string): Promise<Record<string, unknown>[]> {
  const res = await post(`${adminUrl}/query`, { query: sql }, { accept: 'application/json' });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`query failed (${res.status}): ${text}\n${sql}`);
  return (JSON.parse(text) as { rows: Record<string, unknown>[] }).rows;
}

async function statusOf(target: LabTarget, id: string): Promise<string | undefined> {
  const rows = await queryRows(target.adminUrl, `SELECT status FROM sys_invocation WHERE id = '${id}'`);
  return rows[0]?.['status'] as string | undefined;
}

/** Waits until the invocation's derived status (sys_invocation.status) is one of `statuses`. */
export async function waitForStatus(target: LabTarget, id: string, ...statuses: string[]): Promise<void> {
  await until(`${id} to be ${statuses.join(' or ')}`, async () => {
    const status = await statusOf(target, id);
    return status !== undefined && statuses.includes(status) ? status : undefined;
  });
}

/** Plays the lab scenario on a target whose deployment serves LAB_SERVICES. */
export async function playLab(target: LabTarget): Promise<LabInvocations> {
  const greet = await post(`${target.ingressUrl}/Greeter/greet`, 'Alice', { 'idempotency-key': 'idem-1' });
  if (greet.status !== 200) throw new Error(`greet: ${greet.status} ${await greet.text()}`);
  const greeted = greet.headers.get('x-restate-id') ?? '';
  const fail = await post(`${target.ingressUrl}/Greeter/fail`, null);
  await fail.arrayBuffer();
  const failed = fail.headers.get('x-restate-id') ?? '';
  const added = await post(`${target.ingressUrl}/Counter/k1/add`, 7);
  if (added.status !== 200) throw new Error(`add: ${added.status}`);

  const sleeping = await send(target, '/Greeter/sleep', 60 * 60 * 1000);
  const scheduled = await send(target, '/Greeter/greet', 'later', '?delay=1h');
  held.delete('k2');
  const holding = await send(target, '/Counter/k2/hold', null);
  await until('Counter/k2/hold to post its awakeable', () => held.get('k2'));
  const inboxed = await send(target, '/Counter/k2/add', 1);
  const workflow = await send(target, '/Signup/u1/run', 'u1@example.com');
  const paused = await send(target, '/Flaky/boom', null);

  await waitForStatus(target, paused, 'paused');
  await waitForStatus(target, inboxed, 'pending');
  await waitForStatus(target, scheduled, 'scheduled');
  await waitForStatus(target, failed, 'completed');
  return { greeted, failed, sleeping, scheduled, holding, inboxed, workflow, paused };
}

/** Lets everything the lab left running finish, so no endpoint closes under a live attempt. */
export async function releaseLab(target: LabTarget): Promise<void> {
  const id = held.get('k2');
  if (id !== undefined) {
    await post(`${target.ingressUrl}/restate/awakeables/${id}/resolve`, 'released').then((r) => r.arrayBuffer());
  }
}
