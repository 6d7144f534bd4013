import pg from 'pg';
import { serialize } from 'pg-protocol';
import type { Stmt } from './sql.ts';

/** What a submitted query uses of node-postgres's connection: its socket. */
interface Connection {
  readonly stream: { write(chunk: Buffer): boolean };
}

interface RowParser {
  addFields(fields: unknown[]): void;
  parseRow(values: unknown[]): Record<string, unknown>;
}

/** Named statements parsed on each pooled connection: statement name → text. */
const parsedOn = new WeakMap<pg.ClientBase, Map<string, string>>();

const DESCRIBE_PORTAL = serialize.describe({ type: 'P', name: '' });
const EXECUTE = serialize.execute({ portal: '', rows: 0 });

/** Statement names live in the connection's namespace, which node-postgres's own named queries share. */
const PREFIX = 'gc_';

/**
 * Runs statements in one round trip of the extended query protocol: for each statement Parse (a named one once per
 * connection), Bind (bytes as binary parameters, everything else as text), Describe (only when its rows are wanted)
 * and Execute; then one Sync. Outside an explicit transaction block PostgreSQL runs all of it as one implicit
 * transaction that the Sync commits; the first error rolls it back and skips the rest. Resolves with each statement's
 * rows (in order), after the ReadyForQuery that follows the Sync, i.e. after the commit when this is the last part of
 * a transaction; rejects with the server's error, or with the connection's.
 *
 * A failed run leaves the connection's named statements unknown (a Parse may have run or not): the caller must not
 * reuse the connection.
 */
export function runPipeline(client: pg.ClientBase, stmts: readonly Stmt[]): Promise<Record<string, unknown>[][]> {
  let values: (string | Buffer | null)[][];
  try {
    // Before anything is written: a value that cannot be sent must not leave half a transaction for the Sync to commit.
    values = stmts.map((s) => s.values.map(parameter));
  } catch (err) {
    return Promise.reject(new ParameterError(err));
  }
  let parsed = parsedOn.get(client);
  if (parsed === undefined) parsedOn.set(client, (parsed = new Map<string, string>()));
  return new Promise((resolve, reject) => {
    const pipeline = new Pipeline(stmts, values, parsed, (err, rows) =>
      err === undefined ? resolve(rows!) : reject(err),
    );
    client.query(pipeline as unknown as pg.Submittable);
  });
}

/** A statement value has no PostgreSQL form (e.g. JSON.stringify threw): nothing was sent. */
export class ParameterError extends Error {
  constructor(cause: unknown) {
    super(`a statement value cannot be sent to PostgreSQL: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
    this.name = 'ParameterError';
  }
}

class Pipeline {
  /** Each completed statement's rows; the next statement's results arrive into `current`. */
  private readonly rows: Record<string, unknown>[][] = [];
  private parser: RowParser | undefined;
  private current: Record<string, unknown>[] = [];
  private done = false;

  constructor(
    private readonly stmts: readonly Stmt[],
    private readonly values: readonly (readonly (string | Buffer | null)[])[],
    private readonly parsed: Map<string, string>,
    private readonly callback: (err: Error | undefined, rows?: Record<string, unknown>[][]) => void,
  ) {}

  submit(connection: Connection): Error | null {
    // Checked before anything is sent: a name reused for another text would silently run the first text.
    for (const stmt of this.stmts) {
      if (stmt.name === undefined) continue;
      const known = this.parsed.get(stmt.name);
      if (known !== undefined && known !== stmt.text) {
        return new Error(`statement name ${stmt.name} is used for two different statements`);
      }
    }
    // One buffer, one write: the messages of a large transaction are many and small.
    const messages: Buffer[] = [];
    this.stmts.forEach((stmt, i) => {
      let statement = '';
      if (stmt.name !== undefined) {
        statement = PREFIX + stmt.name;
        if (!this.parsed.has(stmt.name)) {
          // Recorded at once: a failed run discards the connection, so each name is parsed once per connection.
          this.parsed.set(stmt.name, stmt.text);
          messages.push(serialize.parse({ name: statement, text: stmt.text }));
        }
      } else {
        messages.push(serialize.parse({ name: '', text: stmt.text }));
      }
      messages.push(serialize.bind({ portal: '', statement, values: this.values[i] as (string | Buffer | null)[] }));
      if (stmt.onResult !== undefined) messages.push(DESCRIBE_PORTAL);
      messages.push(EXECUTE);
    });
    messages.push(serialize.sync());
    connection.stream.write(Buffer.concat(messages));
    return null;
  }

  handleRowDescription(msg: { fields: unknown[] }): void {
    const parser = new pg.Result('object', undefined as never) as unknown as RowParser;
    parser.addFields(msg.fields);
    this.parser = parser;
  }

  handleDataRow(msg: { fields: unknown[] }): void {
    if (this.parser !== undefined) this.current.push(this.parser.parseRow(msg.fields));
  }

  handleCommandComplete(): void {
    this.rows.push(this.current);
    this.current = [];
    this.parser = undefined;
  }

  handleEmptyQuery(): void {
    this.handleCommandComplete();
  }

  handlePortalSuspended(): void {
    this.finish(new Error('a statement was suspended (row limit) in a pipeline'));
  }

  handleCopyInResponse(): void {
    this.finish(new Error('COPY is not supported in a pipeline'));
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    this.finish(err);
  }

  handleReadyForQuery(): void {
    if (this.rows.length !== this.stmts.length) {
      this.finish(new Error(`expected ${this.stmts.length} results from a pipeline, got ${this.rows.length}`));
      return;
    }
    this.finish(undefined);
  }

  private finish(err: Error | undefined): void {
    if (this.done) return;
    this.done = true;
    this.callback(err, err === undefined ? this.rows : undefined);
  }
}

/**
 * A parameter value as node-postgres's Bind sends it: a Buffer goes in binary (bytes as they are, bytea[] in the array
 * binary format), anything else as its PostgreSQL text input form; null is NULL.
 */
export function parameter(value: unknown): string | Buffer | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (value instanceof Uint8Array) {
    return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
  if (value instanceof Date) return timestamp(value);
  if (Array.isArray(value)) return byteaArray(value) ?? arrayText(value);
  return JSON.stringify(value);
}

const BYTEA_OID = 17;

/** A one-dimensional array of byte strings (and NULLs) in PostgreSQL's binary array format; undefined otherwise. */
function byteaArray(items: readonly unknown[]): Buffer | undefined {
  let size = 20;
  let hasNull = 0;
  let bytes = 0;
  for (const item of items) {
    if (item === null || item === undefined) {
      hasNull = 1;
      size += 4;
    } else if (item instanceof Uint8Array) {
      bytes += 1;
      size += 4 + item.byteLength;
    } else {
      return undefined;
    }
  }
  if (bytes === 0) return undefined;
  const out = Buffer.allocUnsafe(size);
  out.writeInt32BE(1, 0);
  out.writeInt32BE(hasNull, 4);
  out.writeInt32BE(BYTEA_OID, 8);
  out.writeInt32BE(items.length, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (const item of items) {
    if (item === null || item === undefined) {
      out.writeInt32BE(-1, at);
      at += 4;
      continue;
    }
    const b = item as Uint8Array;
    out.writeInt32BE(b.byteLength, at);
    out.set(b, at + 4);
    at += 4 + b.byteLength;
  }
  return out;
}

/** A one-dimensional array in PostgreSQL's text input form (elements quoted and escaped as needed). */
function arrayText(items: readonly unknown[]): string {
  let out = '{';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    const item = items[i];
    if (typeof item === 'number' || typeof item === 'bigint' || typeof item === 'boolean') {
      out += String(item);
      continue;
    }
    const t = elementText(item);
    if (t === null) out += 'NULL';
    else if (t.includes('\\') || t.includes('"')) out += `"${t.replace(/[\\"]/g, '\\$&')}"`;
    else out += `"${t}"`;
  }
  return out + '}';
}

function elementText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`;
  if (value instanceof Date) return timestamp(value);
  return JSON.stringify(value);
}

const DAY_MS = 86_400_000;
let cachedDay = Number.NaN;
let cachedPrefix = '';

/**
 * `date.toISOString()`, faster (it is among the costliest steps of sending a write): the `YYYY-MM-DDT` of the last
 * day seen is kept and only the time of day is formatted.
 */
export function timestamp(date: Date): string {
  const ms = date.getTime();
  const day = Math.floor(ms / DAY_MS);
  if (day !== cachedDay) {
    // Throws RangeError for an invalid date, as toISOString does.
    const iso = date.toISOString();
    // Years outside 0000-9999 have a longer form: not cached.
    if (iso.length !== 24) return iso;
    cachedDay = day;
    cachedPrefix = iso.slice(0, 11);
  }
  let rest = ms - day * DAY_MS;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  const milli = rest - s * 1000;
  return `${cachedPrefix}${two(h)}:${two(m)}:${two(s)}.${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

function two(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}
