import type { SchemaInfo } from '../admin/model/common.ts';
import type {
  DeploymentResponse,
  DetailedDeploymentResponse,
  HttpDeploymentResponse,
  LambdaDeploymentResponse,
  RegisterDeploymentResponse,
} from '../admin/model/deployments.ts';
import type { KafkaClusterResponse, SimpleKafkaClusterResponse } from '../admin/model/kafka-clusters.ts';
import type { HandlerMetadata, ServiceMetadata } from '../admin/model/services.ts';
import type { SubscriptionResponse } from '../admin/model/subscriptions.ts';
import { formatDuration } from '../config/units.ts';
import { clampJournalRetention, effectiveHandlerSettings } from './handler-settings.ts';
import type {
  ActiveService,
  DeploymentSchema,
  HandlerSchema,
  InputRules,
  KafkaClusterSchema,
  OutputRules,
  ProtocolType,
  ServiceDefaults,
  SubscriptionSchema,
} from './types.ts';

/**
 * The admin API's JSON shapes (the types of the admin API model, `admin/model/`), rendered exactly as
 * restate-server 1.7.12 does: field order (the order serde writes them, as captured from the live server), which
 * fields are omitted when unset, and defaults. Serialise with `toJsonText`, which writes float fields the way serde
 * does (`2.0`, not `2`).
 */

/** What rendering a service needs besides its schema: the transport of the deployment serving this revision. */
export interface RenderContext {
  protocolType: ProtocolType;
  defaults: ServiceDefaults;
}

/**
 * `2026-11-21T20:43:51.067000000Z`: RFC 3339 with 9 fractional digits, as restate renders times; a time on a whole
 * second has no fraction at all (`2026-11-21T23:35:03Z`), as restate (jiff) prints it.
 */
export function formatTimestamp(date: Date): string {
  const iso = date.toISOString();
  if (date.getUTCMilliseconds() === 0) return `${iso.slice(0, -5)}Z`;
  return `${iso.slice(0, -1)}000000Z`;
}

/** restate's description of a JSON schema: its title, else its type, else nothing (the content type is shown). */
function describeJsonSchema(schema: unknown): string | undefined {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return undefined;
  const { title, type } = schema as { title?: unknown; type?: unknown };
  if (typeof title === 'string') return `JSON '${title}'`;
  if (typeof type === 'string') return `JSON ${type}`;
  return undefined;
}

export function inputDescription(input: InputRules): string {
  if (input.contentType === undefined) return input.required ? '<invalid rules>' : 'none';
  return describeJsonSchema(input.jsonSchema) ?? input.contentType;
}

export function outputDescription(output: OutputRules): string {
  if (output.contentType === undefined) return 'none';
  return (
    describeJsonSchema(output.jsonSchema) ??
    (output.setContentTypeIfEmpty ? `optional ${output.contentType}` : output.contentType)
  );
}

/**
 * restate keeps JSON schemas as `serde_json::Value`, whose objects are sorted maps: it echoes them with keys in
 * sorted order at every level (array order is kept). Ratchet stores them as the SDK sent them and sorts on output.
 */
export function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
  return out;
}

function nonEmpty(map: Record<string, string> | undefined): map is Record<string, string> {
  return map !== undefined && Object.keys(map).length > 0;
}

function inactivityInfo(what: 'service' | 'handler', configuredMs: number): SchemaInfo {
  return {
    code: 'RT0021',
    message:
      `The configured inactivity_timeout ${formatDuration(configuredMs)} will not be applied because the ${what} ` +
      'is exposed in Request/Response mode.',
  };
}

/** restate's note on a journal retention above `max-journal-retention`, which is shown (and applied) reduced. */
const JOURNAL_RETENTION_CLAMPED_INFO: SchemaInfo = {
  code: 'RT0022',
  message: 'The configured journal_retention is clamped to the maximum server limit.',
};

/**
 * `HandlerMetadata`: the handler's own settings (what it inherits is on the service), except `public`, which is its
 * effective visibility.
 */
export function renderHandlerOf(service: ActiveService, handler: HandlerSchema, ctx: RenderContext): HandlerMetadata {
  const requestResponse = ctx.protocolType === 'RequestResponse';
  const p = handler.retryPolicy;
  const info: SchemaInfo[] = [];
  if (requestResponse && handler.inactivityTimeoutMs !== undefined) {
    info.push(inactivityInfo('handler', handler.inactivityTimeoutMs));
  }
  const journal =
    handler.journalRetentionMs === undefined
      ? undefined
      : clampJournalRetention(handler.journalRetentionMs, ctx.defaults);
  if (journal?.clamped === true) info.push(JOURNAL_RETENTION_CLAMPED_INFO);
  return {
    name: handler.name,
    ...(handler.ty === undefined ? {} : { ty: handler.ty }),
    ...(handler.documentation === undefined ? {} : { documentation: handler.documentation }),
    ...(nonEmpty(handler.metadata) ? { metadata: handler.metadata } : {}),
    ...(handler.idempotencyRetentionMs === undefined
      ? {}
      : { idempotency_retention: formatDuration(handler.idempotencyRetentionMs) }),
    ...(journal === undefined ? {} : { journal_retention: formatDuration(journal.valueMs) }),
    ...(handler.inactivityTimeoutMs === undefined || requestResponse
      ? {}
      : { inactivity_timeout: formatDuration(handler.inactivityTimeoutMs) }),
    ...(handler.abortTimeoutMs === undefined ? {} : { abort_timeout: formatDuration(handler.abortTimeoutMs) }),
    ...(handler.enableLazyState === undefined ? {} : { enable_lazy_state: handler.enableLazyState }),
    public: effectiveHandlerSettings(service, handler, ctx.defaults).public,
    input_description: inputDescription(handler.input),
    output_description: outputDescription(handler.output),
    ...(handler.input.jsonSchema === undefined ? {} : { input_json_schema: sortKeys(handler.input.jsonSchema) }),
    ...(handler.output.jsonSchema === undefined ? {} : { output_json_schema: sortKeys(handler.output.jsonSchema) }),
    retry_policy: {
      ...(p.initialIntervalMs === undefined ? {} : { initial_interval: formatDuration(p.initialIntervalMs) }),
      ...(p.exponentiationFactor === undefined ? {} : { exponentiation_factor: p.exponentiationFactor }),
      max_attempts: p.maxAttempts ?? null,
      ...(p.maxIntervalMs === undefined ? {} : { max_interval: formatDuration(p.maxIntervalMs) }),
      ...(p.onMaxAttempts === undefined ? {} : { on_max_attempts: p.onMaxAttempts }),
    },
    ...(info.length === 0 ? {} : { info }),
  };
}

/**
 * `ServiceMetadata` of one revision of a service (`overrides` apply to the latest revision only): its settings as a
 * whole, resolved by `effectiveHandlerSettings`.
 */
export function renderService(service: ActiveService, ctx: RenderContext): ServiceMetadata {
  const { schema, overrides } = service;
  const settings = effectiveHandlerSettings(service, undefined, ctx.defaults);
  const requestResponse = ctx.protocolType === 'RequestResponse';
  const configuredInactivity = overrides.inactivityTimeoutMs ?? schema.inactivityTimeoutMs;
  const info: SchemaInfo[] = [];
  if (requestResponse && configuredInactivity !== undefined) info.push(inactivityInfo('service', configuredInactivity));
  if (settings.journalRetentionClamped) info.push(JOURNAL_RETENTION_CLAMPED_INFO);
  const retry = settings.retryPolicy;
  return {
    name: schema.name,
    ty: schema.ty,
    handlers: schema.handlers.map((h) => renderHandlerOf(service, h, ctx)),
    ...(schema.documentation === undefined ? {} : { documentation: schema.documentation }),
    ...(nonEmpty(schema.metadata) ? { metadata: schema.metadata } : {}),
    deployment_id: service.deploymentId,
    revision: service.revision,
    public: settings.public,
    idempotency_retention: formatDuration(settings.idempotencyRetentionMs),
    ...(settings.workflowCompletionRetentionMs === undefined
      ? {}
      : { workflow_completion_retention: formatDuration(settings.workflowCompletionRetentionMs) }),
    journal_retention: formatDuration(settings.journalRetentionMs),
    // A request/response deployment cannot be asked to suspend on inactivity: restate shows 0s.
    inactivity_timeout: formatDuration(requestResponse ? 0 : settings.inactivityTimeoutMs),
    abort_timeout: formatDuration(settings.abortTimeoutMs),
    enable_lazy_state: settings.enableLazyState,
    retry_policy: {
      initial_interval: formatDuration(retry.initialIntervalMs),
      exponentiation_factor: retry.exponentiationFactor,
      max_attempts: retry.maxAttempts,
      max_interval: formatDuration(retry.maxIntervalMs),
      on_max_attempts: retry.onMaxAttempts,
    },
    ...(info.length === 0 ? {} : { info }),
  };
}

export function renderRegisterResponse(
  deployment: DeploymentSchema,
  services: readonly ActiveService[],
  defaults: ServiceDefaults,
): RegisterDeploymentResponse {
  const ctx: RenderContext = { protocolType: deployment.protocolType, defaults };
  return {
    id: deployment.id,
    services: services.map((s) => renderService(s, ctx)),
    min_protocol_version: deployment.minProtocolVersion,
    max_protocol_version: deployment.maxProtocolVersion,
    sdk_version: deployment.sdkVersion ?? null,
  };
}

/** restate's HTTP or Lambda deployment shape, by the deployment's endpoint. */
function deploymentBase<S>(
  deployment: DeploymentSchema,
  services: S[],
):
  | (Omit<HttpDeploymentResponse, 'services'> & { services: S[] })
  | (Omit<LambdaDeploymentResponse, 'services'> & { services: S[] }) {
  const endpoint = deployment.endpoint;
  const common = {
    ...(nonEmpty(deployment.additionalHeaders) ? { additional_headers: deployment.additionalHeaders } : {}),
    ...(nonEmpty(deployment.metadata) ? { metadata: deployment.metadata } : {}),
    created_at: formatTimestamp(deployment.createdAt),
    min_protocol_version: deployment.minProtocolVersion,
    max_protocol_version: deployment.maxProtocolVersion,
    sdk_version: deployment.sdkVersion ?? null,
    services,
  };
  if (endpoint.kind === 'lambda') {
    return {
      id: deployment.id,
      arn: endpoint.arn,
      ...(endpoint.assumeRoleArn === undefined ? {} : { assume_role_arn: endpoint.assumeRoleArn }),
      ...common,
    };
  }
  return {
    id: deployment.id,
    uri: endpoint.uri,
    protocol_type: deployment.protocolType,
    http_version: endpoint.httpVersion,
    ...common,
  };
}

export function renderDeployment(deployment: DeploymentSchema): DeploymentResponse {
  return deploymentBase(
    deployment,
    deployment.services.map((s) => ({ name: s.name, revision: s.revision })),
  );
}

export function renderDetailedDeployment(
  deployment: DeploymentSchema,
  services: readonly ActiveService[],
  defaults: ServiceDefaults,
): DetailedDeploymentResponse {
  const ctx: RenderContext = { protocolType: deployment.protocolType, defaults };
  return deploymentBase(
    deployment,
    services.map((s) => renderService(s, ctx)),
  );
}

export function renderSubscription(subscription: SubscriptionSchema): SubscriptionResponse {
  return {
    id: subscription.id,
    source: subscription.source,
    sink: subscription.sink,
    options: subscription.options,
  };
}

/** librdkafka properties holding credentials or key material, beyond any name containing one of `SECRET_WORDS`. */
const SECRET_PROPERTIES: ReadonlySet<string> = new Set([
  'sasl.username',
  'sasl.jaas.config',
  'sasl.oauthbearer.config',
  'sasl.oauthbearer.token.endpoint.url',
  'sasl.oauthbearer.assertion.private.key.file',
  'sasl.oauthbearer.assertion.private.key.pem',
  'ssl.key.pem',
  'ssl.key.location',
  'ssl.keystore.location',
]);
const SECRET_WORDS = ['password', 'secret', 'passphrase'];
export const REDACTED = '***';

/** Properties as shown by the admin API: credentials replaced by `***`, matching restate-server's redaction. */
export function redactKafkaProperties(properties: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(properties)) {
    const lower = key.toLowerCase();
    out[key] = SECRET_PROPERTIES.has(lower) || SECRET_WORDS.some((w) => lower.includes(w)) ? REDACTED : value;
  }
  return out;
}

/**
 * restate calls clusters of its configuration file deprecated; for Ratchet they are a supported way to configure a
 * cluster (the specification's, even), so the note only says where the cluster comes from.
 */
const STATIC_CLUSTER_INFO: SchemaInfo = {
  message:
    'This Kafka cluster is defined in the configuration file (kafka-clusters / RATCHET_KAFKA_CLUSTERS); it cannot ' +
    'be changed or deleted through the admin API.',
};

/**
 * `SimpleKafkaClusterResponse`, or `KafkaClusterResponse` when `subscriptions` is given. Clusters of the
 * configuration file carry a note saying so as `info`, and the epoch as creation time (as restate shows them).
 */
export function renderKafkaCluster(cluster: KafkaClusterSchema): SimpleKafkaClusterResponse;
export function renderKafkaCluster(
  cluster: KafkaClusterSchema,
  subscriptions: readonly SubscriptionSchema[],
): KafkaClusterResponse;
export function renderKafkaCluster(
  cluster: KafkaClusterSchema,
  subscriptions?: readonly SubscriptionSchema[],
): SimpleKafkaClusterResponse | KafkaClusterResponse {
  return {
    name: cluster.name,
    properties: redactKafkaProperties(cluster.properties),
    created_at: formatTimestamp(cluster.createdAt),
    ...(subscriptions === undefined ? {} : { subscriptions: subscriptions.map(renderSubscription) }),
    ...(cluster.static ? { info: [STATIC_CLUSTER_INFO] } : {}),
  };
}

/** Float fields of restate's shapes (`f32`), which serde always writes with a fraction: `2.0`. Keyed by parent. */
const FLOAT_FIELDS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['retry_policy', new Set(['exponentiation_factor'])],
]);

function floatText(value: number): string {
  return Number.isInteger(value) ? `${value}.0` : JSON.stringify(value);
}

/**
 * `JSON.stringify` for admin responses, except that integral values of float fields keep their `.0` (JavaScript would
 * print `2` where restate prints `2.0`). Object keys keep insertion order; undefined fields are skipped. Only the
 * known float fields of the rendered shapes are affected, never user data such as JSON schemas.
 */
export function toJsonText(value: unknown): string {
  return write(value, undefined);
}

function write(value: unknown, floats: ReadonlySet<string> | undefined, key?: string): string {
  if (typeof value === 'number' && key !== undefined && floats?.has(key) === true && Number.isFinite(value)) {
    return floatText(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => write(v, undefined)).join(',')}]`;
  if (typeof value === 'object' && value !== null && !(value instanceof Date)) {
    const parts: string[] = [];
    const childFloats = key === undefined ? undefined : FLOAT_FIELDS.get(key);
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined || typeof v === 'function') continue;
      parts.push(`${JSON.stringify(k)}:${write(v, childFloats, k)}`);
    }
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
