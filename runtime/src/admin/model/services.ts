import { Type, type Static } from '@sinclair/typebox';
import { DeploymentId, SchemaInfo } from './common.ts';
import { ArrayOf, Component, MapOf, Meaningful, Nullable, OrNull, Ref, StringEnum, StringMap } from './json-schema.ts';

/*
 * Services and their handlers: `GET /services[/{service}[/handlers[/{handler}]]]`, `PATCH /services/{service}` and
 * `POST /services/{service}/state`.
 */

export const ServiceParams = Type.Object({ service: Type.String({ description: 'Fully qualified service name.' }) });
export type ServiceParams = Static<typeof ServiceParams>;

export const HandlerParams = Type.Object({
  service: Type.String({ description: 'Fully qualified service name.' }),
  handler: Type.String({ description: 'Handler name.' }),
});
export type HandlerParams = Static<typeof HandlerParams>;

export const ServiceType = Component('ServiceType', StringEnum(['Service', 'VirtualObject', 'Workflow']));
export const HandlerMetadataType = Component('HandlerMetadataType', StringEnum(['Exclusive', 'Shared', 'Workflow']));
export const OnMaxAttempts = Component('OnMaxAttempts', StringEnum(['Pause', 'Kill']));

const nullableString = () => Nullable(Type.String());

export const HandlerRetryPolicyMetadata = Component(
  'HandlerRetryPolicyMetadata',
  Type.Object(
    {
      initial_interval: Type.Optional(nullableString()),
      exponentiation_factor: Type.Optional(Nullable(Type.Number({ format: 'float' }))),
      max_attempts: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
      max_interval: Type.Optional(nullableString()),
      on_max_attempts: Type.Optional(OrNull(Ref(OnMaxAttempts))),
    },
    {
      description: 'Only what the handler sets; `max_attempts` is always present (null = inherited from the service).',
    },
  ),
);
export type HandlerRetryPolicyMetadata = Static<typeof HandlerRetryPolicyMetadata>;

export const ServiceRetryPolicyMetadata = Component(
  'ServiceRetryPolicyMetadata',
  Type.Object({
    initial_interval: Type.Optional(Type.String()),
    exponentiation_factor: Type.Optional(Type.Number({ format: 'float' })),
    max_attempts: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
    max_interval: Type.Optional(nullableString()),
    on_max_attempts: Type.Optional(Ref(OnMaxAttempts)),
  }),
);
export type ServiceRetryPolicyMetadata = Static<typeof ServiceRetryPolicyMetadata>;

export const HandlerMetadata = Component(
  'HandlerMetadata',
  Type.Object({
    name: Type.String(),
    ty: Type.Optional(OrNull(Ref(HandlerMetadataType))),
    documentation: Type.Optional(nullableString()),
    metadata: Type.Optional(StringMap()),
    idempotency_retention: Type.Optional(nullableString()),
    journal_retention: Type.Optional(nullableString()),
    inactivity_timeout: Type.Optional(nullableString()),
    abort_timeout: Type.Optional(nullableString()),
    enable_lazy_state: Type.Optional(Nullable(Type.Boolean())),
    public: Type.Optional(Type.Boolean()),
    input_description: Type.String(),
    output_description: Type.String(),
    input_json_schema: Type.Optional(Type.Unknown()),
    output_json_schema: Type.Optional(Type.Unknown()),
    retry_policy: Type.Optional(Ref(HandlerRetryPolicyMetadata)),
    info: Type.Optional(ArrayOf(SchemaInfo)),
  }),
);
export type HandlerMetadata = Static<typeof HandlerMetadata>;

export const ServiceMetadata = Component(
  'ServiceMetadata',
  Type.Object({
    name: Type.String(),
    ty: Ref(ServiceType),
    handlers: ArrayOf(HandlerMetadata),
    documentation: Type.Optional(nullableString()),
    metadata: Type.Optional(StringMap()),
    deployment_id: Ref(DeploymentId),
    revision: Type.Integer({ minimum: 0 }),
    public: Type.Optional(Type.Boolean()),
    idempotency_retention: Type.Optional(Type.String()),
    workflow_completion_retention: Type.Optional(Nullable(Type.String(), { description: 'Workflows only.' })),
    journal_retention: Type.Optional(nullableString()),
    inactivity_timeout: Type.Optional(
      Type.String({ description: '`0s` when the deployment is in request/response mode.' }),
    ),
    abort_timeout: Type.Optional(Type.String()),
    enable_lazy_state: Type.Optional(Type.Boolean()),
    retry_policy: Type.Optional(Ref(ServiceRetryPolicyMetadata)),
    info: Type.Optional(ArrayOf(SchemaInfo)),
  }),
);
export type ServiceMetadata = Static<typeof ServiceMetadata>;

export const ListServicesResponse = Component(
  'ListServicesResponse',
  Type.Object({ services: ArrayOf(ServiceMetadata) }),
);
export type ListServicesResponse = Static<typeof ListServicesResponse>;

export const ListServiceHandlersResponse = Component(
  'ListServiceHandlersResponse',
  Type.Object({ handlers: ArrayOf(HandlerMetadata) }),
);
export type ListServiceHandlersResponse = Static<typeof ListServiceHandlersResponse>;

const DURATION_NOTE =
  "A duration in jiff's friendly format (`1h 30m`, `500ms`, `2d`) or ISO-8601 (`PT1M`); responses use the friendly " +
  'format.';

/** A duration setting of `ModifyServiceRequest`; null or absent leaves it unchanged. */
function duration(what: string) {
  return Type.Optional(Meaningful('duration', Nullable(Type.String(), { description: `${what} ${DURATION_NOTE}` })));
}

/**
 * `PATCH /services/{service}`. Properties are checked in this order (the first problem is reported); unknown ones,
 * `retry_policy` among them (restate does not patch it either), are ignored.
 */
export const ModifyServiceRequest = Component(
  'ModifyServiceRequest',
  Type.Object(
    {
      public: Type.Optional(
        Nullable(Type.Boolean(), { description: 'false: only other services may call it, not the ingress.' }),
      ),
      idempotency_retention: duration('How long results of idempotent calls are kept.'),
      workflow_completion_retention: duration('How long a workflow result is kept (workflows only, else 400).'),
      journal_retention: duration(
        'How long journals of completed invocations are kept; clamped to the server maximum (RT0022).',
      ),
      inactivity_timeout: duration('Ignored for request/response deployments (RT0021).'),
      abort_timeout: duration('How long an attempt may stay silent before it is aborted.'),
    },
    { description: 'Every field is optional; null or absent leaves the setting unchanged.' },
  ),
);
export type ModifyServiceRequest = Static<typeof ModifyServiceRequest>;

/** `POST /services/{service}/state`: replaces the whole state of one virtual object or workflow key. */
export const ModifyServiceStateRequest = Component(
  'ModifyServiceStateRequest',
  Type.Object({
    object_key: Type.String({ description: 'The key of the virtual object or workflow.' }),
    new_state: MapOf(Type.Array(Type.Integer({ minimum: 0, maximum: 255 })), {
      description: 'The new state: every key with its value as bytes.',
    }),
    version: Type.Optional(
      Nullable(Type.String(), {
        description: 'Apply only if the current state has this version (as `restate state` computes it).',
      }),
    ),
  }),
);
export type ModifyServiceStateRequest = Static<typeof ModifyServiceStateRequest>;
