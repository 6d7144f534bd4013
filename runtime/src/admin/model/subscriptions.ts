import { Type, type Static } from '@sinclair/typebox';
import { ArrayOf, Component, Nullable, OrNull, Ref, StringMap } from './json-schema.ts';

/* Kafka subscriptions: `GET|POST /subscriptions`, `GET|DELETE /subscriptions/{subscription}`. */

export const SubscriptionParams = Type.Object({
  subscription: Type.String({ description: 'Subscription identifier' }),
});
export type SubscriptionParams = Static<typeof SubscriptionParams>;

/** Exact-match filters; a repeated parameter counts by its last value. */
export const ListSubscriptionsQuery = Type.Object({
  sink: Type.Optional(Nullable(Type.String(), { description: 'Only subscriptions with exactly this sink.' })),
  source: Type.Optional(Nullable(Type.String(), { description: 'Only subscriptions with exactly this source.' })),
});
export type ListSubscriptionsQuery = Static<typeof ListSubscriptionsQuery>;

export const SubscriptionId = Component(
  'SubscriptionId',
  Type.String({ description: '`sub_1` followed by 22 base62 characters.' }),
);

/** `POST /subscriptions`; the URIs themselves are checked by the registry (META0009). */
export const CreateSubscriptionRequest = Component(
  'CreateSubscriptionRequest',
  Type.Object({
    source: Type.String({ format: 'uri', description: '`kafka://<cluster_name>/<topic_name>`' }),
    sink: Type.String({ format: 'uri', description: '`service://<service_name>/<handler_name>`' }),
    options: Type.Optional(Nullable(StringMap(), { description: 'Kafka consumer options.' })),
  }),
);
export type CreateSubscriptionRequest = Static<typeof CreateSubscriptionRequest>;

export const SubscriptionResponse = Component(
  'SubscriptionResponse',
  Type.Object({ id: Ref(SubscriptionId), source: Type.String(), sink: Type.String(), options: StringMap() }),
);
export type SubscriptionResponse = Static<typeof SubscriptionResponse>;

export const ListSubscriptionsResponse = Component(
  'ListSubscriptionsResponse',
  Type.Object({ subscriptions: ArrayOf(SubscriptionResponse) }),
);
export type ListSubscriptionsResponse = Static<typeof ListSubscriptionsResponse>;

const KafkaError = Type.Object({
  message: Type.String(),
  at: Type.String({ format: 'date-time' }),
});

/** `GET /subscriptions/{subscription}/status` (Ratchet): whether the subscription consumes, from every node. */
export const SubscriptionStatusResponse = Component(
  'SubscriptionStatusResponse',
  Type.Object({
    subscription_id: Ref(SubscriptionId),
    group_id: Type.String({ description: 'The consumer group (`group.id`; the subscription id by default).' }),
    topic: Type.String(),
    ready: Type.Boolean({ description: "Some node's consumer is a member of the group with partitions assigned." }),
    reason: OrNull(Type.String({ description: 'Why it is not ready.' })),
    assigned_partitions: Type.Array(Type.Integer({ minimum: 0 })),
    lag: OrNull(
      Type.Integer({
        minimum: 0,
        description: 'Records of the assigned partitions not yet enqueued (null until each partition read a batch).',
      }),
    ),
    consumers: Type.Array(
      Type.Object({
        node: Type.String(),
        state: Type.Union(['starting', 'assigned', 'joined', 'failed', 'stopped'].map((s) => Type.Literal(s))),
        member_id: OrNull(Type.String()),
        partitions: Type.Array(
          Type.Object({
            partition: Type.Integer({ minimum: 0 }),
            position: OrNull(Type.String({ description: 'The next offset to read.' })),
            high_watermark: OrNull(Type.String()),
            lag: OrNull(Type.Integer({ minimum: 0 })),
            inflight: Type.Integer({
              minimum: 0,
              description: 'Records enqueued whose invocations have not finished.',
            }),
            paused: Type.Boolean({ description: 'Paused by back-pressure (too many unfinished invocations).' }),
          }),
        ),
        error: OrNull(KafkaError),
        updated_at: Type.String({ format: 'date-time' }),
      }),
    ),
    error: OrNull(KafkaError),
  }),
);
export type SubscriptionStatusResponse = Static<typeof SubscriptionStatusResponse>;
