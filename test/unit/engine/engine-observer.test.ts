import { afterEach, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { commands } from '../../support/engine/frames.ts';
import { startEngine, until, type EngineHarness, type HarnessOptions } from '../../support/engine/harness.ts';

/**
 * The lifecycle events the engine reports to its observer (the invocation log lines and, later, spans): each one once,
 * in order, after the change it reports is durable, with the invocation's target, deployment and attempt.
 */
describe('engine: lifecycle events', () => {
  let h: EngineHarness | undefined;

  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  async function start(options: HarnessOptions = {}): Promise<EngineHarness> {
    h = await startEngine(options);
    return h;
  }

  it('reports accepted, started, retrying (with the SDK error and its stack), replayed, suspended, resumed, completed', async () => {
    const h = await start({ retryPolicy: { initialIntervalMs: 20, maxIntervalMs: 20, maxAttempts: 5 } });
    const { id } = await h.engine.accept(h.request('Counter', 'add', { key: 'k' }));
    const a1 = await h.attempt(id);
    a1.command(commands.setState('count', '1')).error(500, 'boom', 'retry', 'Error: boom\n    at add (counter.ts:3)');
    const a2 = await h.attempt(id, 1);
    a2.command(commands.sleep(1, Date.now() + 50)).suspend([1]);
    const a3 = await h.attempt(id, 2);
    a3.output('1').end();
    await h.rowMatching(id, { status: 'completed' });
    await until(() => expect(h.eventsOf(id).at(-1)).toBe('completed'));

    expect(h.eventsOf(id)).toEqual([
      'accepted',
      'started',
      'retrying',
      'started',
      'replayed',
      'suspended',
      'resumed',
      'started',
      'replayed',
      'completed',
    ]);
    const ofId = h.events.filter((x) => x.inv.id === id);
    expect(ofId[0]!.inv).toMatchObject({ target: 'Counter/k/add', service: 'Counter', handler: 'add', key: 'k' });
    expect(ofId[2]!.e).toEqual({
      kind: 'retrying',
      code: 'RT0007',
      message: 'boom',
      stacktrace: 'Error: boom\n    at add (counter.ts:3)',
      delayMs: 20,
    });
    // The second attempt is attempt 1, on the deployment the first one pinned.
    expect(ofId[3]!.inv.attempt).toBe(1);
    expect(ofId[3]!.inv.deploymentId).toEqual(expect.stringMatching(/^dp_/));
    expect(ofId[4]!.e).toEqual({ kind: 'replayed', entries: 2 });
    expect(ofId[6]!.e).toEqual({ kind: 'resumed', by: 'notification' });
    expect(ofId.at(-1)!.e).toEqual({ kind: 'completed', outcome: 'success', code: undefined, message: undefined });
  });

  it('reports an invocation inboxed behind its key, and one scheduled for later', async () => {
    const h = await start();
    const first = await h.engine.accept(h.request('Counter', 'add', { key: 'busy' }));
    await h.attempt(first.id);
    const second = await h.engine.accept(h.request('Counter', 'add', { key: 'busy' }));
    await until(() => expect(h.eventsOf(second.id)).toEqual(['accepted', 'inboxed']));
    const later = await h.engine.accept(h.request('Greeter', 'greet', { delayMs: 60_000 }));
    await until(() => expect(h.eventsOf(later.id)).toEqual(['accepted', 'scheduled']));
    const scheduled = h.events.find((x) => x.inv.id === later.id && x.e.kind === 'scheduled')!.e;
    expect(scheduled.kind === 'scheduled' && scheduled.at.getTime() - Date.now()).toBeGreaterThan(50_000);
  });

  it('reports pause and resume through the admin API, a pause after a failure, a cancellation and a kill', async () => {
    const h = await start({ retryPolicy: { initialIntervalMs: 60_000, maxIntervalMs: 60_000, maxAttempts: 5 } });
    const { id } = await h.engine.accept(h.request('Greeter', 'greet'));
    const a1 = await h.attempt(id);
    a1.command(commands.sleep(1, Date.now() + 60_000)).suspend([1]);
    await h.rowMatching(id, { status: 'suspended' });
    await h.engine.pause(InvocationId.parse(id));
    await h.engine.resume(InvocationId.parse(id), undefined);
    (await h.attempt(id, 1)).error(500, 'stop here', 'pause');
    await h.rowMatching(id, { status: 'paused' });
    await until(() => expect(h.eventsOf(id).at(-1)).toBe('paused'));
    await h.engine.kill(InvocationId.parse(id));
    await until(() => expect(h.eventsOf(id).at(-1)).toBe('killed'));
    expect(h.eventsOf(id)).toEqual([
      'accepted',
      'started',
      'suspended',
      'paused',
      'resumed',
      'started',
      'replayed',
      'paused',
      'completed',
      'killed',
    ]);
    const pauses = h.events.filter((x) => x.inv.id === id && x.e.kind === 'paused').map((x) => x.e);
    expect(pauses).toEqual([
      { kind: 'paused', by: 'admin', code: undefined, message: undefined },
      { kind: 'paused', by: 'failure', code: 'RT0007', message: 'stop here' },
    ]);
    expect(h.events.find((x) => x.inv.id === id && x.e.kind === 'completed')!.e).toMatchObject({
      outcome: 'failure',
      code: 409,
      message: 'killed',
    });

    const other = await h.engine.accept(h.request('Greeter', 'greet'));
    // The SDK awaits its sleep and, as it always does, the cancellation signal (1).
    (await h.attempt(other.id)).command(commands.sleep(1, Date.now() + 60_000)).suspend([1], [1]);
    await h.rowMatching(other.id, { status: 'suspended' });
    await h.engine.cancel(InvocationId.parse(other.id));
    await until(() => expect(h.eventsOf(other.id)).toContain('replayed'));
    expect(h.eventsOf(other.id)).toEqual([
      'accepted',
      'started',
      'suspended',
      'cancelled',
      'resumed',
      'started',
      'replayed',
    ]);
  });
});
