import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { LOG_LEVELS, type LogLevel } from './telemetry/logger.ts';

/*
 * The operator's configuration: the only module that reads the environment. Loaded once at startup into a frozen
 * object; a bad value stops the process with an error naming the variable, before anything touches the cluster.
 */

export const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export interface OperatorConfig {
  /** Where the operator runs: the leader Lease lives here. */
  readonly namespace: string;
  /** Namespaces to watch; empty means all. */
  readonly watchNamespaces: readonly string[];
  readonly leaderElection: {
    readonly enabled: boolean;
    readonly leaseName: string;
    /** How long a Lease holds without renewal before a standby may take it. */
    readonly leaseDurationMs: number;
    /** A leader that could not renew for this long stops reconciling (before anyone else can take over). */
    readonly renewDeadlineMs: number;
    /** Pause between attempts to acquire or renew. */
    readonly retryPeriodMs: number;
  };
  readonly health: { readonly host: string; readonly port: number };
  /** Period of the full re-list that recovers missed watch events (restate-operator #114). */
  readonly resyncPeriodMs: number;
  /** Reconciles in flight at once, per controller. */
  readonly maxConcurrentReconciles: number;
  /** Suffix of in-cluster Service DNS names. */
  readonly clusterDomain: string;
  readonly logLevel: LogLevel;
  /** Only JSON lines (pino), which log collectors ingest as they are. */
  readonly logFormat: 'json';
  /** This instance: the Lease holder identity and the events' reportingInstance. */
  readonly podName: string;
}

export class OperatorConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'OperatorConfigError';
  }
}

export interface LoadConfigOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Reads the service account's namespace file; undefined when absent (outside a pod). */
  readonly readNamespaceFile?: () => string | undefined;
  readonly hostname?: () => string;
}

export function loadConfig(options: LoadConfigOptions = {}): OperatorConfig {
  const env = options.env ?? process.env;
  const read = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };

  const namespace =
    read('RATCHET_OPERATOR_NAMESPACE') ?? (options.readNamespaceFile ?? readServiceAccountNamespace)() ?? 'default';
  checkDnsLabel('RATCHET_OPERATOR_NAMESPACE', namespace);

  const watchNamespaces = (read('RATCHET_OPERATOR_WATCH_NAMESPACES') ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  for (const n of watchNamespaces) checkDnsLabel('RATCHET_OPERATOR_WATCH_NAMESPACES', n);

  const leaseName = read('RATCHET_OPERATOR_LEASE_NAME') ?? 'ratchet-operator-leader';
  checkDnsSubdomain('RATCHET_OPERATOR_LEASE_NAME', leaseName);

  const podName = read('POD_NAME') ?? (options.hostname ?? hostname)();

  const leaseDurationMs = parseDuration(
    'RATCHET_OPERATOR_LEASE_DURATION',
    read('RATCHET_OPERATOR_LEASE_DURATION') ?? '15s',
  );
  const renewDeadlineMs = parseDuration(
    'RATCHET_OPERATOR_RENEW_DEADLINE',
    read('RATCHET_OPERATOR_RENEW_DEADLINE') ?? '10s',
  );
  const retryPeriodMs = parseDuration('RATCHET_OPERATOR_RETRY_PERIOD', read('RATCHET_OPERATOR_RETRY_PERIOD') ?? '2s');
  // Two leaders at once would be possible if a leader kept reconciling past the lease others wait out.
  if (renewDeadlineMs >= leaseDurationMs) {
    throw new OperatorConfigError(
      'RATCHET_OPERATOR_RENEW_DEADLINE',
      'must be shorter than RATCHET_OPERATOR_LEASE_DURATION',
    );
  }
  if (retryPeriodMs >= renewDeadlineMs) {
    throw new OperatorConfigError(
      'RATCHET_OPERATOR_RETRY_PERIOD',
      'must be shorter than RATCHET_OPERATOR_RENEW_DEADLINE',
    );
  }
  const logFormat = read('RATCHET_OPERATOR_LOG_FORMAT') ?? 'json';
  if (logFormat !== 'json') {
    throw new OperatorConfigError('RATCHET_OPERATOR_LOG_FORMAT', `'${logFormat}' is not supported (only json)`);
  }

  return Object.freeze({
    namespace,
    watchNamespaces: Object.freeze([...new Set(watchNamespaces)]),
    leaderElection: Object.freeze({
      enabled: parseBoolean('RATCHET_OPERATOR_LEADER_ELECTION', read('RATCHET_OPERATOR_LEADER_ELECTION') ?? 'true'),
      leaseName,
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
    }),
    health: Object.freeze(
      parseBind('RATCHET_OPERATOR_HEALTH_BIND', read('RATCHET_OPERATOR_HEALTH_BIND') ?? '0.0.0.0:8081'),
    ),
    resyncPeriodMs: parseDuration('RATCHET_OPERATOR_RESYNC_PERIOD', read('RATCHET_OPERATOR_RESYNC_PERIOD') ?? '5m'),
    maxConcurrentReconciles: parsePositiveInt(
      'RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES',
      read('RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES') ?? '4',
    ),
    clusterDomain: parseClusterDomain(read('RATCHET_OPERATOR_CLUSTER_DOMAIN') ?? 'cluster.local'),
    logLevel: parseLogLevel(read('RATCHET_OPERATOR_LOG_LEVEL') ?? 'info'),
    logFormat,
    podName,
  });
}

function readServiceAccountNamespace(): string | undefined {
  try {
    const text = readFileSync(SERVICE_ACCOUNT_NAMESPACE_FILE, 'utf8').trim();
    return text === '' ? undefined : text;
  } catch {
    // Outside a pod there is no service account mount: fall back to the default namespace.
    return undefined;
  }
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function checkDnsLabel(variable: string, value: string): void {
  if (!DNS_LABEL.test(value)) {
    throw new OperatorConfigError(variable, `'${value}' is not a valid namespace name (RFC 1123 label)`);
  }
}

function checkDnsSubdomain(variable: string, value: string): void {
  if (value.length > 253 || !value.split('.').every((part) => DNS_LABEL.test(part))) {
    throw new OperatorConfigError(variable, `'${value}' is not a valid object name (RFC 1123 subdomain)`);
  }
}

function parseBoolean(variable: string, value: string): boolean {
  switch (value.toLowerCase()) {
    case 'true':
      return true;
    case 'false':
      return false;
    default:
      throw new OperatorConfigError(variable, `'${value}' is not a boolean (use true or false)`);
  }
}

function parsePositiveInt(variable: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new OperatorConfigError(variable, `'${value}' is not a positive integer`);
  }
  return n;
}

const DURATION_UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** Go-style durations, as Kubernetes tools write them: `30s`, `5m`, `1h30m`, `500ms`. */
export function parseDuration(variable: string, value: string): number {
  const parts = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/.test(value) ? value.match(/\d+(?:\.\d+)?(?:ms|s|m|h)/g) : null;
  if (parts === null) {
    throw new OperatorConfigError(variable, `'${value}' is not a duration (e.g. '30s', '5m', '1h30m')`);
  }
  let ms = 0;
  for (const part of parts) {
    const [, amount = '', unit = ''] = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(part) ?? [];
    ms += Number(amount) * (DURATION_UNITS[unit] ?? 0);
  }
  ms = Math.round(ms);
  if (ms < 1_000) throw new OperatorConfigError(variable, `'${value}' is shorter than one second`);
  return ms;
}

/** `host:port`, `[v6]:port` or `:port` (all interfaces). */
export function parseBind(variable: string, value: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value);
  const port = Number(match?.[3]);
  if (match === null || port > 65_535) {
    throw new OperatorConfigError(variable, `'${value}' is not host:port (e.g. 0.0.0.0:8081)`);
  }
  const host = match[1] ?? match[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}

function parseClusterDomain(value: string): string {
  const domain = value.replace(/\.$/, '');
  checkDnsSubdomain('RATCHET_OPERATOR_CLUSTER_DOMAIN', domain);
  return domain;
}

function parseLogLevel(value: string): LogLevel {
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (level === undefined) {
    throw new OperatorConfigError('RATCHET_OPERATOR_LOG_LEVEL', `'${value}' is not one of ${LOG_LEVELS.join(', ')}`);
  }
  return level;
}
