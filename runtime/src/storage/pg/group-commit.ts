import pg from 'pg';
import type { JournalRow, Stmt, WriteOp } from './sql.ts';
import { ParameterError, runPipeline } from './pipeline.ts';
import { FencingError } from '../errors.ts';

export { FencingError };

/** COMMIT itself failed (e.g. the connection dropped): the transaction may or may not have committed. */
class CommitOutcomeUnknownError extends Error {
  constructor(cause: unknown) {
    super('the outcome of a commit is unknown (the connection failed during COMMIT)', { cause });
    this.name = 'CommitOutcomeUnknownError';
  }
}

/** Proves, inside a write transaction, that this process still owns the partitions it writes to. */
export interface Fencing {
  /**
   * A statement that locks the partitions' lease rows (FOR SHARE) until the transaction ends and fails with an error
   * whose message contains LEASE_LOST unless this process holds all of them: sent in the same message as the writes.
   */
  guard(partitions: ReadonlySet<number>): Stmt;
  /** Throws FencingError naming the partitions this process does not hold. */
  check(client: pg.ClientBase, partitions: ReadonlySet<number>): Promise<void>;
  /** The epoch this process holds the partition at now; undefined when it does not hold it. */
  epochOf(partition: number): string | undefined;
}

interface Pending {
  op: WriteOp;
  /** The epochs of `op.partitions` when the write was submitted: it commits only under the same ones. */
  epochs: string[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface GroupCommitOptions {
  maxBatch: number;
  maxDelayMs: number;
  /**
   * How many transactions may be in flight at once (≥ 1). Writes that share an ordering key, and writes without
   * keys, are never in two of them at the same time (see `WriteOp.keys`).
   */
  concurrency: number;
  /**
   * Writes gathered at once are split over idle connections into transactions of at least this many writes each
   * (0: never split; default `SPLIT_MIN`).
   */
  splitMin?: number;
  onCommit?: (writes: number, seconds: number) => void;
  /**
   * A transaction failed for a reason other than a statement's error (the connection or the server failed, the
   * outcome is unknown, a lease was lost): what the writers of these partitions keep in memory may be ahead of the
   * database.
   */
  onSuspect?: (partitions: number[], err: unknown) => void;
}

const INSERT_JOURNAL = {
  name: 'journal_insert_batch',
  text: `INSERT INTO ratchet.journal (invocation_id, index, entry_type, completion_id, signal_idx, signal_name, name, raw,
           appended_at, invoked_id, invoked_target, sleep_wakeup_at, promise_name)
         SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[], $6::text[], $7::text[], $8::bytea[],
           $9::timestamptz[], $10::text[], $11::text[], $12::timestamptz[], $13::text[])`,
};

/**
 * The default `splitMin`. Measured with `npm run bench:ab` against the committer without splitting (bench/README.md,
 * session 7), c=128: `noop` driven by wrk gained 13–23 % with 32 or 64 (16 % with 8, at 16 % more CPU per invocation);
 * driven by autocannon, whose bursts already kept the committer busy, −2 to +5 %. `add` lost 1–5 % at 32 (CPU +12 %),
 * nothing at 64 (CPU +2–8 %): its batches hold 40–60 writes. Below 2 × 64 writes at once nothing is split, so c=1 and
 * c=16 are unchanged.
 */
export const SPLIT_MIN = 64;

/**
 * Group commit: writes from many concurrent invocations are gathered and committed together in one transaction, up
 * to `concurrency` transactions at a time, each on its own connection. Order is kept where it matters: a write goes
 * into a transaction only when every earlier write that shares one of its ordering keys (`WriteOp.keys`) has
 * committed or goes into the same transaction, and a write without keys only when nothing else is in flight and
 * nothing earlier waits (a barrier). So each invocation's journal appends and acks stay in submission order, and a
 * transaction that fails cannot have a later write of the same key committed before it. A write's promise settles
 * only after COMMIT returned: nothing is acknowledged before it is durable.
 *
 * Splitting: the writes gathered at once (those submitted during one turn of the event loop) go into one transaction
 * each of up to `concurrency` idle connections when there are at least `splitMin` of them per connection, writes that
 * share a key kept together. Under load a turn gathers 50–200 writes; in one transaction they all wait for the last
 * statement and come back in one burst, while the other connections sit idle. Split,
 * the parts run side by side, the first ones come back sooner, and the invocations waiting for them go on in smaller
 * bursts. Parts have disjoint keys, so they may commit in any order, as any two concurrent transactions may.
 */
export class GroupCommitter {
  private queue: Pending[] = [];
  private inFlight = 0;
  private barrierInFlight = false;
  /** Ordering keys of the writes in the transactions in flight. */
  private readonly busy = new Set<string>();
  private scheduled = false;
  private closed = false;
  private readonly concurrency: number;
  private readonly splitMin: number;

  constructor(
    private readonly pool: pg.Pool,
    private readonly fencing: Fencing,
    private readonly options: GroupCommitOptions,
  ) {
    this.concurrency = Math.max(1, options.concurrency);
    this.splitMin = Math.max(0, options.splitMin ?? SPLIT_MIN);
  }

  submit(op: WriteOp): Promise<void> {
    if (this.closed) return Promise.reject(new Error('storage is shutting down'));
    const epochs: string[] = [];
    for (const p of op.partitions) {
      const epoch = this.fencing.epochOf(p);
      if (epoch === undefined) return Promise.reject(new FencingError([p], true));
      epochs.push(epoch);
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ op, epochs, resolve, reject });
      this.schedule();
    });
  }

  /** Waits for queued writes to commit; later submissions are refused. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.inFlight > 0 || this.queue.length > 0) {
      await new Promise((r) => setTimeout(r, 5));
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0) return;
    if (this.barrierInFlight || this.inFlight >= this.concurrency) return;
    this.scheduled = true;
    const run = (): void => {
      this.scheduled = false;
      this.flush();
    };
    // The first write of an idle period waits at most maxDelayMs for company; under load batches form naturally
    // while the transactions in flight commit.
    if (this.inFlight === 0 && this.options.maxDelayMs > 0 && this.queue.length < this.options.maxBatch)
      setTimeout(run, this.options.maxDelayMs);
    else setImmediate(run);
  }

  /** Starts a transaction with the writes that may go now (in submission order), if there are any. */
  private flush(): void {
    if (this.barrierInFlight || this.inFlight >= this.concurrency) return;
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    /** Keys of writes left in the queue by this pass: nothing later with one of them may go ahead of them. */
    const held = new Set<string>();
    let barrier = false;
    let stopped = false;
    for (const p of this.queue) {
      if (!this.stillHeld(p)) {
        failed(p, new FencingError(p.op.partitions, true));
        continue;
      }
      if (stopped || batch.length >= this.options.maxBatch) {
        rest.push(p);
        continue;
      }
      const keys = p.op.keys;
      if (keys === undefined) {
        // A barrier goes only when it is ordered after everything before it: nothing in flight, nothing held back.
        if (this.inFlight > 0 || rest.length > 0) {
          stopped = true;
          rest.push(p);
          continue;
        }
        barrier = true;
        batch.push(p);
        continue;
      }
      if (keys.some((k) => this.busy.has(k) || held.has(k))) {
        for (const k of keys) held.add(k);
        rest.push(p);
        continue;
      }
      batch.push(p);
    }
    this.queue = rest;
    if (batch.length === 0) return;
    for (const part of barrier ? [batch] : this.split(batch)) this.start(part, barrier);
    // Writes this one left behind may go in a transaction of their own.
    this.schedule();
  }

  /** The writes gathered at once over idle connections (see the class comment); writes sharing a key stay together. */
  private split(batch: Pending[]): Pending[][] {
    const idle = this.concurrency - this.inFlight;
    if (this.splitMin === 0 || idle < 2 || batch.length < 2 * this.splitMin) return [batch];
    const k = Math.min(idle, Math.floor(batch.length / this.splitMin));
    const size = Math.ceil(batch.length / k);
    const parts: Pending[][] = Array.from({ length: k }, () => []);
    const partOf = new Map<string, number>();
    let next = 0;
    for (const p of batch) {
      let target = -1;
      for (const key of p.op.keys ?? []) {
        const at = partOf.get(key);
        if (at === undefined) continue;
        // Its keys are in two parts already (writes touching two invocations): the batch stays whole.
        if (target !== -1 && target !== at) return [batch];
        target = at;
      }
      if (target === -1) {
        while (next < k - 1 && parts[next]!.length >= size) next++;
        target = next;
      }
      parts[target]!.push(p);
      for (const key of p.op.keys ?? []) partOf.set(key, target);
    }
    return parts.filter((part) => part.length > 0);
  }

  /** Starts one transaction with these writes; their keys are busy until it has settled. */
  private start(batch: Pending[], barrier: boolean): void {
    const keys: string[] = [];
    for (const p of batch) {
      for (const k of p.op.keys ?? []) {
        if (this.busy.has(k)) continue;
        this.busy.add(k);
        keys.push(k);
      }
    }
    this.inFlight += 1;
    if (barrier) this.barrierInFlight = true;
    void this.run(batch).finally(() => {
      for (const k of keys) this.busy.delete(k);
      this.inFlight -= 1;
      if (barrier) this.barrierInFlight = false;
      this.schedule();
    });
  }

  /** The write's partitions are still held at the epochs it was made under. */
  private stillHeld(p: Pending): boolean {
    const parts = p.op.partitions;
    for (let i = 0; i < parts.length; i++) if (this.fencing.epochOf(parts[i]!) !== p.epochs[i]) return false;
    return true;
  }

  private async run(batch: Pending[]): Promise<void> {
    try {
      await this.commit(batch.map((p) => p.op));
      for (const p of batch) committed(p);
    } catch (err) {
      if (batch.length > 1 && (isStatementError(err) || err instanceof ParameterError || err instanceof FencingError)) {
        // The transaction was rolled back at a statement's error (a lost lease is one): isolate the write that failed
        // so that one bad write does not fail its neighbours. (Not after a lost connection or an unknown COMMIT
        // outcome: the writes might be durable already, and the database is likely unreachable anyway.)
        const lost = err instanceof FencingError ? new Set(err.partitions) : undefined;
        for (const p of batch) {
          if (lost !== undefined && p.op.partitions.some((id) => lost.has(id))) {
            this.reportSuspect([p], err);
            failed(p, err);
            continue;
          }
          try {
            await this.commit([p.op]);
            committed(p);
          } catch (e) {
            this.reportSuspect([p], e);
            failed(p, e);
          }
        }
      } else {
        this.reportSuspect(batch, err);
        for (const p of batch) failed(p, err);
      }
    }
  }

  private reportSuspect(batch: Pending[], err: unknown): void {
    // Every failure counts, a statement's error too: the writer's memory already shows the write as done. Only a
    // write refused before it was sent leaves nothing to doubt (its partition was given up already).
    if (this.options.onSuspect === undefined) return;
    if (err instanceof FencingError && err.unsent) return;
    const partitions = new Set<number>();
    for (const p of batch) for (const id of p.op.partitions) partitions.add(id);
    if (partitions.size > 0) this.options.onSuspect([...partitions], err);
  }

  private async commit(ops: WriteOp[]): Promise<void> {
    const started = process.hrtime.bigint();
    const partitions = new Set<number>();
    for (const op of ops) for (const p of op.partitions) partitions.add(p);
    const stmts: Stmt[] = [];
    if (partitions.size > 0) stmts.push(this.fencing.guard(partitions));
    const journal: JournalRow[] = [];
    for (const op of ops) {
      for (const stmt of op.stmts) stmts.push(stmt);
      for (const row of op.journal) journal.push(row);
    }
    if (journal.length > 0) stmts.push(insertJournal(journal));
    const client = await this.pool.connect();
    let broken = false;
    let last = false;
    // A checked-out client that loses its connection emits 'error' (and fails the query in flight): without a
    // listener that event would end the process.
    const onError = (): void => {
      broken = true;
    };
    client.on('error', onError);
    try {
      // The whole transaction goes to PostgreSQL in one round trip (`runPipeline`: extended protocol, one Sync), as
      // one implicit transaction that the Sync commits. A statement that depends on an earlier result of this
      // transaction (`when`) needs that result first: then the transaction is an explicit BEGIN … COMMIT block sent
      // in parts, each part once the results before it are known.
      const parts = stmts.some((s) => s.when !== undefined);
      let part: Stmt[] = parts ? [BEGIN] : [];
      const send = async (): Promise<void> => {
        const rows = await runPipeline(client, part);
        part.forEach((s, i) => s.onResult?.(rows[i]!));
        part = [];
      };
      for (const stmt of stmts) {
        if (stmt.when !== undefined) {
          await send();
          if (!stmt.when()) continue;
        }
        part.push(stmt);
      }
      if (parts) part.push(COMMIT);
      last = true;
      await send();
      this.options.onCommit?.(ops.length, Number(process.hrtime.bigint() - started) / 1e9);
    } catch (err) {
      // An ERROR answer means the transaction stopped at the failing statement, its commit included: nothing
      // committed (likewise for a value that could not be sent: nothing of that part was). Anything else during the
      // part that commits (the connection failed, the server went away) leaves the outcome unknown.
      broken = true;
      if (!isStatementError(err) && !(err instanceof ParameterError)) {
        if (last) throw new CommitOutcomeUnknownError(err);
        throw err;
      }
      // (The connection's named statements are unknown now, so it is not reused; see runPipeline.)
      await client.query('ROLLBACK').catch(() => undefined);
      if (isLeaseLost(err)) {
        // Name the partitions that were lost (throws FencingError); were they all held again, still refuse.
        await this.fencing.check(client, partitions);
        throw new FencingError([...partitions]);
      }
      throw err;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }
}

const BEGIN: Stmt = { name: 'begin', text: 'BEGIN', values: [] };
const COMMIT: Stmt = { name: 'commit', text: 'COMMIT', values: [] };

function committed(p: Pending): void {
  p.resolve();
}

function failed(p: Pending, err: unknown): void {
  p.reject(err);
}

/** What the lease guard's error message contains: see `Fencing.guard`. */
export const LEASE_LOST = 'ratchet: partition lease lost';

function isStatementError(err: unknown): boolean {
  return err instanceof pg.DatabaseError && err.severity === 'ERROR';
}

function isLeaseLost(err: unknown): boolean {
  return err instanceof pg.DatabaseError && err.code === '22P02' && err.message.includes(LEASE_LOST);
}

/** Text a deployment chose (command names, signal and promise names): PostgreSQL text cannot hold U+0000. */
function storableText(value: string | null | undefined): string | null {
  if (value === undefined || value === null) return null;
  return value.includes('\0') ? value.replaceAll('\0', '\uFFFD') : value;
}

function insertJournal(rows: JournalRow[]): Stmt {
  const cols: unknown[][] = Array.from({ length: 13 }, () => new Array<unknown>(rows.length));
  rows.forEach((r, i) => {
    cols[0]![i] = r.invocationId;
    cols[1]![i] = r.index;
    cols[2]![i] = r.entryType;
    cols[3]![i] = r.completionId ?? null;
    cols[4]![i] = r.signalIdx ?? null;
    cols[5]![i] = storableText(r.signalName);
    cols[6]![i] = storableText(r.name);
    cols[7]![i] = r.raw;
    cols[8]![i] = r.appendedAt;
    cols[9]![i] = r.invokedId ?? null;
    cols[10]![i] = r.invokedTarget ?? null;
    cols[11]![i] = r.sleepWakeupAt ?? null;
    cols[12]![i] = storableText(r.promiseName);
  });
  return { ...INSERT_JOURNAL, values: cols };
}
