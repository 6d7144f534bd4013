import { Type, type Static } from '@sinclair/typebox';
import {
  Conditions,
  Duration,
  LocalObjectReference,
  Name,
  StringEnum,
  StringMap,
  atMostOneOf,
  cel,
  exactlyOneOf,
} from './schema-helpers.ts';

/*
 * Deployment: one service endpoint registered with a Cluster's admin API. Superseded registrations are drained
 * (no invocation left that could still run on them) and then removed.
 */

export const DELETION_POLICIES = ['Drain', 'DrainThenForce', 'Force', 'Orphan'] as const;
export type DeletionPolicy = (typeof DELETION_POLICIES)[number];

export const SUPERSEDED_STATES = ['Draining', 'Drained', 'Deregistered'] as const;

/** Lambda ARNs must name a version or alias: an unqualified ARN would silently follow $LATEST. */
export const QUALIFIED_LAMBDA_ARN =
  '^arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]+:[A-Za-z0-9_$-]+$';

const Header = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 256, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" }),
    value: Type.Optional(Type.String({ maxLength: 8192 })),
    valueFrom: Type.Optional(
      Type.Object({
        secretKeyRef: Type.Object({
          name: Name('Secret in the same namespace.'),
          key: Type.String({ minLength: 1, maxLength: 253 }),
        }),
      }),
    ),
  },
  { ...cel(exactlyOneOf(['value', 'valueFrom'], 'header value')) },
);

const HttpEndpoint = Type.Object(
  {
    uri: Type.Optional(
      Type.String({ maxLength: 2048, pattern: '^https?://', description: 'URL of the service endpoint.' }),
    ),
    serviceRef: Type.Optional(
      Type.Object(
        {
          name: Name('Kubernetes Service in the same namespace.'),
          port: Type.Integer({ minimum: 1, maximum: 65535 }),
          path: Type.Optional(Type.String({ maxLength: 1024, pattern: '^/' })),
          scheme: Type.Optional(StringEnum(['http', 'https'] as const, { default: 'http' })),
        },
        { description: 'Resolved to http://<name>.<namespace>.svc:<port><path>.' },
      ),
    ),
    useHttp11: Type.Optional(
      Type.Boolean({
        default: false,
        description: 'Talk HTTP/1.1 to the endpoint instead of h2c. A change is applied in place (same deployment id).',
      }),
    ),
  },
  { ...cel(exactlyOneOf(['uri', 'serviceRef'], 'http endpoint')) },
);

const LambdaEndpoint = Type.Object({
  arn: Type.String({
    maxLength: 2048,
    pattern: QUALIFIED_LAMBDA_ARN,
    description: 'Qualified function ARN: with a version, an alias or $LATEST.',
  }),
  assumeRoleArn: Type.Optional(
    Type.String({
      maxLength: 2048,
      pattern: '^arn:aws[a-zA-Z-]*:iam::[0-9]{12}:role/.+$',
      description:
        'IAM role the runtime assumes to invoke the function (sts:ExternalId = the cluster name); without it the ' +
        "runtime's own credentials (the Cluster's service account) invoke it. A change is applied in place.",
    }),
  ),
});

export const DeploymentSpec = Type.Object(
  {
    clusterRef: Type.Optional(LocalObjectReference('The Cluster (same namespace) to register with.')),
    adminUrl: Type.Optional(
      Type.String({ maxLength: 2048, pattern: '^https?://', description: 'Admin API of a runtime not managed here.' }),
    ),
    adminTokenSecretRef: Type.Optional(
      Type.Object(
        { name: Name('Secret name.'), key: Type.Optional(Type.String({ maxLength: 253, default: 'token' })) },
        { description: 'Bearer token for adminUrl.' },
      ),
    ),
    endpoint: Type.Object(
      { http: Type.Optional(HttpEndpoint), lambda: Type.Optional(LambdaEndpoint) },
      { ...cel(exactlyOneOf(['http', 'lambda'], 'endpoint kind')) },
    ),
    additionalHeaders: Type.Optional(
      Type.Array(Header, {
        maxItems: 32,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
        description: 'Headers sent with discovery and every request to the endpoint.',
      }),
    ),
    metadata: Type.Optional(
      StringMap({
        description:
          'Deployment metadata passed to the admin API with a registration. The admin API cannot change it in place: ' +
          'a change alone takes effect with the next new registration (a new endpoint).',
      }),
    ),
    registration: Type.Optional(
      Type.Object({
        force: Type.Optional(Type.Boolean({ default: false, description: 'Overwrite an existing registration.' })),
        breaking: Type.Optional(Type.Boolean({ default: false, description: 'Allow breaking changes.' })),
      }),
    ),
    retirement: Type.Optional(
      Type.Object({
        deletionPolicy: Type.Optional(
          StringEnum(DELETION_POLICIES, {
            default: 'Drain',
            description:
              'On delete: Drain (wait until no invocation can run on it), DrainThenForce (drain up to ' +
              'drainTimeout, then remove), Force (remove now), Orphan (leave it registered).',
          }),
        ),
        drainTimeout: Type.Optional(Duration('For DrainThenForce: how long to wait.', { default: '1h' })),
        gracePeriod: Type.Optional(
          Duration('How long a drained superseded registration stays before it is removed.', { default: '5m' }),
        ),
      }),
    ),
  },
  {
    description: 'A service endpoint registered with a Ratchet cluster.',
    ...cel(
      exactlyOneOf(['clusterRef', 'adminUrl'], 'target runtime'),
      atMostOneOf(['clusterRef', 'adminTokenSecretRef'], 'adminTokenSecretRef is only for adminUrl'),
    ),
  },
);

export const SupersededDeployment = Type.Object({
  deploymentId: Type.String(),
  endpoint: Type.String(),
  supersededAt: Type.String({ format: 'date-time' }),
  state: StringEnum(SUPERSEDED_STATES),
  pendingInvocations: Type.Integer({ minimum: 0 }),
  drainedAt: Type.Optional(Type.String({ format: 'date-time' })),
  removeAfter: Type.Optional(Type.String({ format: 'date-time' })),
});

export const DeploymentStatus = Type.Object({
  observedGeneration: Type.Optional(Type.Integer()),
  conditions: Type.Optional(Conditions),
  deploymentId: Type.Optional(Type.String()),
  endpoint: Type.Optional(Type.String({ description: 'The resolved URI or ARN.' })),
  services: Type.Optional(
    Type.Array(Type.Object({ name: Type.String(), revision: Type.Integer() }), {
      maxItems: 256,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
    }),
  ),
  sdkVersion: Type.Optional(Type.String()),
  protocol: Type.Optional(Type.Object({ min: Type.Integer(), max: Type.Integer() })),
  registeredAt: Type.Optional(Type.String({ format: 'date-time' })),
  headersHash: Type.Optional(Type.String({ description: 'Hash of the headers last sent, to detect changes.' })),
  superseded: Type.Optional(
    Type.Array(SupersededDeployment, {
      maxItems: 32,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['deploymentId'],
    }),
  ),
  drainingCount: Type.Optional(Type.Integer({ description: 'Superseded registrations still draining.' })),
  deletionStartedAt: Type.Optional(Type.String({ format: 'date-time' })),
});

export type DeploymentSpec = Static<typeof DeploymentSpec>;
export type DeploymentStatus = Static<typeof DeploymentStatus>;
export type SupersededDeployment = Static<typeof SupersededDeployment>;
