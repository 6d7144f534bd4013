import pg from 'pg';
import type { JournalRow, Stmt, WriteOp } from '../api.ts';

/** COMMIT itself failed (e.g. the connection dropped): the transaction may or may not have committed. */
class CommitOutcomeUnknownError extends Error {
  constructor(cause: unknown) {
    super('the outcome of a commit is unknown (the connection failed during COMMIT)', { cause });
    this.name = 'CommitOutcomeUnknownError';
  }
}

export class FencingError extends Error {
  constructor(partitions: readonly number[]) {
    super(`lost the lease of partition(s) ${partitions.join(', ')}; another process owns them now`);
    this.name = 'FencingError';
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
}

interface Pending {
  op: WriteOp;
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
  onCommit?: (writes: number, seconds: number) => void;
}

const INSERT_JOURNAL = {
  name: 'journal_insert_batch',
  text: `INSERT INTO ratchet.journal (invocation_id, index, entry_type, completion_id, signal_idx, signal_name, name, raw,
           appended_at, invoked_id, invoked_target, sleep_wakeup_at, promise_name)
         SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[], $6::text[], $7::text[], $8::bytea[],
           $9::timestamptz[], $10::text[], $11::text[], $12::timestamptz[], $13::text[])`,
};

/**
 * Group commit: writes from many concurrent invocations are gathered and committed together in one transaction, up
 * to `concurrency` transactions at a time, each on its own connection. Order is kept where it matters: a write goes
 * into a transaction only when every earlier write that shares one of its ordering keys (`WriteOp.keys`) has
 * committed or goes into the same transaction, and a write without keys only when nothing else is in flight and
 * nothing earlier waits (a barrier). So each invocation's journal appends and acks stay in submission order, and a
 * transaction that fails cannot have a later write of the same key committed before it. A write's promise settles
 * only after COMMIT returned: nothing is acknowledged before it is durable.
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

  constructor(
    private readonly pool: pg.Pool,
    private readonly fencing: Fencing,
    private readonly options: GroupCommitOptions,
  ) {
    this.concurrency = Math.max(1, options.concurrency);
  }

  submit(op: WriteOp): Promise<void> {
    if (this.closed) return Promise.reject(new Error('storage is shutting down'));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ op, resolve, reject });
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
    // Writes this one left behind may go in a transaction of their own.
    this.schedule();
  }

  private async run(batch: Pending[]): Promise<void> {
    try {
      await this.commit(batch.map((p) => p.op));
      for (const p of batch) committed(p);
    } catch (err) {
      if (batch.length > 1 && !(err instanceof FencingError) && !(err instanceof CommitOutcomeUnknownError)) {
        // The transaction was rolled back: isolate the write that failed so that one bad write does not fail its
        // neighbours. (After an unknown COMMIT outcome nothing may be retried: the writes might be durable already.)
        for (const p of batch) {
          try {
            await this.commit([p.op]);
            committed(p);
          } catch (e) {
            failed(p, e);
          }
        }
      } else {
        for (const p of batch) failed(p, err);
      }
    }
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
    try {
      // The whole transaction (BEGIN, the lease guard, the statements in submission order, COMMIT) goes to
      // PostgreSQL as one multi-statement message: one round trip per commit. Named statements are prepared once per
      // connection (SQL PREPARE) and run as EXECUTE with their values as escaped literals, so PostgreSQL plans them
      // once, as with the extended protocol; others have their values inlined. A statement that depends on an
      // earlier result of this transaction (`when`) starts a new message, sent once the results before it are known.
      let prepared = preparedOn.get(client);
      if (prepared === undefined) preparedOn.set(client, (prepared = new Map<string, string>()));
      let message: string[] = ['BEGIN'];
      let slots: (Stmt | undefined)[] = [undefined];
      let last = false;
      const send = async (): Promise<void> => {
        if (message.length === 0) return;
        const res = (await client.query(message.join(';\n'))) as unknown as pg.QueryResult | pg.QueryResult[];
        const results = Array.isArray(res) ? res : [res];
        if (results.length !== slots.length) {
          throw new Error(`expected ${slots.length} results from a statement run, got ${results.length}`);
        }
        slots.forEach((s, i) => s?.onResult?.(results[i]!.rows as Record<string, unknown>[]));
        message = [];
        slots = [];
      };
      try {
        for (const stmt of stmts) {
          if (stmt.when !== undefined) {
            await send();
            if (!stmt.when()) continue;
          }
          const known = stmt.name === undefined ? undefined : prepared.get(stmt.name);
          if (stmt.name !== undefined && known === undefined) {
            // Recorded at once: a failed commit discards the connection (see below), so PREPARE runs once per
            // connection. Its own result takes a slot.
            prepared.set(stmt.name, stmt.text);
            message.push(`PREPARE ${PREFIX}${stmt.name} AS ${stmt.text}`);
            slots.push(undefined);
          } else if (known !== undefined && known !== stmt.text) {
            // EXECUTE would silently run the other text (the extended protocol's named statements refuse this too).
            throw new Error(`statement name ${stmt.name} is used for two different statements`);
          }
          message.push(stmt.name === undefined ? inlineValues(client, stmt) : executeText(client, stmt));
          slots.push(stmt);
        }
        message.push('COMMIT');
        slots.push(undefined);
        last = true;
        await send();
        this.options.onCommit?.(ops.length, Number(process.hrtime.bigint() - started) / 1e9);
      } catch (err) {
        // An ERROR answer means the message stopped at the failing statement, COMMIT included: nothing committed.
        // Anything else during the message that carries COMMIT (the connection failed, the server went away) leaves
        // the outcome unknown.
        if (!isStatementError(err)) {
          broken = true;
          if (last) throw new CommitOutcomeUnknownError(err);
          throw err;
        }
        // The message may have stopped before or after a PREPARE it carried: the connection's prepared statements
        // are unknown now, so it is not reused.
        broken = true;
        await client.query('ROLLBACK').catch(() => undefined);
        if (isLeaseLost(err)) {
          // Name the partitions that were lost (throws FencingError); were they all held again, still refuse.
          await this.fencing.check(client, partitions);
          throw new FencingError([...partitions]);
        }
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }
}

function committed(p: Pending): void {
  try {
    p.op.onCommitted?.();
  } finally {
    p.resolve();
  }
}

function failed(p: Pending, err: unknown): void {
  try {
    p.op.onFailed?.();
  } finally {
    p.reject(err);
  }
}

/** Statements prepared (SQL PREPARE) on each pooled connection by the committer: Stmt name → text. */
const preparedOn = new WeakMap<pg.ClientBase, Map<string, string>>();

/** SQL PREPARE shares its namespace with the extended protocol's named statements, which other queries use. */
const PREFIX = 'gc_';

function executeText(client: pg.ClientBase, stmt: Stmt): string {
  if (stmt.values.length === 0) return `EXECUTE ${PREFIX}${stmt.name}`;
  return `EXECUTE ${PREFIX}${stmt.name}(${stmt.values.map((v) => literal(client, v)).join(', ')})`;
}

/** What the lease guard's error message contains: see `Fencing.guard`. */
export const LEASE_LOST = 'ratchet: partition lease lost';

function isStatementError(err: unknown): boolean {
  return err instanceof pg.DatabaseError && err.severity === 'ERROR';
}

function isLeaseLost(err: unknown): boolean {
  return err instanceof pg.DatabaseError && err.code === '22P02' && err.message.includes(LEASE_LOST);
}

/**
 * The statement's text with `$n` replaced by the literal of its value: what the extended protocol would send as an
 * untyped text parameter, quoted and escaped (so it takes its type from the context, as a parameter does).
 */
export function inlineValues(client: pg.ClientBase, stmt: Stmt): string {
  return stmt.text.replace(/\$(\d+)/g, (_, n: string) => literal(client, stmt.values[Number(n) - 1]));
}

function literal(client: pg.ClientBase, value: unknown): string {
  const text = textOf(value);
  return text === null ? 'NULL' : client.escapeLiteral(text);
}

/** PostgreSQL's text input form of a parameter value (as node-postgres would send it), or null. */
function textOf(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (value instanceof Uint8Array) return `\\x${Buffer.from(value).toString('hex')}`;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) {
    const items = value.map((v: unknown) => {
      const t = textOf(v);
      return t === null ? 'NULL' : `"${t.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    });
    return `{${items.join(',')}}`;
  }
  return JSON.stringify(value);
}

function insertJournal(rows: JournalRow[]): Stmt {
  const cols: unknown[][] = Array.from({ length: 13 }, () => new Array<unknown>(rows.length));
  rows.forEach((r, i) => {
    cols[0]![i] = r.invocationId;
    cols[1]![i] = r.index;
    cols[2]![i] = r.entryType;
    cols[3]![i] = r.completionId ?? null;
    cols[4]![i] = r.signalIdx ?? null;
    cols[5]![i] = r.signalName ?? null;
    cols[6]![i] = r.name ?? null;
    cols[7]![i] = r.raw;
    cols[8]![i] = r.appendedAt;
    cols[9]![i] = r.invokedId ?? null;
    cols[10]![i] = r.invokedTarget ?? null;
    cols[11]![i] = r.sleepWakeupAt ?? null;
    cols[12]![i] = r.promiseName ?? null;
  });
  return { ...INSERT_JOURNAL, values: cols };
}
