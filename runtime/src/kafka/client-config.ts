import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type { ConsumerConfig, KafkaConfig, SASLOptions } from 'kafkajs';
import type { KafkaClusterSchema, SubscriptionSchema } from '../schema/types.ts';

/**
 * A subscription's consumer settings, from librdkafka property names (what restate users write, in the cluster's
 * properties and the subscription's options; the options win) to kafkajs's client and consumer configuration.
 *
 * Understood: `bootstrap.servers` / `metadata.broker.list` (with or without `PLAINTEXT://`-style prefixes),
 * `client.id`, `group.id`, `auto.offset.reset`, `security.protocol`, `sasl.mechanism(s)` with `sasl.username` and
 * `sasl.password` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), `ssl.ca.location` / `ssl.ca.pem`,
 * `ssl.certificate.location` / `ssl.certificate.pem`, `ssl.key.location` / `ssl.key.pem`, `ssl.key.password`,
 * `enable.ssl.certificate.verification`, and the timeouts and fetch sizes listed in `NUMERIC`. Properties that only
 * mean something to librdkafka are reported in `ignored` (logged once per consumer start), never an error; a known
 * property with a value that cannot work is a `KafkaSettingsError` naming the property and what to write instead.
 */
export interface ConsumerSettings {
  client: KafkaConfig;
  consumer: ConsumerConfig;
  groupId: string;
  /** `auto.offset.reset`: where a group without a committed offset starts (librdkafka's default: the end). */
  fromBeginning: boolean;
  /** Property names given that this client does not use. */
  ignored: string[];
}

export class KafkaSettingsError extends Error {
  override readonly name = 'KafkaSettingsError';
}

/** librdkafka numeric properties and the kafkajs setting each becomes (all milliseconds or bytes, as in both). */
const NUMERIC: Record<string, { client?: keyof KafkaConfig; consumer?: keyof ConsumerConfig }> = {
  'session.timeout.ms': { consumer: 'sessionTimeout' },
  'heartbeat.interval.ms': { consumer: 'heartbeatInterval' },
  'max.poll.interval.ms': { consumer: 'rebalanceTimeout' },
  'topic.metadata.refresh.interval.ms': { consumer: 'metadataMaxAge' },
  'fetch.min.bytes': { consumer: 'minBytes' },
  'fetch.max.bytes': { consumer: 'maxBytes' },
  'max.partition.fetch.bytes': { consumer: 'maxBytesPerPartition' },
  'fetch.wait.max.ms': { consumer: 'maxWaitTimeInMs' },
  'socket.connection.setup.timeout.ms': { client: 'connectionTimeout' },
  'request.timeout.ms': { client: 'requestTimeout' },
  'socket.timeout.ms': { client: 'requestTimeout' },
};

/** Read and understood here, not passed on. */
const HANDLED = new Set([
  'bootstrap.servers',
  'metadata.broker.list',
  'client.id',
  'group.id',
  'auto.offset.reset',
  'security.protocol',
  'sasl.mechanism',
  'sasl.mechanisms',
  'sasl.username',
  'sasl.password',
  'ssl.ca.location',
  'ssl.ca.pem',
  'ssl.certificate.location',
  'ssl.certificate.pem',
  'ssl.key.location',
  'ssl.key.pem',
  'ssl.key.password',
  'enable.ssl.certificate.verification',
  'ssl.endpoint.identification.algorithm',
  // Ratchet commits offsets itself, after the records' invocations are stored.
  'enable.auto.commit',
  'enable.auto.offset.store',
  'auto.commit.interval.ms',
]);

/** Secrets never reach a log line or a status. */
export const SECRET_PROPERTIES = new Set(['sasl.password', 'ssl.key.password', 'ssl.key.pem']);

export function consumerSettings(cluster: KafkaClusterSchema, subscription: SubscriptionSchema): ConsumerSettings {
  const props: Record<string, string> = { ...cluster.properties, ...subscription.options };
  const get = (name: string): string | undefined => {
    const v = props[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };

  const servers = get('bootstrap.servers') ?? get('metadata.broker.list');
  if (servers === undefined) {
    throw new KafkaSettingsError(
      `Kafka cluster '${cluster.name}' has neither 'bootstrap.servers' nor 'metadata.broker.list'`,
    );
  }
  const brokers = servers
    .split(',')
    .map((s) => s.trim().replace(/^[A-Za-z_]+:\/\//, ''))
    .filter((s) => s !== '');
  if (brokers.length === 0) {
    throw new KafkaSettingsError(`'bootstrap.servers' of Kafka cluster '${cluster.name}' lists no broker`);
  }
  for (const b of brokers) {
    const port = /^(\[[0-9A-Fa-f:.]+\]|[^:\s/]+):(\d{1,5})$/.exec(b)?.[2];
    if (port === undefined || Number(port) < 1 || Number(port) > 65535) {
      throw new KafkaSettingsError(
        `'bootstrap.servers' of Kafka cluster '${cluster.name}': '${b}' is not host:port (port 1 to 65535)`,
      );
    }
  }

  const groupId = get('group.id') ?? subscription.id;
  const client: KafkaConfig = { brokers, clientId: get('client.id') ?? 'restate' };
  // librdkafka's fetch.wait.max.ms (500 ms), not kafkajs's 5 s: how long a fetch waits at the broker for new records.
  const consumer: ConsumerConfig = { groupId, allowAutoTopicCreation: false, maxWaitTimeInMs: 500 };

  const protocol = (get('security.protocol') ?? 'plaintext').toLowerCase();
  if (!['plaintext', 'ssl', 'sasl_plaintext', 'sasl_ssl'].includes(protocol)) {
    throw new KafkaSettingsError(
      `'security.protocol' is '${get('security.protocol')}': use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL`,
    );
  }
  if (protocol === 'ssl' || protocol === 'sasl_ssl') client.ssl = tlsOptions(get);
  if (protocol === 'sasl_plaintext' || protocol === 'sasl_ssl') client.sasl = saslOptions(get);

  for (const [name, target] of Object.entries(NUMERIC)) {
    const raw = get(name);
    if (raw === undefined) continue;
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(n)) {
      throw new KafkaSettingsError(`'${name}' is '${raw}': it must be a whole number (milliseconds or bytes)`);
    }
    if (target.client !== undefined) (client as unknown as Record<string, number>)[target.client] = n;
    if (target.consumer !== undefined) (consumer as unknown as Record<string, number>)[target.consumer] = n;
  }

  const reset = (get('auto.offset.reset') ?? 'latest').toLowerCase();
  let fromBeginning: boolean;
  if (['earliest', 'smallest', 'beginning'].includes(reset)) fromBeginning = true;
  else if (['latest', 'largest', 'end'].includes(reset)) fromBeginning = false;
  else {
    throw new KafkaSettingsError(
      `'auto.offset.reset' is '${get('auto.offset.reset')}': use 'earliest' (start at the first record of a ` +
        "partition the group has no offset for) or 'latest' (start after the last one)",
    );
  }

  const ignored = Object.keys(props)
    .filter((k) => !HANDLED.has(k) && NUMERIC[k] === undefined)
    .sort();
  return { client, consumer, groupId, fromBeginning, ignored };
}

function tlsOptions(get: (name: string) => string | undefined): ConnectionOptions {
  const tls: ConnectionOptions = {};
  const pem = (inline: string, file: string): string | undefined => {
    const text = get(inline);
    if (text !== undefined) return text;
    const path = get(file);
    if (path === undefined) return undefined;
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      throw new KafkaSettingsError(`'${file}' is '${path}', which cannot be read: ${(err as Error).message}`);
    }
  };
  const ca = pem('ssl.ca.pem', 'ssl.ca.location');
  if (ca !== undefined) tls.ca = ca;
  const cert = pem('ssl.certificate.pem', 'ssl.certificate.location');
  if (cert !== undefined) tls.cert = cert;
  const key = pem('ssl.key.pem', 'ssl.key.location');
  if (key !== undefined) tls.key = key;
  const passphrase = get('ssl.key.password');
  if (passphrase !== undefined) tls.passphrase = passphrase;
  const verify = get('enable.ssl.certificate.verification');
  if (verify !== undefined) {
    if (verify.toLowerCase() !== 'true' && verify.toLowerCase() !== 'false') {
      throw new KafkaSettingsError(`'enable.ssl.certificate.verification' is '${verify}': use true or false`);
    }
    tls.rejectUnauthorized = verify.toLowerCase() === 'true';
  }
  // librdkafka checks the broker's host name only with `ssl.endpoint.identification.algorithm=https` (its default
  // since 1.9); `none` turns the check off.
  if (get('ssl.endpoint.identification.algorithm')?.toLowerCase() === 'none') {
    tls.checkServerIdentity = () => undefined;
  }
  return tls;
}

function saslOptions(get: (name: string) => string | undefined): SASLOptions {
  const given = get('sasl.mechanism') ?? get('sasl.mechanisms') ?? 'PLAIN';
  const mechanisms = { PLAIN: 'plain', 'SCRAM-SHA-256': 'scram-sha-256', 'SCRAM-SHA-512': 'scram-sha-512' } as const;
  const mechanism = mechanisms[given.toUpperCase() as keyof typeof mechanisms] as
    (typeof mechanisms)[keyof typeof mechanisms] | undefined;
  if (mechanism === undefined) {
    throw new KafkaSettingsError(
      `'sasl.mechanism' is '${given}': Ratchet's Kafka client supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512`,
    );
  }
  const username = get('sasl.username');
  const password = get('sasl.password');
  if (username === undefined || password === undefined) {
    throw new KafkaSettingsError(`SASL ${given.toUpperCase()} needs 'sasl.username' and 'sasl.password'`);
  }
  return { mechanism, username, password };
}
