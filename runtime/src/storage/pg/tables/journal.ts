import type pg from 'pg';
import type { StoredEntry } from '../../rows.ts';

export type { StoredEntry };

export async function loadJournal(db: pg.Pool | pg.ClientBase, invocationId: string): Promise<StoredEntry[]> {
  const res = await db.query({
    name: 'journal_load',
    text: `SELECT index, entry_type, completion_id, signal_idx, signal_name, raw FROM ratchet.journal
           WHERE invocation_id = $1 ORDER BY index`,
    values: [invocationId],
  });
  return (res.rows as Record<string, unknown>[]).map((r) => ({
    index: r.index as number,
    entryType: r.entry_type as number,
    completionId: r.completion_id as number | null,
    signalIdx: r.signal_idx as number | null,
    signalName: r.signal_name as string | null,
    raw: r.raw as Buffer,
  }));
}
