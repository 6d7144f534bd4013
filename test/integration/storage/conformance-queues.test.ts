import { describe, expect, it } from 'vitest';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import { invocationWrite, lockWrite, outboxWrite, timerWrite } from '../../../runtime/src/storage/api.ts';
import {
  at,
  BACKENDS,
  bytes,
  commit,
  counter,
  completed,
  newInvocation,
  nextId,
  notificationRow,
  outboxOf,
  s,
  useBackend,
} from './conformance-support.ts';

/**
 * The storage contract, run against every backend: what each write of storage/api.ts does to the tables (seen
 * through the Storage read interfaces) and what it reports back in its own fields. PostgreSQL is the reference; the
 * in-memory store of the engine's unit tests must behave the same, or those tests prove nothing.
 *
 * This file: locks, timers and the outbox.
 */

for (const backend of BACKENDS) {
  describe(`storage conformance: ${backend.name}`, () => {
    useBackend(backend);

    describe('locks', () => {
      it('takes, transfers and releases a key lock only for its holder; lists locks by the partition of the holder', async () => {
        const obj = `Counter${counter}`;
        const a = newInvocation({ serviceName: obj, serviceKey: 'k', partitionId: 1 });
        const b2 = newInvocation({ serviceName: obj, serviceKey: 'k', partitionId: 1 });
        await commit(
          [
            invocationWrite.insert(a, bytes('a')),
            invocationWrite.insert(b2, bytes('b')),
            lockWrite.take(obj, 'k', a.id),
          ],
          [],
          1,
        );
        const locksOf = async (partition: number) => (await s.locks.list([partition])).filter((l) => l.service === obj);
        expect(await locksOf(1)).toEqual([{ service: obj, key: 'k', invocationId: a.id }]);
        expect(await locksOf(2)).toEqual([]);

        // Not the holder: neither a release nor a transfer changes anything.
        await commit([lockWrite.release(obj, 'k', b2.id), lockWrite.transfer(obj, 'k', b2.id, 'someone')], [], 1);
        expect(await locksOf(1)).toEqual([{ service: obj, key: 'k', invocationId: a.id }]);

        await commit([lockWrite.transfer(obj, 'k', a.id, b2.id)], [], 1);
        expect(await locksOf(1)).toEqual([{ service: obj, key: 'k', invocationId: b2.id }]);

        await commit([lockWrite.release(obj, 'k', b2.id)], [], 1);
        expect(await locksOf(1)).toEqual([]);
        // Free again: it can be taken.
        await commit([lockWrite.take(obj, 'k', a.id)], [], 1);
        expect(await locksOf(1)).toEqual([{ service: obj, key: 'k', invocationId: a.id }]);
      });
    });

    describe('timers', () => {
      it('gives each inserted timer an id, lists them by partition in firing order, deletes one or all of an invocation', async () => {
        const inv = nextId('timed');
        const other = nextId('timed');
        const late = timerWrite.insert({
          partitionId: 2,
          fireAt: at(60_000),
          invocationId: inv,
          kind: 'sleep',
          completionId: 3,
        });
        const early = timerWrite.insert({
          partitionId: 2,
          fireAt: at(1_000),
          invocationId: inv,
          kind: 'retry',
          completionId: null,
        });
        const mid = timerWrite.insert({
          partitionId: 2,
          fireAt: at(30_000),
          invocationId: other,
          kind: 'start',
          completionId: null,
        });
        const elsewhere = timerWrite.insert({
          partitionId: 1,
          fireAt: at(0),
          invocationId: other,
          kind: 'start',
          completionId: null,
        });
        await commit([late, early, mid, elsewhere], [], 2);
        const ids = [late.id, early.id, mid.id, elsewhere.id];
        expect(ids.every((id) => typeof id === 'string')).toBe(true);
        expect(new Set(ids).size).toBe(4);

        const mine = async () =>
          (await s.timers.list([2])).filter((t) => t.invocationId === inv || t.invocationId === other);
        expect(await mine()).toEqual([
          { id: early.id, partitionId: 2, fireAt: at(1_000), invocationId: inv, kind: 'retry', completionId: null },
          { id: mid.id, partitionId: 2, fireAt: at(30_000), invocationId: other, kind: 'start', completionId: null },
          { id: late.id, partitionId: 2, fireAt: at(60_000), invocationId: inv, kind: 'sleep', completionId: 3 },
        ]);

        await commit([timerWrite.delete(mid.id!)], [], 2);
        expect((await mine()).map((t) => t.id)).toEqual([early.id, late.id]);
        await commit([timerWrite.deleteOf(inv)], [], 2);
        expect(await mine()).toEqual([]);
        // deleteOf is not limited to a partition: the timer of `other` in partition 1 goes too.
        expect((await s.timers.list([1])).some((t) => t.id === elsewhere.id)).toBe(true);
        await commit([timerWrite.deleteOf(other)], [], 2);
        expect((await s.timers.list([1])).some((t) => t.id === elsewhere.id)).toBe(false);
      });
    });

    describe('outbox', () => {
      it('inserts notifications and requests, returns the rows it created, lists by partition in order, deletes', async () => {
        const target = nextId('target');
        const signal = outboxWrite.insert(
          notificationRow({ partitionId: 2, targetInvocationId: target, signalIdx: 17, raw: bytes('note') }),
        );
        const named = outboxWrite.insert(
          notificationRow({ partitionId: 2, targetInvocationId: target, signalName: 'go', raw: bytes('named') }),
        );
        const request = outboxWrite.request(2, target, {
          kind: 'invoke',
          invocation: { id: target, partitionKey: '5' },
          input: bytes('in').toString('base64'),
          caller: { id: 'caller', partition: 1, completionId: 2, entryType: 0x800d },
          workflowRun: false,
          deterministic: true,
        });
        const kill = outboxWrite.request(2, target, { kind: 'kill' });
        await commit([signal, named, request, kill], [], 2);

        const rows = await outboxOf(target, 2);
        expect(rows).toEqual([signal.rows![0], named.rows![0], request.rows![0], kill.rows![0]]);
        expect(rows[0]).toEqual({
          ...notificationRow({}),
          partitionId: 2,
          targetInvocationId: target,
          signalIdx: 17,
          raw: bytes('note'),
          seq: expect.any(String) as string,
        });
        expect(rows[2]).toMatchObject({
          entryType: 0,
          partitionId: 2,
          raw: null,
          sourceInvocationId: null,
          request: {
            kind: 'invoke',
            caller: { id: 'caller', partition: 1, completionId: 2, entryType: 0x800d },
            deterministic: true,
          },
        });
        expect(rows[3]?.request).toEqual({ kind: 'kill' });
        const seqs = rows.map((r) => BigInt(r.seq));
        expect([...seqs].sort((x, y) => (x < y ? -1 : 1))).toEqual(seqs);
        expect(await outboxOf(target, 1)).toEqual([]);

        // A notification row stores a notification's columns only: a request or a promise source goes through the
        // writes made for them (outbox.request, promise.await / peek / complete).
        const stray = outboxWrite.insert(
          notificationRow({
            partitionId: 2,
            targetInvocationId: `${target}-stray`,
            raw: bytes('x'),
            sourcePromise: { service: 'S', key: 'k', name: 'p' },
            request: { kind: 'kill' },
          }),
        );
        await commit([stray], [], 2);
        const [strayRow] = await outboxOf(`${target}-stray`, 2);
        expect(strayRow?.raw).toEqual(bytes('x'));
        expect(strayRow?.sourcePromise).toBeUndefined();
        expect(strayRow?.request).toBeUndefined();
        expect(stray.rows![0]?.request).toBeUndefined();

        await commit([outboxWrite.delete(rows[1]!.seq), outboxWrite.delete(rows[3]!.seq)], [], 2);
        expect((await outboxOf(target, 2)).map((r) => r.seq)).toEqual([rows[0]!.seq, rows[2]!.seq]);
      });

      it('queues requests without a lease in the order given, listed in numeric seq order past a digit boundary', async () => {
        const target = nextId('queued');
        const requests = Array.from({ length: 120 }, (_, i) => ({
          partition: 3,
          targetInvocationId: `${target}-${i}`,
          request: {
            kind: 'invoke' as const,
            invocation: { id: `${target}-${i}`, partitionKey: '7' },
            input: bytes(String(i)).toString('base64'),
            deterministic: true,
          },
        }));
        const rows = await s.outbox.enqueue(requests);
        expect(rows.map((r) => r.targetInvocationId)).toEqual(requests.map((r) => r.targetInvocationId));
        expect(rows.every((r) => r.partitionId === 3 && r.entryType === 0)).toBe(true);
        // Listed by seq as a number (9 before 10, 99 before 100), which is the order owners carry them out in.
        const listed = (await s.outbox.list([3])).filter((r) => r.targetInvocationId.startsWith(`${target}-`));
        expect(listed.map((r) => r.targetInvocationId)).toEqual(requests.map((r) => r.targetInvocationId));
        const seqs = listed.map((r) => BigInt(r.seq));
        expect([...seqs].sort((x, y) => (x < y ? -1 : 1))).toEqual(seqs);
        expect(await s.outbox.enqueue([])).toEqual([]);
      });

      it('tells which invocations are unfinished: stored and not completed, or still queued for admission', async () => {
        const running = newInvocation({ partitionId: 1 });
        const finished = newInvocation({ partitionId: 1 });
        await commit(
          [
            invocationWrite.insert(running, bytes('a')),
            invocationWrite.insert(finished, bytes('b')),
            invocationWrite.update(finished.id, completed(at(3_600_000)), at(0)),
          ],
          [],
          1,
        );
        const queued = nextId('queued-only');
        await s.outbox.enqueue([
          {
            partition: 1,
            targetInvocationId: queued,
            request: { kind: 'invoke', invocation: { id: queued }, input: '', deterministic: true },
          },
        ]);
        const gone = nextId('gone');
        const unfinished = await s.invocations.unfinished([running.id, finished.id, queued, gone]);
        expect(new Set(unfinished)).toEqual(new Set([running.id, queued]));
        expect(await s.invocations.unfinished([])).toEqual([]);
      });

      it('awaits a running invocation as a waiter, and answers a completed or missing one at once', async () => {
        const callee = newInvocation({ partitionId: 1 });
        const finished = newInvocation({ partitionId: 1 });
        const caller = newInvocation({ partitionId: 2 });
        await commit(
          [
            invocationWrite.insert(callee, bytes('a')),
            invocationWrite.insert(finished, bytes('b')),
            invocationWrite.insert(caller, bytes('c')),
            invocationWrite.update(finished.id, completed(at(3_600_000)), at(0)),
          ],
          [],
          1,
        );
        const onRunning = outboxWrite.awaitResult(callee.id, caller.id, 2, 5, MessageType.CallCompletionNotification);
        // Awaited twice under the same completion id: one waiter.
        const twice = outboxWrite.awaitResult(callee.id, caller.id, 2, 5, MessageType.CallCompletionNotification);
        const onFinished = outboxWrite.awaitResult(
          finished.id,
          caller.id,
          2,
          6,
          MessageType.AttachInvocationCompletionNotification,
        );
        const onMissing = outboxWrite.awaitResult(
          'no-such-invocation',
          caller.id,
          2,
          7,
          MessageType.CallCompletionNotification,
        );
        await commit([onRunning, twice, onFinished, onMissing], [], 1);
        expect(onRunning.rows ?? []).toEqual([]);
        expect(twice.rows ?? []).toEqual([]);
        expect(onFinished.rows).toEqual([
          {
            ...notificationRow({}),
            partitionId: 2,
            targetInvocationId: caller.id,
            entryType: MessageType.AttachInvocationCompletionNotification,
            completionId: 6,
            sourceInvocationId: finished.id,
            seq: expect.any(String) as string,
          },
        ]);
        expect(onMissing.rows).toEqual([
          expect.objectContaining({
            partitionId: 2,
            completionId: 7,
            sourceInvocationId: 'no-such-invocation',
            raw: null,
          }),
        ]);
        expect(await outboxOf(caller.id, 2)).toEqual([onFinished.rows![0], onMissing.rows![0]]);

        // One waiter for the completion id awaited twice.
        const toWaiters = outboxWrite.resultToWaiters(callee.id);
        await commit([invocationWrite.update(callee.id, completed(at(3_600_000)), at(0)), toWaiters], [], 1);
        expect(toWaiters.rows).toEqual([
          expect.objectContaining({ targetInvocationId: caller.id, completionId: 5, sourceInvocationId: callee.id }),
        ]);
      });

      it("turns every waiter into a row for the waiter's partition when the result is there, once", async () => {
        const callee = newInvocation({ partitionId: 1 });
        const caller1 = newInvocation({ partitionId: 2 });
        const caller2 = newInvocation({ partitionId: 0 });
        await commit(
          [
            invocationWrite.insert(callee, bytes('a')),
            invocationWrite.insert(caller1, bytes('b')),
            invocationWrite.insert(caller2, bytes('c')),
            outboxWrite.awaitResult(callee.id, caller1.id, 9, 3, MessageType.CallCompletionNotification),
            outboxWrite.awaitResult(callee.id, caller2.id, 9, 4, MessageType.AttachInvocationCompletionNotification),
            // A waiter whose invocation is gone gets nothing.
            outboxWrite.awaitResult(callee.id, 'gone-caller', 9, 1, MessageType.CallCompletionNotification),
          ],
          [],
          1,
        );
        const toWaiters = outboxWrite.resultToWaiters(callee.id);
        await commit([invocationWrite.update(callee.id, completed(at(3_600_000)), at(0)), toWaiters], [], 1);
        const bySeq = [...(toWaiters.rows ?? [])].sort((x, y) =>
          x.targetInvocationId.localeCompare(y.targetInvocationId),
        );
        expect(bySeq).toEqual(
          [
            {
              ...notificationRow({}),
              partitionId: 2,
              targetInvocationId: caller1.id,
              entryType: MessageType.CallCompletionNotification,
              completionId: 3,
              sourceInvocationId: callee.id,
              seq: expect.any(String) as string,
            },
            {
              ...notificationRow({}),
              partitionId: 0,
              targetInvocationId: caller2.id,
              entryType: MessageType.AttachInvocationCompletionNotification,
              completionId: 4,
              sourceInvocationId: callee.id,
              seq: expect.any(String) as string,
            },
          ].sort((x, y) => x.targetInvocationId.localeCompare(y.targetInvocationId)),
        );
        expect(await outboxOf(caller1.id, 2)).toHaveLength(1);
        expect(await outboxOf(caller2.id, 0)).toHaveLength(1);

        const again = outboxWrite.resultToWaiters(callee.id);
        await commit([again], [], 1);
        expect(again.rows ?? []).toEqual([]);
      });
    });
  });
}
