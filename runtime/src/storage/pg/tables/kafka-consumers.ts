import type pg from 'pg';
import type { ConsumerStatus, ConsumerStatusStore, NodeConsumerStatus } from '../../../kafka/status.ts';

/**
 * `ratchet.kafka_consumer`: each node's report of its subscription consumers (see the migration). A node replaces
 * all of its rows at once, so a consumer it stopped disappears with the next report.
 */
export class PgConsumerStatusStore implements ConsumerStatusStore {
  constructor(private readonly pool: pg.Pool) {}

  async report(node: string, statuses: ConsumerStatus[]): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('DELETE FROM ratchet.kafka_consumer WHERE node = $1', [node]);
      if (statuses.length > 0) {
        await client.query(
          `INSERT INTO ratchet.kafka_consumer
             (subscription_id, node, group_id, topic, state, member_id, partitions, error, error_at, updated_at)
           SELECT s.subscription_id, $1, s.group_id, s.topic, s.state, s.member_id, s.partitions, s.error, s.error_at,
                  now()
             FROM jsonb_to_recordset($2::jsonb) AS s(subscription_id text, group_id text, topic text, state text,
                  member_id text, partitions jsonb, error text, error_at timestamptz)`,
          [
            node,
            JSON.stringify(
              statuses.map((s) => ({
                subscription_id: s.subscriptionId,
                group_id: s.groupId,
                topic: s.topic,
                state: s.state,
                member_id: s.memberId ?? null,
                partitions: s.partitions,
                error: s.error?.message ?? null,
                error_at: s.error?.at ?? null,
              })),
            ),
          ],
        );
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async read(subscriptionId: string, freshWithinMs: number): Promise<NodeConsumerStatus[]> {
    const res = await this.pool.query<{
      node: string;
      group_id: string;
      topic: string;
      state: ConsumerStatus['state'];
      member_id: string | null;
      partitions: ConsumerStatus['partitions'];
      error: string | null;
      error_at: Date | null;
      updated_at: Date;
    }>(
      `SELECT node, group_id, topic, state, member_id, partitions, error, error_at, updated_at
         FROM ratchet.kafka_consumer
        WHERE subscription_id = $1 AND updated_at > now() - make_interval(secs => $2::double precision / 1000)
        ORDER BY node`,
      [subscriptionId, freshWithinMs],
    );
    return res.rows.map((r) => ({
      node: r.node,
      updatedAt: r.updated_at.toISOString(),
      subscriptionId,
      groupId: r.group_id,
      topic: r.topic,
      state: r.state,
      memberId: r.member_id ?? undefined,
      partitions: r.partitions,
      error: r.error === null ? undefined : { message: r.error, at: (r.error_at ?? r.updated_at).toISOString() },
    }));
  }

  async forget(node: string): Promise<void> {
    await this.pool.query('DELETE FROM ratchet.kafka_consumer WHERE node = $1', [node]);
  }
}
