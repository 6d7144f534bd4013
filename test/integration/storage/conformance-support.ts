import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import { type Storage, type Write } from '../../../runtime/src/storage/api.ts';
import { MemoryStorage } from '../../../runtime/src/storage/memory/storage.ts';
import { GroupCommitter } from '../../../runtime/src/storage/pg/group-commit.ts';
import { PartitionLeases } from '../../../runtime/src/storage/pg/leases.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { PgStorage } from '../../../runtime/src/storage/pg/storage.ts';
import {
  type InvocationUpdate,
  type JournalRow,
  type NewInvocation,
  type OutboxRow,
} from '../../../runtime/src/storage/rows.ts';
import { createTestDatabase } from '../../support/postgres.ts';

/*
 * What the storage conformance tests (conformance-*.test.ts) share: the backends they run against, one instance of
 * each per test file and describe (`useBackend`), and builders of rows and writes.
 */

export const PARTITIONS = 4;
/** Given up by the fencing scenario; no other scenario writes it. */
export const FENCED_PARTITION = 3;

export interface Backend {
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

export const BACKENDS: { name: string; create: () => Promise<Backend> }[] = [
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
/** How many ids `nextId` gave out; tests use it to name objects of their own. */
export let counter = 0;
export function nextId(prefix: string): string {
  return `${prefix}_${RUN}_${++counter}`;
}

/** Whole milliseconds: what PostgreSQL's timestamptz gives back exactly. */
export function at(offsetMs: number): Date {
  return new Date(Math.floor(Date.now() / 1000) * 1000 + offsetMs);
}

export function newInvocation(over: Partial<NewInvocation> = {}): NewInvocation {
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

export function workflowRun(service: string, key: string, over: Partial<NewInvocation> = {}): NewInvocation {
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

export function completed(expiresAt: Date | null, output = 'done'): InvocationUpdate {
  return {
    status: 'completed',
    completedAt: at(0),
    resultKind: 'success',
    output: Buffer.from(output),
    expiresAt,
    journalExpiresAt: expiresAt,
  };
}

export const bytes = (s: string): Buffer => Buffer.from(s);

/** The columns of an outbox row that carry a notification; the rest empty. */
export function notificationRow(over: Partial<Omit<OutboxRow, 'seq'>>): Omit<OutboxRow, 'seq'> {
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

/** The backend under test and its storage; set by `useBackend` before each backend's tests. */
export let b: Backend;
export let s: Storage;

/** Creates `backend` before the calling describe's tests (as `b` and `s`) and closes it after; call in the describe. */
export function useBackend(backend: { create: () => Promise<Backend> }): void {
  let created: Backend | undefined;
  beforeAll(async () => {
    b = created = await backend.create();
    s = b.storage;
  });

  afterAll(async () => {
    await created?.close();
  });
}

export function commit(writes: Write[], journal: JournalRow[] = [], partition = 0): Promise<void> {
  return s.submit({ partitions: [partition], writes, journal });
}

export function journalRow(invocationId: string, index: number, raw: string): JournalRow {
  return { invocationId, index, entryType: MessageType.RunCommand, raw: bytes(raw), appendedAt: at(0) };
}

/** The outbox rows of `partition` addressed to `target`. */
export async function outboxOf(target: string, partition = 0): Promise<OutboxRow[]> {
  return (await s.outbox.list([partition])).filter((r) => r.targetInvocationId === target);
}
