import type pg from 'pg';
import type { Stmt } from '../sql.ts';
import type { TimerKind, TimerRow } from '../../rows.ts';

export type { TimerRow };

export function insertTimer(t: Omit<TimerRow, 'id'>, onId: (id: string) => void): Stmt {
  return {
    name: 'timer_insert',
    text: `INSERT INTO ratchet.timer (partition_id, fire_at, invocation_id, kind, completion_id)
           VALUES ($1, $2, $3, $4, $5) RETURNING id::text`,
    values: [t.partitionId, t.fireAt, t.invocationId, t.kind, t.completionId],
    onResult: (rows) => onId((rows[0] as { id: string }).id),
  };
}

export function deleteTimer(id: string): Stmt {
  return { name: 'timer_delete', text: 'DELETE FROM ratchet.timer WHERE id = $1::bigint', values: [id] };
}

export function deleteTimersOf(invocationId: string): Stmt {
  return {
    name: 'timer_delete_of',
    text: 'DELETE FROM ratchet.timer WHERE invocation_id = $1',
    values: [invocationId],
  };
}

export async function listTimers(db: pg.Pool, partitions: number[]): Promise<TimerRow[]> {
  const res = await db.query(
    `SELECT id::text, partition_id, fire_at, invocation_id, kind, completion_id FROM ratchet.timer
     WHERE partition_id = ANY($1::int[]) ORDER BY fire_at`,
    [partitions],
  );
  return (res.rows as Record<string, unknown>[]).map((r) => ({
    id: r.id as string,
    partitionId: r.partition_id as number,
    fireAt: r.fire_at as Date,
    invocationId: r.invocation_id as string,
    kind: r.kind as TimerKind,
    completionId: r.completion_id as number | null,
  }));
}
