import pg from 'pg';

export type Pool = pg.Pool;
export type Client = pg.Client;

export interface PoolOptions {
  url: string;
  max: number;
  applicationName: string;
  /** PostgreSQL's statement_timeout for every statement on these connections (none by default). */
  statementTimeoutMs?: number;
  /**
   * Commits on these connections return before their WAL is flushed (`synchronous_commit = off`): for writes whose
   * loss in a crash of PostgreSQL costs nothing that was acknowledged (the observability store), never for invocations.
   */
  asynchronousCommit?: boolean;
}

export function createPool(options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max,
    application_name: options.applicationName,
    // A broken idle connection must not crash the process; queries on it fail and are retried by callers.
    idleTimeoutMillis: 30_000,
    // A database host that drops packets must fail startup and requests, not hang them.
    connectionTimeoutMillis: 10_000,
    ...(options.statementTimeoutMs === undefined ? {} : { statement_timeout: options.statementTimeoutMs }),
    ...(options.asynchronousCommit === true ? { options: '-c synchronous_commit=off' } : {}),
  });
  pool.on('error', () => {
    // Errors on idle clients surface again on the next checkout; nothing to do here.
  });
  // A client whose connection dies while checked out emits 'error' besides failing its query; the pool listens only
  // while it is idle, and an 'error' event nobody listens to ends the process. The failed query reports the error to
  // whoever ran it, and the holder releases the client as broken, so this listener has nothing more to do.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return pool;
}

/** A connection of its own, outside the pool (LISTEN needs one that stays open); errors end up on its queries. */
/**
 * Runs `work` in one transaction on a client of `pool`: COMMIT when it returns, ROLLBACK (best effort) and rethrow when
 * it throws. The client goes back to the pool either way.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export async function connectClient(url: string, applicationName: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: applicationName });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** pg returns int8 as a decimal string; partition keys are u64 stored as i64. */
export function u64ToI64(v: bigint): string {
  return BigInt.asIntN(64, v).toString();
}

export function i64ToU64(v: string | bigint): bigint {
  return BigInt.asUintN(64, BigInt(v));
}
