import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeConfig, loadConfig, type Config } from '../../../runtime/src/config/config.ts';
import { ConfigError } from '../../../runtime/src/errors/config-errors.ts';

const dir = mkdtempSync(join(tmpdir(), 'ratchet-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileCounter = 0;
function configFile(toml: string): string {
  const path = join(dir, `ratchet-${fileCounter++}.toml`);
  writeFileSync(path, toml);
  return path;
}

function load(env: Record<string, string>, file?: string): Config {
  return loadConfig(file === undefined ? { env, cwd: dir } : { env, cwd: dir, configFile: file });
}

/** Loads, expecting RT0002, and returns the error. */
function failure(env: Record<string, string>, file?: string): ConfigError {
  try {
    load(env, file);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    const configError = error as ConfigError;
    expect(configError.code).toBe('RT0002');
    expect(configError.status).toBe(500);
    return configError;
  }
  throw new Error('expected loadConfig to fail');
}

describe('loadConfig defaults', () => {
  it('gives a complete configuration with no file and no environment', () => {
    const config = load({});
    expect(config).toMatchObject({
      clusterName: 'localcluster',
      dataDir: join(dir, '.ratchet'),
      configFile: undefined,
      database: { url: undefined, poolSize: 10 },
      ingress: { bind: { host: '127.0.0.1', port: 8080 } },
      admin: { bind: { host: '127.0.0.1', port: 9070 } },
      introspection: { bind: { host: '127.0.0.1', port: 9071 } },
      observability: {
        bind: { host: '127.0.0.1', port: 3100 },
        store: true,
        retentionMs: 7 * 86_400_000,
        maxSizeBytes: 10 * 1024 ** 3,
        logLevel: 'debug',
        queryTimeoutMs: 30_000,
      },
      metrics: { bind: { host: '127.0.0.1', port: 5122 } },
      log: { level: 'info', format: 'auto' },
      invoker: {
        inactivityTimeoutMs: 60_000,
        abortTimeoutMs: 600_000,
        messageSizeLimitBytes: 32 * 1024 * 1024,
        maxAwaitedFutureDepth: 1000,
        maxProtocolVersion: 7,
      },
      defaultRetryPolicy: {
        initialIntervalMs: 500,
        exponentiationFactor: 2,
        maxIntervalMs: 60_000,
        maxAttempts: 70,
        onMaxAttempts: 'pause',
      },
      serviceDefaults: {
        idempotencyRetentionMs: 86_400_000,
        journalRetentionMs: 86_400_000,
        maxJournalRetentionMs: undefined,
        workflowCompletionRetentionMs: 86_400_000,
      },
      storage: {
        partitions: 64,
        groupCommit: { maxDelayMs: 0, maxBatch: 256, concurrency: 3 },
        cleanupIntervalMs: 60_000,
      },
      warnings: [],
    });
    // Host name and admin port: distinct for runtimes on one host, the same after a restart.
    expect(config.nodeName).toBe(`${hostname()}-9070`);
    expect(load({ RATCHET_ADMIN_BIND: '127.0.0.1:9170' }).nodeName).toBe(`${hostname()}-9170`);
    expect(load({ RATCHET_ADMIN_BIND: '127.0.0.1:0' }).nodeName).toBe(`${hostname()}-pid${process.pid}`);
  });

  it('is deeply frozen', () => {
    const config = load({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.admin.bind)).toBe(true);
    expect(Object.isFrozen(config.storage.groupCommit)).toBe(true);
    expect(Object.isFrozen(config.warnings)).toBe(true);
    expect(() => {
      (config.admin.bind as { port: number }).port = 1;
    }).toThrow(TypeError);
  });

  it('reads nothing from process.env when given an environment', () => {
    process.env['RATCHET_ADMIN_BIND'] = '127.0.0.1:1';
    try {
      expect(load({}).admin.bind.port).toBe(9070);
    } finally {
      delete process.env['RATCHET_ADMIN_BIND'];
    }
  });
});

describe('loadConfig sources', () => {
  const file = configFile(`
cluster-name = "from-file"
data-dir = "/var/lib/ratchet"

[database]
url = "postgres://ratchet:secret@db.example.com:5432/ratchet"
pool-size = 20

[admin]
bind = "0.0.0.0:19070"

[ingress]
bind = "0.0.0.0:18080"

[log]
level = "debug"

[invoker]
abort-timeout = "30m"
message-size-limit = 1048576
max-awaited-future-depth = 500

[default-retry-policy]
initial-interval = "100ms"
exponentiation-factor = 1.5
max-attempts = 10
on-max-attempts = "kill"

[storage]
partitions = 128
group-commit-max-delay = "2ms"
group-commit-concurrency = 4
`);

  it('takes values from the config file', () => {
    const config = load({}, file);
    expect(config.configFile).toBe(file);
    expect(config.clusterName).toBe('from-file');
    expect(config.dataDir).toBe('/var/lib/ratchet');
    expect(config.database).toEqual({ url: 'postgres://ratchet:secret@db.example.com:5432/ratchet', poolSize: 20 });
    expect(config.admin.bind).toEqual({ host: '0.0.0.0', port: 19070 });
    expect(config.log.level).toBe('debug');
    expect(config.invoker).toMatchObject({
      abortTimeoutMs: 1_800_000,
      messageSizeLimitBytes: 1_048_576,
      maxAwaitedFutureDepth: 500,
    });
    expect(config.defaultRetryPolicy).toMatchObject({
      initialIntervalMs: 100,
      exponentiationFactor: 1.5,
      maxAttempts: 10,
      onMaxAttempts: 'kill',
    });
    expect(config.storage).toEqual({
      partitions: 128,
      groupCommit: { maxDelayMs: 2, maxBatch: 256, concurrency: 4 },
      cleanupIntervalMs: 60_000,
    });
  });

  it('lets environment variables win over the file, and defaults fill the rest', () => {
    const config = load(
      {
        RATCHET_ADMIN_BIND: '[::1]:0',
        RATCHET_LOG_LEVEL: 'silent',
        RATCHET_INVOKER_ABORT_TIMEOUT: '1m 30s',
        RATCHET_RETRY_ON_MAX_ATTEMPTS: 'Pause',
        RATCHET_PARTITIONS: '4',
        RATCHET_INGRESS_BIND: '',
      },
      file,
    );
    expect(config.admin.bind).toEqual({ host: '::1', port: 0 });
    expect(config.log.level).toBe('silent');
    expect(config.invoker.abortTimeoutMs).toBe(90_000);
    expect(config.defaultRetryPolicy.onMaxAttempts).toBe('pause');
    expect(config.storage.partitions).toBe(4);
    // An empty variable counts as unset: the file's value stays.
    expect(config.ingress.bind).toEqual({ host: '0.0.0.0', port: 18080 });
    expect(config.metrics.bind).toEqual({ host: '127.0.0.1', port: 5122 });
  });

  it('finds the file through RATCHET_CONFIG, relative to the working directory', () => {
    const config = loadConfig({ env: { RATCHET_CONFIG: file.slice(dir.length + 1) }, cwd: dir });
    expect(config.configFile).toBe(file);
    expect(config.clusterName).toBe('from-file');
  });

  it('resolves a relative data directory against the working directory', () => {
    expect(load({ RATCHET_DATA_DIR: 'data/ratchet' }).dataDir).toBe(join(dir, 'data/ratchet'));
  });

  it('binds every listener to IPv6 addresses and ephemeral ports', () => {
    const config = load({
      RATCHET_INGRESS_BIND: '[::]:0',
      RATCHET_ADMIN_BIND: '[::1]:9070',
      RATCHET_INTROSPECTION_BIND: '[fd00::5]:9071',
      RATCHET_OBSERVABILITY_BIND: '127.0.0.1:0',
      RATCHET_METRICS_BIND: 'localhost:0',
    });
    expect(config.ingress.bind).toEqual({ host: '::', port: 0 });
    expect(config.admin.bind).toEqual({ host: '::1', port: 9070 });
    expect(config.introspection.bind).toEqual({ host: 'fd00::5', port: 9071 });
    expect(describeConfig(config)).toMatchObject({ admin: '[::1]:9070', metrics: 'localhost:0' });
  });
});

describe('loadConfig warnings', () => {
  it('warns about unknown RATCHET_* variables, with a suggestion, without failing', () => {
    const config = load({ RATCHET_ADMN_BIND: '1', RATCHET_SOMETHING_ELSE: 'x', RATCHET_CONFIG: '', HOME: '/root' });
    expect(config.warnings).toEqual([
      'unknown environment variable RATCHET_ADMN_BIND is ignored (did you mean RATCHET_ADMIN_BIND?)',
      'unknown environment variable RATCHET_SOMETHING_ELSE is ignored',
    ]);
  });

  it('clamps the default journal retention to the maximum (RT0022)', () => {
    const config = load({ RATCHET_DEFAULT_JOURNAL_RETENTION: '7d', RATCHET_MAX_JOURNAL_RETENTION: '2d' });
    expect(config.serviceDefaults.journalRetentionMs).toBe(2 * 86_400_000);
    expect(config.serviceDefaults.maxJournalRetentionMs).toBe(2 * 86_400_000);
    expect(config.warnings).toEqual([
      '[RT0022] the default journal retention 7d exceeds the maximum 2d and is clamped to it',
    ]);
  });
});

describe('loadConfig errors name the offending key (RT0002)', () => {
  it.each([
    ['RATCHET_CLUSTER_NAME', 'Local_Cluster', /lowercase letters/],
    ['RATCHET_CLUSTER_NAME', 'a'.repeat(64), /1-63/],
    ['RATCHET_CLUSTER_NAME', '-cluster', /starting and ending/],
    ['RATCHET_DATABASE_URL', 'mysql://db/x', /postgres:\/\/ or postgresql:\/\//],
    ['RATCHET_DATABASE_URL', 'not a url', /not a URL/],
    ['RATCHET_DATABASE_POOL_SIZE', '0', /at least 1/],
    ['RATCHET_ADMIN_BIND', '9070', /port is missing/],
    ['RATCHET_INGRESS_BIND', '::1:8080', /brackets/],
    ['RATCHET_METRICS_BIND', '127.0.0.1:70000', /0 to 65535/],
    ['RATCHET_LOG_LEVEL', 'verbose', /one of fatal, error, warn, info, debug, trace, silent/],
    ['RATCHET_LOG_FORMAT', 'yaml', /one of auto, json, pretty/],
    ['RATCHET_INVOKER_INACTIVITY_TIMEOUT', '60', /unit is required/],
    ['RATCHET_INVOKER_ABORT_TIMEOUT', '0s', /at least 1ms/],
    ['RATCHET_INVOKER_MESSAGE_SIZE_LIMIT', '32 MB/s', /expected a number of bytes/],
    ['RATCHET_INVOKER_MESSAGE_SIZE_LIMIT', '8 GiB', /at most 4294967295 bytes/],
    ['RATCHET_INVOKER_MAX_AWAITED_FUTURE_DEPTH', '1e400', /whole number/],
    ['RATCHET_RETRY_INITIAL_INTERVAL', 'soon', /duration/],
    ['RATCHET_RETRY_EXPONENTIATION_FACTOR', '0.5', /at least 1/],
    ['RATCHET_RETRY_EXPONENTIATION_FACTOR', 'two', /expected a number/],
    ['RATCHET_RETRY_MAX_ATTEMPTS', '-1', /at least 1/],
    ['RATCHET_RETRY_ON_MAX_ATTEMPTS', 'retry', /one of pause, kill/],
    ['RATCHET_DEFAULT_IDEMPOTENCY_RETENTION', '1 month', /days or smaller/],
    ['RATCHET_DEFAULT_JOURNAL_RETENTION', '-1d', /negative/],
    ['RATCHET_MAX_JOURNAL_RETENTION', 'P1Y', /days or smaller/],
    ['RATCHET_DEFAULT_WORKFLOW_COMPLETION_RETENTION', '1d 1d', /largest to smallest/],
    ['RATCHET_PARTITIONS', '0', /at least 1/],
    ['RATCHET_PARTITIONS', '4097', /at most 4096/],
    ['RATCHET_GROUP_COMMIT_MAX_DELAY', '1', /unit is required/],
    ['RATCHET_GROUP_COMMIT_MAX_BATCH', 'lots', /whole number/],
  ])('%s=%j', (name, value, problem) => {
    const error = failure({ [name]: value });
    expect(error.key).toBe(name);
    expect(error.message.startsWith(`invalid value for ${name}: `)).toBe(true);
    expect(error.message).toMatch(problem);
    expect(error.codedMessage.startsWith(`[RT0002] invalid value for ${name}: `)).toBe(true);
  });

  it('never echoes a database URL that may hold a password', () => {
    const error = failure({ RATCHET_DATABASE_URL: 'mysql://root:hunter2@db/x' });
    expect(error.message).not.toContain('hunter2');
    expect(failure({ RATCHET_DATABASE_URL: 'hunter2' }).message).not.toContain('hunter2');
  });

  it('accepts postgresql:// URLs and Unix socket URLs', () => {
    expect(load({ RATCHET_DATABASE_URL: 'postgresql:///ratchet?host=/var/run/postgresql' }).database.url).toBe(
      'postgresql:///ratchet?host=/var/run/postgresql',
    );
    expect(describeConfig(load({ RATCHET_DATABASE_URL: 'postgres://u:pw@h/db' })).database).toEqual({
      url: 'postgres://u:***@h/db',
      poolSize: 10,
    });
  });

  it('reads the cluster settings, with defaults chosen for a failover within 5 s', () => {
    expect(load({}).cluster).toEqual({
      advertisedAddress: undefined,
      leaseTimeoutMs: 3000,
      heartbeatIntervalMs: 1000,
      partitionWaitMs: 10_000,
      shutdownDelayMs: 0,
    });
    const config = load(
      {
        RATCHET_ADVERTISED_ADDRESS: '10.1.2.3',
        RATCHET_CLUSTER_LEASE_TIMEOUT: '1500ms',
        RATCHET_CLUSTER_HEARTBEAT_INTERVAL: '300ms',
      },
      configFile('[cluster]\npartition-wait = "2s"\nshutdown-delay = "5s"\n'),
    );
    expect(config.cluster).toEqual({
      advertisedAddress: '10.1.2.3',
      leaseTimeoutMs: 1500,
      heartbeatIntervalMs: 300,
      partitionWaitMs: 2000,
      shutdownDelayMs: 5000,
    });
    expect(load({ RATCHET_ADVERTISED_ADDRESS: '[fd00::1]' }).cluster.advertisedAddress).toBe('fd00::1');
  });

  it('refuses an advertised address with a port or a scheme, and a heartbeat too slow for the lease timeout', () => {
    expect(failure({ RATCHET_ADVERTISED_ADDRESS: '10.0.0.1:8080' }).message).toMatch(/without a port/);
    expect(failure({ RATCHET_ADVERTISED_ADDRESS: 'http://pod' }).key).toBe('RATCHET_ADVERTISED_ADDRESS');
    const error = failure({ RATCHET_CLUSTER_HEARTBEAT_INTERVAL: '2s' });
    expect(error.key).toBe('RATCHET_CLUSTER_HEARTBEAT_INTERVAL');
    expect(error.message).toMatch(/heartbeat interval \(2s\) must be at most half the lease timeout \(3s\)/);
  });

  it('refuses an initial retry interval above the maximum, naming the variable set', () => {
    const error = failure({ RATCHET_RETRY_INITIAL_INTERVAL: '2m' });
    expect(error.key).toBe('RATCHET_RETRY_INITIAL_INTERVAL');
    expect(error.message).toMatch(/initial retry interval \(2m\) must not exceed the maximum retry interval \(1m\)/);
  });

  it('refuses a minimum protocol version above the maximum, and reads both', () => {
    const error = failure({ RATCHET_INVOKER_MIN_PROTOCOL_VERSION: '7', RATCHET_INVOKER_MAX_PROTOCOL_VERSION: '6' });
    expect(error.key).toBe('RATCHET_INVOKER_MIN_PROTOCOL_VERSION');
    expect(error.message).toMatch(/minimum service protocol version \(7\) must not exceed the maximum \(6\)/);
    const config = loadConfig({ env: { RATCHET_INVOKER_MIN_PROTOCOL_VERSION: '6' } });
    expect(config.invoker).toMatchObject({ minProtocolVersion: 6, maxProtocolVersion: 7 });
  });

  it("reads the ingress limit: off in dev mode, 36000/h in managed mode, YAML's unquoted off (false) as off", () => {
    expect(loadConfig({ env: {} }).ingress.limit).toBeUndefined();
    expect(loadConfig({ env: { RATCHET_AUTH_KEYS_FILE: '/keys.json' } }).ingress.limit).toEqual({
      perHour: 36_000,
      burst: 600,
    });
    expect(
      loadConfig({ env: { RATCHET_INGRESS_RATE_LIMIT: '10/s', RATCHET_INGRESS_RATE_BURST: '5' } }).ingress.limit,
    ).toEqual({
      perHour: 36_000,
      burst: 5,
    });
    const file = configFile('[ingress]\nrate-limit = false\n');
    expect(
      loadConfig({ env: { RATCHET_AUTH_KEYS_FILE: '/keys.json' }, configFile: file }).ingress.limit,
    ).toBeUndefined();
    expect(failure({ RATCHET_INGRESS_RATE_LIMIT: '100' }).message).toMatch(/expected <requests>\/<s\|m\|h>/);
  });

  it('reads HTTPS files per listener or shared, and refuses half a pair', () => {
    const shared = loadConfig({
      env: {
        RATCHET_TLS_CERT: '/tls/tls.crt',
        RATCHET_TLS_KEY: '/tls/tls.key',
        RATCHET_ADMIN_TLS_CLIENT_CA: '/ca.crt',
      },
    });
    expect(shared.ingress.tls).toEqual({ certFile: '/tls/tls.crt', keyFile: '/tls/tls.key', clientCaFile: undefined });
    expect(shared.admin.tls).toEqual({ certFile: '/tls/tls.crt', keyFile: '/tls/tls.key', clientCaFile: '/ca.crt' });
    expect(shared.observability.tls?.certFile).toBe('/tls/tls.crt');
    expect(shared.introspection.tls).toEqual({ certFile: '/tls/tls.crt', keyFile: '/tls/tls.key' });
    const own = loadConfig({
      env: {
        RATCHET_TLS_CERT: '/tls/tls.crt',
        RATCHET_TLS_KEY: '/tls/tls.key',
        RATCHET_INGRESS_TLS_CERT: '/ingress.crt',
        RATCHET_INGRESS_TLS_KEY: '/ingress.key',
      },
    });
    expect(own.ingress.tls?.certFile).toBe('/ingress.crt');
    expect(own.admin.tls?.certFile).toBe('/tls/tls.crt');
    expect(loadConfig({ env: {} }).ingress.tls).toBeUndefined();
    expect(failure({ RATCHET_INGRESS_TLS_CERT: '/x.crt' }).message).toMatch(/needs both a certificate and a key/);
    const lonely = failure({ RATCHET_TLS_CLIENT_CA: '/ca.crt' });
    expect(lonely.key).toBe('RATCHET_TLS_CLIENT_CA');
    expect(lonely.message).toMatch(/client CA needs the listener to have a TLS certificate/);
  });

  it('names the file key and the file for bad values in the file', () => {
    const file = configFile('[admin]\nbind = "nowhere"\n');
    const error = failure({}, file);
    expect(error.message).toBe(
      `invalid value for admin.bind in ${file}: invalid address 'nowhere': the port is missing, expected host:port, e.g. '127.0.0.1:8080', '0.0.0.0:9070', 'localhost:0' or '[::1]:8080'`,
    );
  });

  it.each([
    ['[invoker]\nabort-timeout = 600\n', 'invoker.abort-timeout', /as a string, got 600/],
    ['[storage]\npartitions = "many"\n', 'storage.partitions', /whole number, got 'many'/],
    ['cluster-name = 7\n', 'cluster-name', /expected a string, got 7/],
    ['[log]\nlevel = ["info"]\n', 'log.level', /got an array/],
    ['default-journal-retention = 1979-05-27\n', 'default-journal-retention', /got the date/],
  ])('file values of the wrong type: %j', (toml, key, problem) => {
    const file = configFile(toml);
    const error = failure({}, file);
    expect(error.message.startsWith(`invalid value for ${key} in ${file}: `)).toBe(true);
    expect(error.message).toMatch(problem);
  });

  it('refuses unknown keys in the file, with a suggestion', () => {
    const file = configFile('[ingres]\nbind = "0.0.0.0:8080"\n');
    expect(failure({}, file).message).toBe(
      `unknown key ingres.bind in the config file ${file} (did you mean ingress.bind?)`,
    );
    const nested = configFile('[admin.bind]\nhost = "0.0.0.0"\n');
    expect(failure({}, nested).message).toMatch(/unknown key admin\.bind\.host/);
  });

  it('refuses a config file it cannot read, naming where the path came from', () => {
    const missing = join(dir, 'missing.toml');
    const error = failure({ RATCHET_CONFIG: missing });
    expect(error.key).toBe('RATCHET_CONFIG');
    expect(error.message).toMatch(
      new RegExp(`cannot read the config file ${missing} \\(from RATCHET_CONFIG\\): .*ENOENT`),
    );
    expect(error.cause).toBeInstanceOf(Error);
    expect(failure({}, dir).message).toMatch(/cannot read the config file .*EISDIR/);
  });

  it('refuses a config file that is not TOML, with the position', () => {
    const file = configFile('cluster-name = "a"\n[admin\nbind = 1\n');
    const error = failure({}, file);
    expect(error.message).toMatch(new RegExp(`the config file ${file} is not valid TOML \\(line 2, column \\d+\\)`));
  });
});
