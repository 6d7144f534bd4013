import type pg from 'pg';
import type { Stmt } from '../sql.ts';

export function takeLock(service: string, key: string, invocationId: string): Stmt {
  return {
    name: 'lock_take',
    text: 'INSERT INTO ratchet.keyed_lock (service_name, service_key, invocation_id) VALUES ($1, $2, $3)',
    values: [service, key, invocationId],
  };
}

export function releaseLock(service: string, key: string, invocationId: string): Stmt {
  return {
    name: 'lock_release',
    text: 'DELETE FROM ratchet.keyed_lock WHERE service_name = $1 AND service_key = $2 AND invocation_id = $3',
    values: [service, key, invocationId],
  };
}

/** The holder completed and the next inboxed invocation takes the key: one UPDATE instead of DELETE + INSERT. */
export function transferLock(service: string, key: string, from: string, to: string): Stmt {
  return {
    name: 'lock_transfer',
    text: 'UPDATE ratchet.keyed_lock SET invocation_id = $4 WHERE service_name = $1 AND service_key = $2 AND invocation_id = $3',
    values: [service, key, from, to],
  };
}

/** The key locks of the given partitions (a lock's holder is an invocation of its key, so of the key's partition). */
export async function listLocks(
  db: pg.Pool,
  partitions: number[],
): Promise<{ service: string; key: string; invocationId: string }[]> {
  const res = await db.query(
    `SELECT l.service_name, l.service_key, l.invocation_id FROM ratchet.keyed_lock l
     JOIN ratchet.invocation i ON i.id = l.invocation_id WHERE i.partition_id = ANY($1::int[])`,
    [partitions],
  );
  return (res.rows as Record<string, string>[]).map((r) => ({
    service: r.service_name!,
    key: r.service_key!,
    invocationId: r.invocation_id!,
  }));
}
