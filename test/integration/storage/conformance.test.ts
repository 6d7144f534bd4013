import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stateVersion } from '../../../runtime/src/ids/state-version.ts';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import {
  invocationWrite,
  journalWrite,
  lockWrite,
  onlyIfInserted,
  outboxWrite,
  promiseWrite,
  stateMutationWrite,
  stateWrite,
  timerWrite,
  unlessInserted,
  type Storage,
  type Write,
} from '../../../runtime/src/storage/api.ts';
import { FencingError } from '../../../runtime/src/storage/errors.ts';
import { MemoryStorage } from '../../../runtime/src/storage/memory/storage.ts';
import { GroupCommitter } from '../../../runtime/src/storage/pg/group-commit.ts';
import { PartitionLeases } from '../../../runtime/src/storage/pg/leases.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { PgStorage } from '../../../runtime/src/storage/pg/storage.ts';
import {
  insertedRow,
  type InvocationUpdate,
  type JournalRow,
  type NewInvocation,
  type OutboxRow,
  type PromiseRef,
} from '../../../runtime/src/storage/rows.ts';
import { createTestDatabase } from '../../support/postgres.ts';

/**
 * The storage contract, run against every backend: what each write of storage/api.ts does to the tables (seen
 * through the Storage read interfaces) and what it reports back in its own fields. PostgreSQL is the reference; the
 * in-memory store of the engine's unit tests must behave the same, or those tests prove nothing.
 */

const PARTITIONS = 4;
/** Given up by the fencing scenario; no other scenario writes it. */
const FENCED_PARTITION = 3;

interface Backend {
  readonly storage: Storage;
  /**
   * Who hears of a failed batch (not of one refused for a partition not held) before anything submitted after it is
   * looked at: the group committer's `onSuspect`, MemoryStorage's `onSuspect`.
   */
  onSuspect(listener: ((partitions: number[]) => void) | undefined): void;
  /** This process stops writing `partition` at once, as the cluster coordinator does with a suspect partition. */
  giveUp(partition: number): void;
  /** Holds `partition` again, at a new epoch. */
  takeBack(partition: number): Promise<void>;
  close(): Promise<void>;
}

const BACKENDS: { name: string; create: () => Promise<Backend> }[] = [
  {
    name: 'MemoryStorage',
    create: () => {
      const storage = new MemoryStorage();
      return Promise.resolve({
        storage,
        onSuspect: (listener) => {
          storage.onSuspect = listener;
        },
        giveUp: (partition) => storage.release(partition),
        takeBack: (partition) => Promise.resolve(storage.retake(partition)),
        close: () => storage.close(),
      });
    },
  },
  {
    name: 'PgStorage',
    create: async () => {
      const db = await createTestDatabase();
      const pool = createPool({ url: db.url, max: 4, applicationName: 'storage-conformance' });
      const client = await pool.connect();
      try {
        await migrate(client);
      } finally {
        client.release();
      }
      const leases = new PartitionLeases(pool, { node: 'conformance', partitions: PARTITIONS, ttlMs: 600_000 });
      await leases.acquireAll();
      let listener: ((partitions: number[]) => void) | undefined;
      const committer = new GroupCommitter(pool, leases, {
        maxBatch: 16,
        maxDelayMs: 0,
        concurrency: 2,
        onSuspect: (partitions) => listener?.(partitions),
      });
      const storage = new PgStorage(pool, committer, leases);
      return {
        storage,
        onSuspect: (l) => {
          listener = l;
        },
        giveUp: (partition) => leases.forget([partition]),
        takeBack: async (partition) => {
          if (!(await leases.retake(partition))) throw new Error(`partition ${partition} could not be taken back`);
        },
        close: async () => {
          await storage.close();
          await leases.releaseAll();
          await pool.end();
          await db.drop();
        },
      };
    },
  },
];

/** Unique across backends and runs; storage does not care what an id looks like. */
const RUN = randomBytes(3).toString('hex');
let counter = 0;
function nextId(prefix: string): string {
  return `${prefix}_${RUN}_${++counter}`;
}

/** Whole milliseconds: what PostgreSQL's timestamptz gives back exactly. */
function at(offsetMs: number): Date {
  return new Date(Math.floor(Date.now() / 1000) * 1000 + offsetMs);
}

function newInvocation(over: Partial<NewInvocation> = {}): NewInvocation {
  return {
    id: nextId('inv'),
    // Above 2^63: the u64 ↔ bigint column mapping must round-trip.
    partitionKey: (1n << 64n) - 3n,
    partitionId: 0,
    serviceName: 'Greeter',
    serviceKey: null,
    handlerName: 'greet',
    serviceTy: 'Service',
    handlerTy: null,
    status: 'invoked',
    idempotencyKey: null,
    invokedBy: 'ingress',
    invokedById: null,
    invokedByTarget: null,
    randomSeed: (1n << 63n) + 11n,
    journalLength: 1,
    inboxSeq: false,
    createdAt: at(0),
    scheduledStartAt: null,
    completionRetentionMs: 60_000,
    journalRetentionMs: 30_000,
    ...over,
  };
}

function workflowRun(service: string, key: string, over: Partial<NewInvocation> = {}): NewInvocation {
  return newInvocation({
    serviceName: service,
    serviceKey: key,
    handlerName: 'run',
    serviceTy: 'Workflow',
    handlerTy: 'Workflow',
    partitionKey: 99n,
    ...over,
  });
}

function completed(expiresAt: Date | null, output = 'done'): InvocationUpdate {
  return {
    status: 'completed',
    completedAt: at(0),
    resultKind: 'success',
    output: Buffer.from(output),
    expiresAt,
    journalExpiresAt: expiresAt,
  };
}

const bytes = (s: string): Buffer => Buffer.from(s);

/** The columns of an outbox row that carry a notification; the rest empty. */
function notificationRow(over: Partial<Omit<OutboxRow, 'seq'>>): Omit<OutboxRow, 'seq'> {
  return {
    partitionId: 0,
    targetInvocationId: 'nobody',
    entryType: MessageType.SignalNotification,
    completionId: null,
    signalIdx: null,
    signalName: null,
    sourceInvocationId: null,
    raw: null,
    ...over,
  };
}

for (const backend of BACKENDS) {
  describe(`storage conformance: ${backend.name}`, () => {
    let b: Backend;
    let s: Storage;

    beforeAll(async () => {
      b = await backend.create();
      s = b.storage;
    });

    afterAll(async () => {
      await b?.close();
    });

    function commit(writes: Write[], journal: JournalRow[] = [], partition = 0): Promise<void> {
      return s.submit({ partitions: [partition], writes, journal });
    }

    function journalRow(invocationId: string, index: number, raw: string): JournalRow {
      return { invocationId, index, entryType: MessageType.RunCommand, raw: bytes(raw), appendedAt: at(0) };
    }

    /** The outbox rows of `partition` addressed to `target`. */
    async function outboxOf(target: string, partition = 0): Promise<OutboxRow[]> {
      return (await s.outbox.list([partition])).filter((r) => r.targetInvocationId === target);
    }

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
