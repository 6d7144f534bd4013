import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAwakeableId } from '../../../runtime/src/ids/awakeable-id.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * Workflows and durable promises, attach, cancellation: real SDK services, each behaviour over HTTP/2 (bidi) and
 * HTTP/1.1 (request/response, where every wait is a suspension and a replay).
 */

const signup = restate.workflow({
  name: 'Signup',
  handlers: {
    run: async (ctx: restate.WorkflowContext, req: { email: string }) => {
      ctx.set('status', 'waiting');
      const approval = await ctx.promise<string>('approval');
      ctx.set('status', 'approved');
      return { user: ctx.key, approvedWith: approval, req };
    },
    approve: async (ctx: restate.WorkflowSharedContext, value: string) => {
      await ctx.promise<string>('approval').resolve(value);
      return 'approved';
    },
    refuse: async (ctx: restate.WorkflowSharedContext, reason: string) => {
      // DurablePromise.reject takes a reason string, not a promise rejection (SDK 1.17.2 in request/response mode
      // fails with a wasm aliasing error when given a TerminalError here).
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      await ctx.promise<string>('approval').reject(reason);
      return 'refused';
    },
    status: async (ctx: restate.WorkflowSharedContext) => (await ctx.get<string>('status')) ?? 'none',
    peek: async (ctx: restate.WorkflowSharedContext) => (await ctx.promise<string>('approval').peek()) ?? 'pending',
    waitTwice: async (ctx: restate.WorkflowSharedContext) => {
      // A shared handler waits on the same promise as run.
      const v = await ctx.promise<string>('approval');
      return `shared saw ${v}`;
    },
  },
});

/** Holds an awakeable open until resolved; its id is kept in the object's state for the test to read. */
const holder = restate.object({
  name: 'Holder',
  handlers: {
    hold: async (ctx: restate.ObjectContext) => {
      const { id, promise } = ctx.awakeable<string>();
      ctx.set('awakeable', id);
      try {
        return await promise;
      } catch (err) {
        ctx.set('outcome', `interrupted: ${(err as Error).message}`);
        throw err;
      }
    },
    awakeable: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext) => (await ctx.get<string>('awakeable')) ?? '',
    ),
    outcome: restate.handlers.object.shared(
      async (ctx: restate.ObjectSharedContext) => (await ctx.get<string>('outcome')) ?? '',
    ),
  },
});
const holderRef = { name: 'Holder' } as typeof holder;

const parent = restate.service({
  name: 'Parent',
  handlers: {
    callChild: async (ctx: restate.Context, key: string) => ctx.objectClient(holderRef, key).hold(),
    sendAndAttach: async (ctx: restate.Context, key: string) => {
      const handle = ctx.objectSendClient(holderRef, key).hold();
      const id = await handle.invocationId;
      return `attached: ${await ctx.invocation(id).attach<string>()}`;
    },
  },
});

const GET_PROMISE = MessageType.GetPromiseCommand;
const ATTACH_INVOCATION = MessageType.AttachInvocationCommand;

const signals = restate.service({
  name: 'Signals',
  handlers: {
    waitFor: async (ctx: restate.Context, name: string) => `got ${await ctx.signal<string>(name)}`,
    signal: async (ctx: restate.Context, req: { target: string; name: string; value?: string; reason?: string }) => {
      const ref = ctx.invocation(req.target as restate.InvocationId).signal<string>(req.name);
      if (req.reason !== undefined) ref.reject(req.reason);
      else ref.resolve(req.value ?? '');
      return 'sent';
    },
    resolveAwakeable: async (ctx: restate.Context, req: { id: string; value: string }) => {
      ctx.resolveAwakeable(req.id, req.value);
      return 'resolved';
    },
  },
});

async function query<T>(dbUrl: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function send(runtime: TestRuntime, path: string, body?: unknown): Promise<string> {
  const res = await call(runtime.ingressUrl, `${path}/send`, body);
  expect(res.status).toBe(202);
  return (res.json as { invocationId: string }).invocationId;
}

/** True once the invocation journaled a command of this type (so it waits on it, bidi or suspended alike). */
async function journaled(dbUrl: string, id: string, entryType: number): Promise<true | undefined> {
  const rows = await query(dbUrl, 'SELECT 1 FROM ratchet.journal WHERE invocation_id = $1 AND entry_type = $2', [
    id,
    entryType,
  ]);
  return rows.length > 0 ? true : undefined;
}

async function statusOf(dbUrl: string, id: string): Promise<string | undefined> {
  const rows = await query<{ status: string }>(dbUrl, 'SELECT status FROM ratchet.invocation WHERE id = $1', [id]);
  return rows[0]?.status;
}

describe.each(['h2', 'h1'] as const)('workflows, promises, attach and cancellation over %s', (transport) => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let n = 0;
  const key = (label: string): string => `${label}-${transport}-${++n}`;

  const output = async (id: string) => {
    const done = await runtime.handle.engine.awaitCompletion(id);
    if (done === undefined) throw new Error(`invocation ${id} not found`);
    return done.outcome.kind === 'success'
      ? { ok: true as const, value: JSON.parse(Buffer.from(done.outcome.value).toString()) as unknown }
      : { ok: false as const, code: done.outcome.failure.code, message: done.outcome.failure.message };
  };
  const awakeableOf = (k: string): Promise<string> =>
    until(`the awakeable of ${k}`, async () => {
      const res = await call(runtime.ingressUrl, `/Holder/${k}/awakeable`);
      return typeof res.json === 'string' && res.json !== '' ? res.json : undefined;
    });

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
      RATCHET_RETRY_MAX_INTERVAL: '200ms',
    });
    endpoint = await startEndpoint({ services: [signup, holder, parent, signals], transport });
    await registerEndpoint(runtime, endpoint);
  });

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('run waits on a durable promise that a shared handler completes; state is visible meanwhile', async () => {
    const k = key('wf');
    const id = await send(runtime, `/Signup/${k}/run`, { email: `${k}@x` });
    expect(id).toBe(InvocationId.forWorkflow('Signup', k));
    await until('run to wait on its promise', () => journaled(db.url, id, GET_PROMISE));
    expect((await call(runtime.ingressUrl, `/Signup/${k}/status`)).json).toBe('waiting');
    expect((await call(runtime.ingressUrl, `/Signup/${k}/peek`)).json).toBe('pending');

    expect((await call(runtime.ingressUrl, `/Signup/${k}/approve`, 'yes')).json).toBe('approved');
    expect(await output(id)).toEqual({ ok: true, value: { user: k, approvedWith: 'yes', req: { email: `${k}@x` } } });
    expect((await call(runtime.ingressUrl, `/Signup/${k}/status`)).json).toBe('approved');
    expect((await call(runtime.ingressUrl, `/Signup/${k}/peek`)).json).toBe('yes');
    // A shared handler arriving after completion gets the value at once.
    expect((await call(runtime.ingressUrl, `/Signup/${k}/waitTwice`)).json).toBe('shared saw yes');

    // The promise row is what every handler of the key sees.
    const rows = await query<{ key: string; value: Buffer }>(
      db.url,
      `SELECT key, value FROM ratchet.promise WHERE service_name = 'Signup' AND service_key = $1`,
      [k],
    );
    expect(rows.map((r) => [r.key, r.value.toString()])).toEqual([['approval', '"yes"']]);
  });

  it('completing a promise twice fails the second completer with 409, and the first value stands', async () => {
    const k = key('twice');
    expect((await call(runtime.ingressUrl, `/Signup/${k}/approve`, 'first')).json).toBe('approved');
    const second = await call(runtime.ingressUrl, `/Signup/${k}/approve`, 'second');
    expect(second.status).toBe(409);
    expect(second.json).toMatchObject({ code: 409, message: 'promise was already completed' });
    const refused = await call(runtime.ingressUrl, `/Signup/${k}/refuse`, 'late');
    expect(refused.status).toBe(409);
    // Completed before run even started: run gets the value without waiting.
    const id = await send(runtime, `/Signup/${k}/run`, { email: 'e' });
    expect(await output(id)).toEqual({ ok: true, value: { user: k, approvedWith: 'first', req: { email: 'e' } } });
  });

  it('a rejected promise fails run with the reason; waiting shared handlers see it too', async () => {
    const k = key('reject');
    const runId = await send(runtime, `/Signup/${k}/run`, { email: 'r' });
    const sharedId = await send(runtime, `/Signup/${k}/waitTwice`);
    await until('run to wait', () => journaled(db.url, runId, GET_PROMISE));
    await until('the shared handler to wait', () => journaled(db.url, sharedId, GET_PROMISE));
    expect((await call(runtime.ingressUrl, `/Signup/${k}/refuse`, 'not today')).json).toBe('refused');
    expect(await output(runId)).toMatchObject({ ok: false, message: 'not today' });
    expect(await output(sharedId)).toMatchObject({ ok: false, message: 'not today' });
  });

  it('run executes once per key: a second call is 409, a second send is PreviouslyAccepted', async () => {
    const k = key('once');
    expect((await call(runtime.ingressUrl, `/Signup/${k}/approve`, 'go')).status).toBe(200);
    const first = await call(runtime.ingressUrl, `/Signup/${k}/run`, { email: '1' });
    expect(first.status).toBe(200);
    const again = await call(runtime.ingressUrl, `/Signup/${k}/run`, { email: '2' });
    expect(again.status).toBe(409);
    expect(again.json).toEqual({ code: 409, message: 'the workflow method was already invoked', source: 'invocation' });
    expect(again.headers.get('x-restate-id')).toBe(first.headers.get('x-restate-id'));
    const resend = await call(runtime.ingressUrl, `/Signup/${k}/run/send`, { email: '3' });
    expect(resend.json).toEqual({ invocationId: first.headers.get('x-restate-id'), status: 'PreviouslyAccepted' });
  });

  it('ctx.invocation(id).attach() waits for another invocation and gets its result', async () => {
    const k = key('attach');
    const parentId = await send(runtime, '/Parent/sendAndAttach', k);
    const awakeable = await awakeableOf(k);
    await until('the parent to wait on its attach', () => journaled(db.url, parentId, ATTACH_INVOCATION));
    await runtime.handle.engine.signal(
      InvocationId.parse(awakeableInvocation(awakeable)),
      { idx: awakeableIndex(awakeable) },
      { kind: 'value', value: Buffer.from('"released"') },
    );
    expect(await output(parentId)).toEqual({ ok: true, value: 'attached: released' });
    const journal = await query<{ entry_type: number }>(
      db.url,
      'SELECT entry_type FROM ratchet.journal WHERE invocation_id = $1 ORDER BY index',
      [parentId],
    );
    expect(journal.map((r) => r.entry_type)).toContain(ATTACH_INVOCATION);
    expect(journal.map((r) => r.entry_type)).toContain(MessageType.AttachInvocationCompletionNotification);
  });

  it('cancelling a parent that waits on a child cancels both; the child runs its compensation', async () => {
    const k = key('cancel');
    const parentId = await send(runtime, '/Parent/callChild', k);
    await awakeableOf(k);
    const childRows = await until('the child', async () => {
      const rows = await query<{ id: string }>(
        db.url,
        `SELECT id FROM ratchet.invocation WHERE service_name = 'Holder' AND service_key = $1 AND handler_name = 'hold'`,
        [k],
      );
      return rows.length > 0 ? rows : undefined;
    });
    const res = await fetch(`${runtime.adminUrl}/invocations/${parentId}/cancel`, { method: 'PATCH' });
    expect(res.status).toBe(202);
    expect(await output(parentId)).toEqual({ ok: false, code: 409, message: 'Cancelled' });
    expect(await output(childRows[0]!.id)).toEqual({ ok: false, code: 409, message: 'Cancelled' });
    expect((await call(runtime.ingressUrl, `/Holder/${k}/outcome`)).json).toBe('interrupted: Cancelled');

    const again = await fetch(`${runtime.adminUrl}/invocations/${parentId}/cancel`, { method: 'PATCH' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ message: `The invocation '${parentId}' was already completed.` });
  });

  it('cancelling an invocation that has not started fails it at once; the key then serves the next one', async () => {
    const k = key('inboxed');
    const holding = await send(runtime, `/Holder/${k}/hold`);
    const awakeable = await awakeableOf(k);
    const queued = await send(runtime, `/Holder/${k}/hold`);
    const last = await send(runtime, `/Holder/${k}/hold`);
    expect(await statusOf(db.url, queued)).toBe('inboxed');
    // Whoever waits on it learns it was cancelled; afterwards nothing of it is left to see (as restate does).
    const waiting = output(queued);
    const res = await fetch(`${runtime.adminUrl}/invocations/${queued}/cancel`, { method: 'PATCH' });
    expect(res.status).toBe(200);
    expect(await waiting).toEqual({ ok: false, code: 409, message: 'canceled' });
    expect(await runtime.handle.engine.getCompleted(queued)).toBeUndefined();

    await runtime.handle.engine.signal(
      InvocationId.parse(awakeableInvocation(awakeable)),
      { idx: awakeableIndex(awakeable) },
      { kind: 'value', value: Buffer.from('"one"') },
    );
    expect(await output(holding)).toEqual({ ok: true, value: 'one' });
    // The cancelled one is skipped: the last one holds the key now.
    const next = await until('the last invocation to hold the key', async () => {
      const a = await awakeableOf(k);
      return a !== awakeable ? a : undefined;
    });
    expect(awakeableInvocation(next)).toBe(last);
    await runtime.handle.engine.cancel(InvocationId.parse(last));
    expect(await output(last)).toEqual({ ok: false, code: 409, message: 'Cancelled' });
  });

  it('delivers named signals from other handlers, resolved or rejected', async () => {
    const waiting = await send(runtime, '/Signals/waitFor', 'go');
    const refused = await send(runtime, '/Signals/waitFor', 'stop');
    await until('both to wait', async () =>
      (await journaled(db.url, waiting, MessageType.OutputCommand)) === undefined &&
      (await query(db.url, 'SELECT 1 FROM ratchet.invocation WHERE id = ANY($1) AND running_at IS NOT NULL', [
        [waiting, refused],
      ]).then((r) => r.length === 2))
        ? true
        : undefined,
    );
    expect(
      (await call(runtime.ingressUrl, '/Signals/signal', { target: waiting, name: 'go', value: 'green' })).json,
    ).toBe('sent');
    expect(await output(waiting)).toEqual({ ok: true, value: 'got green' });
    await call(runtime.ingressUrl, '/Signals/signal', { target: refused, name: 'stop', reason: 'red light' });
    expect(await output(refused)).toMatchObject({ ok: false, code: 500, message: 'red light' });
    const rows = await query<{ signal_name: string }>(
      db.url,
      'SELECT signal_name FROM ratchet.journal WHERE invocation_id = $1 AND entry_type = $2',
      [waiting, MessageType.SignalNotification],
    );
    expect(rows).toEqual([{ signal_name: 'go' }]);
  });

  it('resolves an awakeable from another handler', async () => {
    const k = key('awk');
    const holding = await send(runtime, `/Holder/${k}/hold`);
    const awakeable = await awakeableOf(k);
    expect(
      (await call(runtime.ingressUrl, '/Signals/resolveAwakeable', { id: awakeable, value: 'from a handler' })).json,
    ).toBe('resolved');
    expect(await output(holding)).toEqual({ ok: true, value: 'from a handler' });
  });

  it('answers cancel of unknown and malformed ids like restate', async () => {
    const unknown = InvocationId.forWorkflow('Nope', 'nobody');
    const res = await fetch(`${runtime.adminUrl}/invocations/${unknown}/cancel`, { method: 'PATCH' });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ message: `The requested invocation '${unknown}' does not exist` });
    const bad = await fetch(`${runtime.adminUrl}/invocations/inv_bad/cancel`, { method: 'PATCH' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      message: "The request field 'invocation_id' is invalid. Reason: unrecognized codec version",
    });
    const post = await fetch(`${runtime.adminUrl}/invocations/${unknown}/cancel`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('PATCH');
  });
});

function awakeableInvocation(id: string): string {
  return parseAwakeableId(id).invocationId;
}
function awakeableIndex(id: string): number {
  return parseAwakeableId(id).index;
}
