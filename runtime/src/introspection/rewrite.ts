/**
 * The one DataFusion spelling PostgreSQL cannot be taught with functions or operators (views.ts has those), and the
 * narrow rewrite that handles it. Shared by `POST /query` and the wire-protocol listener. It is not a parser: it
 * recognises exactly one statement shape, outside string literals, quoted identifiers and comments, and leaves
 * everything else alone.
 *
 * The restate CLI counts invocations with
 *
 *     SELECT COUNT(1) FROM (SELECT * FROM sys_invocation inv LIMIT 50000) WHERE inv.target_service_name IN (…)
 *
 * DataFusion lets the outer query name the alias of the table inside an unaliased derived table; PostgreSQL does
 * not (and before version 16 wants an alias on every derived table). The derived table is given the inner alias:
 * `(SELECT * FROM sys_invocation inv LIMIT 50000) AS inv`, which means the same thing in both.
 */

/** Words that may follow an unaliased derived table (anything else there is its alias). */
const CLAUSE_WORDS = new Set([
  'where',
  'group',
  'order',
  'limit',
  'offset',
  'having',
  'window',
  'union',
  'except',
  'intersect',
  'fetch',
  'join',
  'inner',
  'left',
  'right',
  'full',
  'cross',
  'natural',
  'on',
]);

/** Not aliases, although they look like one after a table name. */
const RESERVED_AFTER_TABLE = new Set([...CLAUSE_WORDS, 'as', 'tablesample']);

const DERIVED_TABLE =
  /\bfrom\s*\(\s*select\s+\*\s+from\s+([a-z_][a-z0-9_]*)\s+(?:as\s+)?([a-z_][a-z0-9_]*)(\s+limit\s+\d+)?\s*\)/giy;

/**
 * The statement with string literals, quoted identifiers and comments blanked out (same length, so positions match),
 * which is what the pattern is matched against.
 */
function codeOnly(sql: string): string {
  const out = sql.split('');
  let i = 0;
  const blank = (from: number, to: number): void => {
    for (let k = from; k < to && k < out.length; k++) if (out[k] !== '\n') out[k] = ' ';
  };
  while (i < sql.length) {
    const c = sql[i];
    const next = sql[i + 1];
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < sql.length) {
        if (sql[j] === c) {
          if (sql[j + 1] === c) j += 2;
          else break;
        } else j++;
      }
      blank(i, j + 1);
      i = j + 1;
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      const j = end === -1 ? sql.length : end;
      blank(i, j);
      i = j;
    } else if (c === '/' && next === '*') {
      const end = sql.indexOf('*/', i + 2);
      const j = end === -1 ? sql.length : end + 2;
      blank(i, j);
      i = j;
    } else if (c === '$') {
      // Dollar quoting: $tag$ … $tag$.
      const m = /^\$([a-z_][a-z0-9_]*)?\$/i.exec(sql.slice(i));
      if (m === null) {
        i++;
        continue;
      }
      const end = sql.indexOf(m[0], i + m[0].length);
      const j = end === -1 ? sql.length : end + m[0].length;
      blank(i, j);
      i = j;
    } else {
      i++;
    }
  }
  return out.join('');
}

/** The word right after `pos`, lower-cased, or undefined at the end of the statement / before punctuation. */
function wordAt(code: string, pos: number): string | undefined {
  const m = /^\s*([a-z_][a-z0-9_]*)/i.exec(code.slice(pos));
  return m?.[1]?.toLowerCase();
}

export function rewriteDataFusionSql(sql: string): string {
  const code = codeOnly(sql);
  const inserts: { at: number; text: string }[] = [];
  for (let start = code.search(/\bfrom\s*\(/i); start !== -1;) {
    DERIVED_TABLE.lastIndex = start;
    const m = DERIVED_TABLE.exec(code);
    if (m !== null) {
      const alias = m[2]!;
      const end = start + m[0].length;
      const following = wordAt(code, end);
      if (!RESERVED_AFTER_TABLE.has(alias.toLowerCase()) && (following === undefined || CLAUSE_WORDS.has(following))) {
        inserts.push({ at: end, text: ` AS ${alias}` });
      }
    }
    const rest = code.slice(start + 1).search(/\bfrom\s*\(/i);
    start = rest === -1 ? -1 : start + 1 + rest;
  }
  let out = sql;
  for (const { at, text } of inserts.reverse()) out = out.slice(0, at) + text + out.slice(at);
  return out;
}
