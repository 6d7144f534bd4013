import { resolve } from 'node:path';
import { ConfigError } from '../errors/config-errors.ts';
import { describe, invalid, isTable, stringOf, type Raw, type Reader } from './reader.ts';
import {
  KAFKA_CLUSTER_NAME_PATTERN,
  type ClusterConfig,
  type IntrospectionConfig,
  type KafkaClusterConfig,
  type TlsFilesConfig,
} from './settings.ts';
import { formatDuration } from './units.ts';

/*
 * Settings made of several values, or checked against each other: Kafka clusters, introspection credentials and TLS,
 * file paths, cluster membership.
 */

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
export function kafkaClusters(raw: Raw | undefined): KafkaClusterConfig[] {
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

export function introspectionPassword(raw: Raw | undefined): string | undefined {
  if (raw === undefined) return undefined;
  // Never echo the value in an error: it is a secret.
  if (typeof raw.value !== 'string') throw invalid(raw, 'expected a string');
  return raw.value;
}

export function introspectionTls(cert: Raw | undefined, key: Raw | undefined, cwd: string): IntrospectionConfig['tls'] {
  if (cert === undefined && key === undefined) return undefined;
  if (cert === undefined || key === undefined) {
    const given = (cert ?? key)!;
    throw invalid(given, 'TLS needs both RATCHET_INTROSPECTION_TLS_CERT and RATCHET_INTROSPECTION_TLS_KEY');
  }
  return { certFile: resolve(cwd, stringOf(cert, 'a file path')), keyFile: resolve(cwd, stringOf(key, 'a file path')) };
}

/**
 * The TLS files of an HTTPS listener: its own `RATCHET_<LISTENER>_TLS_*`, or the shared `RATCHET_TLS_*`. Certificate
 * and key go together (both from the same level); the client CA may come from either level.
 */
export function listenerTls(
  own: { cert: Raw | undefined; key: Raw | undefined; clientCa: Raw | undefined },
  shared: { cert: Raw | undefined; key: Raw | undefined; clientCa: Raw | undefined },
  cwd: string,
): TlsFilesConfig | undefined {
  const pair = own.cert !== undefined || own.key !== undefined ? own : shared;
  if (pair.cert === undefined && pair.key === undefined) {
    const ca = own.clientCa ?? shared.clientCa;
    if (ca !== undefined) throw invalid(ca, 'a client CA needs the listener to have a TLS certificate and key as well');
    return undefined;
  }
  if (pair.cert === undefined || pair.key === undefined) {
    throw invalid((pair.cert ?? pair.key)!, 'TLS needs both a certificate and a key file');
  }
  const path = (raw: Raw): string => {
    const value = stringOf(raw, 'a file path');
    if (value === '') throw invalid(raw, 'expected a file path');
    return resolve(cwd, value);
  };
  const ca = own.clientCa ?? shared.clientCa;
  return { certFile: path(pair.cert), keyFile: path(pair.key), clientCaFile: ca === undefined ? undefined : path(ca) };
}

export function optionalPath(raw: Raw | undefined, cwd: string): string | undefined {
  if (raw === undefined) return undefined;
  const path = stringOf(raw, 'a file path');
  if (path === '') throw invalid(raw, 'expected a file path');
  return resolve(cwd, path);
}

export function clusterConfig(read: Reader): ClusterConfig {
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
