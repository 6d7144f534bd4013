import { stateVersion } from '../../ids/state-version.ts';
import { MessageType } from '../../protocol/message-types.ts';
import type { QueuedRequest, Storage, Write, WriteBatch } from '../api.ts';
import { FencingError } from '../errors.ts';
import { insertedRow } from '../rows.ts';
import type {
  InvocationRow,
  InvocationUpdate,
  JournalRow,
  LockRow,
  OutboxRequest,
  OutboxRow,
  PromiseRef,
  PromiseRow,
  StateEntryRow,
  StateMutationRow,
  StoredEntry,
  TimerRow,
} from '../rows.ts';

/**
 * The engine's storage in memory: the same tables and the same write semantics as PostgreSQL's (a storage
 * conformance suite runs both), without a database. Batches commit one at a time, in submission order, all or
 * nothing; a batch for a partition this store does not hold is refused as the lease guard refuses it. For the
 * engine's unit tests, and a place to read what each write means without SQL.
 */
export class MemoryStorage implements Storage {
  readonly tables = {
    invocations: new Map<string, InvocationRow & { extra: Partial<InvocationUpdate> }>(),
    journal: new Map<string, JournalRow[]>(),
    state: new Map<string, Map<string, StateEntryRow>>(),
    locks: new Map<string, string>(),
    timers: new Map<string, TimerRow>(),
    outbox: new Map<string, OutboxRow>(),
    completionWaiters: new Map<string, { callerId: string; completionId: number; entryType: number }[]>(),
    stateMutations: new Map<string, StateMutationRow>(),
    promises: new Map<string, PromiseRow>(),
    promiseWaiters: new Map<string, { invocationId: string; completionId: number }[]>(),
  };
  /** Partitions given up; every other partition is held, at its epoch (1 unless taken back since). */
  private readonly released = new Set<number>();
  private readonly epochs = new Map<number, number>();
  private seq = 0;
  private tail: Promise<void> = Promise.resolve();
  private closed = false;
  /** Makes the next submitted batches fail (after nothing was applied), as a lost connection would. */
  failNext = 0;
  /**
   * Told of every batch that failed (but not of one refused for a partition not held), before any later batch is
   * looked at: what the group committer's `onSuspect` is to PostgreSQL. Whoever listens can `release` the partitions
   * at once, so that nothing submitted after the failure commits, as the cluster coordinator fences them.
   */
  onSuspect: ((partitions: number[], err: unknown) => void) | undefined;
  readonly notified: number[][] = [];

  readonly invocations = {
    get: (id: string): Promise<InvocationRow | undefined> => Promise.resolve(this.invocation(id)),
    getMany: (ids: string[]): Promise<InvocationRow[]> =>
      Promise.resolve(ids.map((id) => this.invocation(id)).filter((r) => r !== undefined)),
    listActive: (partitions: number[]): Promise<InvocationRow[]> =>
      Promise.resolve(
        [...this.tables.invocations.values()]
          .filter((r) => r.status !== 'completed' && partitions.includes(r.partitionId))
          .map((r) => this.invocation(r.id)!),
      ),
    unfinished: (ids: string[]): Promise<string[]> =>
      Promise.resolve(
        ids.filter((id) => {
          const row = this.tables.invocations.get(id);
          if (row !== undefined) return row.status !== 'completed';
          return [...this.tables.outbox.values()].some((o) => o.targetInvocationId === id && o.request !== undefined);
        }),
      ),
  };
  readonly journal = {
    load: (id: string): Promise<StoredEntry[]> =>
      Promise.resolve(
        (this.tables.journal.get(id) ?? [])
          .slice()
          .sort((a, b) => a.index - b.index)
          .map((j) => ({
            index: j.index,
            entryType: j.entryType,
            completionId: j.completionId ?? null,
            signalIdx: j.signalIdx ?? null,
            signalName: j.signalName ?? null,
            raw: Buffer.from(j.raw),
          })),
      ),
  };
  readonly state = {
    load: (service: string, key: string): Promise<StateEntryRow[]> =>
      Promise.resolve(
        [...(this.tables.state.get(stateKeyOf(service, key))?.values() ?? [])].sort((a, b) =>
          Buffer.compare(a.key, b.key),
        ),
      ),
    get: (service: string, key: string, stateKey: Uint8Array): Promise<Buffer | undefined> =>
      Promise.resolve(
        this.tables.state.get(stateKeyOf(service, key))?.get(Buffer.from(stateKey).toString('hex'))?.value,
      ),
  };
  readonly locks = {
    list: (partitions: number[]): Promise<LockRow[]> => {
      const rows: LockRow[] = [];
      for (const [lk, invocationId] of this.tables.locks) {
        const inv = this.tables.invocations.get(invocationId);
        if (inv === undefined || !partitions.includes(inv.partitionId)) continue;
        const [service, key] = JSON.parse(lk) as [string, string];
        rows.push({ service, key, invocationId });
      }
      return Promise.resolve(rows);
    },
  };
  readonly timers = {
    /** In firing order, as PostgreSQL lists them (`ORDER BY fire_at`; ties in insertion order here). */
    list: (partitions: number[]): Promise<TimerRow[]> =>
      Promise.resolve(
        [...this.tables.timers.values()]
          .filter((t) => partitions.includes(t.partitionId))
          .sort((a, b) => a.fireAt.getTime() - b.fireAt.getTime() || Number(BigInt(a.id) - BigInt(b.id)))
          .map((t) => ({ ...t })),
      ),
  };
  readonly outbox = {
    list: (partitions: number[]): Promise<OutboxRow[]> =>
      Promise.resolve(
        [...this.tables.outbox.values()]
          .filter((r) => partitions.includes(r.partitionId))
          .sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)))
          .map((r) => ({ ...r })),
      ),
    enqueue: (requests: QueuedRequest[]): Promise<OutboxRow[]> =>
      Promise.resolve(
        requests.map((q) =>
          this.insertOutbox({
            ...NO_PAYLOAD,
            partitionId: q.partition,
            targetInvocationId: q.targetInvocationId,
            entryType: 0,
            request: structuredClone(q.request),
          }),
        ),
      ),
  };
  readonly stateMutations = {
    list: (partitions: number[]): Promise<StateMutationRow[]> =>
      Promise.resolve(
        [...this.tables.stateMutations.values()]
          .filter((m) => partitions.includes(m.partitionId))
          .sort((a, b) => (a.inboxSeq < b.inboxSeq ? -1 : 1)),
      ),
  };
  readonly promises = {
    get: (ref: PromiseRef): Promise<PromiseRow | undefined> =>
      Promise.resolve(this.tables.promises.get(promiseKeyOf(ref))),
  };
  private readonly pausedQueues = new Map<string, number>();
  readonly vqueues = {
    listPaused: (partitions: number[]): Promise<{ vqueueId: string; partitionId: number }[]> =>
      Promise.resolve(
        [...this.pausedQueues]
          .filter(([, p]) => partitions.includes(p))
          .map(([vqueueId, partitionId]) => ({ vqueueId, partitionId })),
      ),
    setPaused: (partitionId: number, vqueueId: string, paused: boolean): Promise<void> => {
      if (paused) this.pausedQueues.set(vqueueId, partitionId);
      else this.pausedQueues.delete(vqueueId);
      return Promise.resolve();
    },
  };

  /** Gives up `partition`: batches that write it are refused from now on (those queued already included). */
  release(partition: number): void {
    this.released.add(partition);
  }

  /** Holds `partition` again, at a new epoch: batches submitted from now on commit again (not older ones). */
  retake(partition: number): void {
    if (!this.released.delete(partition)) return;
    this.epochs.set(partition, (this.epochs.get(partition) ?? 1) + 1);
  }

  epochOf(partition: number): string | undefined {
    return this.released.has(partition) ? undefined : String(this.epochs.get(partition) ?? 1);
  }

  notifyOutbox(partitions: number[]): Promise<void> {
    this.notified.push(partitions);
    return Promise.resolve();
  }

  isUnavailable(): boolean {
    return false;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.tail;
  }

  submit(batch: WriteBatch): Promise<void> {
    // Refused when closed, as the group committer refuses it; what was submitted before still commits.
    if (this.closed) return Promise.reject(new Error('the storage is closed'));
    // It commits only under the epochs its partitions are held at now, as the lease guard checks them.
    const epochs = batch.partitions.map((p) => this.epochOf(p));
    const run = this.tail.then(async () => {
      // A commit is never synchronous: whatever the engine does right after submitting runs before it.
      await Promise.resolve();
      try {
        this.commit(batch, epochs);
      } catch (err) {
        // As the group committer: the writer hears of the failure before anything later commits.
        if (!(err instanceof FencingError && err.unsent)) this.onSuspect?.(batch.partitions, err);
        throw err;
      }
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Applies a batch whole, or throws with nothing of it applied. */
  private commit(batch: WriteBatch, epochs: (string | undefined)[]): void {
    const lost = batch.partitions.filter((p, i) => epochs[i] === undefined || this.epochOf(p) !== epochs[i]);
    if (lost.length > 0) throw new FencingError(lost, true);
    if (this.failNext > 0) {
      this.failNext -= 1;
      throw new Error('injected write failure');
    }
    const undo = this.snapshot();
    try {
      for (const w of batch.writes) {
        if (w.onlyIf !== undefined && w.onlyIf.inserted !== true) continue;
        if (w.unless !== undefined && w.unless.inserted !== false) continue;
        this.apply(w);
      }
      for (const j of batch.journal) this.appendJournal(j);
    } catch (err) {
      undo();
      throw err;
    }
  }

  // -------------------------------------------------------------------------------------------------------------

  private invocation(id: string): InvocationRow | undefined {
    const r = this.tables.invocations.get(id);
    if (r === undefined) return undefined;
    const { extra: _extra, ...row } = r;
    return { ...row };
  }

  private nextSeq(): bigint {
    return BigInt(++this.seq);
  }

  private apply(w: Write): void {
    const t = this.tables;
    switch (w.kind) {
      case 'invocation.insert': {
        const r = w.row;
        if (t.invocations.has(r.id)) {
          w.inserted = false;
          return;
        }
        w.inserted = true;
        t.invocations.set(r.id, {
          ...insertedRow(r, r.inboxSeq ? this.nextSeq() : null),
          extra: r.attemptStartAt == null ? {} : { lastStartAt: r.attemptStartAt, runningAt: r.attemptStartAt },
        });
        this.appendJournal({
          invocationId: r.id,
          index: 0,
          entryType: MessageType.InputCommand,
          raw: w.input,
          appendedAt: r.createdAt,
        });
        return;
      }
      case 'invocation.update': {
        const r = t.invocations.get(w.id);
        if (r === undefined) return;
        applyUpdate(r, w.update);
        return;
      }
      case 'invocation.inbox': {
        const r = t.invocations.get(w.id);
        if (r === undefined) return;
        r.status = 'inboxed';
        r.inboxSeq = this.nextSeq();
        return;
      }
      case 'invocation.purge': {
        const r = t.invocations.get(w.id);
        if (r?.status === 'completed') this.purge(r);
        return;
      }
      case 'invocation.purgeIfExpired': {
        const r = t.invocations.get(w.id);
        if (r?.expiresAt != null && r.expiresAt.getTime() <= Date.now()) this.purge(r);
        return;
      }
      case 'journal.delete':
        t.journal.delete(w.invocationId);
        return;
      case 'lock.take': {
        const lk = lockKeyOf(w.service, w.key);
        if (t.locks.has(lk)) throw new Error(`duplicate key: the lock of ${w.service}/${w.key} is held`);
        t.locks.set(lk, w.invocationId);
        return;
      }
      case 'lock.release': {
        const lk = lockKeyOf(w.service, w.key);
        if (t.locks.get(lk) === w.invocationId) t.locks.delete(lk);
        return;
      }
      case 'lock.transfer': {
        const lk = lockKeyOf(w.service, w.key);
        if (t.locks.get(lk) === w.from) t.locks.set(lk, w.to);
        return;
      }
      case 'timer.insert': {
        const id = String(this.nextSeq());
        t.timers.set(id, { ...w.timer, id });
        w.id = id;
        return;
      }
      case 'timer.delete':
        t.timers.delete(w.id);
        return;
      case 'timer.deleteOf':
        for (const [id, timer] of t.timers) if (timer.invocationId === w.invocationId) t.timers.delete(id);
        return;
      case 'outbox.insert':
        // The notification's columns only, as its INSERT names them: a request or a promise source given here is
        // not stored (they have writes of their own).
        (w.rows ??= []).push(
          this.insertOutbox({
            partitionId: w.row.partitionId,
            targetInvocationId: w.row.targetInvocationId,
            entryType: w.row.entryType,
            completionId: w.row.completionId,
            signalIdx: w.row.signalIdx,
            signalName: w.row.signalName,
            sourceInvocationId: w.row.sourceInvocationId,
            raw: w.row.raw === null ? null : Buffer.from(w.row.raw),
          }),
        );
        return;
      case 'outbox.request':
        (w.rows ??= []).push(
          this.insertOutbox({
            partitionId: w.partition,
            targetInvocationId: w.targetInvocationId,
            entryType: 0,
            completionId: null,
            signalIdx: null,
            signalName: null,
            sourceInvocationId: null,
            raw: null,
            // Stored as JSON (jsonb): what is read back is a copy, without undefined members.
            request: JSON.parse(JSON.stringify(w.request)) as OutboxRequest,
          }),
        );
        return;
      case 'outbox.delete':
        t.outbox.delete(w.seq);
        return;
      case 'outbox.awaitResult': {
        const target = t.invocations.get(w.invocationId);
        if (target !== undefined && target.status !== 'completed') {
          const waiters = t.completionWaiters.get(w.invocationId) ?? [];
          if (!waiters.some((x) => x.callerId === w.callerId && x.completionId === w.callerCompletionId)) {
            waiters.push({ callerId: w.callerId, completionId: w.callerCompletionId, entryType: w.entryType });
          }
          t.completionWaiters.set(w.invocationId, waiters);
          return;
        }
        (w.rows ??= []).push(
          this.insertOutbox({
            ...NO_PAYLOAD,
            partitionId: w.callerPartition,
            targetInvocationId: w.callerId,
            entryType: w.entryType,
            completionId: w.callerCompletionId,
            sourceInvocationId: w.invocationId,
          }),
        );
        return;
      }
      case 'outbox.resultToWaiters': {
        const waiters = t.completionWaiters.get(w.invocationId) ?? [];
        t.completionWaiters.delete(w.invocationId);
        for (const x of waiters) {
          const caller = t.invocations.get(x.callerId);
          if (caller === undefined) continue;
          (w.rows ??= []).push(
            this.insertOutbox({
              ...NO_PAYLOAD,
              partitionId: caller.partitionId,
              targetInvocationId: x.callerId,
              entryType: x.entryType,
              completionId: x.completionId,
              sourceInvocationId: w.invocationId,
            }),
          );
        }
        return;
      }
      case 'state.set': {
        const sk = stateKeyOf(w.service, w.key);
        const entries = t.state.get(sk) ?? new Map<string, StateEntryRow>();
        entries.set(Buffer.from(w.stateKey).toString('hex'), {
          key: Buffer.from(w.stateKey),
          value: Buffer.from(w.value),
        });
        t.state.set(sk, entries);
        return;
      }
      case 'state.clear':
        t.state.get(stateKeyOf(w.service, w.key))?.delete(Buffer.from(w.stateKey).toString('hex'));
        return;
      case 'state.clearAll':
        t.state.delete(stateKeyOf(w.service, w.key));
        return;
      case 'stateMutation.insert':
        t.stateMutations.set(w.mutation.id, { ...w.mutation, inboxSeq: this.nextSeq() });
        return;
      case 'stateMutation.delete':
        t.stateMutations.delete(w.id);
        return;
      case 'stateMutation.apply': {
        const sk = stateKeyOf(w.service, w.key);
        const current = [...(t.state.get(sk)?.values() ?? [])].map((e) => [e.key, e.value] as const);
        if (w.version !== null && w.version !== stateVersion(current)) {
          w.applied = false;
          return;
        }
        w.applied = true;
        const entries = new Map<string, StateEntryRow>();
        for (const e of w.entries)
          entries.set(e.key.toString('hex'), { key: Buffer.from(e.key), value: Buffer.from(e.value) });
        t.state.set(sk, entries);
        return;
      }
      case 'promise.await': {
        const pk = promiseKeyOf(w.promise);
        if (t.promises.has(pk)) {
          (w.rows ??= []).push(
            this.promiseAnswer(w.promise, w.callerPartition, w.callerId, w.entryType, w.completionId),
          );
          return;
        }
        const waiters = t.promiseWaiters.get(pk) ?? [];
        if (!waiters.some((x) => x.invocationId === w.callerId && x.completionId === w.completionId)) {
          waiters.push({ invocationId: w.callerId, completionId: w.completionId });
        }
        t.promiseWaiters.set(pk, waiters);
        return;
      }
      case 'promise.peek':
        (w.rows ??= []).push(this.promiseAnswer(w.promise, w.callerPartition, w.callerId, w.entryType, w.completionId));
        return;
      case 'promise.complete': {
        const pk = promiseKeyOf(w.promise);
        const first = !t.promises.has(pk);
        if (first) {
          t.promises.set(pk, {
            resultKind: w.result.kind,
            value: w.result.kind === 'success' ? Buffer.from(w.result.value) : null,
            failureCode: w.result.kind === 'failure' ? w.result.code : null,
            failureMessage: w.result.kind === 'failure' ? w.result.message : null,
          });
        }
        const rows = (w.rows ??= []);
        const waiters = t.promiseWaiters.get(pk) ?? [];
        t.promiseWaiters.delete(pk);
        for (const x of waiters) {
          const inv = t.invocations.get(x.invocationId);
          if (inv === undefined) continue;
          rows.push(this.promiseAnswer(w.promise, inv.partitionId, x.invocationId, w.waiterEntryType, x.completionId));
        }
        rows.push(
          this.insertOutbox({
            ...NO_PAYLOAD,
            partitionId: w.completer.partition,
            targetInvocationId: w.completer.id,
            entryType: w.completer.entryType,
            completionId: w.completer.completionId,
            raw: Buffer.from(first ? w.ifCompleted : w.ifAlreadyCompleted),
          }),
        );
        return;
      }
    }
  }

  private promiseAnswer(
    promise: PromiseRef,
    partitionId: number,
    targetInvocationId: string,
    entryType: number,
    completionId: number,
  ): OutboxRow {
    return this.insertOutbox({
      ...NO_PAYLOAD,
      partitionId,
      targetInvocationId,
      entryType,
      completionId,
      sourcePromise: { ...promise },
    });
  }

  private insertOutbox(row: Omit<OutboxRow, 'seq'>): OutboxRow {
    const full: OutboxRow = { ...row, seq: String(this.nextSeq()) };
    this.tables.outbox.set(full.seq, full);
    return { ...full };
  }

  private appendJournal(j: JournalRow): void {
    const rows = this.tables.journal.get(j.invocationId) ?? [];
    if (rows.some((r) => r.index === j.index)) {
      throw new Error(`duplicate key: journal entry ${j.index} of ${j.invocationId} exists`);
    }
    rows.push({ ...j, raw: Buffer.from(j.raw) });
    this.tables.journal.set(j.invocationId, rows);
  }

  private purge(r: InvocationRow): void {
    const t = this.tables;
    t.invocations.delete(r.id);
    t.journal.delete(r.id);
    if (r.serviceTy === 'Workflow' && r.handlerTy === 'Workflow' && r.serviceKey !== null) {
      t.state.delete(stateKeyOf(r.serviceName, r.serviceKey));
      const prefix = JSON.stringify([r.serviceName, r.serviceKey]).slice(0, -1);
      for (const k of [...t.promises.keys()]) if (k.startsWith(prefix)) t.promises.delete(k);
      for (const k of [...t.promiseWaiters.keys()]) if (k.startsWith(prefix)) t.promiseWaiters.delete(k);
    }
  }

  /** A copy of every table, restored if a batch fails midway (a transaction rolls back). */
  private snapshot(): () => void {
    const saved = new Map<string, Map<unknown, unknown>>();
    for (const [name, table] of Object.entries(this.tables)) saved.set(name, structuredCopy(table));
    const seq = this.seq;
    return () => {
      for (const [name, table] of Object.entries(this.tables)) {
        const m = table as Map<unknown, unknown>;
        m.clear();
        for (const [k, v] of saved.get(name)!) m.set(k, v);
      }
      this.seq = seq;
    };
  }
}

const NO_PAYLOAD = {
  completionId: null,
  signalIdx: null,
  signalName: null,
  sourceInvocationId: null,
  raw: null,
} as const;

const INVOCATION_FIELDS = new Set([
  'status',
  'lastStartAt',
  'deploymentId',
  'protocolVersion',
  'journalLength',
  'retryCount',
  'retryCountSinceAppend',
  'lastAppendAt',
  'awaiting',
  'inboxSeq',
  'completedAt',
  'resultKind',
  'output',
  'failureCode',
  'failureMessage',
  'failureMetadata',
  'expiresAt',
]);

/** Columns the row type carries are set on it; the others (last failure, next retry…) are kept beside it. */
function applyUpdate(r: InvocationRow & { extra: Partial<InvocationUpdate> }, update: InvocationUpdate): void {
  for (const [k, v] of Object.entries(update) as [string, unknown][]) {
    if (v === undefined) continue;
    if (INVOCATION_FIELDS.has(k))
      (r as unknown as Record<string, unknown>)[k] = k === 'output' && v !== null ? Buffer.from(v as Uint8Array) : v;
    else r.extra = { ...r.extra, [k]: v };
  }
}

/** Rows are copied one level deep: a batch replaces row objects or mutates them in place, never deeper. */
function structuredCopy(m: Map<unknown, unknown>): Map<unknown, unknown> {
  const copy = new Map<unknown, unknown>();
  for (const [k, v] of m) {
    if (v instanceof Map) copy.set(k, new Map(v));
    else if (Array.isArray(v)) copy.set(k, v.slice());
    else if (typeof v === 'object' && v !== null) copy.set(k, { ...v });
    else copy.set(k, v);
  }
  return copy;
}

function lockKeyOf(service: string, key: string): string {
  return JSON.stringify([service, key]);
}

function stateKeyOf(service: string, key: string): string {
  return JSON.stringify([service, key]);
}

function promiseKeyOf(p: PromiseRef): string {
  return JSON.stringify([p.service, p.key, p.name]);
}
