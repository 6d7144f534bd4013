import { describe, expect, it } from 'vitest';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import { invocationWrite, journalWrite, promiseWrite, stateWrite } from '../../../runtime/src/storage/api.ts';
import { insertedRow, type PromiseRef } from '../../../runtime/src/storage/rows.ts';
import {
  at,
  BACKENDS,
  bytes,
  commit,
  counter,
  completed,
  journalRow,
  newInvocation,
  s,
  useBackend,
  workflowRun,
} from './conformance-support.ts';

/**
 * The storage contract, run against every backend: what each write of storage/api.ts does to the tables (seen
 * through the Storage read interfaces) and what it reports back in its own fields. PostgreSQL is the reference; the
 * in-memory store of the engine's unit tests must behave the same, or those tests prove nothing.
 *
 * This file: invocations. Locks, timers and the outbox: conformance-queues.test.ts; state and promises:
 * conformance-state.test.ts; batches: conformance-batches.test.ts.
 */

for (const backend of BACKENDS) {
  describe(`storage conformance: ${backend.name}`, () => {
    useBackend(backend);

    describe('invocations', () => {
      it('inserts a row with its input as journal entry 0; a duplicate id inserts nothing and says so', async () => {
        const row = newInvocation();
        const insert = invocationWrite.insert(row, bytes('input-1'));
        await commit([insert]);
        expect(insert.inserted).toBe(true);
        expect(await s.invocations.get(row.id)).toEqual(insertedRow(row, null));
        const journal = await s.journal.load(row.id);
        expect(journal).toEqual([
          {
            index: 0,
            entryType: MessageType.InputCommand,
            completionId: null,
            signalIdx: null,
            signalName: null,
            raw: bytes('input-1'),
          },
        ]);

        const again = invocationWrite.insert({ ...row, handlerName: 'other', status: 'scheduled' }, bytes('input-2'));
        await commit([again]);
        expect(again.inserted).toBe(false);
        expect(await s.invocations.get(row.id)).toEqual(insertedRow(row, null));
        expect(await s.journal.load(row.id)).toEqual(journal);
      });

      it('gives an inboxed insert a place in the inbox sequence, shared with later inbox moves', async () => {
        const first = newInvocation({ status: 'inboxed', inboxSeq: true, serviceKey: 'k', serviceTy: 'VirtualObject' });
        const second = newInvocation({ status: 'scheduled', scheduledStartAt: at(60_000) });
        await commit([invocationWrite.insert(first, bytes('a')), invocationWrite.insert(second, bytes('b'))]);
        const a = await s.invocations.get(first.id);
        expect(a).toEqual({ ...insertedRow(first, null), inboxSeq: expect.any(BigInt) as bigint });
        expect((await s.invocations.get(second.id))?.inboxSeq).toBeNull();

        await commit([invocationWrite.inbox(second.id)]);
        const b2 = await s.invocations.get(second.id);
        expect(b2?.status).toBe('inboxed');
        expect(b2!.inboxSeq!).toBeGreaterThan(a!.inboxSeq!);
        // Inboxing an unknown invocation changes nothing (and does not fail the batch).
        await commit([invocationWrite.inbox('no-such-invocation')]);
        expect(await s.invocations.get('no-such-invocation')).toBeUndefined();
      });

      it('updates only the columns named, and an update of an unknown id is a no-op', async () => {
        const row = newInvocation({ status: 'scheduled', inboxSeq: true });
        await commit([invocationWrite.insert(row, bytes('in'))]);
        const before = (await s.invocations.get(row.id))!;
        const awaiting = {
          combinator: 'first_completed',
          completions: [1, 2],
          signals: [],
          namedSignals: ['x'],
          nested: [],
        };
        const lastAppendAt = at(5_000);
        await commit([
          invocationWrite.update(
            row.id,
            {
              status: 'suspended',
              deploymentId: 'dp_1',
              protocolVersion: 6,
              journalLength: 4,
              retryCount: 2,
              retryCountSinceAppend: 1,
              lastAppendAt,
              awaiting,
              inboxSeq: null,
              // Columns the row type does not show are accepted all the same.
              nextRetryAt: at(9_000),
              lastFailure: '[RT0010] boom',
              lastFailureCode: 'RT0010',
              lastStartAt: at(1_000),
              runningAt: at(1_000),
            },
            at(0),
          ),
          invocationWrite.update('no-such-invocation', { status: 'completed' }, at(0)),
        ]);
        expect(await s.invocations.get(row.id)).toEqual({
          ...before,
          status: 'suspended',
          deploymentId: 'dp_1',
          protocolVersion: 6,
          journalLength: 4,
          retryCount: 2,
          retryCountSinceAppend: 1,
          lastAppendAt,
          awaiting,
          inboxSeq: null,
          // The row shows when its last attempt started (flow control reads it to tell running from waiting).
          lastStartAt: at(1_000),
        });
        expect(await s.invocations.get('no-such-invocation')).toBeUndefined();

        const expiresAt = at(3_600_000);
        await commit([
          invocationWrite.update(
            row.id,
            {
              status: 'completed',
              completedAt: at(2_000),
              resultKind: 'failure',
              output: null,
              failureCode: 409,
              failureMessage: 'killed',
              failureMetadata: { reason: 'test' },
              expiresAt,
              awaiting: null,
            },
            at(0),
          ),
        ]);
        expect(await s.invocations.get(row.id)).toMatchObject({
          status: 'completed',
          completedAt: at(2_000),
          resultKind: 'failure',
          output: null,
          failureCode: 409,
          failureMessage: 'killed',
          failureMetadata: { reason: 'test' },
          expiresAt,
          awaiting: null,
          // Untouched.
          deploymentId: 'dp_1',
          retryCount: 2,
        });
      });

      it('reads active invocations by partition and several by id', async () => {
        const p1 = newInvocation({ partitionId: 1 });
        const p2 = newInvocation({ partitionId: 2, status: 'suspended' });
        const done = newInvocation({ partitionId: 1 });
        await commit(
          [
            invocationWrite.insert(p1, bytes('x')),
            invocationWrite.insert(p2, bytes('y')),
            invocationWrite.insert(done, bytes('z')),
            invocationWrite.update(done.id, completed(at(60_000)), at(0)),
          ],
          [],
          1,
        );
        const ids = (rows: { id: string }[]): string[] => rows.map((r) => r.id).sort();
        expect(ids(await s.invocations.listActive([1]))).toContain(p1.id);
        expect(ids(await s.invocations.listActive([1]))).not.toContain(done.id);
        expect(ids(await s.invocations.listActive([1]))).not.toContain(p2.id);
        expect(ids(await s.invocations.listActive([1, 2]))).toEqual(expect.arrayContaining([p1.id, p2.id]));
        expect(ids(await s.invocations.getMany([p1.id, done.id, 'no-such-invocation']))).toEqual(
          [p1.id, done.id].sort(),
        );
      });

      it('purges a completed invocation with its journal, never a running one', async () => {
        const done = newInvocation();
        const running = newInvocation();
        await commit(
          [
            invocationWrite.insert(done, bytes('a')),
            invocationWrite.insert(running, bytes('b')),
            invocationWrite.update(done.id, completed(at(3_600_000)), at(0)),
          ],
          [journalRow(done.id, 1, 'r1'), journalRow(running.id, 1, 'r2')],
        );
        await commit([invocationWrite.purge(done.id), invocationWrite.purge(running.id)]);
        expect(await s.invocations.get(done.id)).toBeUndefined();
        expect(await s.journal.load(done.id)).toEqual([]);
        expect((await s.invocations.get(running.id))?.status).toBe('invoked');
        expect((await s.journal.load(running.id)).map((e) => e.index)).toEqual([0, 1]);
      });

      it("purges a workflow run's key state and promises with it; other keys and plain invocations keep theirs", async () => {
        const wf = `Signup${counter}`;
        const run = workflowRun(wf, 'alice');
        const other = workflowRun(wf, 'bob');
        // A plain invocation of the same key is not the workflow's run: its purge keeps the key's state.
        const shared = workflowRun(wf, 'alice', { handlerName: 'status', handlerTy: 'Shared' });
        const ref = (key: string, name: string): PromiseRef => ({ service: wf, key, name });
        const completer = { id: run.id, partition: 0, completionId: 1, entryType: 0x800b };
        await commit([
          invocationWrite.insert(run, bytes('a')),
          invocationWrite.insert(other, bytes('b')),
          invocationWrite.insert(shared, bytes('c')),
          stateWrite.set(wf, 'alice', 99n, bytes('k'), bytes('v')),
          stateWrite.set(wf, 'bob', 99n, bytes('k'), bytes('v')),
          promiseWrite.complete(
            ref('alice', 'p'),
            99n,
            { kind: 'success', value: bytes('1') },
            completer,
            bytes('ok'),
            bytes('409'),
            0x8009,
          ),
          promiseWrite.complete(
            ref('bob', 'p'),
            99n,
            { kind: 'success', value: bytes('2') },
            completer,
            bytes('ok'),
            bytes('409'),
            0x8009,
          ),
          invocationWrite.update(shared.id, completed(at(3_600_000)), at(0)),
          invocationWrite.update(run.id, completed(at(3_600_000)), at(0)),
          invocationWrite.update(other.id, completed(at(3_600_000)), at(0)),
        ]);

        await commit([invocationWrite.purge(shared.id)]);
        expect(await s.invocations.get(shared.id)).toBeUndefined();
        expect(await s.state.load(wf, 'alice')).toHaveLength(1);
        expect(await s.promises.get(ref('alice', 'p'))).toBeDefined();

        await commit([invocationWrite.purge(run.id)]);
        expect(await s.invocations.get(run.id)).toBeUndefined();
        expect(await s.state.load(wf, 'alice')).toEqual([]);
        expect(await s.promises.get(ref('alice', 'p'))).toBeUndefined();
        expect(await s.state.load(wf, 'bob')).toEqual([{ key: bytes('k'), value: bytes('v') }]);
        expect(await s.promises.get(ref('bob', 'p'))).toEqual({
          resultKind: 'success',
          value: bytes('2'),
          failureCode: null,
          failureMessage: null,
        });
      });

      it('purges only what expired before an insert with a deterministic id (a workflow run with its key)', async () => {
        const wf = `Expiring${counter}`;
        const expired = workflowRun(wf, 'k1');
        const retained = newInvocation();
        const open = newInvocation();
        await commit([
          invocationWrite.insert(expired, bytes('a')),
          invocationWrite.insert(retained, bytes('b')),
          invocationWrite.insert(open, bytes('c')),
          stateWrite.set(wf, 'k1', 99n, bytes('s'), bytes('1')),
          invocationWrite.update(expired.id, completed(at(-60_000)), at(0)),
          invocationWrite.update(retained.id, completed(at(3_600_000)), at(0)),
        ]);
        await commit([
          invocationWrite.purgeIfExpired(expired.id),
          invocationWrite.purgeIfExpired(retained.id),
          invocationWrite.purgeIfExpired(open.id),
        ]);
        expect(await s.invocations.get(expired.id)).toBeUndefined();
        expect(await s.journal.load(expired.id)).toEqual([]);
        expect(await s.state.load(wf, 'k1')).toEqual([]);
        expect((await s.invocations.get(retained.id))?.status).toBe('completed');
        expect((await s.invocations.get(open.id))?.status).toBe('invoked');

        // As admission uses it: the purge and the insert of the same id in one batch start the invocation afresh.
        const stale = workflowRun(wf, 'k2');
        await commit([
          invocationWrite.insert(stale, bytes('old input')),
          invocationWrite.update(stale.id, completed(at(-1_000)), at(0)),
        ]);
        const fresh = invocationWrite.insert({ ...stale, createdAt: at(1_000) }, bytes('new input'));
        await commit([invocationWrite.purgeIfExpired(stale.id), fresh]);
        expect(fresh.inserted).toBe(true);
        expect(await s.invocations.get(stale.id)).toEqual(insertedRow({ ...stale, createdAt: at(1_000) }, null));
        expect((await s.journal.load(stale.id)).map((e) => e.raw.toString())).toEqual(['new input']);
      });

      it("deletes an invocation's journal and keeps its row", async () => {
        const row = newInvocation();
        await commit([invocationWrite.insert(row, bytes('a'))], [journalRow(row.id, 1, 'x')]);
        await commit([journalWrite.delete(row.id)]);
        expect(await s.journal.load(row.id)).toEqual([]);
        expect((await s.invocations.get(row.id))?.status).toBe('invoked');
      });

      it('appends journal rows of a batch after its writes, in index order', async () => {
        const row = newInvocation();
        await commit(
          [invocationWrite.insert(row, bytes('input'))],
          [journalRow(row.id, 2, 'second'), journalRow(row.id, 1, 'first')],
        );
        expect((await s.journal.load(row.id)).map((e) => [e.index, e.raw.toString()])).toEqual([
          [0, 'input'],
          [1, 'first'],
          [2, 'second'],
        ]);
      });
    });
  });
}
