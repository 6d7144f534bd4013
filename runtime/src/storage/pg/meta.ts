import type pg from 'pg';

/**
 * The number of partitions is chosen when the cluster's storage is created and can never change: partition keys map
 * to partitions by range, so a different count would move invocations between owners. The first runtime records it;
 * later ones use the recorded value.
 */
export async function recordedPartitionCount(pool: pg.Pool, configured: number): Promise<number> {
  await pool.query(`INSERT INTO ratchet.meta (key, value) VALUES ('partitions', $1) ON CONFLICT (key) DO NOTHING`, [
    String(configured),
  ]);
  const res = await pool.query<{ value: string }>(`SELECT value FROM ratchet.meta WHERE key = 'partitions'`);
  return Number(res.rows[0]!.value);
}
