import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { parse as parseToml, TomlDate, TomlError } from 'smol-toml';
import { ConfigError } from '../errors/config-errors.ts';
import { formatBindAddress, parseBindAddress, type BindAddress } from './bind-address.ts';
import { formatDuration, parseDuration, parseSize, UnitFormatError } from './units.ts';

/*
 * The only place in Ratchet that reads the environment. Everything else receives the frozen `Config` (or one of its
 * sections) from `main.ts`.
 *
 * Precedence: environment variable > config file > default. Names: `RATCHET_<SECTION>_<NAME>` in the environment,
 * `section.name` (kebab-case) in the TOML file; `SETTINGS` below is the complete list.
 */

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Only JSON: it is what the observability listener and Loki-style tools ingest. */
export const LOG_FORMATS = ['json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const ON_MAX_ATTEMPTS = ['pause', 'kill'] as const;
export type OnMaxAttempts = (typeof ON_MAX_ATTEMPTS)[number];

export interface ListenerConfig {
  readonly bind: BindAddress;
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
  readonly ingress: ListenerConfig;
  readonly admin: ListenerConfig;
  readonly introspection: IntrospectionConfig;
  readonly observability: ObservabilityConfig;
  readonly metrics: ListenerConfig;
  readonly log: LogConfig;
  readonly invoker: InvokerConfig;
  readonly defaultRetryPolicy: RetryPolicyConfig;
  readonly serviceDefaults: ServiceDefaultsConfig;
  readonly storage: StorageConfig;
  readonly kafka: KafkaConfig;
  readonly auth: AuthConfig;
  readonly cluster: ClusterConfig;
  /**
   * Problems that did not stop loading (unknown `RATCHET_*` variables, a clamped retention). The logger does not
   * exist yet while config loads, so `main.ts` logs these once it does.
   */
  readonly warnings: readonly string[];
}

/** Every setting: environment variable → config file key. */
export const SETTINGS = {
  RATCHET_CLUSTER_NAME: 'cluster-name',
  RATCHET_NODE_NAME: 'node-name',
  RATCHET_DATA_DIR: 'data-dir',
  RATCHET_DATABASE_URL: 'database.url',
  RATCHET_DATABASE_POOL_SIZE: 'database.pool-size',
  RATCHET_INGRESS_BIND: 'ingress.bind',
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
  RATCHET_INTROSPECTION_PASSWORD: 'introspection.password',
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
} as const;

export type SettingName = keyof typeof SETTINGS;

/** The variable naming the config file; not itself a setting. */
export const CONFIG_FILE_ENV = 'RATCHET_CONFIG';

/**
 * Lowercase DNS label (RFC 1123): the cluster name becomes Kubernetes object names, the JWT audience, the
 * introspection user name and the STS external id, and this is the shape all of them accept.
 */
export const CLUSTER_NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** A raw value and the name to blame for it: the env var, or the file key and file. */
interface Raw {
  readonly value: unknown;
  readonly key: string;
  readonly fromEnv: boolean;
}

class Sources {
  constructor(
    private readonly env: Readonly<Record<string, string | undefined>>,
    private readonly file: ReadonlyMap<string, unknown>,
    private readonly filePath: string | undefined,
  ) {}

  get(name: SettingName): Raw | undefined {
    const fromEnv = this.env[name];
    // An empty variable counts as unset: `RATCHET_X=${X:-}` in compose files and charts must not break defaults.
    if (fromEnv !== undefined && fromEnv.trim() !== '') return { value: fromEnv, key: name, fromEnv: true };
    const fileKey = SETTINGS[name];
    if (this.file.has(fileKey))
      return { value: this.file.get(fileKey), key: `${fileKey} in ${this.filePath ?? 'config file'}`, fromEnv: false };
    return undefined;
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  if (value instanceof TomlDate) return `the date ${value.toISOString()}`;
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return 'a table';
  return String(value);
}

function invalid(raw: Raw, problem: string, cause?: unknown): ConfigError {
  return ConfigError.invalidValue(raw.key, problem, cause === undefined ? {} : { cause });
}

/** Runs a unit parser on a string value, turning its message into RT0002 naming the key. */
function viaUnit<T>(raw: Raw, what: string, parse: (text: string) => T): T {
  if (typeof raw.value !== 'string') throw invalid(raw, `expected ${what} as a string, got ${describe(raw.value)}`);
  try {
    return parse(raw.value);
  } catch (error) {
    if (error instanceof UnitFormatError) throw invalid(raw, error.message, error);
    throw error;
  }
}

interface Bounds {
  readonly min?: number;
  readonly max?: number;
}

function checkBounds(raw: Raw, value: number, bounds: Bounds, render: (n: number) => string = String): number {
  if (bounds.min !== undefined && value < bounds.min)
    throw invalid(raw, `must be at least ${render(bounds.min)}, got ${describe(raw.value)}`);
  if (bounds.max !== undefined && value > bounds.max)
    throw invalid(raw, `must be at most ${render(bounds.max)}, got ${describe(raw.value)}`);
  return value;
}

function toNumber(raw: Raw, integer: boolean): number {
  const what = integer ? 'a whole number' : 'a number';
  let value: number;
  if (typeof raw.value === 'number') value = raw.value;
  else if (typeof raw.value === 'bigint') value = Number(raw.value);
  else if (typeof raw.value === 'string' && /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(raw.value))
    value = Number(raw.value);
  else throw invalid(raw, `expected ${what}, got ${describe(raw.value)}`);
  if (!Number.isFinite(value) || (integer && !Number.isSafeInteger(value)))
    throw invalid(raw, `expected ${what}, got ${describe(raw.value)}`);
  return value;
}

function stringOf(raw: Raw, what: string): string {
  if (typeof raw.value !== 'string') throw invalid(raw, `expected ${what}, got ${describe(raw.value)}`);
  return raw.value.trim();
}

function oneOf<T extends string>(raw: Raw, allowed: readonly T[]): T {
  const text = stringOf(raw, `one of ${allowed.join(', ')}`).toLowerCase();
  const found = allowed.find((candidate) => candidate === text);
  if (found === undefined) throw invalid(raw, `expected one of ${allowed.join(', ')}, got ${describe(raw.value)}`);
  return found;
}

function redactUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = '***';
  return copy.href;
}

class Reader {
  constructor(private readonly sources: Sources) {}

  raw(name: SettingName): Raw | undefined {
    return this.sources.get(name);
  }

  string(name: SettingName, fallback: string, check: (raw: Raw, value: string) => void): string {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = stringOf(raw, 'a string');
    check(raw, value);
    return value;
  }

  integer(name: SettingName, fallback: number, bounds: Bounds): number {
    const raw = this.raw(name);
    return raw === undefined ? fallback : checkBounds(raw, toNumber(raw, true), bounds);
  }

  number(name: SettingName, fallback: number, bounds: Bounds): number {
    const raw = this.raw(name);
    return raw === undefined ? fallback : checkBounds(raw, toNumber(raw, false), bounds);
  }

  duration(name: SettingName, fallback: string, bounds: Bounds = { min: 0 }): number {
    const value = this.optionalDuration(name, bounds);
    return value ?? parseDuration(fallback);
  }

  optionalDuration(name: SettingName, bounds: Bounds = { min: 0 }): number | undefined {
    const raw = this.raw(name);
    if (raw === undefined) return undefined;
    return checkBounds(
      raw,
      viaUnit(raw, "a duration such as '500ms', '1m 30s', '1d' or 'PT1M'", parseDuration),
      bounds,
      formatDuration,
    );
  }

  size(name: SettingName, fallback: string, bounds: Bounds): number {
    const raw = this.raw(name);
    if (raw === undefined) return parseSize(fallback);
    // TOML integers are plain bytes; strings go through the size parser (which also takes plain numbers).
    const bytes =
      typeof raw.value === 'number' || typeof raw.value === 'bigint'
        ? toNumber(raw, true)
        : viaUnit(raw, "a size such as '32 MiB'", parseSize);
    return checkBounds(raw, bytes, bounds, (n) => `${n} bytes`);
  }

  bind(name: SettingName, fallback: BindAddress): BindAddress {
    const raw = this.raw(name);
    return raw === undefined ? fallback : viaUnit(raw, "an address such as '127.0.0.1:8080'", parseBindAddress);
  }

  oneOf<T extends string>(name: SettingName, allowed: readonly T[], fallback: T): T {
    const raw = this.raw(name);
    return raw === undefined ? fallback : oneOf(raw, allowed);
  }
}

/** Kafka cluster names end up in `kafka://<name>/<topic>` URIs: the characters of a URI host, nothing else. */
export const KAFKA_CLUSTER_NAME_PATTERN = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/;

/** Nested TOML tables (`[kafka-clusters.security]`, dotted keys) become dotted librdkafka property names. */
function flattenProperties(
  raw: Raw,
  table: Record<string, unknown>,
  prefix: string,
  into: Record<string, string>,
  where: string,
): void {
  for (const [key, value] of Object.entries(table)) {
    const name = prefix === '' ? key : `${prefix}.${key}`;
    if (isTable(value)) flattenProperties(raw, value, name, into, where);
    else if (typeof value === 'string') into[name] = value;
    else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
      into[name] = String(value);
    else throw invalid(raw, `${where}: property '${name}' must be a string, got ${describe(value)}`);
  }
}

/**
 * `[[kafka-clusters]]` tables in the file, or the same as a JSON array in `RATCHET_KAFKA_CLUSTERS`: each has a `name`,
 * optionally `brokers` (a list, restate's shorthand for `metadata.broker.list`), and librdkafka properties.
 */
function kafkaClusters(raw: Raw | undefined): KafkaClusterConfig[] {
  if (raw === undefined) return [];
  let value = raw.value;
  if (raw.fromEnv) {
    try {
      value = JSON.parse(String(value)) as unknown;
    } catch (error) {
      throw invalid(raw, 'expected a JSON array such as [{"name":"my-cluster","brokers":["kafka:9092"]}]', error);
    }
  }
  if (!Array.isArray(value)) throw invalid(raw, `expected a list of clusters, got ${describe(value)}`);
  const seen = new Set<string>();
  return value.map((entry: unknown, index) => {
    const where = `cluster #${index + 1}`;
    if (!isTable(entry)) throw invalid(raw, `${where}: expected a table, got ${describe(entry)}`);
    const { name, brokers, ...rest } = entry;
    if (typeof name !== 'string' || !KAFKA_CLUSTER_NAME_PATTERN.test(name)) {
      throw invalid(raw, `${where}: 'name' must be letters, digits, '.', '_' or '-', got ${describe(name)}`);
    }
    if (seen.has(name)) throw invalid(raw, `${where}: the name '${name}' is used twice`);
    seen.add(name);
    const properties: Record<string, string> = {};
    if (brokers !== undefined) {
      if (!Array.isArray(brokers) || brokers.length === 0 || !brokers.every((b) => typeof b === 'string' && b !== '')) {
        throw invalid(raw, `${where} ('${name}'): 'brokers' must be a non-empty list of host:port strings`);
      }
      properties['metadata.broker.list'] = (brokers as string[]).join(',');
    }
    flattenProperties(raw, rest, '', properties, `${where} ('${name}')`);
    if (properties['bootstrap.servers'] === undefined && properties['metadata.broker.list'] === undefined) {
      throw invalid(raw, `${where} ('${name}'): needs 'brokers', 'bootstrap.servers' or 'metadata.broker.list'`);
    }
    return { name, properties };
  });
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof TomlDate);
}

function flatten(table: Record<string, unknown>, prefix: string, into: Map<string, unknown>): void {
  for (const [key, value] of Object.entries(table)) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (isTable(value)) flatten(value, path, into);
    else into.set(path, value);
  }
}

function introspectionPassword(raw: Raw | undefined): string | undefined {
  if (raw === undefined) return undefined;
  // Never echo the value in an error: it is a secret.
  if (typeof raw.value !== 'string') throw invalid(raw, 'expected a string');
  return raw.value;
}

function introspectionTls(cert: Raw | undefined, key: Raw | undefined, cwd: string): IntrospectionConfig['tls'] {
  if (cert === undefined && key === undefined) return undefined;
  if (cert === undefined || key === undefined) {
    const given = (cert ?? key)!;
    throw invalid(given, 'TLS needs both RATCHET_INTROSPECTION_TLS_CERT and RATCHET_INTROSPECTION_TLS_KEY');
  }
  return { certFile: resolve(cwd, stringOf(cert, 'a file path')), keyFile: resolve(cwd, stringOf(key, 'a file path')) };
}

function optionalPath(raw: Raw | undefined, cwd: string): string | undefined {
  if (raw === undefined) return undefined;
  const path = stringOf(raw, 'a file path');
  if (path === '') throw invalid(raw, 'expected a file path');
  return resolve(cwd, path);
}

const FILE_KEYS: ReadonlySet<string> = new Set(Object.values(SETTINGS));

function readConfigFile(path: string, blame: string): Map<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(`cannot read the config file ${path} (from ${blame}): ${reason}`, {
      key: blame,
      cause: error,
    });
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = parseToml(text);
  } catch (error) {
    if (error instanceof TomlError) {
      throw new ConfigError(
        `the config file ${path} is not valid TOML (line ${error.line}, column ${error.column}): ${error.message}`,
        {
          key: blame,
          cause: error,
        },
      );
    }
    throw error;
  }
  const values = new Map<string, unknown>();
  flatten(parsed, '', values);
  // A mistyped key would otherwise be silently ignored, and the setting silently left at its default.
  for (const key of values.keys()) {
    if (!FILE_KEYS.has(key)) {
      const hint = closest(key, [...FILE_KEYS]);
      throw new ConfigError(
        `unknown key ${key} in the config file ${path}${hint === undefined ? '' : ` (did you mean ${hint}?)`}`,
        { key },
      );
    }
  }
  return values;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

function closest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(3, Math.floor(name.length / 4)) + 1;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function unknownEnvWarnings(env: Readonly<Record<string, string | undefined>>): string[] {
  const known = Object.keys(SETTINGS);
  return Object.keys(env)
    .filter((name) => name.startsWith('RATCHET_') && name !== CONFIG_FILE_ENV && !(name in SETTINGS))
    .sort()
    .map((name) => {
      const hint = closest(name, known);
      return `unknown environment variable ${name} is ignored${hint === undefined ? '' : ` (did you mean ${hint}?)`}`;
    });
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

export interface LoadConfigOptions {
  /** Defaults to `process.env`. Tests pass their own object, which then replaces the environment entirely. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Config file to read; overrides `RATCHET_CONFIG`. Relative paths are resolved against `cwd`. */
  configFile?: string;
  /** Base of relative paths (`data-dir`, the config file); defaults to `process.cwd()`. */
  cwd?: string;
}

const MAX_SAFE_MS = Number.MAX_SAFE_INTEGER;

/**
 * Reads the configuration once, at startup: config file, then environment variables over it, then defaults.
 * Throws `ConfigError` (RT0002) naming the offending variable or file key. The result is deeply frozen.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();

  const envFile = env[CONFIG_FILE_ENV]?.trim();
  const fileArg = options.configFile ?? (envFile === '' ? undefined : envFile);
  const configFile = fileArg === undefined ? undefined : resolve(cwd, fileArg);
  const fileValues =
    configFile === undefined
      ? new Map<string, unknown>()
      : readConfigFile(configFile, options.configFile === undefined ? CONFIG_FILE_ENV : 'the configFile option');

  const read = new Reader(new Sources(env, fileValues, configFile));
  const warnings = unknownEnvWarnings(env);

  const clusterName = read.string('RATCHET_CLUSTER_NAME', 'localcluster', (raw, value) => {
    if (!CLUSTER_NAME_PATTERN.test(value)) {
      throw invalid(
        raw,
        `expected 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit, got ${describe(raw.value)}`,
      );
    }
  });

  // The node name must survive a restart: a restarted node takes its partition leases back at once instead of
  // waiting for them to expire. By default it is the host name and the admin port, so that runtimes on one host
  // sharing a database (which listen on different ports) get distinct names with no setting, and a restarted one
  // (same port) keeps its name. With an ephemeral admin port the process id stands in for the port.
  const adminBind = read.bind('RATCHET_ADMIN_BIND', { host: '127.0.0.1', port: 9070 });
  const nodeName = read.string(
    'RATCHET_NODE_NAME',
    `${hostname()}-${adminBind.port === 0 ? `pid${process.pid}` : adminBind.port}`,
    (raw, value) => {
      if (value.length === 0 || value.length > 253) throw invalid(raw, 'expected a name of 1 to 253 characters');
    },
  );

  const dataDir = resolve(
    cwd,
    read.string('RATCHET_DATA_DIR', './.ratchet', (raw, value) => {
      if (value.length === 0) throw invalid(raw, 'expected a directory path');
    }),
  );

  const databaseUrl = (() => {
    const raw = read.raw('RATCHET_DATABASE_URL');
    if (raw === undefined) return undefined;
    const text = stringOf(raw, 'a postgres:// URL');
    let url: URL;
    try {
      url = new URL(text);
    } catch (error) {
      // Never echo the value: it may hold a password.
      throw invalid(
        raw,
        'expected a URL such as postgres://user:password@host:5432/database, and this is not a URL',
        error,
      );
    }
    if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
      throw invalid(raw, `expected a postgres:// or postgresql:// URL, got ${redactUrl(url)}`);
    }
    return text;
  })();

  const retryInitialIntervalMs = read.duration('RATCHET_RETRY_INITIAL_INTERVAL', '500ms', { min: 1, max: MAX_SAFE_MS });
  const retryMaxIntervalMs = read.duration('RATCHET_RETRY_MAX_INTERVAL', '1m', { min: 1, max: MAX_SAFE_MS });
  if (retryInitialIntervalMs > retryMaxIntervalMs) {
    const blame = read.raw('RATCHET_RETRY_INITIAL_INTERVAL') ?? read.raw('RATCHET_RETRY_MAX_INTERVAL');
    const key = blame?.key ?? 'RATCHET_RETRY_INITIAL_INTERVAL';
    throw ConfigError.invalidValue(
      key,
      `the initial retry interval (${formatDuration(retryInitialIntervalMs)}) must not exceed the maximum retry interval (${formatDuration(retryMaxIntervalMs)})`,
    );
  }

  const maxJournalRetentionMs = read.optionalDuration('RATCHET_MAX_JOURNAL_RETENTION');
  let journalRetentionMs = read.duration('RATCHET_DEFAULT_JOURNAL_RETENTION', '1d');
  if (maxJournalRetentionMs !== undefined && journalRetentionMs > maxJournalRetentionMs) {
    warnings.push(
      `[RT0022] the default journal retention ${formatDuration(journalRetentionMs)} exceeds the maximum ` +
        `${formatDuration(maxJournalRetentionMs)} and is clamped to it`,
    );
    journalRetentionMs = maxJournalRetentionMs;
  }

  const config: Config = {
    clusterName,
    nodeName,
    dataDir,
    configFile,
    database: {
      url: databaseUrl,
      poolSize: read.integer('RATCHET_DATABASE_POOL_SIZE', 10, { min: 1, max: 1000 }),
    },
    ingress: { bind: read.bind('RATCHET_INGRESS_BIND', { host: '127.0.0.1', port: 8080 }) },
    admin: { bind: adminBind },
    introspection: {
      bind: read.bind('RATCHET_INTROSPECTION_BIND', { host: '127.0.0.1', port: 9071 }),
      password: introspectionPassword(read.raw('RATCHET_INTROSPECTION_PASSWORD')),
      tls: introspectionTls(read.raw('RATCHET_INTROSPECTION_TLS_CERT'), read.raw('RATCHET_INTROSPECTION_TLS_KEY'), cwd),
      // PostgreSQL's statement_timeout is an int of milliseconds.
      statementTimeoutMs: read.duration('RATCHET_INTROSPECTION_STATEMENT_TIMEOUT', '30s', { min: 1, max: 2 ** 31 - 1 }),
      maxSessions: read.integer('RATCHET_INTROSPECTION_MAX_SESSIONS', 32, { min: 1, max: 10_000 }),
      rowLimit: read.integer('RATCHET_INTROSPECTION_ROW_LIMIT', 10_000, { min: 1, max: 10_000_000 }),
    },
    observability: {
      bind: read.bind('RATCHET_OBSERVABILITY_BIND', { host: '127.0.0.1', port: 3100 }),
      store: read.oneOf('RATCHET_OBSERVABILITY_STORE', ['on', 'off'] as const, 'off') === 'on',
      retentionMs: read.duration('RATCHET_OBSERVABILITY_RETENTION', '7d', { min: 60_000, max: MAX_SAFE_MS }),
      maxSizeBytes: read.size('RATCHET_OBSERVABILITY_MAX_SIZE', '10 GiB', { min: 1024 * 1024, max: 2 ** 50 }),
      logLevel: read.oneOf('RATCHET_OBSERVABILITY_LOG_LEVEL', LOG_LEVELS, 'debug'),
      // PostgreSQL's statement_timeout is an int of milliseconds.
      queryTimeoutMs: read.duration('RATCHET_OBSERVABILITY_QUERY_TIMEOUT', '30s', { min: 1, max: 2 ** 31 - 1 }),
    },
    metrics: { bind: read.bind('RATCHET_METRICS_BIND', { host: '127.0.0.1', port: 5122 }) },
    log: {
      level: read.oneOf('RATCHET_LOG_LEVEL', LOG_LEVELS, 'info'),
      format: read.oneOf('RATCHET_LOG_FORMAT', LOG_FORMATS, 'json'),
    },
    invoker: {
      inactivityTimeoutMs: read.duration('RATCHET_INVOKER_INACTIVITY_TIMEOUT', '1m', { min: 1, max: MAX_SAFE_MS }),
      abortTimeoutMs: read.duration('RATCHET_INVOKER_ABORT_TIMEOUT', '10m', { min: 1, max: MAX_SAFE_MS }),
      // The service protocol's frame header carries the length in 32 bits.
      messageSizeLimitBytes: read.size('RATCHET_INVOKER_MESSAGE_SIZE_LIMIT', '32 MiB', { min: 1, max: 2 ** 32 - 1 }),
      maxAwaitedFutureDepth: read.integer('RATCHET_INVOKER_MAX_AWAITED_FUTURE_DEPTH', 1000, { min: 1 }),
      maxProtocolVersion: read.integer('RATCHET_INVOKER_MAX_PROTOCOL_VERSION', 7, { min: 5, max: 7 }),
    },
    defaultRetryPolicy: {
      initialIntervalMs: retryInitialIntervalMs,
      exponentiationFactor: read.number('RATCHET_RETRY_EXPONENTIATION_FACTOR', 2.0, { min: 1 }),
      maxIntervalMs: retryMaxIntervalMs,
      maxAttempts: read.integer('RATCHET_RETRY_MAX_ATTEMPTS', 70, { min: 1 }),
      onMaxAttempts: read.oneOf('RATCHET_RETRY_ON_MAX_ATTEMPTS', ON_MAX_ATTEMPTS, 'pause'),
    },
    serviceDefaults: {
      idempotencyRetentionMs: read.duration('RATCHET_DEFAULT_IDEMPOTENCY_RETENTION', '1d'),
      journalRetentionMs,
      maxJournalRetentionMs,
      workflowCompletionRetentionMs: read.duration('RATCHET_DEFAULT_WORKFLOW_COMPLETION_RETENTION', '1d'),
    },
    storage: {
      partitions: read.integer('RATCHET_PARTITIONS', 64, { min: 1, max: 4096 }),
      groupCommit: {
        maxDelayMs: read.duration('RATCHET_GROUP_COMMIT_MAX_DELAY', '0ms'),
        maxBatch: read.integer('RATCHET_GROUP_COMMIT_MAX_BATCH', 256, { min: 1, max: 65536 }),
        concurrency: read.integer('RATCHET_GROUP_COMMIT_CONCURRENCY', 3, { min: 1, max: 64 }),
      },
      cleanupIntervalMs: read.duration('RATCHET_CLEANUP_INTERVAL', '1m', { min: 10, max: MAX_SAFE_MS }),
    },
    kafka: { clusters: kafkaClusters(read.raw('RATCHET_KAFKA_CLUSTERS')) },
    auth: { keysFile: optionalPath(read.raw('RATCHET_AUTH_KEYS_FILE'), cwd) },
    cluster: clusterConfig(read),
    warnings,
  };
  return deepFreeze(config);
}

function clusterConfig(read: Reader): ClusterConfig {
  const advertised = read.raw('RATCHET_ADVERTISED_ADDRESS');
  let advertisedAddress: string | undefined;
  if (advertised !== undefined) {
    const text = stringOf(advertised, 'a host name or IP address').trim();
    // A host only: the listeners' own ports are added. IPv6 literals may come with or without brackets.
    const host = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
    if (host === '' || /[\s/@?#]/.test(host)) {
      throw invalid(advertised, `expected a host name or IP address without port or scheme, got ${describe(text)}`);
    }
    if (/^[^:]+:\d+$/.test(host)) {
      throw invalid(
        advertised,
        `expected a host without a port (the listeners' ports are used), got ${describe(text)}`,
      );
    }
    advertisedAddress = host;
  }
  const leaseTimeoutMs = read.duration('RATCHET_CLUSTER_LEASE_TIMEOUT', '3s', { min: 100, max: 600_000 });
  const heartbeatIntervalMs = read.duration('RATCHET_CLUSTER_HEARTBEAT_INTERVAL', '1s', { min: 10, max: 300_000 });
  if (heartbeatIntervalMs * 2 > leaseTimeoutMs) {
    const blame = read.raw('RATCHET_CLUSTER_HEARTBEAT_INTERVAL') ?? read.raw('RATCHET_CLUSTER_LEASE_TIMEOUT');
    throw ConfigError.invalidValue(
      blame?.key ?? 'RATCHET_CLUSTER_HEARTBEAT_INTERVAL',
      `the heartbeat interval (${formatDuration(heartbeatIntervalMs)}) must be at most half the lease timeout ` +
        `(${formatDuration(leaseTimeoutMs)}), so that one late heartbeat does not cost a node its partitions`,
    );
  }
  return {
    advertisedAddress,
    leaseTimeoutMs,
    heartbeatIntervalMs,
    partitionWaitMs: read.duration('RATCHET_CLUSTER_PARTITION_WAIT', '10s', { min: 0, max: 3_600_000 }),
    shutdownDelayMs: read.duration('RATCHET_SHUTDOWN_DELAY', '0s', { min: 0, max: 600_000 }),
  };
}

/** For logs and error messages: binds as `host:port`, the database password masked. */
export function describeConfig(config: Config): Record<string, unknown> {
  const url = config.database.url === undefined ? undefined : redactUrl(new URL(config.database.url));
  return {
    ...config,
    database: { ...config.database, url },
    ingress: formatBindAddress(config.ingress.bind),
    admin: formatBindAddress(config.admin.bind),
    introspection: formatBindAddress(config.introspection.bind),
    observability: formatBindAddress(config.observability.bind),
    metrics: formatBindAddress(config.metrics.bind),
  };
}
