import { Type, type Static } from '@sinclair/typebox';
import { DeploymentId, SchemaInfo } from './common.ts';
import { ArrayOf, Component, Meaningful, Nullable, OneOf, Ref, StringEnum, StringMap } from './json-schema.ts';
import { ServiceMetadata } from './services.ts';

/*
 * Deployments: `GET|POST /deployments`, `GET|PATCH|PUT|DELETE /deployments/{deployment}`.
 *
 * restate's API has an HTTP and a Lambda variant of each deployment shape (an untagged enum: `uri` or `arn`), and so
 * has Ratchet's: the components carry restate's names and are `oneOf` the two variants.
 */

export const DeploymentParams = Type.Object({ deployment: Type.String({ description: 'Deployment identifier' }) });
export type DeploymentParams = Static<typeof DeploymentParams>;

export const DeleteDeploymentQuery = Type.Object({
  force: Type.Optional(
    Nullable(Type.Boolean(), { description: 'Must be true: delete even if invocations depend on it.' }),
  ),
});
export type DeleteDeploymentQuery = Static<typeof DeleteDeploymentQuery>;

export const ProtocolType = Component('ProtocolType', StringEnum(['RequestResponse', 'BidiStream']));
export type ProtocolType = Static<typeof ProtocolType>;

export const ServiceNameRevPair = Component(
  'ServiceNameRevPair',
  Type.Object({ name: Type.String(), revision: Type.Integer({ minimum: 0 }) }),
);
export type ServiceNameRevPair = Static<typeof ServiceNameRevPair>;

const protocolVersion = () => Type.Integer({ format: 'int32' });

/** The fields of an HTTP deployment; `services` are name/revision pairs or full metadata. */
function httpDeploymentFields<S extends typeof ServiceNameRevPair | typeof ServiceMetadata>(services: S) {
  return {
    id: Ref(DeploymentId),
    uri: Type.String({ format: 'uri', description: 'Normalised, with a trailing `/`.' }),
    protocol_type: Ref(ProtocolType),
    http_version: StringEnum(['HTTP/2.0', 'HTTP/1.1']),
    additional_headers: Type.Optional(StringMap({ description: 'Headers sent with every request to the deployment.' })),
    metadata: Type.Optional(StringMap()),
    created_at: Type.String({ description: 'RFC 3339, nanosecond precision.' }),
    min_protocol_version: protocolVersion(),
    max_protocol_version: protocolVersion(),
    sdk_version: Type.Optional(Nullable(Type.String())),
    services: ArrayOf(services),
    info: Type.Optional(ArrayOf(SchemaInfo)),
  };
}

/** The fields of a Lambda deployment. */
function lambdaDeploymentFields<S extends typeof ServiceNameRevPair | typeof ServiceMetadata>(services: S) {
  return {
    id: Ref(DeploymentId),
    arn: Type.String({ description: 'The qualified function ARN (version, alias or $LATEST).' }),
    assume_role_arn: Type.Optional(
      Nullable(Type.String(), { description: 'Role assumed to invoke the function (external id: the cluster name).' }),
    ),
    additional_headers: Type.Optional(StringMap({ description: 'Headers sent with every request to the function.' })),
    metadata: Type.Optional(StringMap()),
    created_at: Type.String(),
    min_protocol_version: protocolVersion(),
    max_protocol_version: protocolVersion(),
    sdk_version: Type.Optional(Nullable(Type.String())),
    services: ArrayOf(services),
    info: Type.Optional(ArrayOf(SchemaInfo)),
  };
}

export const HttpDeploymentResponse = Type.Object(httpDeploymentFields(ServiceNameRevPair), {
  title: 'HttpDeploymentResponse',
  description: 'Deployment response for HTTP deployments',
});
export type HttpDeploymentResponse = Static<typeof HttpDeploymentResponse>;
export const LambdaDeploymentResponse = Type.Object(lambdaDeploymentFields(ServiceNameRevPair), {
  title: 'LambdaDeploymentResponse',
  description: 'Deployment response for Lambda deployments',
});
export type LambdaDeploymentResponse = Static<typeof LambdaDeploymentResponse>;
/** A deployment in `GET /deployments`. */
export const DeploymentResponse = Component(
  'DeploymentResponse',
  OneOf([HttpDeploymentResponse, LambdaDeploymentResponse]),
);
export type DeploymentResponse = Static<typeof DeploymentResponse>;

export const DetailedHttpDeploymentResponse = Type.Object(httpDeploymentFields(ServiceMetadata), {
  title: 'HttpDetailedDeploymentResponse',
  description: 'Detailed deployment response for HTTP deployments',
});
export type DetailedHttpDeploymentResponse = Static<typeof DetailedHttpDeploymentResponse>;
export const DetailedLambdaDeploymentResponse = Type.Object(lambdaDeploymentFields(ServiceMetadata), {
  title: 'LambdaDetailedDeploymentResponse',
  description: 'Detailed deployment response for Lambda deployments',
});
export type DetailedLambdaDeploymentResponse = Static<typeof DetailedLambdaDeploymentResponse>;
/** `GET|PATCH /deployments/{deployment}`: a deployment with the metadata of the service revisions it registered. */
export const DetailedDeploymentResponse = Component(
  'DetailedDeploymentResponse',
  OneOf([DetailedHttpDeploymentResponse, DetailedLambdaDeploymentResponse]),
);
export type DetailedDeploymentResponse = Static<typeof DetailedDeploymentResponse>;

export const ListDeploymentsResponse = Component(
  'ListDeploymentsResponse',
  Type.Object({ deployments: ArrayOf(DeploymentResponse) }),
);
export type ListDeploymentsResponse = Static<typeof ListDeploymentsResponse>;

/**
 * What both variants of a registration carry, in the order they are checked: a body is read as restate's untagged
 * enum, these first, then `uri` or `arn` chooses the variant.
 */
const registrationFlags = {
  force: Type.Optional(
    Nullable(Type.Boolean(), {
      description: 'Replace the deployment with the same uri. Defaults to true under `/v2`, false otherwise.',
    }),
  ),
  breaking: Type.Optional(Type.Boolean({ description: 'Allow a service to change type (META0006 otherwise).' })),
  dry_run: Type.Optional(Type.Boolean({ description: 'Discover and check, store nothing.' })),
  metadata: Type.Optional(StringMap()),
  additional_headers: Type.Optional(
    Meaningful('http-headers', Nullable(StringMap(), { description: 'Sent with discovery and every invocation.' })),
  ),
};

export const RegisterHttpDeploymentRequest = Type.Object(
  {
    ...registrationFlags,
    uri: Type.String({ format: 'uri' }),
    use_http_11: Type.Optional(
      Type.Boolean({ description: 'Discover (and invoke) over HTTP/1.1: request/response mode.' }),
    ),
  },
  { title: 'RegisterHttpDeploymentRequest', description: 'Register HTTP deployment request' },
);
export type RegisterHttpDeploymentRequest = Static<typeof RegisterHttpDeploymentRequest>;

export const RegisterLambdaDeploymentRequest = Type.Object(
  {
    ...registrationFlags,
    arn: Type.String({ description: 'Qualified function ARN: ends with a version, an alias or $LATEST.' }),
    assume_role_arn: Type.Optional(
      Nullable(Type.String(), {
        description: 'IAM role assumed to invoke the function; STS is called with the cluster name as external id.',
      }),
    ),
  },
  { title: 'RegisterLambdaDeploymentRequest', description: 'Register Lambda deployment request' },
);
export type RegisterLambdaDeploymentRequest = Static<typeof RegisterLambdaDeploymentRequest>;

/** `POST /deployments`. */
export const RegisterDeploymentRequest = Component(
  'RegisterDeploymentRequest',
  OneOf([RegisterHttpDeploymentRequest, RegisterLambdaDeploymentRequest]),
);
export type RegisterDeploymentRequest = Static<typeof RegisterDeploymentRequest>;

export const RegisterDeploymentResponse = Component(
  'RegisterDeploymentResponse',
  Type.Object({
    id: Ref(DeploymentId),
    services: ArrayOf(ServiceMetadata),
    min_protocol_version: Type.Optional(protocolVersion()),
    max_protocol_version: Type.Optional(protocolVersion()),
    sdk_version: Type.Optional(Nullable(Type.String())),
    info: Type.Optional(ArrayOf(SchemaInfo)),
  }),
);
export type RegisterDeploymentResponse = Static<typeof RegisterDeploymentResponse>;

const updateFlags = {
  overwrite: Type.Optional(
    Type.Boolean({ description: 'Also replace the stored service schemas with the discovered ones.' }),
  ),
  dry_run: Type.Optional(Type.Boolean()),
  additional_headers: Type.Optional(
    Meaningful(
      'http-headers',
      Nullable(StringMap(), { description: 'Replaces all headers; null leaves them unchanged.' }),
    ),
  ),
};

/** Properties are checked in this order; the first problem is reported. */
export const UpdateHttpDeploymentRequest = Type.Object(
  {
    uri: Type.Optional(Nullable(Type.String(), { format: 'uri' })),
    overwrite: updateFlags.overwrite,
    dry_run: updateFlags.dry_run,
    use_http_11: Type.Optional(Nullable(Type.Boolean())),
    additional_headers: updateFlags.additional_headers,
  },
  {
    title: 'UpdateHttpDeploymentRequest',
    description:
      'Without `uri`, `additional_headers` and `use_http_11` nothing changes. Otherwise the endpoint is discovered ' +
      'again and must keep the same protocol versions, services, service types and handlers (META0016).',
  },
);
export type UpdateHttpDeploymentRequest = Static<typeof UpdateHttpDeploymentRequest>;

export const UpdateLambdaDeploymentRequest = Type.Object(
  {
    arn: Type.Optional(Nullable(Type.String(), { description: 'A new qualified function ARN.' })),
    assume_role_arn: Type.Optional(Nullable(Type.String(), { description: 'A new role to assume.' })),
    ...updateFlags,
  },
  {
    title: 'UpdateLambdaDeploymentRequest',
    description:
      'Without `arn`, `assume_role_arn` and `additional_headers` nothing changes. Otherwise the function is ' +
      'discovered again (with the new role) and must keep what the deployment registered (META0016).',
  },
);
export type UpdateLambdaDeploymentRequest = Static<typeof UpdateLambdaDeploymentRequest>;

/** `PATCH /deployments/{deployment}` (and `PUT` under `/v2`). */
export const UpdateDeploymentRequest = Component(
  'UpdateDeploymentRequest',
  OneOf([UpdateHttpDeploymentRequest, UpdateLambdaDeploymentRequest]),
);
export type UpdateDeploymentRequest = Static<typeof UpdateDeploymentRequest>;
