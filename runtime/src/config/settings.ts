import type { BindAddress } from './bind-address.ts';

/*
 * What can be configured: the shape of the frozen `Config` handed out by `loadConfig()` (`config.ts`), and every
 * setting's environment variable and config file key.
 *
 * Names: `RATCHET_<SECTION>_<NAME>` in the environment, `section.name` (kebab-case) in the TOML file; `SETTINGS` below
 * is the complete list.
 */

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * `json`: one JSON object per line (what log shippers and Loki-style tools ingest); `pretty`: human-readable lines;
 * `auto`: pretty when stdout is a terminal, JSON otherwise. The observability store always gets JSON.
 */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const ON_MAX_ATTEMPTS = ['pause', 'kill'] as const;
export type OnMaxAttempts = (typeof ON_MAX_ATTEMPTS)[number];

/** PEM files of an HTTPS listener, re-read when they change. */
export interface TlsFilesConfig {
  readonly certFile: string;
  readonly keyFile: string;
  /** When set, clients must present a certificate issued by one of these CAs. */
  readonly clientCaFile?: string | undefined;
}

export interface ListenerConfig {
  readonly bind: BindAddress;
  /** HTTPS with these files; plain HTTP when undefined (the dev-mode default). */
  readonly tls?: TlsFilesConfig | undefined;
}

/** Limits every HTTP listener (ingress, admin, observability, metrics) applies to its clients. */
export interface HttpLimitsConfig {
  /** Largest request head (request line and headers); larger is refused with 431. */
  readonly maxHeaderBytes: number;
  /** Time a client has to send the request head (408 after it). */
  readonly headersTimeoutMs: number;
  /** Time a client has to send the whole request, body included (408 after it). */
  readonly requestTimeoutMs: number;
  /** Connections open at once per listener; more are closed at once. */
  readonly maxConnections: number;
}

/** The cluster-wide ingress limit (specification section 8); undefined = no limit. */
export interface IngressLimitConfig {
  readonly perHour: number;
  readonly burst: number;
}

export interface IngressConfig extends ListenerConfig {
  readonly limit?: IngressLimitConfig | undefined;
  /** Largest request body the ingress reads (413 above). */
  readonly maxBodyBytes: number;
}

/** The observability listener (3100) and the log and trace store behind it; see `observability/README.md`. */
export interface ObservabilityConfig extends ListenerConfig {
  /**
   * Whether this node writes its log lines and spans to the cluster's store. Off by default while their cost is over
   * its budget (bench/README.md, "Observability"); spans still go to an OTLP collector when one is configured.
   */
  readonly store: boolean;
  /** Logs and spans older than this are dropped (in six-hour partitions). */
  readonly retentionMs: number;
  /** Each of the two tables (log lines, spans) is kept under this size on disk, give or take a partition. */
  readonly maxSizeBytes: number;
  /** Lines at this level or above go to the store, whatever stdout's level; `silent` stores no logs. */
  readonly logLevel: LogLevel;
  /** A query on 3100 running longer is cancelled. */
  readonly queryTimeoutMs: number;
}

/** The PostgreSQL wire-protocol listener (9071); see `introspection/pgwire/README.md`. */
export interface IntrospectionConfig extends ListenerConfig {
  /** What SQL clients log in with (user = cluster name); undefined = no password (dev mode on loopback). */
  readonly password: string | undefined;
  /** PEM files; when set, clients may negotiate TLS (SSLRequest). */
  readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  /** Longest statement of a SQL session before PostgreSQL cancels it (57014). */
  readonly statementTimeoutMs: number;
  /** Most SQL sessions at once in this process (each holds one PostgreSQL connection); more are refused (53300). */
  readonly maxSessions: number;
  /** Sessions one client (an access token, or a user name) may hold at once. */
  readonly maxSessionsPerUser: number;
  /** Most rows one `POST /query` answer may hold; a statement returning more is refused (400), never cut. */
  readonly rowLimit: number;
}

/** Managed mode: what every request on the ingress, admin and introspection listeners must authenticate with. */
export interface AuthConfig {
  /**
   * Absolute path of the verification keys (a JWKS document or PEM blocks, see `auth/README.md`); re-read when it
   * changes. Undefined = dev mode: no authentication.
   */
  readonly keysFile: string | undefined;
}

export interface DatabaseConfig {
  /** External PostgreSQL (`postgres://` / `postgresql://`); undefined = embedded PostgreSQL under `dataDir`. */
  readonly url: string | undefined;
  readonly poolSize: number;
}

export interface LogConfig {
  readonly level: LogLevel;
  readonly format: LogFormat;
}

export interface InvokerConfig {
  /** Time without messages from the deployment, while Ratchet waits on something, before the stream is suspended. */
  readonly inactivityTimeoutMs: number;
  /** Time without messages, while only responses are awaited, before the attempt is aborted (RT0001). */
  readonly abortTimeoutMs: number;
  /** Largest message accepted from a service (RT0003). */
  readonly messageSizeLimitBytes: number;
  /** Deepest nesting of awaited futures before the invocation is paused (RT0025). */
  readonly maxAwaitedFutureDepth: number;
  /**
   * Lowest service protocol version accepted for new invocations (5–7): a service whose deployment speaks only older
   * versions is deprecated, its new requests are refused with RT0020 until a newer deployment is registered.
   */
  readonly minProtocolVersion: number;
  /** Highest service protocol version offered to deployments (5–7); pinned per invocation. */
  readonly maxProtocolVersion: number;
}

export interface RetryPolicyConfig {
  readonly initialIntervalMs: number;
  readonly exponentiationFactor: number;
  readonly maxIntervalMs: number;
  readonly maxAttempts: number;
  readonly onMaxAttempts: OnMaxAttempts;
}

/** Defaults for services that do not set their own (admin API `ServiceMetadata`). */
export interface ServiceDefaultsConfig {
  readonly idempotencyRetentionMs: number;
  /** Already clamped to `maxJournalRetentionMs` (RT0022). */
  readonly journalRetentionMs: number;
  /** Upper bound on any journal retention; undefined = no bound. */
  readonly maxJournalRetentionMs: number | undefined;
  readonly workflowCompletionRetentionMs: number;
}

export interface StorageConfig {
  /** Number of partitions of the key space; fixed when the cluster's storage is created. */
  readonly partitions: number;
  readonly groupCommit: {
    readonly maxDelayMs: number;
    readonly maxBatch: number;
    /** Group-commit transactions in flight at once, each on its own pooled connection. */
    readonly concurrency: number;
  };
  /** How often completed invocations and journals whose retention ended are removed. */
  readonly cleanupIntervalMs: number;
}

/** A Kafka cluster defined in the configuration (read-only through the admin API). */
export interface KafkaClusterConfig {
  readonly name: string;
  /** librdkafka properties; holds `bootstrap.servers` or `metadata.broker.list`. */
  readonly properties: Readonly<Record<string, string>>;
}

export interface KafkaConfig {
  /** Clusters subscriptions may read from besides those registered through `POST /kafka-clusters`. */
  readonly clusters: readonly KafkaClusterConfig[];
  /** Back-pressure: a topic partition pauses while this many of its records' invocations are unfinished. */
  readonly maxInflightPerPartition: number;
  /**
   * Fault injection for the durability tests, never for production: `after-enqueue` makes the process SIGKILL itself
   * right after a batch of records was stored as invocations and before its offsets reach Kafka (the worst moment).
   */
  readonly crashPoint: 'after-enqueue' | undefined;
}

/** Membership, partition placement and hand-over between runtime processes sharing one database. */
export interface ClusterConfig {
  /** Host peers reach this process at (its listeners' ports are added); undefined = the bind hosts. */
  readonly advertisedAddress: string | undefined;
  /** A node whose heartbeat (or a partition whose lease) is older than this is dead (or free). */
  readonly leaseTimeoutMs: number;
  /** How often a node writes its heartbeat, renews its leases and rebalances. */
  readonly heartbeatIntervalMs: number;
  /** How long a request for a partition between owners waits for one before it is answered 503. */
  readonly partitionWaitMs: number;
  /** After SIGTERM: how long the listeners stay open (not ready, partitions handed over) before draining. */
  readonly shutdownDelayMs: number;
}

export interface Config {
  readonly clusterName: string;
  /** This process's name, e.g. as lease owner; unique per process. */
  readonly nodeName: string;
  /** Absolute. */
  readonly dataDir: string;
  /** Absolute path of the config file read, if any. */
  readonly configFile: string | undefined;
  readonly database: DatabaseConfig;
  readonly ingress: IngressConfig;
  readonly admin: ListenerConfig;
  readonly introspection: IntrospectionConfig;
  readonly observability: ObservabilityConfig;
  readonly metrics: ListenerConfig;
  readonly http: HttpLimitsConfig;
  readonly log: LogConfig;
  readonly invoker: InvokerConfig;
  readonly defaultRetryPolicy: RetryPolicyConfig;
  readonly serviceDefaults: ServiceDefaultsConfig;
  readonly storage: StorageConfig;
  readonly kafka: KafkaConfig;
  readonly auth: AuthConfig;
  readonly cluster: ClusterConfig;
  readonly experimental: ExperimentalConfig;
  /**
   * Problems that did not stop loading (unknown `RATCHET_*` variables, a clamped retention). The logger does not
   * exist yet while config loads, so `main.ts` logs these once it does.
   */
  readonly warnings: readonly string[];
}

/** Features restate-server 1.7 keeps behind `experimental-enable-*` switches; off by default as there. */
export interface ExperimentalConfig {
  /**
   * Flow control: scoped invocations, limit keys, the limiter's rule book (`/limits/rules`) and pausable virtual
   * queues (`/vqueues/…`). Off: scopes and limit keys are refused (RT0024) as restate refuses them.
   */
  readonly vqueues: boolean;
}

/** Every setting: environment variable → config file key. */
export const SETTINGS = {
  RATCHET_CLUSTER_NAME: 'cluster-name',
  RATCHET_NODE_NAME: 'node-name',
  RATCHET_DATA_DIR: 'data-dir',
  RATCHET_DATABASE_URL: 'database.url',
  RATCHET_DATABASE_POOL_SIZE: 'database.pool-size',
  RATCHET_INGRESS_BIND: 'ingress.bind',
  RATCHET_INGRESS_RATE_LIMIT: 'ingress.rate-limit',
  RATCHET_INGRESS_MAX_BODY_SIZE: 'ingress.max-body-size',
  RATCHET_INTROSPECTION_MAX_SESSIONS_PER_USER: 'introspection.max-sessions-per-user',
  RATCHET_HTTP_MAX_HEADER_SIZE: 'http.max-header-size',
  RATCHET_HTTP_HEADERS_TIMEOUT: 'http.headers-timeout',
  RATCHET_HTTP_REQUEST_TIMEOUT: 'http.request-timeout',
  RATCHET_HTTP_MAX_CONNECTIONS: 'http.max-connections',
  RATCHET_INGRESS_RATE_BURST: 'ingress.rate-burst',
  RATCHET_ADMIN_BIND: 'admin.bind',
  RATCHET_INTROSPECTION_BIND: 'introspection.bind',
  RATCHET_OBSERVABILITY_BIND: 'observability.bind',
  RATCHET_OBSERVABILITY_STORE: 'observability.store',
  RATCHET_OBSERVABILITY_RETENTION: 'observability.retention',
  RATCHET_OBSERVABILITY_MAX_SIZE: 'observability.max-size',
  RATCHET_OBSERVABILITY_LOG_LEVEL: 'observability.log-level',
  RATCHET_OBSERVABILITY_QUERY_TIMEOUT: 'observability.query-timeout',
  RATCHET_METRICS_BIND: 'metrics.bind',
  RATCHET_LOG_LEVEL: 'log.level',
  RATCHET_LOG_FORMAT: 'log.format',
  RATCHET_INVOKER_INACTIVITY_TIMEOUT: 'invoker.inactivity-timeout',
  RATCHET_INVOKER_ABORT_TIMEOUT: 'invoker.abort-timeout',
  RATCHET_INVOKER_MESSAGE_SIZE_LIMIT: 'invoker.message-size-limit',
  RATCHET_INVOKER_MAX_AWAITED_FUTURE_DEPTH: 'invoker.max-awaited-future-depth',
  RATCHET_INVOKER_MIN_PROTOCOL_VERSION: 'invoker.min-protocol-version',
  RATCHET_INVOKER_MAX_PROTOCOL_VERSION: 'invoker.max-protocol-version',
  RATCHET_RETRY_INITIAL_INTERVAL: 'default-retry-policy.initial-interval',
  RATCHET_RETRY_EXPONENTIATION_FACTOR: 'default-retry-policy.exponentiation-factor',
  RATCHET_RETRY_MAX_INTERVAL: 'default-retry-policy.max-interval',
  RATCHET_RETRY_MAX_ATTEMPTS: 'default-retry-policy.max-attempts',
  RATCHET_RETRY_ON_MAX_ATTEMPTS: 'default-retry-policy.on-max-attempts',
  RATCHET_DEFAULT_IDEMPOTENCY_RETENTION: 'default-idempotency-retention',
  RATCHET_DEFAULT_JOURNAL_RETENTION: 'default-journal-retention',
  RATCHET_MAX_JOURNAL_RETENTION: 'max-journal-retention',
  RATCHET_DEFAULT_WORKFLOW_COMPLETION_RETENTION: 'default-workflow-completion-retention',
  RATCHET_PARTITIONS: 'storage.partitions',
  RATCHET_GROUP_COMMIT_MAX_DELAY: 'storage.group-commit-max-delay',
  RATCHET_GROUP_COMMIT_MAX_BATCH: 'storage.group-commit-max-batch',
  RATCHET_GROUP_COMMIT_CONCURRENCY: 'storage.group-commit-concurrency',
  RATCHET_CLEANUP_INTERVAL: 'storage.cleanup-interval',
  RATCHET_KAFKA_CLUSTERS: 'kafka-clusters',
  RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION: 'kafka.max-inflight-per-partition',
  RATCHET_KAFKA_CRASH_POINT: 'kafka.crash-point',
  RATCHET_INTROSPECTION_PASSWORD: 'introspection.password',
  RATCHET_TLS_CERT: 'tls.cert',
  RATCHET_TLS_KEY: 'tls.key',
  RATCHET_TLS_CLIENT_CA: 'tls.client-ca',
  RATCHET_INGRESS_TLS_CERT: 'ingress.tls-cert',
  RATCHET_INGRESS_TLS_KEY: 'ingress.tls-key',
  RATCHET_INGRESS_TLS_CLIENT_CA: 'ingress.tls-client-ca',
  RATCHET_ADMIN_TLS_CERT: 'admin.tls-cert',
  RATCHET_ADMIN_TLS_KEY: 'admin.tls-key',
  RATCHET_ADMIN_TLS_CLIENT_CA: 'admin.tls-client-ca',
  RATCHET_OBSERVABILITY_TLS_CERT: 'observability.tls-cert',
  RATCHET_OBSERVABILITY_TLS_KEY: 'observability.tls-key',
  RATCHET_OBSERVABILITY_TLS_CLIENT_CA: 'observability.tls-client-ca',
  RATCHET_INTROSPECTION_TLS_CERT: 'introspection.tls-cert',
  RATCHET_INTROSPECTION_TLS_KEY: 'introspection.tls-key',
  RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: 'introspection.statement-timeout',
  RATCHET_INTROSPECTION_MAX_SESSIONS: 'introspection.max-sessions',
  RATCHET_INTROSPECTION_ROW_LIMIT: 'introspection.row-limit',
  RATCHET_AUTH_KEYS_FILE: 'auth.keys-file',
  RATCHET_ADVERTISED_ADDRESS: 'cluster.advertised-address',
  RATCHET_CLUSTER_LEASE_TIMEOUT: 'cluster.lease-timeout',
  RATCHET_CLUSTER_HEARTBEAT_INTERVAL: 'cluster.heartbeat-interval',
  RATCHET_CLUSTER_PARTITION_WAIT: 'cluster.partition-wait',
  RATCHET_SHUTDOWN_DELAY: 'cluster.shutdown-delay',
  RATCHET_EXPERIMENTAL_ENABLE_VQUEUES: 'experimental-enable-vqueues',
} as const;

export type SettingName = keyof typeof SETTINGS;

/** The variable naming the config file; not itself a setting. */
export const CONFIG_FILE_ENV = 'RATCHET_CONFIG';

/**
 * Lowercase DNS label (RFC 1123): the cluster name becomes Kubernetes object names, the JWT audience, the
 * introspection user name and the STS external id, and this is the shape all of them accept.
 */
export const CLUSTER_NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Kafka cluster names end up in `kafka://<name>/<topic>` URIs: the characters of a URI host, nothing else. */
export const KAFKA_CLUSTER_NAME_PATTERN = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/;
