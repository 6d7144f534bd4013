/**
 * JSON Schemas of the admin API's bodies, under restate-server 1.7.12's component names so that clients generated
 * from either document line up. They describe what Ratchet sends and accepts (`schema/render.ts`, `request.ts`):
 * HTTP deployments only, `service_code` beside `restate_code` in errors. `additionalProperties` is left open, as in
 * restate's document (unknown request fields are ignored; responses may gain fields).
 */

type Schema = Record<string, unknown>;

const string: Schema = { type: 'string' };
const nullableString: Schema = { type: ['string', 'null'] };
const stringMap: Schema = { type: 'object', additionalProperties: { type: 'string' } };
const nullableStringMap: Schema = { type: ['object', 'null'], additionalProperties: { type: 'string' } };
const protocolVersion: Schema = { type: 'integer', format: 'int32' };

function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

function arrayOf(name: string): Schema {
  return { type: 'array', items: ref(name) };
}

const DURATION_NOTE =
  "A duration in jiff's friendly format (`1h 30m`, `500ms`, `2d`) or ISO-8601 (`PT1M`); responses use the friendly " +
  'format.';

function duration(what: string, nullable = true): Schema {
  return { type: nullable ? ['string', 'null'] : 'string', description: `${what} ${DURATION_NOTE}` };
}

const deploymentFields = (services: Schema): Schema => ({
  id: ref('DeploymentId'),
  uri: { type: 'string', format: 'uri', description: 'Normalised, with a trailing `/`.' },
  protocol_type: ref('ProtocolType'),
  http_version: { type: 'string', enum: ['HTTP/2.0', 'HTTP/1.1'] },
  additional_headers: { ...stringMap, description: 'Headers sent with every request to the deployment.' },
  metadata: stringMap,
  created_at: { type: 'string', description: 'RFC 3339, nanosecond precision.' },
  min_protocol_version: protocolVersion,
  max_protocol_version: protocolVersion,
  sdk_version: nullableString,
  services,
  info: arrayOf('SchemaInfo'),
});

const DEPLOYMENT_REQUIRED = [
  'id',
  'uri',
  'protocol_type',
  'http_version',
  'created_at',
  'min_protocol_version',
  'max_protocol_version',
  'services',
];

export const COMPONENT_SCHEMAS: Record<string, Schema> = {
  ErrorDescriptionResponse: {
    type: 'object',
    description: 'Error details. Coded errors start their message with `[CODE] `.',
    required: ['message'],
    properties: {
      message: string,
      restate_code: { ...nullableString, description: 'Error code (META/RT), as restate clients read it.' },
      service_code: { ...nullableString, description: "The same code, under the specification's name." },
    },
  },
  VersionInformation: {
    type: 'object',
    required: ['version', 'min_admin_api_version', 'max_admin_api_version', 'features'],
    properties: {
      version: { ...string, description: "Ratchet's version." },
      min_admin_api_version: { type: 'integer', minimum: 0 },
      max_admin_api_version: { type: 'integer', minimum: 0 },
      ingress_endpoint: nullableString,
      features: { type: 'object', additionalProperties: { type: 'boolean' } },
    },
  },
  ClusterHealthResponse: {
    type: 'object',
    description: 'Cluster health information',
    required: ['cluster_name', 'nodes'],
    properties: {
      cluster_name: { ...string, description: 'Cluster name' },
      metadata_cluster_health: {
        oneOf: [
          { type: 'null' },
          {
            type: 'object',
            required: ['members'],
            properties: {
              members: {
                type: 'array',
                items: { type: 'integer', minimum: 0 },
                description: 'Plain node ids of the live nodes (each holds the whole metadata: it is in PostgreSQL).',
              },
            },
          },
        ],
      },
      nodes: {
        type: 'array',
        description: 'Every registered runtime node (Ratchet).',
        items: {
          type: 'object',
          required: [
            'name',
            'id',
            'address',
            'ingress_address',
            'alive',
            'leaving',
            'started_at',
            'last_heartbeat',
            'leader_of',
          ],
          properties: {
            name: { ...string, description: 'RATCHET_NODE_NAME of the node.' },
            id: { type: 'integer', minimum: 0, description: 'Its plain node id.' },
            address: { ...string, description: 'host:port of its admin listener, as peers reach it.' },
            ingress_address: { ...string, description: 'host:port of its ingress listener, as peers reach it.' },
            alive: { type: 'boolean', description: 'Its heartbeat is younger than the lease timeout.' },
            leaving: { type: 'boolean', description: 'It is stopping and hands its partitions over.' },
            started_at: { ...string, format: 'date-time' },
            last_heartbeat: { ...string, format: 'date-time' },
            leader_of: { type: 'array', items: { type: 'integer', minimum: 0 }, description: 'Partitions it leads.' },
          },
        },
      },
    },
  },
  DeploymentId: { type: 'string', description: '`dp_1` followed by 22 base62 characters.' },
  SubscriptionId: { type: 'string', description: '`sub_1` followed by 22 base62 characters.' },
  KafkaClusterName: {
    type: 'string',
    format: 'hostname',
    description: "Letters, digits, '.', '_' and '-', starting and ending with a letter or digit.",
  },
  ProtocolType: { type: 'string', enum: ['RequestResponse', 'BidiStream'] },
  ServiceType: { type: 'string', enum: ['Service', 'VirtualObject', 'Workflow'] },
  HandlerMetadataType: { type: 'string', enum: ['Exclusive', 'Shared', 'Workflow'] },
  OnMaxAttempts: { type: 'string', enum: ['Pause', 'Kill'] },
  SchemaInfo: {
    type: 'object',
    required: ['message'],
    properties: { code: nullableString, message: string },
  },
  ServiceNameRevPair: {
    type: 'object',
    required: ['name', 'revision'],
    properties: { name: string, revision: { type: 'integer', minimum: 0 } },
  },
  HandlerRetryPolicyMetadata: {
    type: 'object',
    description: 'Only what the handler sets; `max_attempts` is always present (null = inherited from the service).',
    properties: {
      initial_interval: nullableString,
      exponentiation_factor: { type: ['number', 'null'], format: 'float' },
      max_attempts: { type: ['integer', 'null'], minimum: 1 },
      max_interval: nullableString,
      on_max_attempts: { oneOf: [{ type: 'null' }, ref('OnMaxAttempts')] },
    },
  },
  ServiceRetryPolicyMetadata: {
    type: 'object',
    properties: {
      initial_interval: string,
      exponentiation_factor: { type: 'number', format: 'float' },
      max_attempts: { type: ['integer', 'null'], minimum: 1 },
      max_interval: nullableString,
      on_max_attempts: ref('OnMaxAttempts'),
    },
  },
  HandlerMetadata: {
    type: 'object',
    required: ['name', 'input_description', 'output_description'],
    properties: {
      name: string,
      ty: { oneOf: [{ type: 'null' }, ref('HandlerMetadataType')] },
      documentation: nullableString,
      metadata: stringMap,
      idempotency_retention: nullableString,
      journal_retention: nullableString,
      inactivity_timeout: nullableString,
      abort_timeout: nullableString,
      enable_lazy_state: { type: ['boolean', 'null'] },
      public: { type: 'boolean' },
      input_description: string,
      output_description: string,
      input_json_schema: {},
      output_json_schema: {},
      retry_policy: ref('HandlerRetryPolicyMetadata'),
      info: arrayOf('SchemaInfo'),
    },
  },
  ServiceMetadata: {
    type: 'object',
    required: ['name', 'ty', 'handlers', 'deployment_id', 'revision'],
    properties: {
      name: string,
      ty: ref('ServiceType'),
      handlers: arrayOf('HandlerMetadata'),
      documentation: nullableString,
      metadata: stringMap,
      deployment_id: ref('DeploymentId'),
      revision: { type: 'integer', minimum: 0 },
      public: { type: 'boolean' },
      idempotency_retention: string,
      workflow_completion_retention: { ...nullableString, description: 'Workflows only.' },
      journal_retention: nullableString,
      inactivity_timeout: { ...string, description: '`0s` when the deployment is in request/response mode.' },
      abort_timeout: string,
      enable_lazy_state: { type: 'boolean' },
      retry_policy: ref('ServiceRetryPolicyMetadata'),
      info: arrayOf('SchemaInfo'),
    },
  },
  ListServicesResponse: {
    type: 'object',
    required: ['services'],
    properties: { services: arrayOf('ServiceMetadata') },
  },
  ListServiceHandlersResponse: {
    type: 'object',
    required: ['handlers'],
    properties: { handlers: arrayOf('HandlerMetadata') },
  },
  ModifyServiceRequest: {
    type: 'object',
    description: 'Every field is optional; null or absent leaves the setting unchanged.',
    properties: {
      public: { type: ['boolean', 'null'], description: 'false: only other services may call it, not the ingress.' },
      idempotency_retention: duration('How long results of idempotent calls are kept.'),
      workflow_completion_retention: duration('How long a workflow result is kept (workflows only, else 400).'),
      journal_retention: duration(
        'How long journals of completed invocations are kept; clamped to the server maximum (RT0022).',
      ),
      inactivity_timeout: duration('Ignored for request/response deployments (RT0021).'),
      abort_timeout: duration('How long an attempt may stay silent before it is aborted.'),
    },
  },
  DeploymentResponse: {
    type: 'object',
    title: 'HttpDeploymentResponse',
    required: DEPLOYMENT_REQUIRED,
    properties: deploymentFields(arrayOf('ServiceNameRevPair')),
  },
  DetailedDeploymentResponse: {
    type: 'object',
    title: 'DetailedHttpDeploymentResponse',
    required: DEPLOYMENT_REQUIRED,
    properties: deploymentFields(arrayOf('ServiceMetadata')),
  },
  ListDeploymentsResponse: {
    type: 'object',
    required: ['deployments'],
    properties: { deployments: arrayOf('DeploymentResponse') },
  },
  RegisterDeploymentRequest: {
    type: 'object',
    title: 'RegisterHttpDeploymentRequest',
    description: 'Ratchet registers HTTP deployments; a Lambda request (`arn`) is answered with 501.',
    required: ['uri'],
    properties: {
      uri: { type: 'string', format: 'uri' },
      additional_headers: { ...nullableStringMap, description: 'Sent with discovery and every invocation.' },
      use_http_11: { type: 'boolean', description: 'Discover (and invoke) over HTTP/1.1: request/response mode.' },
      force: {
        type: ['boolean', 'null'],
        description: 'Replace the deployment with the same uri. Defaults to true under `/v2`, false otherwise.',
      },
      breaking: { type: 'boolean', description: 'Allow a service to change type (META0006 otherwise).' },
      dry_run: { type: 'boolean', description: 'Discover and check, store nothing.' },
      metadata: stringMap,
    },
  },
  RegisterDeploymentResponse: {
    type: 'object',
    required: ['id', 'services'],
    properties: {
      id: ref('DeploymentId'),
      services: arrayOf('ServiceMetadata'),
      min_protocol_version: protocolVersion,
      max_protocol_version: protocolVersion,
      sdk_version: nullableString,
      info: arrayOf('SchemaInfo'),
    },
  },
  UpdateDeploymentRequest: {
    type: 'object',
    title: 'UpdateHttpDeploymentRequest',
    description:
      'Without `uri`, `additional_headers` and `use_http_11` nothing changes. Otherwise the endpoint is discovered ' +
      'again and must keep the same protocol versions, services, service types and handlers (META0016).',
    properties: {
      uri: { type: ['string', 'null'], format: 'uri' },
      additional_headers: { ...nullableStringMap, description: 'Replaces all headers; null leaves them unchanged.' },
      use_http_11: { type: ['boolean', 'null'] },
      overwrite: { type: 'boolean', description: 'Also replace the stored service schemas with the discovered ones.' },
      dry_run: { type: 'boolean' },
    },
  },
  CreateKafkaClusterRequest: {
    type: 'object',
    required: ['name', 'properties'],
    properties: {
      name: ref('KafkaClusterName'),
      properties: {
        ...stringMap,
        description: "librdkafka properties; must contain 'bootstrap.servers' or 'metadata.broker.list'.",
      },
    },
  },
  UpdateKafkaClusterRequest: {
    type: 'object',
    required: ['properties'],
    properties: { properties: { ...stringMap, description: 'Replaces all properties.' } },
  },
  SimpleKafkaClusterResponse: {
    type: 'object',
    required: ['name', 'properties', 'created_at'],
    properties: {
      name: ref('KafkaClusterName'),
      properties: { ...stringMap, description: 'Credentials are shown as `***`.' },
      created_at: string,
      info: arrayOf('SchemaInfo'),
    },
  },
  KafkaClusterResponse: {
    type: 'object',
    required: ['name', 'properties', 'created_at', 'subscriptions'],
    properties: {
      name: ref('KafkaClusterName'),
      properties: { ...stringMap, description: 'Credentials are shown as `***`.' },
      created_at: string,
      subscriptions: { ...arrayOf('SubscriptionResponse'), description: 'Empty unless `include_subscriptions`.' },
      info: arrayOf('SchemaInfo'),
    },
  },
  ListKafkaClustersResponse: {
    type: 'object',
    required: ['clusters'],
    properties: { clusters: arrayOf('SimpleKafkaClusterResponse') },
  },
  CreateSubscriptionRequest: {
    type: 'object',
    required: ['source', 'sink'],
    properties: {
      source: { type: 'string', format: 'uri', description: '`kafka://<cluster_name>/<topic_name>`' },
      sink: { type: 'string', format: 'uri', description: '`service://<service_name>/<handler_name>`' },
      options: { ...nullableStringMap, description: 'Kafka consumer options.' },
    },
  },
  SubscriptionResponse: {
    type: 'object',
    required: ['id', 'source', 'sink', 'options'],
    properties: { id: ref('SubscriptionId'), source: string, sink: string, options: stringMap },
  },
  ListSubscriptionsResponse: {
    type: 'object',
    required: ['subscriptions'],
    properties: { subscriptions: arrayOf('SubscriptionResponse') },
  },
  ModifyServiceStateRequest: {
    type: 'object',
    required: ['object_key', 'new_state'],
    properties: {
      object_key: { ...string, description: 'The key of the virtual object or workflow.' },
      new_state: {
        type: 'object',
        description: 'The new state: every key with its value as bytes.',
        additionalProperties: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 255 } },
      },
      version: {
        ...nullableString,
        description: 'Apply only if the current state has this version (as `restate state` computes it).',
      },
    },
  },
  QueryRequest: {
    type: 'object',
    required: ['query'],
    properties: { query: { type: 'string', description: 'One SQL statement.' } },
  },
  QueryResponse: {
    type: 'object',
    required: ['rows'],
    description: 'With `accept: application/json`; otherwise the answer is an Arrow IPC stream.',
    properties: { rows: { type: 'array', items: { type: 'object' } } },
  },
  RestartAsNewInvocationResponse: {
    type: 'object',
    required: ['new_invocation_id'],
    properties: { new_invocation_id: string },
  },
};
