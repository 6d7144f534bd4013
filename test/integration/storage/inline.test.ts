import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stmt } from '../../../runtime/src/storage/api.ts';
import { inlineValues } from '../../../runtime/src/storage/pg/group-commit.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * The group committer sends runs of statements as one message with their values inlined as literals. Whatever the
 * values hold (quotes, backslashes, SQL, bytes, arrays, dates, JSON), the inlined statement must mean exactly what
 * the parameterised one means.
 */
let db: TestDatabase;
let client: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase();
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
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

describe('inlined statement values', () => {
  it.each(tricky)('keeps the text %j intact', async (value) => {
    const stmt: Stmt = { text: 'SELECT $1::text AS v, length($1) AS n', values: [value] };
    const inlined = await client.query(inlineValues(client, stmt));
    const prepared = await client.query(stmt.text, stmt.values);
    expect(inlined.rows).toEqual(prepared.rows);
    expect((inlined.rows[0] as { v: string }).v).toBe(value);
  });

  it('keeps bytes, arrays of bytes and text, dates, numbers, booleans, JSON and NULL intact', async () => {
    const values = [
      Buffer.from([0, 1, 0x27, 0x5c, 0xff]),
      [Buffer.from('a"b\\c'), null, Buffer.alloc(0)],
      ['x', 'y"z', 'back\\slash', null, ''],
      new Date('2026-11-22T01:02:03.456Z'),
      -42,
      '9223372036854775807',
      true,
      JSON.stringify({ a: "it's", b: [1, 2] }),
      null,
      undefined,
    ];
    const stmt: Stmt = {
      text: `SELECT $1::bytea AS a, $2::bytea[] AS b, $3::text[] AS c, $4::timestamptz AS d, $5::int AS e,
               $6::bigint AS f, $7::boolean AS g, $8::jsonb AS h, $9::text AS i, $10::int AS j`,
      values,
    };
    const inlined = await client.query(inlineValues(client, stmt));
    const prepared = await client.query(
      stmt.text,
      values.map((v) => v ?? null),
    );
    expect(inlined.rows).toEqual(prepared.rows);
    expect((inlined.rows[0] as { c: unknown }).c).toEqual(['x', 'y"z', 'back\\slash', null, '']);
  });
});
