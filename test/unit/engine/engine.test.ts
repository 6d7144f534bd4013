import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MessageType as T } from '../../../runtime/src/protocol/message-types.ts';
import { commands, inputBody, notification, resultOf } from '../../support/engine/frames.ts';
import { startEngine, until, type EngineHarness } from '../../support/engine/harness.ts';
import { DEFAULTS, DEPLOYMENT_ID } from '../../support/engine/registry.ts';

/**
 * The engine's state machine without PostgreSQL and without an SDK: an invocation from its acceptance to its
 * completion, through the journal, suspension and timers. The deployment is scripted (test/support/engine).
 */
describe('engine: an invocation from accept to completion', () => {
  let h: EngineHarness;

  beforeEach(async () => {
    h = await startEngine();
  });

  afterEach(async () => {
    await h.stop();
  });

  it('starts an attempt with the input as its journal and completes with the Output once End comes', async () => {
    const accepted = await h.engine.accept(h.request('Greeter', 'greet', { body: 'Ada' }));
    expect(accepted.created).toBe(true);
    const a = await h.attempt(accepted.id);
    expect(a.spec).toMatchObject({
      invocationId: accepted.id,
      serviceName: 'Greeter',
      handlerName: 'greet',
      serviceKey: null,
      protocolVersion: 6,
      partialState: true,
      deployment: { id: DEPLOYMENT_ID },
    });
    expect(a.journal.map((e) => e.type)).toEqual([T.InputCommand]);
    expect(inputBody(a.journal[0]!.raw)).toBe('Ada');
    expect(await h.row(accepted.id)).toMatchObject({
      status: 'invoked',
      deploymentId: DEPLOYMENT_ID,
      protocolVersion: 6,
    });

    const done = h.engine.awaitCompletion(accepted.id);
    a.output('Hello Ada').end();
    const result = await done;
    expect(result?.outcome.kind).toBe('success');
    expect(result?.outcome.kind === 'success' && Buffer.from(result.outcome.value).toString()).toBe('Hello Ada');

    const row = await h.rowMatching(accepted.id, { status: 'completed' });
    expect(row).toMatchObject({ resultKind: 'success', output: Buffer.from('Hello Ada'), journalLength: 2 });
    // A call without an idempotency key is retained for its journal retention.
    expect(row.completionRetentionMs).toBe(DEFAULTS.journalRetentionMs);
    expect(row.expiresAt!.getTime() - row.completedAt!.getTime()).toBe(DEFAULTS.journalRetentionMs);
    expect(h.storage.journalOf(accepted.id).map((j) => j.entryType)).toEqual([T.InputCommand, T.OutputCommand]);
    expect(h.invoker.of(accepted.id)).toHaveLength(1);
  });

  it('journals a command before acting on it: nothing of it happens until its write committed', async () => {
    const { id } = await h.engine.accept(h.request('Counter', 'add', { key: 'k1' }));
    const a = await h.attempt(id);
    h.storage.holdCommits();
    a.command(commands.setState('count', '1'));
    a.command(commands.sleep(1, Date.now() + 60_000));
    a.command(
      commands.call({
        service: 'Greeter',
        handler: 'greet',
        parameter: 'x',
        invocationIdCompletionId: 2,
        resultCompletionId: 3,
      }),
    );
    // The engine has read all three (their writes are submitted) but none is durable: nothing has been acted on.
    await until(() => expect(h.storage.batches.filter((b) => b.journal.length > 0)).toHaveLength(3));
    expect(h.storage.journalOf(id).map((j) => j.entryType)).toEqual([T.InputCommand]);
    expect(await h.storage.state.load('Counter', 'k1')).toEqual([]);
    expect(h.invoker.attempts).toHaveLength(1);
    expect(a.sent).toEqual([]);

    h.storage.releaseCommits();
    await until(() =>
      expect(h.storage.journalOf(id).map((j) => j.entryType)).toEqual([
        T.InputCommand,
        T.SetStateCommand,
        T.SleepCommand,
        T.CallCommand,
        T.CallInvocationIdCompletionNotification,
      ]),
    );
    expect(await h.storage.state.load('Counter', 'k1')).toEqual([
      { key: Buffer.from('count'), value: Buffer.from('1') },
    ]);
    const row = (await h.row(id))!;
    expect(await h.storage.timers.list([row.partitionId])).toContainEqual(
      expect.objectContaining({ invocationId: id, kind: 'sleep', completionId: 1 }),
    );
    const callee = await until(() => {
      const c = h.invoker.attempts.find((x) => x.spec.serviceName === 'Greeter');
      if (c === undefined) throw new Error('the callee has not started');
      return c;
    });
    await until(() => expect(a.sent.map((f) => f.type)).toEqual([T.CallInvocationIdCompletionNotification]));
    expect(resultOf(a.sent[0]!.payload)).toEqual({ kind: 'invocationId', invocationId: callee.spec.invocationId });
  });

  it('suspends on a sleep and resumes when its timer fires, with the completion in the new attempt', async () => {
    const { id } = await h.engine.accept(h.request('Greeter', 'greet'));
    const a1 = await h.attempt(id);
    const wakeUpAt = Date.now() + 150;
    a1.command(commands.sleep(1, wakeUpAt)).suspend([1]);

    const suspended = await h.rowMatching(id, { status: 'suspended' });
    expect(suspended.awaiting).toEqual({
      combinator: 'first_completed',
      completions: [1],
      signals: [],
      namedSignals: [],
      nested: [],
    });
    expect(await h.storage.timers.list([suspended.partitionId])).toContainEqual(
      expect.objectContaining({ invocationId: id, kind: 'sleep', completionId: 1, fireAt: new Date(wakeUpAt) }),
    );

    const a2 = await h.attempt(id, 1);
    expect(Date.now()).toBeGreaterThanOrEqual(wakeUpAt);
    expect(a2.journal.map((e) => e.type)).toEqual([T.InputCommand, T.SleepCommand, T.SleepCompletionNotification]);
    expect(notification(a2.journal[2]!.raw)).toEqual({ id: { kind: 'completion', id: 1 }, result: { kind: 'void' } });
    expect(await h.row(id)).toMatchObject({ status: 'invoked', awaiting: null });
    expect((await h.storage.timers.list([suspended.partitionId])).filter((t) => t.invocationId === id)).toEqual([]);

    a2.output('rested').end();
    await h.rowMatching(id, { status: 'completed', resultKind: 'success' });
    expect(h.storage.journalOf(id).map((j) => j.entryType)).toEqual([
      T.InputCommand,
      T.SleepCommand,
      T.SleepCompletionNotification,
      T.OutputCommand,
    ]);
  });

  it('accepts a request with an idempotency key once: a repeat gets the same invocation, running or completed', async () => {
    const request = () => h.request('Greeter', 'greet', { body: 'x', idempotencyKey: 'once' });
    const first = await h.engine.accept(request());
    expect(first.created).toBe(true);
    const running = await h.engine.accept(request());
    expect(running).toMatchObject({ id: first.id, created: false });

    (await h.attempt(first.id)).output('only once').end();
    const row = await h.rowMatching(first.id, { status: 'completed' });
    // Retained for the idempotency retention, so that repeats find it.
    expect(row.expiresAt!.getTime() - row.completedAt!.getTime()).toBe(DEFAULTS.idempotencyRetentionMs);

    const completed = await h.engine.accept(request());
    expect(completed).toMatchObject({ id: first.id, created: false });
    const result = await h.engine.awaitCompletion(first.id);
    expect(result?.outcome.kind === 'success' && Buffer.from(result.outcome.value).toString()).toBe('only once');
    expect(h.invoker.attempts).toHaveLength(1);
    expect(h.storage.journalOf(first.id).map((j) => j.entryType)).toEqual([T.InputCommand, T.OutputCommand]);
  });
});
