import { Type, type Static } from '@sinclair/typebox';
import { Conditions, LocalObjectReference, Name, StringEnum, StringMap, cel, immutable } from './schema-helpers.ts';

/*
 * Subscription: a Kafka topic of one of the Cluster's Kafka clusters delivered to a service handler. The admin API
 * has no update for subscriptions, so changed options mean delete and recreate (a `Recreated` event says so). Ready
 * means a runtime node's consumer joined the consumer group and has partitions assigned.
 */

/** Bounds of the consumer fields of status (the controller cuts longer values to fit). */
export const MAX_REPORTED_PARTITIONS = 10_000;
export const MAX_LAST_ERROR_LENGTH = 4096;

export const SUBSCRIPTION_DELETION_POLICIES = ['Delete', 'Retain'] as const;

export const SubscriptionSpec = Type.Object(
  {
    clusterRef: LocalObjectReference('The Cluster (same namespace) that runs the subscription.'),
    source: Type.Object(
      {
        kafka: Type.Object({
          cluster: Name('A Kafka cluster named in the Cluster spec.kafka.clusters.'),
          topic: Type.String({ minLength: 1, maxLength: 249, pattern: '^[a-zA-Z0-9._-]+$' }),
        }),
      },
      { description: 'Where records come from. Immutable.', ...cel(immutable('source')) },
    ),
    sink: Type.Object(
      {
        service: Type.Object({
          name: Type.String({ minLength: 1, maxLength: 255 }),
          handler: Type.String({ minLength: 1, maxLength: 255 }),
        }),
      },
      { description: 'Which handler receives each record. Immutable.', ...cel(immutable('sink')) },
    ),
    options: Type.Optional(
      StringMap({ description: 'Subscription options (e.g. auto.offset.reset). A change recreates it.' }),
    ),
    deletionPolicy: Type.Optional(
      StringEnum(SUBSCRIPTION_DELETION_POLICIES, {
        default: 'Delete',
        description: 'Delete removes the subscription from the runtime with the resource; Retain leaves it.',
      }),
    ),
  },
  { description: 'A Kafka subscription of a Ratchet cluster.' },
);

export const SubscriptionStatus = Type.Object({
  observedGeneration: Type.Optional(Type.Integer()),
  conditions: Type.Optional(Conditions),
  subscriptionId: Type.Optional(Type.String()),
  source: Type.Optional(Type.String({ description: 'kafka://<cluster>/<topic>' })),
  sink: Type.Optional(Type.String({ description: 'service://<service>/<handler>' })),
  optionsHash: Type.Optional(Type.String()),
  lastSyncTime: Type.Optional(Type.String({ format: 'date-time' })),
  consumerGroup: Type.Optional(
    Type.String({ description: 'The Kafka consumer group (group.id) the runtime consumes as.' }),
  ),
  assignedPartitions: Type.Optional(
    Type.Array(Type.Integer({ minimum: 0 }), {
      maxItems: MAX_REPORTED_PARTITIONS,
      'x-kubernetes-list-type': 'atomic',
      description: "The topic partitions assigned to the runtime's consumers.",
    }),
  ),
  lag: Type.Optional(
    Type.Integer({
      minimum: 0,
      description:
        'Records of the assigned partitions not yet read by the runtime; absent until every assigned partition read a batch.',
    }),
  ),
  consumers: Type.Optional(Type.Integer({ minimum: 0, description: 'Runtime nodes reporting a consumer of it.' })),
  lastError: Type.Optional(
    Type.String({
      maxLength: MAX_LAST_ERROR_LENGTH,
      description: 'The latest error a consumer reported (an unreachable broker, a missing topic, bad credentials).',
    }),
  ),
});

export type SubscriptionSpec = Static<typeof SubscriptionSpec>;
export type SubscriptionStatus = Static<typeof SubscriptionStatus>;
