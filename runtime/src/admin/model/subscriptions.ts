import { Type, type Static } from '@sinclair/typebox';
import { ArrayOf, Component, Nullable, Ref, StringMap } from './json-schema.ts';

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
