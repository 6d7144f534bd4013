import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MessageType as T } from '../../../runtime/src/protocol/message-types.ts';
import { commands, inputBody, notification, resultOf } from '../../support/engine/frames.ts';
import { startEngine, until, type EngineHarness } from '../../support/engine/harness.ts';
import type { ScriptedAttempt } from '../../support/engine/scripted-invoker.ts';

/**
 * Virtual-object keys (one exclusive handler at a time, the next from the key's inbox, with the state the previous
 * one left) and calls between invocations (the callee admitted with the caller's Call entry, its result delivered
 * back as a notification).
 */
describe('engine: keys and calls', () => {
  let h: EngineHarness;

  beforeEach(async () => {
    h = await startEngine();
  });

  afterEach(async () => {
    await h.stop();
  });

  function startedAttemptOf(service: string): Promise<ScriptedAttempt> {
    return until(() => {
      const a = h.invoker.attempts.find((x) => x.spec.serviceName === service);
      if (a === undefined) throw new Error(`no attempt of ${service} has started`);
      return a;
    });
  }

  it('runs the exclusive handlers of one key one at a time; the next starts with the state the first left', async () => {
    const first = await h.engine.accept(h.request('Counter', 'add', { key: 'k', body: '1' }));
    const second = await h.engine.accept(h.request('Counter', 'add', { key: 'k', body: '2' }));
    const otherKey = await h.engine.accept(h.request('Counter', 'add', { key: 'other' }));
    const shared = await h.engine.accept(h.request('Counter', 'get', { key: 'k' }));
    const a1 = await h.attempt(first.id);
    // Another key, and a shared handler of the same key, are not held up by the lock.
    await h.attempt(otherKey.id);
    await h.attempt(shared.id);
    expect(a1.stateMap).toEqual([]);
    expect(a1.spec.partialState).toBe(false);

    const partition = (await h.row(first.id))!.partitionId;
    const lockOfK = async () =>
      (await h.storage.locks.list([partition])).filter((l) => l.service === 'Counter' && l.key === 'k');
    expect(await h.row(second.id)).toMatchObject({ status: 'inboxed', inboxSeq: expect.any(BigInt) as bigint });
    expect(await lockOfK()).toEqual([{ service: 'Counter', key: 'k', invocationId: first.id }]);
    expect(h.invoker.of(second.id)).toEqual([]);

    a1.command(commands.setState('count', '1')).output('1').end();
    const a2 = await h.attempt(second.id);
    // Handed over in the first one's completion: it is completed by the time the second starts.
    expect((await h.row(first.id))?.status).toBe('completed');
    expect(a2.stateMap).toEqual([{ key: 'count', value: '1' }]);
    expect(inputBody(a2.journal[0]!.raw)).toBe('2');
    expect(await h.row(second.id)).toMatchObject({ status: 'invoked', inboxSeq: null });
    expect(await lockOfK()).toEqual([{ service: 'Counter', key: 'k', invocationId: second.id }]);

    a2.command(commands.setState('count', '2')).output('2').end();
    await h.rowMatching(second.id, { status: 'completed' });
    await until(async () => expect(await lockOfK()).toEqual([]));
    expect(await h.storage.state.load('Counter', 'k')).toEqual([
      { key: Buffer.from('count'), value: Buffer.from('2') },
    ]);
  });

  it('admits the callee in the same write as the Call and sends its result to the running caller', async () => {
    const caller = await h.engine.accept(h.request('Greeter', 'greet'));
    const a = await h.attempt(caller.id);
    a.command(
      commands.call({
        service: 'Counter',
        handler: 'add',
        key: 'c1',
        parameter: '5',
        invocationIdCompletionId: 1,
        resultCompletionId: 2,
      }),
    );
    const callee = await startedAttemptOf('Counter');
    const calleeId = callee.spec.invocationId;
    expect(inputBody(callee.journal[0]!.raw)).toBe('5');
    expect(callee.spec.serviceKey).toBe('c1');
    expect(await h.row(calleeId)).toMatchObject({ invokedBy: 'service', invokedById: caller.id, status: 'invoked' });

    const callWrite = h.storage.batches.find((b) =>
      b.journal.some((j) => j.invocationId === caller.id && j.entryType === T.CallCommand),
    );
    expect(callWrite?.journal.map((j) => j.entryType)).toEqual([
      T.CallCommand,
      T.CallInvocationIdCompletionNotification,
    ]);
    expect(callWrite?.writes).toContainEqual(
      expect.objectContaining({ kind: 'invocation.insert', row: expect.objectContaining({ id: calleeId }) as unknown }),
    );
    await until(() => expect(a.sent.map((f) => f.type)).toEqual([T.CallInvocationIdCompletionNotification]));
    expect(resultOf(a.sent[0]!.payload)).toEqual({ kind: 'invocationId', invocationId: calleeId });

    callee.output('6').end();
    await until(() =>
      expect(a.sent.map((f) => f.type)).toEqual([
        T.CallInvocationIdCompletionNotification,
        T.CallCompletionNotification,
      ]),
    );
    expect(notification(a.sent[1]!.payload).id).toEqual({ kind: 'completion', id: 2 });
    expect(resultOf(a.sent[1]!.payload)).toEqual({ kind: 'value', value: '6' });
    expect(h.storage.journalOf(caller.id).map((j) => [j.entryType, j.completionId])).toEqual([
      [T.InputCommand, undefined],
      [T.CallCommand, undefined],
      [T.CallInvocationIdCompletionNotification, 1],
      [T.CallCompletionNotification, 2],
    ]);
    // Delivered: nothing is left in the outbox.
    await until(async () => expect(await h.storage.outbox.list([0, 1, 2, 3])).toEqual([]));

    a.output('done').end();
    await h.rowMatching(caller.id, { status: 'completed', resultKind: 'success' });
  });

  it('resumes a caller suspended on a call once the callee completed, with the result in its journal', async () => {
    const caller = await h.engine.accept(h.request('Greeter', 'greet'));
    const a1 = await h.attempt(caller.id);
    a1.command(
      commands.call({
        service: 'Counter',
        handler: 'add',
        key: 'c2',
        invocationIdCompletionId: 1,
        resultCompletionId: 2,
      }),
    ).suspend([2]);
    const suspended = await h.rowMatching(caller.id, { status: 'suspended' });
    expect(suspended.awaiting).toMatchObject({ completions: [2] });

    const callee = await startedAttemptOf('Counter');
    callee.command(commands.outputFailure(418, 'no coffee')).end();
    const a2 = await h.attempt(caller.id, 1);
    expect(a2.journal.map((e) => e.type)).toEqual([
      T.InputCommand,
      T.CallCommand,
      T.CallInvocationIdCompletionNotification,
      T.CallCompletionNotification,
    ]);
    expect(resultOf(a2.journal[3]!.raw)).toEqual({
      kind: 'failure',
      failure: { code: 418, message: 'no coffee', metadata: [] },
    });
    a2.output('handled').end();
    await h.rowMatching(caller.id, { status: 'completed', resultKind: 'success' });
  });
});
