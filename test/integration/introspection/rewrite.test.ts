import { describe, expect, it } from 'vitest';
import { rewriteDataFusionSql } from '../../../runtime/src/introspection/rewrite.ts';

/**
 * The one statement rewrite (rewrite.ts): an unaliased derived table `(SELECT * FROM t alias [LIMIT n])` gets the
 * inner alias, so the outer query may name it as DataFusion allows. Anything else is left exactly as it was. (That
 * PostgreSQL then runs the CLI's statements is checked end to end in query.test.ts.)
 */
describe('rewriteDataFusionSql', () => {
  it('gives the restate CLI’s unaliased derived table its inner alias', () => {
    const sql = `SELECT COUNT(1) FROM (SELECT
            *
        FROM sys_invocation inv
        LIMIT 50000
        )
        WHERE inv.target_service_name IN ('Counter') AND status IN ('completed')`;
    expect(rewriteDataFusionSql(sql)).toBe(sql.replace('LIMIT 50000\n        )', 'LIMIT 50000\n        ) AS inv'));
    expect(rewriteDataFusionSql('SELECT COUNT(1) FROM (SELECT * FROM sys_invocation inv LIMIT 5)')).toBe(
      'SELECT COUNT(1) FROM (SELECT * FROM sys_invocation inv LIMIT 5) AS inv',
    );
  });

  it('leaves aliased, different and quoted statements alone', () => {
    for (const sql of [
      'SELECT * FROM (SELECT * FROM sys_invocation inv LIMIT 5) AS x',
      'SELECT * FROM (SELECT * FROM sys_invocation inv LIMIT 5) x WHERE x.id = 1',
      'SELECT * FROM (SELECT id FROM sys_invocation inv LIMIT 5) WHERE true',
      'SELECT * FROM (SELECT * FROM sys_invocation WHERE id = 1)',
      "SELECT 'FROM (SELECT * FROM sys_invocation inv LIMIT 5) WHERE' AS text",
      'SELECT 1 -- FROM (SELECT * FROM sys_invocation inv LIMIT 5)',
      'SELECT 1 /* FROM (SELECT * FROM sys_invocation inv) */',
      'SELECT $$FROM (SELECT * FROM sys_invocation inv)$$',
      'SELECT * FROM (SELECT * FROM sys_invocation LIMIT 5)',
      'select id, status from sys_invocation limit 3',
    ]) {
      expect(rewriteDataFusionSql(sql), sql).toBe(sql);
    }
  });
});
