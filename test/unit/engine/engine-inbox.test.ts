import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { MessageType as T } from '../../../runtime/src/protocol/message-types.ts';
import { commands, resultOf } from '../../support/engine/frames.ts';
import { startEngine, until, type EngineHarness } from '../../support/engine/harness.ts';

/**
 * A key's inbox under the paths that leave it other than by completing: the holder killed, a waiter cancelled, a
 * delayed invocation whose start finds the key busy, a state replacement queued between invocations.
 */
describe('engine: a key inbox', () => {
  let h: EngineHarness;

  beforeEach(async () => {
    h = await startEngine();
  });

  afterEach(async () => {
    await h.stop();
  });

  it('hands the key to the next waiter when its holder is killed', async () => {
    const holder = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    const waiter = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    await h.attempt(holder.id);
    await h.rowMatching(waiter.id, { status: 'inboxed' });
    await h.engine.kill(InvocationId.parse(holder.id));
    const a = await h.attempt(waiter.id);
    expect(await h.row(waiter.id)).toMatchObject({ status: 'invoked' });
    a.output('next').end();
    await h.rowMatching(waiter.id, { status: 'completed', resultKind: 'success' });
  });

  it('fails a cancelled waiter at once; the holder then releases the key to nobody', async () => {
    const holder = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    const waiter = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    const a = await h.attempt(holder.id);
    await h.rowMatching(waiter.id, { status: 'inboxed' });
    expect(await h.engine.cancel(InvocationId.parse(waiter.id))).toBe('done');
    await h.rowMatching(waiter.id, { status: 'completed', failureCode: 409 });

    a.output('done').end();
    const row = await h.rowMatching(holder.id, { status: 'completed' });
    await until(async () => expect(await h.storage.locks.list([row.partitionId])).toEqual([]));
    expect(h.invoker.of(waiter.id)).toEqual([]);
    // Free: the next one runs at once.
    const later = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    await h.attempt(later.id);
  });

  it('queues a delayed invocation whose start finds its key busy, and starts it after the holder', async () => {
    const holder = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    const a = await h.attempt(holder.id);
    const delayed = await h.engine.accept(h.request('Counter', 'add', { key: 'k', delayMs: 50 }));
    expect(await h.row(delayed.id)).toMatchObject({ status: 'scheduled' });
    await h.rowMatching(delayed.id, { status: 'inboxed' });
    expect(h.invoker.of(delayed.id)).toEqual([]);

    a.output('first').end();
    const next = await h.attempt(delayed.id);
    expect((await h.row(holder.id))?.status).toBe('completed');
    next.output('second').end();
    await h.rowMatching(delayed.id, { status: 'completed' });
  });

  it('applies a state replacement queued behind the holder before the next invocation of the key starts', async () => {
    const holder = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    const a = await h.attempt(holder.id);
    await h.engine.modifyState('Counter', 'k', undefined, [{ key: Buffer.from('count'), value: Buffer.from('100') }]);
    const waiter = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    expect(await h.storage.stateMutations.list([0, 1, 2, 3])).toHaveLength(1);

    a.command(commands.setState('count', '1')).output('1').end();
    const next = await h.attempt(waiter.id);
    expect(next.stateMap).toEqual([{ key: 'count', value: '100' }]);
    expect(await h.storage.stateMutations.list([0, 1, 2, 3])).toEqual([]);
  });

  it("answers a second call of a workflow's run with 409, and the first with the run's result", async () => {
    const caller = await h.engine.accept(h.request('Greeter', 'greet'));
    const a = await h.attempt(caller.id);
    const call = (n: number) =>
      commands.call({
        service: 'Signup',
        handler: 'run',
        key: 'w',
        invocationIdCompletionId: n,
        resultCompletionId: n + 1,
      });
    a.command(call(1));
    const run = await until(() => {
      const r = h.invoker.attempts.find((x) => x.spec.serviceName === 'Signup');
      if (r === undefined) throw new Error('the run has not started');
      return r;
    });
    a.command(call(3));
    await until(() => expect(a.sent.map((f) => f.type)).toContain(T.CallCompletionNotification));
    const second = a.sent.find((f) => f.type === T.CallCompletionNotification)!;
    expect(resultOf(second.payload)).toMatchObject({ kind: 'failure', failure: { code: 409 } });

    run.output('ran').end();
    await until(() => expect(a.sent.filter((f) => f.type === T.CallCompletionNotification)).toHaveLength(2));
    const first = a.sent.filter((f) => f.type === T.CallCompletionNotification)[1]!;
    expect(resultOf(first.payload)).toEqual({ kind: 'value', value: 'ran' });
    expect(h.invoker.attempts.filter((x) => x.spec.serviceName === 'Signup')).toHaveLength(1);
  });

  it('leaves no trace of a callee whose Call write failed: its key stays free', async () => {
    // Nobody recovers the partition: what the engine itself keeps in memory must not hold the callee's key.
    await h.stop();
    h = await startEngine({ coordinator: false });
    const caller = await h.engine.accept(h.request('Greeter', 'greet'));
    const a = await h.attempt(caller.id);
    h.storage.failNext = 1;
    a.command(
      commands.call({
        service: 'Counter',
        handler: 'add',
        key: 'lost',
        invocationIdCompletionId: 1,
        resultCompletionId: 2,
      }),
    );
    await until(() => expect(h.suspects.length).toBeGreaterThan(0));
    expect(h.invoker.attempts).toHaveLength(1);

    const next = await h.engine.accept(h.request('Counter', 'add', { key: 'lost' }));
    await h.attempt(next.id);
  });

  it('keeps a paused invocation paused when what it awaited arrives; resume runs it with the completion', async () => {
    const { id } = await h.engine.accept(h.request('Greeter', 'greet'));
    const a1 = await h.attempt(id);
    a1.command(commands.sleep(1, Date.now() + 100)).suspend([1]);
    await h.rowMatching(id, { status: 'suspended' });
    expect(await h.engine.pause(InvocationId.parse(id))).toBe('paused');

    await until(() => expect(h.storage.journalOf(id).map((j) => j.entryType)).toContain(T.SleepCompletionNotification));
    expect(await h.row(id)).toMatchObject({ status: 'paused' });
    expect(h.invoker.of(id)).toHaveLength(1);

    await h.engine.resume(InvocationId.parse(id), undefined);
    const a2 = await h.attempt(id, 1);
    expect(a2.journal.map((e) => e.type)).toEqual([T.InputCommand, T.SleepCommand, T.SleepCompletionNotification]);
  });
});
