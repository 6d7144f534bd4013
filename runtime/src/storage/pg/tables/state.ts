import type pg from 'pg';
import type { Stmt } from '../sql.ts';
import { u64ToI64 } from '../pool.ts';

export async function loadState(
  db: pg.Pool | pg.ClientBase,
  service: string,
  key: string,
): Promise<{ key: Buffer; value: Buffer }[]> {
  const res = await db.query({
    name: 'state_load',
    text: 'SELECT key, value FROM ratchet.state WHERE service_name = $1 AND service_key = $2 ORDER BY key',
    values: [service, key],
  });
  return res.rows as { key: Buffer; value: Buffer }[];
}

export async function getStateValue(
  db: pg.Pool | pg.ClientBase,
  service: string,
  key: string,
  stateKey: Uint8Array,
): Promise<Buffer | undefined> {
  const res = await db.query({
    name: 'state_get',
    text: 'SELECT value FROM ratchet.state WHERE service_name = $1 AND service_key = $2 AND key = $3',
    values: [service, key, stateKey],
  });
  return (res.rows[0] as { value: Buffer } | undefined)?.value;
}

export function setState(
  service: string,
  key: string,
  partitionKey: bigint,
  stateKey: Uint8Array,
  value: Uint8Array,
): Stmt {
  return {
    name: 'state_set',
    text: `INSERT INTO ratchet.state (service_name, service_key, key, value, partition_key) VALUES ($1, $2, $3, $4, $5::bigint)
           ON CONFLICT (service_name, service_key, key) DO UPDATE SET value = EXCLUDED.value`,
    values: [service, key, stateKey, value, u64ToI64(partitionKey)],
  };
}

export function clearState(service: string, key: string, stateKey: Uint8Array): Stmt {
  return {
    name: 'state_clear',
    text: 'DELETE FROM ratchet.state WHERE service_name = $1 AND service_key = $2 AND key = $3',
    values: [service, key, stateKey],
  };
}

export function clearAllState(service: string, key: string): Stmt {
  return {
    name: 'state_clear_all',
    text: 'DELETE FROM ratchet.state WHERE service_name = $1 AND service_key = $2',
    values: [service, key],
  };
}
