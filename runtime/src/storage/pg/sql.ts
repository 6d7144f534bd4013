import type { JournalRow } from '../rows.ts';

export type { JournalRow };

/**
 * What the group committer executes: SQL statements plus journal rows, committed atomically and fenced by the
 * partitions they name. The engine never builds these; storage/pg/storage.ts translates its write batches.
 */
export interface Stmt {
  /** Prepared-statement name; statements on the hot path are named so PostgreSQL plans them once per connection. */
  name?: string;
  text: string;
  values: unknown[];
  onResult?: (rows: Record<string, unknown>[]) => void;
  /**
   * Evaluated when the statement's turn comes in its transaction: false skips it. Lets a statement depend on the
   * result of an earlier one in the same write (e.g. take a key's lock only if the invocation was really inserted).
   */
  when?: () => boolean;
}

export interface WriteOp {
  partitions: number[];
  stmts: Stmt[];
  journal: JournalRow[];
  /**
   * Ordering keys: the partition keys of every invocation (and virtual-object or workflow key) whose rows this write
   * touches or whose rows it assumes. Writes that share a key commit in submission order and never in two
   * concurrent transactions; writes with disjoint keys may commit concurrently, in any order. Without keys the
   * write is a barrier, ordered against every other write.
   */
  keys?: string[];
}
