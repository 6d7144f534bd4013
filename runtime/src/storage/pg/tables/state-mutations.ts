import type pg from 'pg';
import type { Stmt } from '../sql.ts';
import type { StateMutationRow } from '../../rows.ts';

export type { StateMutationRow };

/**
 * State replacements requested through the admin API (`POST /services/{s}/state`). One that finds its key busy waits
 * in the key's inbox (it shares the inbox sequence with invocations) and is applied when its turn comes.
 */

/** `m.id` is chosen by the caller (a UUID), so the mutation can be named before its insert committed. */
export function insertStateMutation(m: Omit<StateMutationRow, 'inboxSeq'>): Stmt {
  return {
    name: 'state_mutation_insert',
    text: `INSERT INTO ratchet.state_mutation (id, partition_id, service_name, service_key, version, keys, state_values,
             inbox_seq, created_at)
           VALUES ($7, $1, $2, $3, $4, $5, $6, nextval('ratchet.inbox_seq'), now())`,
    values: [
      m.partitionId,
      m.service,
      m.key,
      m.version,
      m.entries.map((e) => e.key),
      m.entries.map((e) => e.value),
      m.id,
    ],
  };
}

export function deleteStateMutation(id: string): Stmt {
  return { name: 'state_mutation_delete', text: 'DELETE FROM ratchet.state_mutation WHERE id = $1', values: [id] };
}

/**
 * Replaces the whole state of a key, if `version` (when given) still names its current state: the version is
 * computed here exactly as `ids/state-version.ts` does (SHA-256 over `u64be(i) 0x01 key 0x02 value 0x03` in key
 * order, base64url without padding). `onApplied(false)`: the version did not match and nothing changed.
 */
export function applyStateMutation(
  service: string,
  key: string,
  partitionKey: string,
  version: string | null,
  entries: { key: Buffer; value: Buffer }[],
  onApplied: (applied: boolean) => void,
): Stmt {
  return {
    name: 'state_mutation_apply',
    text: `WITH cur AS (
             SELECT key, value, row_number() OVER (ORDER BY key) - 1 AS i FROM ratchet.state
             WHERE service_name = $1 AND service_key = $2),
           v AS (
             SELECT rtrim(translate(encode(sha256(coalesce(
               string_agg(int8send(i) || '\\x01'::bytea || key || '\\x02'::bytea || value || '\\x03'::bytea, ''::bytea
                 ORDER BY key), ''::bytea)), 'base64'), '+/', '-_'), '=') AS version FROM cur),
           ok AS (SELECT $3::text IS NULL OR $3::text = (SELECT version FROM v) AS ok),
           del AS (DELETE FROM ratchet.state WHERE service_name = $1 AND service_key = $2
                     AND NOT (key = ANY($4::bytea[])) AND (SELECT ok FROM ok)),
           ins AS (INSERT INTO ratchet.state (service_name, service_key, key, value, partition_key)
                   SELECT $1, $2, k, v, $6::bigint FROM unnest($4::bytea[], $5::bytea[]) AS n(k, v)
                   WHERE (SELECT ok FROM ok)
                   ON CONFLICT (service_name, service_key, key) DO UPDATE SET value = EXCLUDED.value)
           SELECT ok FROM ok`,
    values: [service, key, version, entries.map((e) => e.key), entries.map((e) => e.value), partitionKey],
    onResult: (rows) => onApplied((rows[0] as { ok: boolean } | undefined)?.ok === true),
  };
}

export async function listStateMutations(db: pg.Pool, partitions: number[]): Promise<StateMutationRow[]> {
  const res = await db.query(
    `SELECT id, partition_id, service_name, service_key, version, keys, state_values, inbox_seq::text
     FROM ratchet.state_mutation WHERE partition_id = ANY($1::int[]) ORDER BY state_mutation.inbox_seq`,
    [partitions],
  );
  return (res.rows as Record<string, unknown>[]).map((r) => {
    const keys = r.keys as Buffer[];
    const values = r.state_values as Buffer[];
    return {
      id: r.id as string,
      partitionId: r.partition_id as number,
      service: r.service_name as string,
      key: r.service_key as string,
      version: r.version as string | null,
      entries: keys.map((k, i) => ({ key: k, value: values[i]! })),
      inboxSeq: BigInt(r.inbox_seq as string),
    };
  });
}
