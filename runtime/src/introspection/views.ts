import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from 'pino';
import { INTROSPECTION_SCHEMA } from './access.ts';
import { pgTypeOf } from './column-types.ts';
import { INTROSPECTION_TABLES, type TableDef } from './tables.ts';

/**
 * The contents of the introspection schema: helper functions, the DataFusion compatibility layer, and one view per
 * table of tables.ts. PostgreSQL is the query engine; this only teaches it the few DataFusion spellings the restate
 * CLI uses, where PostgreSQL can learn them:
 *
 * - `a == b`: an operator (any two comparable types), as DataFusion's equality.
 * - `first_value(x ORDER BY y)` as an aggregate: PostgreSQL's `first_value` is a window function only. An aggregate
 *   of the same signature in this schema shadows it, because sessions put the schema before `pg_catalog`; as a
 *   window function (`OVER (...)`) it still returns the first row of the frame.
 *
 * What needs a change of the statement itself is in rewrite.ts. `information_schema` is PostgreSQL's own: it lists
 * what the read-only role may read, i.e. exactly these views (with `table_schema` = `ratchet_sql`).
 *
 * The schema is rebuilt (dropped and created again) only when this definition changes; its hash is kept in
 * `ratchet.meta`, and processes starting together serialize on an advisory lock.
 */

const S = INTROSPECTION_SCHEMA;

/**
 * PL/pgSQL that reads one varint of `msg` at `pos` into `target` (`digit`: the 7-bit group `b & 127` at `shift`,
 * in the target's type), and returns from the function when the message ends first or the varint runs past
 * `maxShift`. The three varints of `protobuf_field` (tag, value, length) are read alike.
 */
function readVarint(target: string, maxShift: number, digit: string): string {
  return `${target} := 0; shift := 0;
    LOOP
      IF pos >= n OR shift > ${maxShift} THEN RETURN; END IF;
      b := get_byte(msg, pos); pos := pos + 1;
      ${target} := ${target} + ${digit};
      EXIT WHEN b < 128;
      shift := shift + 7;
    END LOOP;`;
}

const BIGINT_DIGIT = '((b & 127)::bigint << shift)';

const FUNCTIONS = `
-- u64 values stored as i64 (two's complement), shown unsigned.
CREATE FUNCTION ${S}.u64(bigint) RETURNS numeric LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT CASE WHEN $1 < 0 THEN $1::numeric + 18446744073709551616 ELSE $1::numeric END $$;

-- Bytes as text when they are valid UTF-8, else NULL (restate's *_utf8 columns).
CREATE FUNCTION ${S}.utf8_or_null(bytea) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  RETURN convert_from($1, 'UTF8');
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;

-- The first occurrence of a top-level protobuf field of a message: wire type 0 (varint, in num) or 2 (bytes).
-- Journal entries are stored as protocol bytes; the views read entry names and completion ids from them.
CREATE FUNCTION ${S}.protobuf_field(msg bytea, wanted integer, OUT wire integer, OUT num numeric, OUT bytes bytea)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  pos integer := 0;
  n integer := length(msg);
  b integer;
  shift integer;
  tag bigint;
  v numeric;
  len bigint;
  field bigint;
  wt integer;
BEGIN
  WHILE pos < n LOOP
    ${readVarint('tag', 35, BIGINT_DIGIT)}
    field := tag >> 3;
    wt := (tag & 7)::integer;
    IF wt = 0 THEN
      ${readVarint('v', 63, `(b & 127) * (2::numeric ^ shift)`)}
      IF field = wanted THEN wire := 0; num := v; RETURN; END IF;
    ELSIF wt = 2 THEN
      ${readVarint('len', 35, BIGINT_DIGIT)}
      IF pos + len > n THEN RETURN; END IF;
      IF field = wanted THEN wire := 2; bytes := substring(msg FROM pos + 1 FOR len::integer); RETURN; END IF;
      pos := pos + len::integer;
    ELSIF wt = 1 THEN
      pos := pos + 8;
    ELSIF wt = 5 THEN
      pos := pos + 4;
    ELSE
      RETURN;
    END IF;
  END LOOP;
END $$;

CREATE FUNCTION ${S}.protobuf_uint(msg bytea, field integer) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT CASE WHEN f.wire = 0 AND f.num <= 9223372036854775807 THEN f.num::bigint END
        FROM ${S}.protobuf_field(msg, field) f $$;

CREATE FUNCTION ${S}.protobuf_string(msg bytea, field integer) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT CASE WHEN f.wire = 2 THEN ${S}.utf8_or_null(f.bytes) END FROM ${S}.protobuf_field(msg, field) f $$;

-- Flow control: the enabled rule of the limiter's rule book that applies to a counter (a scope; with l1 a first
-- limit-key level; with l2 a second), the most specific first: an exact scope outranks '*', then level 1, then level 2.
-- Reads the rule book with the owner's rights, as the views do.
CREATE FUNCTION ${S}.rule_match(scope text, l1 text, l2 text, OUT pattern text, OUT concurrency bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
  SELECT r.pattern, r.concurrency FROM ratchet.limit_rule r,
    LATERAL (SELECT string_to_array(r.pattern, '/') AS p) c
  WHERE NOT r.disabled AND r.concurrency IS NOT NULL
    AND cardinality(c.p) = CASE WHEN l1 IS NULL THEN 1 WHEN l2 IS NULL THEN 2 ELSE 3 END
    AND (c.p[1] = '*' OR c.p[1] = scope)
    AND (l1 IS NULL OR c.p[2] = '*' OR c.p[2] = l1)
    AND (l2 IS NULL OR c.p[3] = '*' OR c.p[3] = l2)
  ORDER BY (CASE WHEN c.p[1] = '*' THEN 0 ELSE 4 END) + (CASE WHEN l1 IS NULL OR c.p[2] = '*' THEN 0 ELSE 2 END)
    + (CASE WHEN l2 IS NULL OR c.p[3] = '*' THEN 0 ELSE 1 END) DESC
  LIMIT 1 $$;
CREATE FUNCTION ${S}.rule_limit(scope text, l1 text, l2 text) RETURNS bigint LANGUAGE sql STABLE
  AS $$ SELECT (${S}.rule_match(scope, l1, l2)).concurrency $$;
CREATE FUNCTION ${S}.rule_pattern(scope text, l1 text, l2 text) RETURNS text LANGUAGE sql STABLE
  AS $$ SELECT (${S}.rule_match(scope, l1, l2)).pattern $$;

-- DataFusion: a == b.
CREATE FUNCTION ${S}.datafusion_eq(anycompatible, anycompatible) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT $1 = $2 $$;
CREATE OPERATOR ${S}.== (FUNCTION = ${S}.datafusion_eq, LEFTARG = anycompatible, RIGHTARG = anycompatible,
  COMMUTATOR = OPERATOR(${S}.==));

-- DataFusion: first_value(x [ORDER BY y]) as an aggregate (NULL counts as a value, as there).
CREATE FUNCTION ${S}.first_value_step(anyarray, anyelement) RETURNS anyarray LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE WHEN $1 IS NULL THEN ARRAY[$2] ELSE $1 END $$;
CREATE FUNCTION ${S}.first_value_final(anyarray) RETURNS anyelement LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT $1[1] $$;
CREATE AGGREGATE ${S}.first_value(anyelement) (
  SFUNC = ${S}.first_value_step, STYPE = anyarray, FINALFUNC = ${S}.first_value_final
);
`;

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function viewSql(table: TableDef): string {
  const select = table.columns
    .map((c) => `(${c.sql ?? 'NULL'})::${c.pg ?? pgTypeOf(c.type)} AS ${quoteIdent(c.name)}`)
    .join(',\n  ');
  const from = table.from ?? 'WHERE false';
  return `CREATE VIEW ${S}.${quoteIdent(table.name)} AS SELECT\n  ${select}\n${from};`;
}

/** The whole schema's contents, as one script. */
export function introspectionSchemaSql(): string {
  return [FUNCTIONS, ...INTROSPECTION_TABLES.map(viewSql)].join('\n\n');
}

const META_KEY = 'introspection_schema_hash';

/**
 * Brings the introspection schema up to date with this process's definition. Returns true when it was (re)built.
 * Grants are not made here: `ensureIntrospectionAccess` (access.ts) must run afterwards.
 */
export async function ensureIntrospectionViews(pool: pg.Pool, logger: Logger): Promise<boolean> {
  const script = introspectionSchemaSql();
  const hash = createHash('sha256').update(script).digest('hex');
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('ratchet_sql_views'))`);
      const stored = await client.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = $1`, [META_KEY]);
      if (stored.rows[0]?.value === hash) {
        await client.query('COMMIT');
        return false;
      }
      // Everything in the schema is derived from this definition: dropping it whole leaves nothing stale behind.
      await client.query(`DROP SCHEMA IF EXISTS ${S} CASCADE`);
      await client.query(`CREATE SCHEMA ${S}`);
      await client.query(script);
      await client.query(
        `INSERT INTO ratchet.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
        [META_KEY, hash],
      );
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    logger.info({ tables: INTROSPECTION_TABLES.length }, 'introspection views created');
    return true;
  } finally {
    client.release();
  }
}
