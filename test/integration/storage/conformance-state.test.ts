import { describe, expect, it } from 'vitest';
import { stateVersion } from '../../../runtime/src/ids/state-version.ts';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import { invocationWrite, promiseWrite, stateMutationWrite, stateWrite } from '../../../runtime/src/storage/api.ts';
import { type PromiseRef } from '../../../runtime/src/storage/rows.ts';
import {
  BACKENDS,
  bytes,
  commit,
  counter,
  newInvocation,
  nextId,
  notificationRow,
  s,
  useBackend,
} from './conformance-support.ts';

/**
 * The storage contract, run against every backend: what each write of storage/api.ts does to the tables (seen
 * through the Storage read interfaces) and what it reports back in its own fields. PostgreSQL is the reference; the
 * in-memory store of the engine's unit tests must behave the same, or those tests prove nothing.
 *
 * This file: state and promises.
 */

for (const backend of BACKENDS) {
  describe(`storage conformance: ${backend.name}`, () => {
    useBackend(backend);

    describe('state', () => {
      it('sets, overwrites, clears and clears all; loads a key in key-byte order and gets one entry', async () => {
        const obj = `State${counter}`;
        const keys = [bytes('b'), Buffer.from([0x01, 0xff]), Buffer.from([0x02]), Buffer.from([0x01]), bytes('a')];
        await commit([
          ...keys.map((k, i) => stateWrite.set(obj, 'k', 5n, k, bytes(`v${i}`))),
          stateWrite.set(obj, 'other', 5n, bytes('a'), bytes('other')),
          stateWrite.set(obj, 'k', 5n, bytes('a'), bytes('overwritten')),
        ]);
        expect(await s.state.load(obj, 'k')).toEqual([
          { key: Buffer.from([0x01]), value: bytes('v3') },
          { key: Buffer.from([0x01, 0xff]), value: bytes('v1') },
          { key: Buffer.from([0x02]), value: bytes('v2') },
          { key: bytes('a'), value: bytes('overwritten') },
          { key: bytes('b'), value: bytes('v0') },
        ]);
        expect(await s.state.get(obj, 'k', bytes('a'))).toEqual(bytes('overwritten'));
        expect(await s.state.get(obj, 'k', bytes('zz'))).toBeUndefined();
        expect(await s.state.get(obj, 'nobody', bytes('a'))).toBeUndefined();

        await commit([stateWrite.clear(obj, 'k', bytes('a')), stateWrite.clear(obj, 'k', bytes('missing'))]);
        expect(await s.state.get(obj, 'k', bytes('a'))).toBeUndefined();
        expect(await s.state.load(obj, 'k')).toHaveLength(4);

        await commit([stateWrite.clearAll(obj, 'k')]);
        expect(await s.state.load(obj, 'k')).toEqual([]);
        expect(await s.state.load(obj, 'other')).toEqual([{ key: bytes('a'), value: bytes('other') }]);
      });

      it('queues state mutations in the inbox sequence, lists them by partition, deletes them', async () => {
        const obj = `Mutated${counter}`;
        const inboxed = newInvocation({
          status: 'inboxed',
          inboxSeq: true,
          serviceName: obj,
          serviceKey: 'k',
          partitionId: 1,
        });
        const m1 = {
          id: nextId('mut'),
          partitionId: 1,
          service: obj,
          key: 'k',
          version: null,
          entries: [{ key: bytes('a'), value: bytes('1') }],
        };
        const m2 = { id: nextId('mut'), partitionId: 1, service: obj, key: 'k', version: 'v-1', entries: [] };
        const m3 = { id: nextId('mut'), partitionId: 2, service: obj, key: 'j', version: null, entries: [] };
        await commit([invocationWrite.insert(inboxed, bytes('a')), stateMutationWrite.insert(m1)], [], 1);
        await commit([stateMutationWrite.insert(m2), stateMutationWrite.insert(m3)], [], 1);
        const listed = (await s.stateMutations.list([1])).filter((m) => m.service === obj);
        expect(listed).toEqual([
          { ...m1, inboxSeq: expect.any(BigInt) as bigint },
          { ...m2, inboxSeq: expect.any(BigInt) as bigint },
        ]);
        // One sequence with the inbox: the invocation inboxed first comes first.
        const seqOf = (await s.invocations.get(inboxed.id))!.inboxSeq!;
        expect(listed[0]!.inboxSeq).toBeGreaterThan(seqOf);
        expect(listed[1]!.inboxSeq).toBeGreaterThan(listed[0]!.inboxSeq);
        expect((await s.stateMutations.list([2])).filter((m) => m.service === obj).map((m) => m.id)).toEqual([m3.id]);

        await commit([stateMutationWrite.delete(m1.id)], [], 1);
        expect((await s.stateMutations.list([1, 2])).filter((m) => m.service === obj).map((m) => m.id)).toEqual([
          m2.id,
          m3.id,
        ]);
      });

      it('applies a state replacement without a version, or with the current one; a stale version changes nothing', async () => {
        const obj = `Replaced${counter}`;
        await commit([
          stateWrite.set(obj, 'k', 5n, bytes('b'), bytes('2')),
          stateWrite.set(obj, 'k', 5n, bytes('a'), bytes('1')),
        ]);
        const current = await s.state.load(obj, 'k');
        const version = stateVersion(current.map((e) => [e.key, e.value] as const));

        const stale = stateMutationWrite.apply(obj, 'k', 5n, stateVersion([['a', bytes('other')]]), [
          { key: bytes('x'), value: bytes('stale') },
        ]);
        await commit([stale]);
        expect(stale.applied).toBe(false);
        expect(await s.state.load(obj, 'k')).toEqual(current);

        const matching = stateMutationWrite.apply(obj, 'k', 5n, version, [
          { key: bytes('b'), value: bytes('20') },
          { key: bytes('c'), value: bytes('30') },
        ]);
        await commit([matching]);
        expect(matching.applied).toBe(true);
        expect(await s.state.load(obj, 'k')).toEqual([
          { key: bytes('b'), value: bytes('20') },
          { key: bytes('c'), value: bytes('30') },
        ]);

        const blind = stateMutationWrite.apply(obj, 'k', 5n, null, []);
        await commit([blind]);
        expect(blind.applied).toBe(true);
        expect(await s.state.load(obj, 'k')).toEqual([]);

        // The version of no state at all names an empty key.
        const fromEmpty = stateMutationWrite.apply(obj, 'k', 5n, stateVersion([]), [
          { key: bytes('z'), value: bytes('1') },
        ]);
        await commit([fromEmpty]);
        expect(fromEmpty.applied).toBe(true);
        expect(await s.state.load(obj, 'k')).toEqual([{ key: bytes('z'), value: bytes('1') }]);
      });
    });

    describe('promises', () => {
      it('makes a getter of an open promise wait; the first completion answers it and the completer, a second is refused', async () => {
        const wf = `Promised${counter}`;
        const ref: PromiseRef = { service: wf, key: 'k', name: 'approval' };
        const getter = newInvocation({ partitionId: 2 });
        const completer = newInvocation({ partitionId: 1 });
        await commit(
          [invocationWrite.insert(getter, bytes('a')), invocationWrite.insert(completer, bytes('b'))],
          [],
          2,
        );

        const wait = promiseWrite.await(ref, getter.id, 2, 4, MessageType.GetPromiseCompletionNotification);
        const waitTwice = promiseWrite.await(ref, getter.id, 2, 4, MessageType.GetPromiseCompletionNotification);
        const peekOpen = promiseWrite.peek(ref, getter.id, 2, 5, MessageType.PeekPromiseCompletionNotification);
        await commit([wait, waitTwice, peekOpen], [], 2);
        expect(wait.rows ?? []).toEqual([]);
        expect(waitTwice.rows ?? []).toEqual([]);
        expect(peekOpen.rows).toEqual([
          {
            ...notificationRow({}),
            partitionId: 2,
            targetInvocationId: getter.id,
            entryType: MessageType.PeekPromiseCompletionNotification,
            completionId: 5,
            sourcePromise: ref,
            seq: expect.any(String) as string,
          },
        ]);
        expect(await s.promises.get(ref)).toBeUndefined();

        const first = promiseWrite.complete(
          ref,
          99n,
          { kind: 'success', value: bytes('yes') },
          {
            id: completer.id,
            partition: 1,
            completionId: 2,
            entryType: MessageType.CompletePromiseCompletionNotification,
          },
          bytes('completed'),
          bytes('already'),
          MessageType.GetPromiseCompletionNotification,
        );
        await commit([first], [], 1);
        expect(first.rows).toEqual([
          {
            ...notificationRow({}),
            partitionId: 2,
            targetInvocationId: getter.id,
            entryType: MessageType.GetPromiseCompletionNotification,
            completionId: 4,
            sourcePromise: ref,
            seq: expect.any(String) as string,
          },
          {
            ...notificationRow({}),
            partitionId: 1,
            targetInvocationId: completer.id,
            entryType: MessageType.CompletePromiseCompletionNotification,
            completionId: 2,
            raw: bytes('completed'),
            seq: expect.any(String) as string,
          },
        ]);
        expect(await s.promises.get(ref)).toEqual({
          resultKind: 'success',
          value: bytes('yes'),
          failureCode: null,
          failureMessage: null,
        });

        const second = promiseWrite.complete(
          ref,
          99n,
          { kind: 'failure', code: 500, message: 'late' },
          {
            id: completer.id,
            partition: 1,
            completionId: 3,
            entryType: MessageType.CompletePromiseCompletionNotification,
          },
          bytes('completed'),
          bytes('already'),
          MessageType.GetPromiseCompletionNotification,
        );
        await commit([second], [], 1);
        expect(second.rows).toEqual([
          expect.objectContaining({ targetInvocationId: completer.id, completionId: 3, raw: bytes('already') }),
        ]);
        expect((await s.promises.get(ref))?.value).toEqual(bytes('yes'));

        // Completed: a getter is answered at once.
        const late = promiseWrite.await(ref, getter.id, 2, 8, MessageType.GetPromiseCompletionNotification);
        await commit([late], [], 2);
        expect(late.rows).toEqual([
          expect.objectContaining({ targetInvocationId: getter.id, completionId: 8, sourcePromise: ref, raw: null }),
        ]);
      });

      it('stores a failed promise', async () => {
        const ref: PromiseRef = { service: `Failed${counter}`, key: 'k', name: 'p' };
        await commit([
          promiseWrite.complete(
            ref,
            1n,
            { kind: 'failure', code: 418, message: 'teapot' },
            {
              id: 'whoever',
              partition: 0,
              completionId: 1,
              entryType: MessageType.CompletePromiseCompletionNotification,
            },
            bytes('ok'),
            bytes('409'),
            MessageType.GetPromiseCompletionNotification,
          ),
        ]);
        expect(await s.promises.get(ref)).toEqual({
          resultKind: 'failure',
          value: null,
          failureCode: 418,
          failureMessage: 'teapot',
        });
      });
    });
  });
}
