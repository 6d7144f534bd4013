import type pg from 'pg';
import type { Logger } from 'pino';
import { createPool } from '../storage/pg/pool.ts';
import { INTROSPECTION_SCHEMA, type IntrospectionAccess } from './access.ts';
import type { ColumnType } from './column-types.ts';
import { IntrospectionQueryError, IntrospectionRowLimitError, IntrospectionUnavailableError } from './errors.ts';
import { rewriteDataFusionSql } from './rewrite.ts';
import { introspectionTable, type ColumnDef } from './tables.ts';

/**
 * Runs introspection SQL for `POST /query`: always as the read-only role (never as the runtime's user), one statement
 * per request, in a read-only transaction that is rolled back afterwards (so nothing a statement sets survives it),
 * under a statement timeout and a row limit. PostgreSQL plans and executes; this only adapts the one DataFusion
 * spelling it cannot learn (rewrite.ts) and decides the restate column type of each result column.
 */

export interface IntrospectionQueryOptions {
  readonly statementTimeoutMs: number;
  /** Results with more rows are refused (400), not cut. */
  readonly rowLimit: number;
  readonly poolSize: number;
}

export interface ResultColumn {
  readonly name: string;
  readonly type: ColumnType;
  readonly nullable: boolean;
}

/** Values as PostgreSQL's text output (see values.ts for how each type is spelled); NULL is null. */
export interface QueryResult {
  readonly columns: readonly ResultColumn[];
  readonly rows: readonly (readonly (string | null)[])[];
}

export interface IntrospectionQueries {
  query(sql: string): Promise<QueryResult>;
  close(): Promise<void>;
}

// PostgreSQL type OIDs (pg_type.dat).
const OID = {
  bool: 16,
  bytea: 17,
  int8: 20,
  int2: 21,
  int4: 23,
  oid: 26,
  float4: 700,
  float8: 701,
  timestamp: 1114,
  timestamptz: 1184,
  interval: 1186,
  numeric: 1700,
} as const;
const INTEGER_ARRAYS = new Set([1005, 1007, 1016, 1028]);
const TEXT_ARRAYS = new Set([1009, 1015, 1014, 1003, 1002]);

/** The restate type of a computed column (no view column behind it), from its PostgreSQL type and values. */
function computedType(typeOid: number, values: () => Iterable<string | null>): ColumnType {
  switch (typeOid) {
    case OID.bool:
      return 'Boolean';
    case OID.int2:
    case OID.int4:
    case OID.int8:
    case OID.oid:
      // DataFusion's integer literals and COUNT are Int64.
      return 'Int64';
    case OID.float4:
    case OID.float8:
      return 'Float64';
    case OID.numeric: {
      // SUM of integers is numeric in PostgreSQL and an integer in DataFusion; decimals stay floats.
      for (const v of values()) {
        if (v === null) continue;
        if (!/^-?\d+$/.test(v) || BigInt(v) > 2n ** 63n - 1n || BigInt(v) < -(2n ** 63n)) return 'Float64';
      }
      return 'Int64';
    }
    case OID.bytea:
      return 'LargeBinary';
    case OID.timestamptz:
      return 'TimestampMs';
    case OID.timestamp:
      return 'TimestampMsNaive';
    case OID.interval:
      return 'DurationMs';
    default:
      if (INTEGER_ARRAYS.has(typeOid)) return 'List<Int64>';
      if (TEXT_ARRAYS.has(typeOid)) return 'List<LargeUtf8>';
      return 'LargeUtf8';
  }
}

/** Statements a cursor can run (and so be cut at the row limit); others (SHOW, EXPLAIN, …) run as they are. */
function isCursorable(sql: string): boolean {
  const stripped = sql.replace(/^(\s+|--[^\n]*(\n|$)|\/\*[\s\S]*?\*\/|\()*/, '');
  return /^(select|with|values|table)\b/i.test(stripped);
}

/** SQLSTATE classes that mean "the database is not there" rather than "the statement is wrong". */
function isUnavailable(err: { code?: unknown }): boolean {
  const code = typeof err.code === 'string' ? err.code : '';
  return (
    code.startsWith('08') || // connection exception
    code.startsWith('53') || // insufficient resources (too many connections, out of memory)
    code.startsWith('28') || // the role's login failed
    code === '57P01' || // admin shutdown
    code === '57P02' || // crash shutdown
    code === '57P03' || // cannot connect now
    code === '3D000' || // database does not exist
    ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH'].includes(code)
  );
}

function isPgError(err: unknown): err is Error & { code: string; hint?: string; detail?: string } {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string';
}

/** Everything as text: values are rendered from PostgreSQL's own output (values.ts). */
const TEXT_TYPES = { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig;

type ExtendedQuery = pg.QueryConfig & { queryMode: 'extended' };

/** A result column's view column: the table OID and attribute number PostgreSQL reports in its row description. */
type ViewColumns = ReadonlyMap<number, ColumnDef> | null;

export class PgIntrospectionQueries implements IntrospectionQueries {
  private readonly pool: pg.Pool | undefined;
  /** Table OID → columns of one of our views by attribute number, or null for any other relation. */
  private readonly relations = new Map<number, ViewColumns>();

  constructor(
    private readonly access: IntrospectionAccess | undefined,
    private readonly options: IntrospectionQueryOptions,
    private readonly logger: Logger,
  ) {
    this.pool =
      access === undefined
        ? undefined
        : createPool({ url: access.url, max: options.poolSize, applicationName: 'ratchet introspection' });
  }

  async close(): Promise<void> {
    await this.pool?.end();
  }

  async query(sql: string): Promise<QueryResult> {
    if (this.pool === undefined) {
      throw new IntrospectionUnavailableError(
        'SQL introspection is unavailable: the runtime could not create its read-only database role ' +
          '(the database user needs CREATEROLE)',
      );
    }
    const statement = rewriteDataFusionSql(sql).replace(/[\s;]+$/, '');
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw new IntrospectionUnavailableError(`The database is unavailable: ${(err as Error).message}`, { cause: err });
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN READ ONLY');
      try {
        await client.query(
          `SET LOCAL statement_timeout = ${Math.max(1, Math.floor(this.options.statementTimeoutMs))};
           SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'iso_8601';
           SET LOCAL bytea_output = 'hex'; SET LOCAL search_path = ${INTROSPECTION_SCHEMA}, pg_catalog`,
        );
        const limit = this.options.rowLimit;
        let result: pg.QueryResult<string[]>;
        // Extended protocol: exactly one statement, whatever the text holds.
        if (isCursorable(statement)) {
          await client.query({
            text: `DECLARE ratchet_query NO SCROLL CURSOR FOR ${statement}`,
            queryMode: 'extended',
          } as ExtendedQuery);
          result = await client.query<string[]>({
            text: `FETCH FORWARD ${limit + 1} FROM ratchet_query`,
            rowMode: 'array',
            types: TEXT_TYPES,
          });
        } else {
          result = await client.query<string[]>({
            text: statement,
            rowMode: 'array',
            types: TEXT_TYPES,
            queryMode: 'extended',
          } as ExtendedQuery & { rowMode: 'array' });
        }
        if (result.rows.length > limit) throw new IntrospectionRowLimitError(limit);
        const columns = await this.resultColumns(client, result);
        return { columns, rows: result.rows };
      } finally {
        // Always rolled back: a SET or set_config() in the statement must not outlive it on the pooled connection.
        await client.query('ROLLBACK').catch((err: unknown) => {
          broken = err as Error;
        });
      }
    } catch (err) {
      if (err instanceof IntrospectionRowLimitError) throw err;
      if (isPgError(err) || (err instanceof Error && /Connection terminated|timeout/i.test(err.message))) {
        if (!isPgError(err) || isUnavailable(err)) {
          broken = err;
          throw new IntrospectionUnavailableError(`The database is unavailable: ${err.message}`, { cause: err });
        }
        const hint = err.hint === undefined ? '' : ` (${err.hint})`;
        throw new IntrospectionQueryError(`${err.message}${hint}`, err.code, { cause: err });
      }
      throw err;
    } finally {
      client.release(broken);
    }
  }

  private async resultColumns(client: pg.PoolClient, result: pg.QueryResult<string[]>): Promise<ResultColumn[]> {
    const unknown = [...new Set(result.fields.map((f) => f.tableID))].filter(
      (oid) => oid !== 0 && !this.relations.has(oid),
    );
    if (unknown.length > 0) await this.loadRelations(client, unknown);
    return result.fields.map((field, index) => {
      const view = field.tableID === 0 ? undefined : this.relations.get(field.tableID);
      const def = view?.get(field.columnID);
      if (def !== undefined) return { name: field.name, type: def.type, nullable: def.notNull !== true };
      const values = function* (): Iterable<string | null> {
        for (const row of result.rows) yield row[index] ?? null;
      };
      return { name: field.name, type: computedType(field.dataTypeID, values), nullable: true };
    });
  }

  /** Which of these relations are our views (recreated views get new OIDs: looked up when first seen). */
  private async loadRelations(client: pg.PoolClient, oids: number[]): Promise<void> {
    const res = await client.query<{ oid: number; relname: string; attnum: number; attname: string }>(
      `SELECT c.oid::integer AS oid, c.relname, a.attnum, a.attname
       FROM pg_catalog.pg_class c
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       WHERE c.oid = ANY($1::oid[]) AND n.nspname = $2`,
      [oids, INTROSPECTION_SCHEMA],
    );
    for (const oid of oids) this.relations.set(oid, null);
    const found = new Map<number, Map<number, ColumnDef>>();
    for (const row of res.rows) {
      const def = introspectionTable(row.relname)?.columns.find((c) => c.name === row.attname);
      if (def === undefined) continue;
      let columns = found.get(row.oid);
      if (columns === undefined) found.set(row.oid, (columns = new Map<number, ColumnDef>()));
      columns.set(row.attnum, def);
    }
    for (const [oid, columns] of found) this.relations.set(oid, columns);
    this.logger.debug({ relations: found.size }, 'introspection: resolved result column types');
  }
}
