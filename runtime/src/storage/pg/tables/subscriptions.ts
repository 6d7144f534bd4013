import type pg from 'pg';
import type { KafkaClusterSchema, SubscriptionSchema } from '../../../schema/types.ts';

/**
 * `ratchet.kafka_cluster` and `ratchet.subscription`: the Kafka side of the schema registry. These functions run on
 * the client of a schema transaction (which holds the schema lock) or of the registry's snapshot read; they never
 * commit or notify on their own.
 */

interface KafkaClusterRow {
  name: string;
  properties: Record<string, string>;
  created_at: Date;
}

interface SubscriptionRow {
  id: string;
  source: string;
  sink: string;
  cluster: string;
  topic: string;
  service_name: string;
  handler_name: string;
  options: Record<string, string>;
  created_at: Date;
}

const SUBSCRIPTION_COLUMNS = 'id, source, sink, cluster, topic, service_name, handler_name, options, created_at';

function toKafkaCluster(row: KafkaClusterRow): KafkaClusterSchema {
  return { name: row.name, properties: row.properties, createdAt: row.created_at, static: false };
}

function toSubscription(row: SubscriptionRow): SubscriptionSchema {
  return {
    id: row.id,
    source: row.source,
    sink: row.sink,
    cluster: row.cluster,
    topic: row.topic,
    serviceName: row.service_name,
    handlerName: row.handler_name,
    options: row.options,
    createdAt: row.created_at,
  };
}

export async function loadKafkaClusters(client: pg.ClientBase): Promise<KafkaClusterSchema[]> {
  const res = await client.query<KafkaClusterRow>(
    'SELECT name, properties, created_at FROM ratchet.kafka_cluster ORDER BY created_at, name',
  );
  return res.rows.map(toKafkaCluster);
}

export async function loadSubscriptions(client: pg.ClientBase): Promise<SubscriptionSchema[]> {
  const res = await client.query<SubscriptionRow>(
    `SELECT ${SUBSCRIPTION_COLUMNS} FROM ratchet.subscription ORDER BY created_at, id`,
  );
  return res.rows.map(toSubscription);
}

export async function findKafkaCluster(client: pg.ClientBase, name: string): Promise<KafkaClusterSchema | undefined> {
  const res = await client.query<KafkaClusterRow>(
    'SELECT name, properties, created_at FROM ratchet.kafka_cluster WHERE name = $1',
    [name],
  );
  const row = res.rows[0];
  return row === undefined ? undefined : toKafkaCluster(row);
}

export async function insertKafkaCluster(client: pg.ClientBase, cluster: KafkaClusterSchema): Promise<void> {
  await client.query('INSERT INTO ratchet.kafka_cluster (name, properties, created_at) VALUES ($1, $2::json, $3)', [
    cluster.name,
    JSON.stringify(cluster.properties),
    cluster.createdAt,
  ]);
}

export async function updateKafkaClusterProperties(
  client: pg.ClientBase,
  name: string,
  properties: Record<string, string>,
): Promise<void> {
  await client.query('UPDATE ratchet.kafka_cluster SET properties = $2::json WHERE name = $1', [
    name,
    JSON.stringify(properties),
  ]);
}

export async function deleteKafkaCluster(client: pg.ClientBase, name: string): Promise<boolean> {
  const res = await client.query('DELETE FROM ratchet.kafka_cluster WHERE name = $1', [name]);
  return (res.rowCount ?? 0) > 0;
}

export async function subscriptionsOfCluster(client: pg.ClientBase, cluster: string): Promise<SubscriptionSchema[]> {
  const res = await client.query<SubscriptionRow>(
    `SELECT ${SUBSCRIPTION_COLUMNS} FROM ratchet.subscription WHERE cluster = $1 ORDER BY created_at, id`,
    [cluster],
  );
  return res.rows.map(toSubscription);
}

export async function insertSubscription(client: pg.ClientBase, s: SubscriptionSchema): Promise<void> {
  await client.query(
    `INSERT INTO ratchet.subscription (${SUBSCRIPTION_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::json, $9)`,
    [s.id, s.source, s.sink, s.cluster, s.topic, s.serviceName, s.handlerName, JSON.stringify(s.options), s.createdAt],
  );
}

export async function deleteSubscription(client: pg.ClientBase, id: string): Promise<boolean> {
  const res = await client.query('DELETE FROM ratchet.subscription WHERE id = $1', [id]);
  return (res.rowCount ?? 0) > 0;
}
