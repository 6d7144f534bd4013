/**
 * Ratchet's model of what deployments expose, normalised from the discovery manifest. Durations are milliseconds.
 * Admin responses are rendered from this model (see render.ts); the engine and ingress read it through
 * SchemaRegistry.
 */
export type ServiceType = 'Service' | 'VirtualObject' | 'Workflow';
export type HandlerType = 'Exclusive' | 'Shared' | 'Workflow';
export type ProtocolType = 'BidiStream' | 'RequestResponse';
export type OnMaxAttempts = 'Pause' | 'Kill';

export interface RetryPolicyOverrides {
  initialIntervalMs?: number;
  exponentiationFactor?: number;
  maxAttempts?: number;
  maxIntervalMs?: number;
  onMaxAttempts?: OnMaxAttempts;
}

export interface InputRules {
  /** undefined = the handler takes no input (an empty body is the only valid one). */
  contentType?: string;
  required: boolean;
  jsonSchema?: unknown;
}

export interface OutputRules {
  contentType?: string;
  setContentTypeIfEmpty: boolean;
  jsonSchema?: unknown;
}

/** What a manifest may declare both for a service and for each of its handlers. */
export interface DeclaredSettings {
  documentation?: string;
  metadata?: Record<string, string>;
  retryPolicy: RetryPolicyOverrides;
  idempotencyRetentionMs?: number;
  journalRetentionMs?: number;
  workflowCompletionRetentionMs?: number;
  inactivityTimeoutMs?: number;
  abortTimeoutMs?: number;
  enableLazyState?: boolean;
  ingressPrivate?: boolean;
}

export interface HandlerSchema extends DeclaredSettings {
  name: string;
  ty?: HandlerType;
  input: InputRules;
  output: OutputRules;
}

export interface ServiceSchema extends DeclaredSettings {
  name: string;
  ty: ServiceType;
  handlers: HandlerSchema[];
}

/** Settings changed through `PATCH /services/{name}`; they win over the manifest. */
export interface ServiceOverrides {
  public?: boolean;
  idempotencyRetentionMs?: number;
  workflowCompletionRetentionMs?: number;
  journalRetentionMs?: number;
  inactivityTimeoutMs?: number;
  abortTimeoutMs?: number;
}

export type HttpVersion = 'HTTP/2.0' | 'HTTP/1.1';

/** An HTTP deployment: its normalised URI and the HTTP version discovery ran over. */
export interface HttpEndpoint {
  kind: 'http';
  uri: string;
  httpVersion: HttpVersion;
}

/** A Lambda deployment: its qualified function ARN and, when set, the role assumed to invoke it. */
export interface LambdaEndpoint {
  kind: 'lambda';
  arn: string;
  assumeRoleArn?: string | undefined;
}

/** Where a deployment's services are reached; its address (URI or ARN) is unique among deployments. */
export type DeploymentEndpoint = HttpEndpoint | LambdaEndpoint;

/** The URI or ARN: what identifies the endpoint in messages and in the uniqueness check. */
export function endpointAddress(endpoint: DeploymentEndpoint): string {
  return endpoint.kind === 'http' ? endpoint.uri : endpoint.arn;
}

export interface DeploymentSchema {
  id: string;
  endpoint: DeploymentEndpoint;
  protocolType: ProtocolType;
  additionalHeaders: Record<string, string>;
  metadata: Record<string, string>;
  minProtocolVersion: number;
  maxProtocolVersion: number;
  sdkVersion?: string;
  createdAt: Date;
  /** Services as registered by this deployment, with the revision each got. */
  services: { name: string; revision: number }[];
}

/** The latest revision of a service, with the deployment serving it. */
export interface ActiveService {
  schema: ServiceSchema;
  revision: number;
  deploymentId: string;
  overrides: ServiceOverrides;
}

/**
 * What a service gets when neither its manifest nor the admin API sets a value (runtime configuration:
 * `default-*` settings, the invoker timeouts and `default-retry-policy`). Rendered by the admin API.
 */
export interface ServiceDefaults {
  idempotencyRetentionMs: number;
  journalRetentionMs: number;
  /** Upper bound of any journal retention (RT0022); undefined = no bound. */
  maxJournalRetentionMs: number | undefined;
  workflowCompletionRetentionMs: number;
  inactivityTimeoutMs: number;
  abortTimeoutMs: number;
  retryPolicy: {
    initialIntervalMs: number;
    exponentiationFactor: number;
    maxAttempts: number;
    maxIntervalMs: number;
    onMaxAttempts: OnMaxAttempts;
  };
}

/**
 * A Kafka cluster subscriptions can read from: registered through the admin API (stored), or defined in the
 * configuration file (`static`, read-only, never stored).
 */
export interface KafkaClusterSchema {
  name: string;
  /** librdkafka properties, in the order given; always holds `bootstrap.servers` or `metadata.broker.list`. */
  properties: Record<string, string>;
  createdAt: Date;
  static: boolean;
}

/** A Kafka subscription: records of `kafka://<cluster>/<topic>` become invocations of `service://<service>/<handler>`. */
export interface SubscriptionSchema {
  id: string;
  /** As rendered: `kafka://<cluster>/<topic>`. */
  source: string;
  /** As rendered: `service://<service>/<handler>`. */
  sink: string;
  cluster: string;
  topic: string;
  serviceName: string;
  handlerName: string;
  /** Consumer options, with `group.id` and `client.id` filled in when neither the request nor the cluster set them. */
  options: Record<string, string>;
  createdAt: Date;
}
