import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { ConfigError } from '../errors/config-errors.ts';
import { parseRateLimit } from '../rate-limit/limiter.ts';
import { formatBindAddress } from './bind-address.ts';
import { readConfigFile } from './config-file.ts';
import { describe, invalid, Reader, redactUrl, Sources, stringOf, unknownEnvWarnings } from './reader.ts';
import {
  clusterConfig,
  introspectionPassword,
  introspectionTls,
  kafkaClusters,
  listenerTls,
  optionalPath,
} from './sections.ts';
import {
  CLUSTER_NAME_PATTERN,
  CONFIG_FILE_ENV,
  LOG_FORMATS,
  LOG_LEVELS,
  ON_MAX_ATTEMPTS,
  type Config,
} from './settings.ts';
import { formatDuration } from './units.ts';

/*
 * The only place in Ratchet that reads the environment. Everything else receives the frozen `Config` (or one of its
 * sections) from `main.ts`.
 *
 * Precedence: environment variable > config file > default. Names: `RATCHET_<SECTION>_<NAME>` in the environment,
 * `section.name` (kebab-case) in the TOML file; `SETTINGS` (`settings.ts`) is the complete list. Reading one value is
 * `reader.ts`, the TOML file `config-file.ts`, the settings made of several values `sections.ts`.
 */

export * from './settings.ts';

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

  const minProtocolVersion = read.integer('RATCHET_INVOKER_MIN_PROTOCOL_VERSION', 5, { min: 5, max: 7 });
  const maxProtocolVersion = read.integer('RATCHET_INVOKER_MAX_PROTOCOL_VERSION', 7, { min: 5, max: 7 });
  if (minProtocolVersion > maxProtocolVersion) {
    const key = read.raw('RATCHET_INVOKER_MIN_PROTOCOL_VERSION')?.key ?? 'RATCHET_INVOKER_MIN_PROTOCOL_VERSION';
    throw ConfigError.invalidValue(
      key,
      `the minimum service protocol version (${minProtocolVersion}) must not exceed the maximum (${maxProtocolVersion})`,
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

  const sharedTls = {
    cert: read.raw('RATCHET_TLS_CERT'),
    key: read.raw('RATCHET_TLS_KEY'),
    clientCa: read.raw('RATCHET_TLS_CLIENT_CA'),
  };
  const ownTls = (listener: 'INGRESS' | 'ADMIN' | 'OBSERVABILITY') =>
    listenerTls(
      {
        cert: read.raw(`RATCHET_${listener}_TLS_CERT`),
        key: read.raw(`RATCHET_${listener}_TLS_KEY`),
        clientCa: read.raw(`RATCHET_${listener}_TLS_CLIENT_CA`),
      },
      sharedTls,
      cwd,
    );
  const introspectionOwnTls = introspectionTls(
    read.raw('RATCHET_INTROSPECTION_TLS_CERT'),
    read.raw('RATCHET_INTROSPECTION_TLS_KEY'),
    cwd,
  );
  const sharedListenerTls = listenerTls({ cert: undefined, key: undefined, clientCa: undefined }, sharedTls, cwd);

  const keysFile = optionalPath(read.raw('RATCHET_AUTH_KEYS_FILE'), cwd);
  // Managed mode (access tokens) takes the specification's 36 000 requests per hour unless told otherwise.
  // `off` unquoted in YAML (a Cluster's spec.config) arrives as the boolean false: it means off too.
  const rawLimit = read.raw('RATCHET_INGRESS_RATE_LIMIT');
  const ingressPerHour =
    rawLimit?.value === false
      ? 'off'
      : read.string('RATCHET_INGRESS_RATE_LIMIT', keysFile === undefined ? 'off' : '36000/h', (raw, value) => {
          try {
            parseRateLimit(value);
          } catch (err) {
            throw invalid(raw, (err as Error).message);
          }
        });
  const perHour = parseRateLimit(ingressPerHour);
  const ingressLimit =
    perHour === undefined
      ? undefined
      : {
          perHour,
          // A minute's worth by default: after a quiet period that many requests may come at once.
          burst: read.integer('RATCHET_INGRESS_RATE_BURST', Math.max(1, Math.ceil(perHour / 60)), { min: 1 }),
        };

  const introspectionMaxSessions = read.integer('RATCHET_INTROSPECTION_MAX_SESSIONS', 32, { min: 1, max: 10_000 });

  const config: Config = {
    clusterName,
    nodeName,
    dataDir,
    configFile,
    database: {
      url: databaseUrl,
      poolSize: read.integer('RATCHET_DATABASE_POOL_SIZE', 10, { min: 1, max: 1000 }),
    },
    ingress: {
      bind: read.bind('RATCHET_INGRESS_BIND', { host: '127.0.0.1', port: 8080 }),
      tls: ownTls('INGRESS'),
      limit: ingressLimit,
      maxBodyBytes: read.size('RATCHET_INGRESS_MAX_BODY_SIZE', '32 MiB', { min: 1, max: 2 ** 31 - 1 }),
    },
    http: {
      maxHeaderBytes: read.size('RATCHET_HTTP_MAX_HEADER_SIZE', '16 KiB', { min: 1024, max: 1024 * 1024 }),
      headersTimeoutMs: read.duration('RATCHET_HTTP_HEADERS_TIMEOUT', '30s', { min: 1, max: MAX_SAFE_MS }),
      requestTimeoutMs: read.duration('RATCHET_HTTP_REQUEST_TIMEOUT', '5m', { min: 1, max: MAX_SAFE_MS }),
      maxConnections: read.integer('RATCHET_HTTP_MAX_CONNECTIONS', 10_000, { min: 1, max: 1_000_000 }),
    },
    admin: { bind: adminBind, tls: ownTls('ADMIN') },
    introspection: {
      bind: read.bind('RATCHET_INTROSPECTION_BIND', { host: '127.0.0.1', port: 9071 }),
      password: introspectionPassword(read.raw('RATCHET_INTROSPECTION_PASSWORD')),
      // Its own pair, else the shared one (the SQL listener does not verify client certificates).
      tls:
        introspectionOwnTls ??
        (sharedListenerTls === undefined
          ? undefined
          : { certFile: sharedListenerTls.certFile, keyFile: sharedListenerTls.keyFile }),
      // PostgreSQL's statement_timeout is an int of milliseconds.
      statementTimeoutMs: read.duration('RATCHET_INTROSPECTION_STATEMENT_TIMEOUT', '30s', { min: 1, max: 2 ** 31 - 1 }),
      maxSessions: introspectionMaxSessions,
      // In managed mode half of them by default: one access token (a busy tool, a leaked token) cannot take every
      // session. Dev mode has one user: all of them.
      maxSessionsPerUser: read.integer(
        'RATCHET_INTROSPECTION_MAX_SESSIONS_PER_USER',
        keysFile === undefined ? introspectionMaxSessions : Math.max(1, Math.ceil(introspectionMaxSessions / 2)),
        { min: 1, max: 10_000 },
      ),
      rowLimit: read.integer('RATCHET_INTROSPECTION_ROW_LIMIT', 10_000, { min: 1, max: 10_000_000 }),
    },
    observability: {
      bind: read.bind('RATCHET_OBSERVABILITY_BIND', { host: '127.0.0.1', port: 3100 }),
      tls: ownTls('OBSERVABILITY'),
      store: read.oneOf('RATCHET_OBSERVABILITY_STORE', ['on', 'off'] as const, 'on') === 'on',
      retentionMs: read.duration('RATCHET_OBSERVABILITY_RETENTION', '7d', { min: 60_000, max: MAX_SAFE_MS }),
      maxSizeBytes: read.size('RATCHET_OBSERVABILITY_MAX_SIZE', '10 GiB', { min: 1024 * 1024, max: 2 ** 50 }),
      logLevel: read.oneOf('RATCHET_OBSERVABILITY_LOG_LEVEL', LOG_LEVELS, 'debug'),
      // PostgreSQL's statement_timeout is an int of milliseconds.
      queryTimeoutMs: read.duration('RATCHET_OBSERVABILITY_QUERY_TIMEOUT', '30s', { min: 1, max: 2 ** 31 - 1 }),
    },
    metrics: { bind: read.bind('RATCHET_METRICS_BIND', { host: '127.0.0.1', port: 5122 }) },
    log: {
      level: read.oneOf('RATCHET_LOG_LEVEL', LOG_LEVELS, 'info'),
      format: read.oneOf('RATCHET_LOG_FORMAT', LOG_FORMATS, 'auto'),
    },
    invoker: {
      inactivityTimeoutMs: read.duration('RATCHET_INVOKER_INACTIVITY_TIMEOUT', '1m', { min: 1, max: MAX_SAFE_MS }),
      abortTimeoutMs: read.duration('RATCHET_INVOKER_ABORT_TIMEOUT', '10m', { min: 1, max: MAX_SAFE_MS }),
      // The service protocol's frame header carries the length in 32 bits.
      messageSizeLimitBytes: read.size('RATCHET_INVOKER_MESSAGE_SIZE_LIMIT', '32 MiB', { min: 1, max: 2 ** 32 - 1 }),
      maxAwaitedFutureDepth: read.integer('RATCHET_INVOKER_MAX_AWAITED_FUTURE_DEPTH', 1000, { min: 1 }),
      minProtocolVersion,
      maxProtocolVersion,
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
    kafka: {
      clusters: kafkaClusters(read.raw('RATCHET_KAFKA_CLUSTERS')),
      maxInflightPerPartition: read.integer('RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION', 250, {
        min: 1,
        max: 1_000_000,
      }),
      crashPoint:
        read.raw('RATCHET_KAFKA_CRASH_POINT') === undefined
          ? undefined
          : read.oneOf('RATCHET_KAFKA_CRASH_POINT', ['after-enqueue'] as const, 'after-enqueue'),
    },
    auth: { keysFile },
    cluster: clusterConfig(read),
    experimental: {
      vqueues: read.boolean('RATCHET_EXPERIMENTAL_ENABLE_VQUEUES', false),
    },
    warnings,
  };
  return deepFreeze(config);
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
