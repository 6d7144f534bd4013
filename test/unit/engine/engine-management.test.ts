import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  InvocationAlreadyCompletedError,
  InvocationNotCompletedError,
} from '../../../runtime/src/engine/management-errors.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { MessageType as T } from '../../../runtime/src/protocol/message-types.ts';
import { commands, notification } from '../../support/engine/frames.ts';
import { startEngine, until, type EngineHarness } from '../../support/engine/harness.ts';

/** What the admin API does to invocations: kill, cancel, pause and resume, purge. */
describe('engine: managing invocations', () => {
  let h: EngineHarness;

  beforeEach(async () => {
    h = await startEngine();
  });

  afterEach(async () => {
    await h.stop();
  });

  it('kills a running invocation and the callee it waits for: both fail with 409 at once', async () => {
    const caller = await h.engine.accept(h.request('Greeter', 'greet'));
    const a = await h.attempt(caller.id);
    a.command(
      commands.call({
        service: 'Counter',
        handler: 'add',
        key: 'kk',
        invocationIdCompletionId: 1,
        resultCompletionId: 2,
      }),
    );
    const callee = await until(() => {
      const c = h.invoker.attempts.find((x) => x.spec.serviceName === 'Counter');
      if (c === undefined) throw new Error('the callee has not started');
      return c;
    });
    await until(() => expect(a.sent).toHaveLength(1));

    const done = h.engine.awaitCompletion(caller.id);
    await h.engine.kill(InvocationId.parse(caller.id));
    expect((await done)?.outcome).toEqual({ kind: 'failure', failure: { code: 409, message: 'killed' } });
    expect(a.aborted).toBe(true);
    expect(await h.row(caller.id)).toMatchObject({ status: 'completed', failureCode: 409, failureMessage: 'killed' });

    await h.rowMatching(callee.spec.invocationId, { status: 'completed', failureCode: 409 });
    expect(callee.aborted).toBe(true);
    // The callee's lock is free for the next invocation of its key.
    const next = await h.engine.accept(h.request('Counter', 'add', { key: 'kk' }));
    await h.attempt(next.id);

    await expect(h.engine.kill(InvocationId.parse(caller.id))).rejects.toBeInstanceOf(InvocationAlreadyCompletedError);
    expect(h.invoker.of(caller.id)).toHaveLength(1);
  });

  it('cancels a running invocation through signal 1, which its handler answers', async () => {
    const { id } = await h.engine.accept(h.request('Greeter', 'greet'));
    const a = await h.attempt(id);
    expect(await h.engine.cancel(InvocationId.parse(id))).toBe('accepted');

    await until(() => expect(a.sent.map((f) => f.type)).toEqual([T.SignalNotification]));
    expect(notification(a.sent[0]!.payload)).toEqual({ id: { kind: 'signal', idx: 1 }, result: { kind: 'void' } });
    expect(h.storage.journalOf(id).map((j) => [j.entryType, j.signalIdx])).toEqual([
      [T.InputCommand, undefined],
      [T.SignalNotification, 1],
    ]);

    a.command(commands.outputFailure(409, 'cancelled')).end();
    expect(await h.rowMatching(id, { status: 'completed' })).toMatchObject({
      resultKind: 'failure',
      failureCode: 409,
      failureMessage: 'cancelled',
    });
  });

  it('cancels a delayed invocation before it starts: it fails at once, never runs, and is not retained', async () => {
    const { id } = await h.engine.accept(h.request('Greeter', 'greet', { delayMs: 60_000 }));
    const scheduled = await h.rowMatching(id, { status: 'scheduled' });
    expect(await h.storage.timers.list([scheduled.partitionId])).toContainEqual(
      expect.objectContaining({ invocationId: id, kind: 'start' }),
    );

    const done = h.engine.awaitCompletion(id);
    expect(await h.engine.cancel(InvocationId.parse(id))).toBe('done');
    expect((await done)?.outcome).toEqual({ kind: 'failure', failure: { code: 409, message: 'canceled' } });
    const row = await h.rowMatching(id, { status: 'completed' });
    expect(row.expiresAt).toEqual(row.completedAt);
    expect((await h.storage.timers.list([row.partitionId])).filter((t) => t.invocationId === id)).toEqual([]);
    expect(h.invoker.of(id)).toEqual([]);
  });

  it('pauses a running invocation (its attempt stops) until it is resumed', async () => {
    const { id } = await h.engine.accept(h.request('Greeter', 'greet'));
    const a1 = await h.attempt(id);
    a1.command(commands.sleep(1, Date.now() + 60_000));
    await until(() => expect(h.storage.journalOf(id)).toHaveLength(2));

    expect(await h.engine.pause(InvocationId.parse(id))).toBe('paused');
    expect(a1.aborted).toBe(true);
    expect(await h.row(id)).toMatchObject({ status: 'paused' });
    expect(await h.engine.pause(InvocationId.parse(id))).toBe('already_paused');
    expect(h.invoker.of(id)).toHaveLength(1);

    await h.engine.resume(InvocationId.parse(id), undefined);
    const a2 = await h.attempt(id, 1);
    expect(a2.journal.map((e) => e.type)).toEqual([T.InputCommand, T.SleepCommand]);
    expect(await h.row(id)).toMatchObject({ status: 'invoked' });
    a2.output('resumed').end();
    await h.rowMatching(id, { status: 'completed', resultKind: 'success' });
  });

  it("purges a completed invocation (a workflow run with its key's state); a running one is refused", async () => {
    const { id } = await h.engine.accept(h.request('Signup', 'run', { key: 'ada' }));
    const a = await h.attempt(id);
    await expect(h.engine.purge(InvocationId.parse(id))).rejects.toBeInstanceOf(InvocationNotCompletedError);

    a.command(commands.setState('email', 'ada@example.com')).output('signed up').end();
    await h.rowMatching(id, { status: 'completed' });
    expect(await h.storage.state.load('Signup', 'ada')).toHaveLength(1);

    await h.engine.purge(InvocationId.parse(id));
    expect(await h.row(id)).toBeUndefined();
    expect(h.storage.journalOf(id)).toEqual([]);
    expect(await h.storage.state.load('Signup', 'ada')).toEqual([]);
    expect(await h.engine.awaitCompletion(id)).toBeUndefined();

    // The workflow key is free: the same id runs again from a fresh start.
    const again = await h.engine.accept(h.request('Signup', 'run', { key: 'ada' }));
    expect(again).toMatchObject({ id, created: true });
    const fresh = await h.attempt(id, 1);
    expect(fresh.journal.map((e) => e.type)).toEqual([T.InputCommand]);
    expect(fresh.stateMap).toEqual([]);
  });
});
