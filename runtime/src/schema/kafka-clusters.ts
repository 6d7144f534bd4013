import { InvalidKafkaClusterError, KafkaClusterConflictError, SchemaNotFoundError } from './errors.ts';
import { commitSchemaChange, type SchemaOperationDeps } from './operation-deps.ts';
import type { KafkaClusterSchema, SubscriptionSchema } from './types.ts';

/**
 * Kafka clusters registered through the admin API (`/kafka-clusters`). A cluster is a name and the librdkafka
 * properties to reach it; subscriptions name it in their source URI. Clusters of the configuration file share the
 * name space but are read-only here. Ratchet does not connect to the brokers when a cluster is registered (neither
 * does restate): a wrong address shows only once a subscription consumes from it.
 */

export type CreateKafkaCluster = (name: string, properties: Record<string, string>) => Promise<KafkaClusterSchema>;
export type UpdateKafkaCluster = (name: string, properties: Record<string, string>) => Promise<KafkaClusterSchema>;
/** `force` deletes even when subscriptions still read from the cluster (they stay, orphaned). */
export type DeleteKafkaCluster = (name: string, force: boolean) => Promise<void>;

function checkProperties(name: string, properties: Record<string, string>): void {
  if (properties['bootstrap.servers'] === undefined && properties['metadata.broker.list'] === undefined) {
    throw new InvalidKafkaClusterError(
      `kafka cluster '${name}' properties must contain either 'bootstrap.servers' or 'metadata.broker.list'`,
    );
  }
}

function staticCluster(deps: SchemaOperationDeps, name: string): KafkaClusterSchema | undefined {
  return deps.registry.staticKafkaClusters.find((c) => c.name === name);
}

function readOnly(name: string): KafkaClusterConflictError {
  return new KafkaClusterConflictError(
    `kafka cluster '${name}' cannot be updated, because it was defined in the configuration file ` +
      '(kafka-clusters / RATCHET_KAFKA_CLUSTERS). Update the configuration file directly, or remove the cluster from it',
  );
}

function orphans(name: string, subscriptions: readonly SubscriptionSchema[]): KafkaClusterConflictError {
  const ids = subscriptions.map((s) => `'${s.id}'`).join(', ');
  const what = subscriptions.length === 1 ? `subscription ${ids} being orphan` : `subscriptions ${ids} being orphans`;
  return new KafkaClusterConflictError(
    `Removing the kafka cluster '${name}' leads to ${what}. Remove the subscription first, or use the 'force' flag.`,
  );
}

export function createCreateKafkaCluster(deps: SchemaOperationDeps): CreateKafkaCluster {
  const log = deps.logger.child({ component: 'admin' });
  return async (name, properties) => {
    checkProperties(name, properties);
    if (staticCluster(deps, name) !== undefined) {
      throw new KafkaClusterConflictError(
        `kafka cluster '${name}' conflicts with static configuration. Cluster names in schema registry cannot ` +
          'override statically configured clusters.',
      );
    }
    const cluster: KafkaClusterSchema = { name, properties, createdAt: deps.now(), static: false };
    await commitSchemaChange(
      deps,
      async (tx) => {
        if ((await tx.kafkaCluster(name)) !== undefined) {
          throw new KafkaClusterConflictError(`kafka cluster '${name}' already exists in schema registry`);
        }
        await tx.insertKafkaCluster(cluster);
      },
      () => log.info({ 'kafka.cluster': name }, 'kafka cluster registered'),
    );
    return deps.registry.kafkaCluster(name) ?? cluster;
  };
}

export function createUpdateKafkaCluster(deps: SchemaOperationDeps): UpdateKafkaCluster {
  const log = deps.logger.child({ component: 'admin' });
  return async (name, properties) => {
    if (staticCluster(deps, name) !== undefined) throw readOnly(name);
    const updated = await commitSchemaChange(
      deps,
      async (tx) => {
        const existing = await tx.kafkaCluster(name);
        if (existing === undefined) throw new SchemaNotFoundError(`kafka cluster '${name}'`);
        checkProperties(name, properties);
        await tx.updateKafkaClusterProperties(name, properties);
        return { ...existing, properties };
      },
      () => log.info({ 'kafka.cluster': name }, 'kafka cluster updated'),
    );
    return deps.registry.kafkaCluster(name) ?? updated;
  };
}

export function createDeleteKafkaCluster(deps: SchemaOperationDeps): DeleteKafkaCluster {
  const log = deps.logger.child({ component: 'admin' });
  return async (name, force) => {
    if (staticCluster(deps, name) !== undefined) throw readOnly(name);
    await commitSchemaChange(
      deps,
      async (tx) => {
        if ((await tx.kafkaCluster(name)) === undefined) throw new SchemaNotFoundError(`kafka cluster named '${name}'`);
        const subscriptions = await tx.subscriptionsOfCluster(name);
        if (subscriptions.length > 0 && !force) throw orphans(name, subscriptions);
        await tx.deleteKafkaCluster(name);
        return subscriptions;
      },
      (orphaned) => {
        if (orphaned.length > 0) {
          log.warn(
            { 'kafka.cluster': name, subscriptions: orphaned.map((s) => s.id) },
            `kafka cluster deleted with force; ${orphaned.length} subscription(s) reading from it are orphaned`,
          );
        } else {
          log.info({ 'kafka.cluster': name }, 'kafka cluster deleted');
        }
      },
    );
  };
}
