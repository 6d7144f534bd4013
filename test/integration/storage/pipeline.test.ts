import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stmt } from '../../../runtime/src/storage/pg/sql.ts';
import { ParameterError, runPipeline, timestamp } from '../../../runtime/src/storage/pg/pipeline.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * The group committer sends a transaction's statements as one extended-protocol pipeline (`runPipeline`) with its own
 * encoding of values (bytes and arrays of bytes in binary). Whatever the values hold, a statement must mean exactly
 * what node-postgres's own parameterised query means; and the pipeline must be one transaction.
 */
let db: TestDatabase;
let client: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase();
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query('CREATE TABLE pipeline_t (id int PRIMARY KEY, v text)');
});

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

const tricky = [
  "it's",
  'back\\slash \\x00 and "quotes"',
  "'); DROP TABLE x; --",
  '$1 $2 $$ dollar',
  'ünïcödé ✓ \u{1F600}',
  '',
];

describe('pipeline statement values', () => {
  it.each(tricky)('keeps the text %j intact', async (value) => {
    const stmt: Stmt = { text: 'SELECT $1::text AS v, length($1) AS n', values: [value] };
    const [rows] = await runPipeline(client, [{ ...stmt, onResult: () => undefined }]);
    const prepared = await client.query(stmt.text, stmt.values);
    expect(rows).toEqual(prepared.rows);
    expect((rows![0] as { v: string }).v).toBe(value);
  });

  it('keeps bytes, arrays of bytes and text, dates, numbers, booleans, JSON and NULL intact', async () => {
    const values = [
      Buffer.from([0, 1, 0x27, 0x5c, 0xff]),
      [Buffer.from('a"b\\c'), null, Buffer.alloc(0), new Uint8Array([9, 8, 7]).subarray(1)],
      ['x', 'y"z', 'back\\slash', null, ''],
      new Date('2026-11-22T01:02:03.456Z'),
      -42,
      '9223372036854775807',
      true,
      JSON.stringify({ a: "it's", b: [1, 2] }),
      null,
      undefined,
      new Uint8Array([1, 2, 3, 4]).subarray(1, 3),
      [null, null],
      [],
      [1n, -2n],
    ];
    const stmt: Stmt = {
      name: 'pipeline_values',
      text: `SELECT $1::bytea AS a, $2::bytea[] AS b, $3::text[] AS c, $4::timestamptz AS d, $5::int AS e,
               $6::bigint AS f, $7::boolean AS g, $8::jsonb AS h, $9::text AS i, $10::int AS j, $11::bytea AS k,
               $12::bytea[] AS l, $13::int[] AS m, $14::bigint[] AS n`,
      values,
    };
    const [rows] = await runPipeline(client, [{ ...stmt, onResult: () => undefined }]);
    const prepared = await client.query(
      stmt.text,
      values.map((v) =>
        v instanceof Uint8Array && !Buffer.isBuffer(v)
          ? Buffer.from(v)
          : Array.isArray(v)
            ? v.map((x) => (x instanceof Uint8Array ? Buffer.from(x) : typeof x === 'bigint' ? String(x) : x))
            : (v ?? null),
      ),
    );
    expect(rows).toEqual(prepared.rows);
    const row = rows![0] as Record<string, unknown>;
    expect(row.b).toEqual([Buffer.from('a"b\\c'), null, Buffer.alloc(0), Buffer.from([8, 7])]);
    expect(row.c).toEqual(['x', 'y"z', 'back\\slash', null, '']);
    expect(row.k).toEqual(Buffer.from([2, 3]));
    // A named statement runs again from its parsed form on the same connection.
    const [again] = await runPipeline(client, [{ ...stmt, onResult: () => undefined }]);
    expect(again).toEqual(rows);
  });

  it('returns each statement rows in order, and only for statements that want them', async () => {
    const results = await runPipeline(client, [
      { text: 'SELECT 1 AS one', values: [], onResult: () => undefined },
      { name: 'pipeline_ins', text: 'INSERT INTO pipeline_t VALUES ($1, $2)', values: [1, 'a'] },
      { text: 'SELECT id, v FROM pipeline_t ORDER BY id', values: [], onResult: () => undefined },
    ]);
    expect(results).toEqual([[{ one: 1 }], [], [{ id: 1, v: 'a' }]]);
  });

  it('is one transaction: a failing statement rolls back the statements before it and skips those after', async () => {
    await expect(
      runPipeline(client, [
        { name: 'pipeline_ins', text: 'INSERT INTO pipeline_t VALUES ($1, $2)', values: [2, 'b'] },
        { name: 'pipeline_ins', text: 'INSERT INTO pipeline_t VALUES ($1, $2)', values: [1, 'duplicate'] },
        { name: 'pipeline_ins', text: 'INSERT INTO pipeline_t VALUES ($1, $2)', values: [3, 'c'] },
      ]),
    ).rejects.toMatchObject({ code: '23505', severity: 'ERROR' });
    const { rows } = await client.query('SELECT id FROM pipeline_t ORDER BY id');
    expect(rows).toEqual([{ id: 1 }]);
    // The connection is usable again afterwards (the Sync ended the failed transaction).
    expect((await client.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
  });

  it('refuses a value without a PostgreSQL form before sending anything', async () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    await expect(
      runPipeline(client, [
        { name: 'pipeline_ins', text: 'INSERT INTO pipeline_t VALUES ($1, $2)', values: [4, 'd'] },
        { text: 'SELECT $1::jsonb', values: [circular] },
      ]),
    ).rejects.toBeInstanceOf(ParameterError);
    const { rows } = await client.query('SELECT id FROM pipeline_t WHERE id = 4');
    expect(rows).toEqual([]);
  });

  it('refuses one statement name for two texts', async () => {
    await expect(runPipeline(client, [{ name: 'pipeline_ins', text: 'SELECT 1', values: [] }])).rejects.toThrow(
      /two different statements/,
    );
  });
});

describe('timestamp', () => {
  it('is toISOString for any date, across seconds, before 1970 and beyond year 9999', () => {
    const base = Date.UTC(2026, 10, 22, 5, 59, 59, 990);
    const times = [
      base,
      base + 5,
      base + 9,
      base + 10,
      base + 99,
      base + 100,
      base + 1000,
      base,
      0,
      -1,
      -999,
      -1000,
      -1001,
      Date.UTC(-1, 0, 1),
      Date.UTC(10000, 0, 1, 0, 0, 0, 7),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      Date.UTC(2026, 10, 22, 23, 59, 59, 999),
      Date.UTC(2026, 10, 23, 0, 0, 0, 0),
      Date.UTC(2026, 10, 22, 12, 0, 0, 1),
    ];
    for (const t of times) expect(timestamp(new Date(t))).toBe(new Date(t).toISOString());
  });

  it('throws for an invalid date, as toISOString does', () => {
    expect(() => timestamp(new Date(Number.NaN))).toThrow(RangeError);
  });
});
