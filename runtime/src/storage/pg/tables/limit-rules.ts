import type pg from 'pg';
import {
  applyDeletes,
  applyUpserts,
  type RuleBookStore,
  type RuleDelete,
  type RuleUpsert,
  type StoredRule,
} from '../../../flow-control/rule-book.ts';
import { inTransaction } from '../pool.ts';

/**
 * `ratchet.limit_rule`: the limiter's rule book. A batch runs in one transaction that locks the book's version row,
 * so batches from any node apply one after another, and bumps that version when it changed something: runtime
 * processes watch it (see flow-control/rules-watch.ts) and reload the book when it moves.
 */

interface RuleRow {
  pattern: string;
  concurrency: string | null;
  description: string | null;
  disabled: boolean;
  version: number;
  last_modified: Date;
}

function toRule(r: RuleRow): StoredRule {
  return {
    pattern: r.pattern,
    concurrency: r.concurrency === null ? undefined : Number(r.concurrency),
    description: r.description ?? undefined,
    disabled: r.disabled,
    version: r.version,
    lastModified: r.last_modified,
  };
}

const SELECT_RULES = `SELECT pattern, concurrency, description, disabled, version, last_modified FROM ratchet.limit_rule`;

export class PgRuleBookStore implements RuleBookStore {
  constructor(private readonly pool: pg.Pool) {}

  async list(): Promise<StoredRule[]> {
    const res = await this.pool.query<RuleRow>(`${SELECT_RULES} ORDER BY pattern`);
    return res.rows.map(toRule);
  }

  private async lockBook(client: pg.PoolClient): Promise<{ version: number; rules: Map<string, StoredRule> }> {
    const v = await client.query<{ value: string }>(
      `SELECT value FROM ratchet.meta WHERE key = 'rule_book_version' FOR UPDATE`,
    );
    const rows = await client.query<RuleRow>(SELECT_RULES);
    return { version: Number(v.rows[0]?.value ?? '0'), rules: new Map(rows.rows.map((r) => [r.pattern, toRule(r)])) };
  }

  async upsert(batch: readonly RuleUpsert[]): Promise<StoredRule[]> {
    if (batch.length === 0) return [];
    return inTransaction(this.pool, async (client) => {
      const book = await this.lockBook(client);
      const next = book.version + 1;
      const { rules, changed } = applyUpserts(book.rules, batch, next, new Date());
      if (changed.size > 0) {
        for (const pattern of changed) {
          const r = rules.get(pattern)!;
          await client.query(
            `INSERT INTO ratchet.limit_rule (pattern, concurrency, description, disabled, version, last_modified)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (pattern) DO UPDATE SET concurrency = EXCLUDED.concurrency,
               description = EXCLUDED.description, disabled = EXCLUDED.disabled, version = EXCLUDED.version,
               last_modified = EXCLUDED.last_modified`,
            [r.pattern, r.concurrency ?? null, r.description ?? null, r.disabled, r.version, r.lastModified],
          );
        }
        await this.bump(client, next);
      }
      return batch.map((u) => rules.get(u.pattern.text)!);
    });
  }

  async bulkDelete(batch: readonly RuleDelete[]): Promise<string[]> {
    if (batch.length === 0) return [];
    return inTransaction(this.pool, async (client) => {
      const book = await this.lockBook(client);
      const { removed } = applyDeletes(book.rules, batch);
      if (removed.length > 0) {
        await client.query(`DELETE FROM ratchet.limit_rule WHERE pattern = ANY($1::text[])`, [removed]);
        await this.bump(client, book.version + 1);
      }
      return removed;
    });
  }

  private async bump(client: pg.PoolClient, version: number): Promise<void> {
    await client.query(`UPDATE ratchet.meta SET value = $1 WHERE key = 'rule_book_version'`, [String(version)]);
  }

  async version(): Promise<number> {
    const res = await this.pool.query<{ value: string }>(
      `SELECT value FROM ratchet.meta WHERE key = 'rule_book_version'`,
    );
    return Number(res.rows[0]?.value ?? '0');
  }
}
