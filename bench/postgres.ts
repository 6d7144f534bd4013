import { rmSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import pg from 'pg';
import { pino } from 'pino';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../runtime/src/storage/pg/embedded.ts';
import { createLogger } from '../runtime/src/telemetry/logger.ts';

/**
 * The PostgreSQL of a cluster in the bench's cluster mode: the server dev mode starts (same binaries, same code, same
 * durable defaults, Unix socket), but started by the harness, so that N runtime processes can share it, and with
 * `pg_stat_statements` loaded, so that what one invocation costs PostgreSQL can be counted.
 */

/** What PostgreSQL has done so far; the harness reports differences over each run. */
export interface PostgresSnapshot {
  /** Read at once: current WAL insert position (bytes), next transaction id, pg_stat_statements sums. */
  readonly walLsn: bigint;
  readonly nextXid: bigint;
  readonly statements: ReadonlyMap<string, StatementCounters>;
  /**
   * PostgreSQL's cumulative statistics: each backend reports them at most once a second while busy and up to 10 s
   * after it went idle, so a reading just after a run misses part of it (see `--pg-settle`).
   */
  readonly cumulative: CumulativeCounters;
}

export interface StatementCounters {
  readonly query: string;
  readonly calls: number;
  readonly execMs: number;
  readonly rows: number;
  readonly walBytes: number;
}

export interface CumulativeCounters {
  /** `pg_stat_database` of the runtime's database. */
  readonly xactCommit: number;
  readonly xactRollback: number;
  readonly blocksRead: number;
  readonly blocksHit: number;
  /** `pg_stat_wal`. */
  readonly walRecords: number;
  readonly walFpi: number;
  readonly walBuffersFull: number;
  /** `pg_stat_io`, object `wal`: write calls and syncs of the WAL (PostgreSQL 18 moved them there from pg_stat_wal). */
  readonly walWrites: number;
  readonly walSyncs: number;
  /** `pg_stat_io`, object `relation`: data pages written by any process (backends, bgwriter, checkpointer). */
  readonly dataPageWrites: number;
}

/**
 * What PostgreSQL did during a run (totals; the report divides by invocations). The counts from cumulative statistics
 * (transactions, WAL records, syncs, pages) were read `settleS` after the run; the idle background of that time (as
 * measured before the warm-up) is subtracted from them, over `idleSubtractedS` seconds.
 */
export interface PostgresCost {
  /** Seconds between the end of the run and the reading of the cumulative statistics. */
  readonly settleS: number;
  readonly idleSubtractedS: number;
  /** Transaction ids assigned: transactions that wrote something. */
  readonly writeTransactions: number;
  /** Committed and rolled-back transactions of the runtime's database, read-only ones included. */
  readonly transactions: number;
  readonly rollbacks: number;
  /** Statements executed (pg_stat_statements `calls`, utility statements such as BEGIN included). */
  readonly statements: number;
  readonly statementExecMs: number;
  /** WAL written, from the WAL insert position: everything, commit records and background work included. */
  readonly walBytes: number;
  readonly walRecords: number;
  readonly walFpi: number;
  readonly walWrites: number;
  readonly walSyncs: number;
  readonly walBuffersFull: number;
  readonly dataPageWrites: number;
  readonly blocksRead: number;
  readonly blocksHit: number;
  /** The statements that ran most often during the run, with their totals. */
  readonly topStatements: readonly (StatementCounters & { readonly queryId: string })[];
}

export interface StorageReading {
  /** Tables of the `ratchet` schema with their indexes and TOAST, bytes. */
  readonly bytes: number;
  readonly invocations: number;
  readonly journalEntries: number;
}

/** The counts of `PostgresCost` taken from PostgreSQL's cumulative statistics. */
type CumulativeCost =
  | 'transactions'
  | 'rollbacks'
  | 'walRecords'
  | 'walFpi'
  | 'walWrites'
  | 'walSyncs'
  | 'walBuffersFull'
  | 'dataPageWrites'
  | 'blocksRead'
  | 'blocksHit';

/** PostgreSQL's background work over `seconds` without load (heartbeats, lease renewals, checkpoints). */
export interface PostgresIdle {
  readonly seconds: number;
  readonly cost: PostgresCost;
}

export interface BenchPostgres {
  /** For the runtime processes: the `ratchet` database over the server's Unix socket, as dev mode connects. */
  readonly url: string;
  /** The postmaster. */
  readonly pid: number;
  readonly dataDir: string;
  /** Settings a reader of the results needs (durability, memory, WAL). */
  readonly settings: Readonly<Record<string, string>>;
  snapshot(): Promise<PostgresSnapshot>;
  /** Rows of `ratchet.partition_lease`: the runtime's partition count, once a node has created them (else 0). */
  partitions(): Promise<number>;
  /** What the runtime's tables hold now (results and journals are kept a day by default). */
  storage(): Promise<StorageReading>;
  stop(): Promise<void>;
  /** At once and synchronously, for a harness that must exit now: immediate shutdown. */
  forceStop(): void;
}

const DATABASE = 'ratchet';
const TOP_STATEMENTS = 25;
const REPORTED_SETTINGS = [
  'server_version',
  'fsync',
  'synchronous_commit',
  'full_page_writes',
  'wal_sync_method',
  'shared_buffers',
  'max_wal_size',
  'checkpoint_timeout',
  'max_connections',
  'shared_preload_libraries',
];

/** The same URL on another database of the server. */
function onDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** `X/Y` (two hex halves) as a byte position. */
function lsnBytes(lsn: string): bigint {
  const [hi = '0', lo = '0'] = lsn.split('/');
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

export async function startBenchPostgres(): Promise<BenchPostgres> {
  const dataDir = await mkdtemp('/tmp/ratchet-bench-pg-');
  // As root, the embedded PostgreSQL runs as the `postgres` user, which must be able to reach the directory.
  await chmod(dataDir, 0o755);
  const logger = createLogger({ level: 'warn' }, { destination: pino.destination(2), base: { component: 'bench-pg' } });
  let server: EmbeddedDatabase | undefined;
  let client: pg.Client | undefined;
  const stop = async (): Promise<void> => {
    await client?.end().catch(() => undefined); // the server goes next either way
    await server?.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    // Started twice: a preloaded library is read only at server start, and ALTER SYSTEM needs a running server.
    server = await startEmbeddedDatabase(dataDir, logger);
    await withClient(onDatabase(server.url, 'postgres'), (c) =>
      c.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"),
    );
    await server.stop();
    server = await startEmbeddedDatabase(dataDir, logger);
    const adminUrl = onDatabase(server.url, 'postgres');
    // The harness reads from the `postgres` database, so its own queries are not counted as the runtime's.
    client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const rows = (
      await client.query<{ name: string; setting: string }>(
        'SELECT name, current_setting(name) AS setting FROM pg_settings WHERE name = ANY($1) ORDER BY name',
        [REPORTED_SETTINGS],
      )
    ).rows;
    const settings = Object.fromEntries(rows.map((r) => [r.name, r.setting]));
    const { url, pid } = server;
    const connected = client;
    return {
      url,
      pid,
      dataDir,
      settings,
      snapshot: () => snapshot(connected),
      partitions: () =>
        withClient(url, async (c) => {
          const res = await c.query<{ n: number }>(
            "SELECT CASE WHEN to_regclass('ratchet.partition_lease') IS NULL THEN 0 " +
              'ELSE (SELECT count(*)::int FROM ratchet.partition_lease) END AS n',
          );
          return res.rows[0]?.n ?? 0;
        }),
      storage: () =>
        withClient(url, async (c) => {
          const res = await c.query<{ bytes: string; invocations: string; journal: string }>(
            `SELECT (SELECT sum(pg_total_relation_size(oid)) FROM pg_class
                      WHERE relnamespace = 'ratchet'::regnamespace AND relkind = 'r')::text AS bytes,
                    (SELECT count(*) FROM ratchet.invocation)::text AS invocations,
                    (SELECT count(*) FROM ratchet.journal)::text AS journal`,
          );
          const row = res.rows[0];
          return {
            bytes: Number(row?.bytes ?? 0),
            invocations: Number(row?.invocations ?? 0),
            journalEntries: Number(row?.journal ?? 0),
          };
        }),
      stop,
      forceStop() {
        try {
          process.kill(pid, 'SIGQUIT');
        } catch {
          // Already gone.
        }
        try {
          rmSync(dataDir, { recursive: true, force: true, maxRetries: 3 });
        } catch {
          // Left behind under /tmp.
        }
      },
    };
  } catch (err) {
    await stop().catch(() => undefined); // the startup failure is what matters
    throw err;
  }
}

async function snapshot(client: pg.Client): Promise<PostgresSnapshot> {
  const now = await client.query<Record<string, string>>(
    `SELECT pg_current_wal_insert_lsn()::text AS lsn,
            pg_snapshot_xmax(pg_current_snapshot())::text AS next_xid`,
  );
  const statements = await client.query<{
    queryid: string;
    query: string;
    calls: string;
    total_exec_time: number;
    rows: string;
    wal_bytes: string;
  }>(
    `SELECT queryid::text, query, calls, total_exec_time, rows, wal_bytes::text
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`,
    [DATABASE],
  );
  const cumulative = await client.query<Record<string, string>>(
    `SELECT d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit,
            w.wal_records, w.wal_fpi, w.wal_buffers_full,
            (SELECT coalesce(sum(writes), 0) FROM pg_stat_io WHERE object = 'wal') AS wal_writes,
            (SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal') AS wal_syncs,
            (SELECT coalesce(sum(writes), 0) FROM pg_stat_io WHERE object = 'relation') AS data_writes
       FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = $1`,
    [DATABASE],
  );
  const n = now.rows[0]!;
  const c = cumulative.rows[0]!;
  const num = (v: string | undefined): number => Number(v ?? 0);
  return {
    walLsn: lsnBytes(n['lsn'] ?? '0/0'),
    nextXid: BigInt(n['next_xid'] ?? 0),
    statements: new Map(
      statements.rows.map((r) => [
        r.queryid,
        {
          query: r.query,
          calls: Number(r.calls),
          execMs: r.total_exec_time,
          rows: Number(r.rows),
          walBytes: Number(r.wal_bytes),
        },
      ]),
    ),
    cumulative: {
      xactCommit: num(c['xact_commit']),
      xactRollback: num(c['xact_rollback']),
      blocksRead: num(c['blks_read']),
      blocksHit: num(c['blks_hit']),
      walRecords: num(c['wal_records']),
      walFpi: num(c['wal_fpi']),
      walBuffersFull: num(c['wal_buffers_full']),
      walWrites: num(c['wal_writes']),
      walSyncs: num(c['wal_syncs']),
      dataPageWrites: num(c['data_writes']),
    },
  };
}

/**
 * PostgreSQL's work between `before` and `after` (read just after the run), with the cumulative statistics taken from
 * `settled` (read `settleS` seconds later, once the backends have reported them).
 */
export function postgresCost(
  before: PostgresSnapshot,
  after: PostgresSnapshot,
  settled: PostgresSnapshot,
  settleS: number,
  idle?: PostgresIdle,
): PostgresCost {
  const statements: (StatementCounters & { queryId: string })[] = [];
  for (const [queryId, a] of after.statements) {
    const b = before.statements.get(queryId);
    const calls = a.calls - (b?.calls ?? 0);
    if (calls <= 0) continue;
    statements.push({
      queryId,
      query: a.query,
      calls,
      execMs: a.execMs - (b?.execMs ?? 0),
      rows: a.rows - (b?.rows ?? 0),
      walBytes: a.walBytes - (b?.walBytes ?? 0),
    });
  }
  statements.sort((x, y) => y.calls - x.calls);
  const c = (key: keyof CumulativeCounters): number => settled.cumulative[key] - before.cumulative[key];
  const subtract = idle !== undefined && idle.seconds > 0 && settleS > 0;
  /** A cumulative count without the background of the settle time. */
  const net = (key: CumulativeCost, value: number): number =>
    subtract ? Math.max(0, value - (idle.cost[key] / idle.seconds) * settleS) : value;
  return {
    settleS,
    idleSubtractedS: subtract ? settleS : 0,
    writeTransactions: Number(after.nextXid - before.nextXid),
    transactions: net('transactions', c('xactCommit') + c('xactRollback')),
    rollbacks: net('rollbacks', c('xactRollback')),
    statements: statements.reduce((a, s) => a + s.calls, 0),
    statementExecMs: statements.reduce((a, s) => a + s.execMs, 0),
    walBytes: Number(after.walLsn - before.walLsn),
    walRecords: net('walRecords', c('walRecords')),
    walFpi: net('walFpi', c('walFpi')),
    walWrites: net('walWrites', c('walWrites')),
    walSyncs: net('walSyncs', c('walSyncs')),
    walBuffersFull: net('walBuffersFull', c('walBuffersFull')),
    dataPageWrites: net('dataPageWrites', c('dataPageWrites')),
    blocksRead: net('blocksRead', c('blocksRead')),
    blocksHit: net('blocksHit', c('blocksHit')),
    topStatements: statements.slice(0, TOP_STATEMENTS).map((s) => ({ ...s, query: s.query.slice(0, 300) })),
  };
}
