import type pg from 'pg';
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
 * Group commit: writes from many concurrent invocations are gathered while the previous transaction commits and then
 * committed together in one transaction. Exactly one transaction is in flight, so commit order equals submission
 * order, which keeps each invocation's journal appends and acks in order. A write's promise settles only after
 * COMMIT returned: nothing is acknowledged before it is durable.
 */
export class GroupCommitter {
  private queue: Pending[] = [];
  private flushing = false;
  private scheduled = false;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly fencing: Fencing,
    private readonly options: GroupCommitOptions,
  ) {}

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
    while (this.flushing || this.queue.length > 0) {
      await new Promise((r) => setTimeout(r, 5));
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.flushing || this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    // The first write of an idle period waits at most maxDelayMs for company; under load batches form naturally
    // while the previous transaction commits.
    const run = (): void => {
      this.scheduled = false;
      void this.flush();
    };
    if (this.options.maxDelayMs > 0 && this.queue.length < this.options.maxBatch)
      setTimeout(run, this.options.maxDelayMs);
    else setImmediate(run);
  }

  private async flush(): Promise<void> {
    if (this.flushing || this.queue.length === 0) return;
    this.flushing = true;
    const batch = this.queue.splice(0, this.options.maxBatch);
    try {
      await this.commit(batch.map((p) => p.op));
      for (const p of batch) p.resolve();
    } catch (err) {
      if (batch.length > 1 && !(err instanceof FencingError) && !(err instanceof CommitOutcomeUnknownError)) {
        // The transaction was rolled back: isolate the write that failed so that one bad write does not fail its
        // neighbours. (After an unknown COMMIT outcome nothing may be retried: the writes might be durable already.)
        for (const p of batch) {
          try {
            await this.commit([p.op]);
            p.resolve();
          } catch (e) {
            p.reject(e);
          }
        }
      } else {
        for (const p of batch) p.reject(err);
      }
    } finally {
      this.flushing = false;
      this.schedule();
    }
  }

  private async commit(ops: WriteOp[]): Promise<void> {
    const started = process.hrtime.bigint();
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      try {
        const partitions = new Set<number>();
        for (const op of ops) for (const p of op.partitions) partitions.add(p);
        if (partitions.size > 0) await this.fencing.check(client, partitions);
        const journal: JournalRow[] = [];
        // Statements run in submission order. Consecutive ones that do not depend on an earlier result of this
        // transaction (no `when`) go to PostgreSQL together, as one multi-statement message: one round trip for
        // the run instead of one per statement, which is what bounds a batch's time in the transaction.
        const run: Stmt[] = [];
        for (const op of ops) {
          for (const stmt of op.stmts) {
            if (stmt.when === undefined) {
              run.push(stmt);
              continue;
            }
            await runStmts(client, run);
            run.length = 0;
            await runStmt(client, stmt);
          }
          for (const row of op.journal) journal.push(row);
        }
        await runStmts(client, run);
        if (journal.length > 0) await insertJournal(client, journal);
        try {
          await client.query('COMMIT');
        } catch (err) {
          broken = true;
          throw new CommitOutcomeUnknownError(err);
        }
        this.options.onCommit?.(ops.length, Number(process.hrtime.bigint() - started) / 1e9);
      } catch (err) {
        if (!(err instanceof CommitOutcomeUnknownError)) {
          await client.query('ROLLBACK').catch(() => {
            broken = true;
          });
        }
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }
}

/** From this many statements on, a run is sent as one message; below, one prepared statement at a time. */
const INLINE_MIN_RUN = 6;

/** Runs statements in order in one round trip (values inlined as escaped literals); results go to each `onResult`. */
async function runStmts(client: pg.ClientBase, stmts: readonly Stmt[]): Promise<void> {
  if (stmts.length < INLINE_MIN_RUN) {
    // Short runs (light load): prepared statements, planned once per connection, cost less than the round trips.
    for (const s of stmts) await runStmt(client, s);
    return;
  }
  const text = stmts.map((s) => inlineValues(client, s)).join(';\n');
  const res = (await client.query(text)) as unknown as pg.QueryResult | pg.QueryResult[];
  const results = Array.isArray(res) ? res : [res];
  if (results.length !== stmts.length) {
    throw new Error(`expected ${stmts.length} results from a statement run, got ${results.length}`);
  }
  stmts.forEach((s, i) => s.onResult?.(results[i]!.rows as Record<string, unknown>[]));
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

async function runStmt(client: pg.ClientBase, stmt: Stmt): Promise<void> {
  if (stmt.when !== undefined && !stmt.when()) return;
  const res = await client.query(
    stmt.name === undefined
      ? { text: stmt.text, values: stmt.values }
      : { name: stmt.name, text: stmt.text, values: stmt.values },
  );
  stmt.onResult?.(res.rows as Record<string, unknown>[]);
}

async function insertJournal(client: pg.ClientBase, rows: JournalRow[]): Promise<void> {
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
  await client.query({ ...INSERT_JOURNAL, values: cols });
}
