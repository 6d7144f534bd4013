import { describe, expect, it } from 'vitest';
import {
  invocationWrite,
  lockWrite,
  onlyIfInserted,
  outboxWrite,
  stateWrite,
  timerWrite,
  unlessInserted,
} from '../../../runtime/src/storage/api.ts';
import { FencingError } from '../../../runtime/src/storage/errors.ts';
import {
  at,
  b,
  BACKENDS,
  bytes,
  commit,
  counter,
  FENCED_PARTITION,
  journalRow,
  newInvocation,
  notificationRow,
  s,
  useBackend,
} from './conformance-support.ts';

/**
 * The storage contract, run against every backend: what each write of storage/api.ts does to the tables (seen
 * through the Storage read interfaces) and what it reports back in its own fields. PostgreSQL is the reference; the
 * in-memory store of the engine's unit tests must behave the same, or those tests prove nothing.
 *
 * This file: batches (atomicity, fencing, failures).
 */

for (const backend of BACKENDS) {
  describe(`storage conformance: ${backend.name}`, () => {
    useBackend(backend);

    describe('batches', () => {
      it('applies a write made conditional on an insert of the same batch only when that insert inserted (or only when not)', async () => {
        const obj = `Conditional${counter}`;
        const row = newInvocation({ serviceName: obj, serviceKey: 'k' });
        const first = invocationWrite.insert(row, bytes('a'));
        await commit([
          first,
          onlyIfInserted(stateWrite.set(obj, 'k', 1n, bytes('inserted'), bytes('1')), first),
          unlessInserted(stateWrite.set(obj, 'k', 1n, bytes('duplicate'), bytes('1')), first),
        ]);
        expect((await s.state.load(obj, 'k')).map((e) => e.key.toString())).toEqual(['inserted']);

        const dup = invocationWrite.insert(row, bytes('a'));
        const answer = unlessInserted(
          outboxWrite.insert(notificationRow({ targetInvocationId: row.id, raw: bytes('409') })),
          dup,
        );
        const lock = onlyIfInserted(lockWrite.take(obj, 'k', row.id), dup);
        await commit([dup, lock, answer, unlessInserted(stateWrite.clearAll(obj, 'k'), dup)]);
        expect(dup.inserted).toBe(false);
        expect(await s.locks.list([0])).not.toContainEqual(expect.objectContaining({ service: obj }));
        expect(answer.rows).toHaveLength(1);
        expect(await s.state.load(obj, 'k')).toEqual([]);
      });

      it('applies nothing of a batch that fails (a lock taken twice, a journal index written twice) and rejects it', async () => {
        const obj = `Atomic${counter}`;
        const holder = newInvocation({ serviceName: obj, serviceKey: 'k' });
        await commit([invocationWrite.insert(holder, bytes('h')), lockWrite.take(obj, 'k', holder.id)]);
        const outboxBefore = await s.outbox.list([0]);
        const timersBefore = await s.timers.list([0]);

        const newcomer = newInvocation({ serviceName: obj, serviceKey: 'k' });
        await expect(
          s.submit({
            partitions: [0],
            writes: [
              invocationWrite.insert(newcomer, bytes('n')),
              stateWrite.set(obj, 'k', 1n, bytes('a'), bytes('1')),
              invocationWrite.update(holder.id, { status: 'suspended' }, at(0)),
              timerWrite.insert({
                partitionId: 0,
                fireAt: at(0),
                invocationId: newcomer.id,
                kind: 'sleep',
                completionId: 1,
              }),
              outboxWrite.insert(notificationRow({ targetInvocationId: holder.id, raw: bytes('x') })),
              lockWrite.release(obj, 'k', holder.id),
              lockWrite.take(obj, 'k', newcomer.id),
              lockWrite.take(obj, 'k', newcomer.id),
            ],
            journal: [journalRow(holder.id, 1, 'lost')],
          }),
        ).rejects.toThrow();
        expect(await s.invocations.get(newcomer.id)).toBeUndefined();
        expect(await s.journal.load(newcomer.id)).toEqual([]);
        expect((await s.invocations.get(holder.id))?.status).toBe('invoked');
        expect((await s.journal.load(holder.id)).map((e) => e.index)).toEqual([0]);
        expect(await s.state.load(obj, 'k')).toEqual([]);
        expect(await s.timers.list([0])).toEqual(timersBefore);
        expect(await s.outbox.list([0])).toEqual(outboxBefore);
        expect((await s.locks.list([0])).filter((l) => l.service === obj)).toEqual([
          { service: obj, key: 'k', invocationId: holder.id },
        ]);

        // A journal entry that exists already fails its batch the same way.
        await expect(
          commit([stateWrite.set(obj, 'k', 1n, bytes('b'), bytes('2'))], [journalRow(holder.id, 0, 'again')]),
        ).rejects.toThrow();
        expect(await s.state.load(obj, 'k')).toEqual([]);
        expect((await s.journal.load(holder.id))[0]?.raw).toEqual(bytes('h'));

        // The store goes on: the next batch commits.
        await commit([stateWrite.set(obj, 'k', 1n, bytes('c'), bytes('3'))]);
        expect(await s.state.load(obj, 'k')).toEqual([{ key: bytes('c'), value: bytes('3') }]);
      });

      it('reports a failed batch before anything submitted after it is looked at, so that it can be fenced', async () => {
        const obj = `Suspect${counter}`;
        const holder = newInvocation({ serviceName: obj, serviceKey: 'k', partitionId: 2 });
        await commit([invocationWrite.insert(holder, bytes('h')), lockWrite.take(obj, 'k', holder.id)], [], 2);
        const reported: number[][] = [];
        b.onSuspect((partitions) => {
          reported.push(partitions);
          b.giveUp(2);
        });
        try {
          // Submitted together, as an SDK's commands are: the first fails, the second must not commit after it.
          const failing = commit([lockWrite.take(obj, 'k', 'intruder')], [], 2);
          const later = commit([stateWrite.set(obj, 'k', 1n, bytes('later'), bytes('1'))], [], 2);
          await expect(failing).rejects.toThrow();
          await expect(later).rejects.toBeInstanceOf(FencingError);
          // (PostgreSQL may report the fenced one too, when it was in the failed write's transaction: harmless.)
          expect(reported[0]).toEqual([2]);
          expect(new Set(reported.map((r) => r.join()))).toEqual(new Set(['2']));
          expect(await s.state.load(obj, 'k')).toEqual([]);
          const reports = reported.length;
          // A batch refused because the partition is not held is not reported.
          await expect(commit([stateWrite.set(obj, 'k', 1n, bytes('x'), bytes('1'))], [], 2)).rejects.toBeInstanceOf(
            FencingError,
          );
          expect(reported).toHaveLength(reports);
        } finally {
          b.onSuspect(undefined);
          await b.takeBack(2);
        }
        expect(s.epochOf(2)).toBeDefined();
        await commit([stateWrite.set(obj, 'k', 1n, bytes('again'), bytes('1'))], [], 2);
        expect((await s.state.load(obj, 'k')).map((e) => e.key.toString())).toEqual(['again']);
      });

      it('never commits a batch made under an epoch it no longer holds, even once the partition is taken back', async () => {
        const row = newInvocation({ partitionId: 2 });
        const stale = s
          .submit({ partitions: [2], writes: [invocationWrite.insert(row, bytes('stale'))], journal: [] })
          .then(
            () => undefined,
            (err: unknown) => err,
          );
        b.giveUp(2);
        await b.takeBack(2);
        expect(await stale).toBeInstanceOf(FencingError);
        expect(await s.invocations.get(row.id)).toBeUndefined();
        const fresh = invocationWrite.insert(newInvocation({ partitionId: 2 }), bytes('fresh'));
        await commit([fresh], [], 2);
        expect(fresh.inserted).toBe(true);
      });

      it('refuses a batch for a partition it does not hold with a FencingError, writing nothing', async () => {
        expect(s.epochOf(FENCED_PARTITION)).toBeDefined();
        b.giveUp(FENCED_PARTITION);
        expect(s.epochOf(FENCED_PARTITION)).toBeUndefined();
        const row = newInvocation({ partitionId: FENCED_PARTITION });
        const err: unknown = await s
          .submit({
            partitions: [0, FENCED_PARTITION],
            writes: [invocationWrite.insert(row, bytes('x'))],
            journal: [],
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(err).toBeInstanceOf(FencingError);
        expect((err as FencingError).partitions).toEqual([FENCED_PARTITION]);
        expect((err as FencingError).unsent).toBe(true);
        expect(await s.invocations.get(row.id)).toBeUndefined();
        // Partitions still held are not affected.
        await commit([invocationWrite.insert(newInvocation(), bytes('y'))]);
      });

      it('commits what was submitted before it closed and refuses what comes after', async () => {
        const before = newInvocation();
        const after = newInvocation();
        const first = commit([invocationWrite.insert(before, bytes('a'))]);
        const closing = s.close();
        await expect(commit([invocationWrite.insert(after, bytes('b'))])).rejects.toThrow();
        await first;
        await closing;
        expect(await s.invocations.get(before.id)).toBeDefined();
        expect(await s.invocations.get(after.id)).toBeUndefined();
      });
    });
  });
}
