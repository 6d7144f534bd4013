import { Type, type Static } from '@sinclair/typebox';
import { SchemaInfo } from './common.ts';
import { ArrayOf, Component, Meaningful, Nullable, Ref, StringMap } from './json-schema.ts';
import { SubscriptionResponse } from './subscriptions.ts';

/*
 * Kafka clusters subscriptions read from: `GET|POST /kafka-clusters`,
 * `GET|PATCH|DELETE /kafka-clusters/{cluster_name}`.
 */

export const KafkaClusterParams = Type.Object({ cluster_name: Type.String({ description: 'Kafka cluster name' }) });
export type KafkaClusterParams = Static<typeof KafkaClusterParams>;

export const GetKafkaClusterQuery = Type.Object({
  include_subscriptions: Type.Optional(
    Type.Boolean({ description: 'List the subscriptions reading from the cluster.' }),
  ),
});
export type GetKafkaClusterQuery = Static<typeof GetKafkaClusterQuery>;

export const DeleteKafkaClusterQuery = Type.Object({
  force: Type.Optional(Nullable(Type.Boolean(), { description: 'Delete even if subscriptions use it.' })),
});
export type DeleteKafkaClusterQuery = Static<typeof DeleteKafkaClusterQuery>;

/** The authority of `kafka://<name>/<topic>`, so hostname-like. */
export const KafkaClusterName = Component(
  'KafkaClusterName',
  Meaningful(
    'kafka-cluster-name',
    Type.String({
      format: 'hostname',
      description: "Letters, digits, '.', '_' and '-', starting and ending with a letter or digit.",
    }),
  ),
);

export const CreateKafkaClusterRequest = Component(
  'CreateKafkaClusterRequest',
  Type.Object({
    name: Ref(KafkaClusterName),
    properties: StringMap({
      description: "librdkafka properties; must contain 'bootstrap.servers' or 'metadata.broker.list'.",
    }),
  }),
);
export type CreateKafkaClusterRequest = Static<typeof CreateKafkaClusterRequest>;

export const UpdateKafkaClusterRequest = Component(
  'UpdateKafkaClusterRequest',
  Type.Object({ properties: StringMap({ description: 'Replaces all properties.' }) }),
);
export type UpdateKafkaClusterRequest = Static<typeof UpdateKafkaClusterRequest>;

const clusterFields = {
  name: Ref(KafkaClusterName),
  properties: StringMap({ description: 'Credentials are shown as `***`.' }),
  created_at: Type.String(),
};

/** A cluster as listed; clusters of the configuration file carry a note saying so as `info`. */
export const SimpleKafkaClusterResponse = Component(
  'SimpleKafkaClusterResponse',
  Type.Object({ ...clusterFields, info: Type.Optional(ArrayOf(SchemaInfo)) }),
);
export type SimpleKafkaClusterResponse = Static<typeof SimpleKafkaClusterResponse>;

/** `GET /kafka-clusters/{cluster_name}`. */
export const KafkaClusterResponse = Component(
  'KafkaClusterResponse',
  Type.Object({
    ...clusterFields,
    subscriptions: ArrayOf(SubscriptionResponse, { description: 'Empty unless `include_subscriptions`.' }),
    info: Type.Optional(ArrayOf(SchemaInfo)),
  }),
);
export type KafkaClusterResponse = Static<typeof KafkaClusterResponse>;

export const ListKafkaClustersResponse = Component(
  'ListKafkaClustersResponse',
  Type.Object({ clusters: ArrayOf(SimpleKafkaClusterResponse) }),
);
export type ListKafkaClustersResponse = Static<typeof ListKafkaClustersResponse>;
