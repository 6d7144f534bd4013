import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  KafkaSettingsError,
  SECRET_PROPERTIES,
  consumerSettings,
  type ConsumerSettings,
} from '../../../runtime/src/kafka/client-config.ts';
import type { KafkaClusterSchema, SubscriptionSchema } from '../../../runtime/src/schema/types.ts';

const PASSWORD = 's3cr3t-P@ssw0rd';

function cluster(properties: Record<string, string>): KafkaClusterSchema {
  return { name: 'my-cluster', properties, createdAt: new Date(0), static: false };
}

function subscription(options: Record<string, string> = {}): SubscriptionSchema {
  return {
    id: 'sub_1234',
    source: 'kafka://my-cluster/orders',
    sink: 'service://Orders/handle',
    cluster: 'my-cluster',
    topic: 'orders',
    serviceName: 'Orders',
    handlerName: 'handle',
    options,
    createdAt: new Date(0),
  };
}

const BASE = { 'bootstrap.servers': 'broker:9092' };

/** Settings from cluster properties (on top of a valid bootstrap.servers) and subscription options. */
function settings(properties: Record<string, string>, options: Record<string, string> = {}): ConsumerSettings {
  return consumerSettings(cluster({ ...BASE, ...properties }), subscription(options));
}

/** The KafkaSettingsError thrown by `fn`; fails the test if it throws nothing or something else. */
function settingsError(fn: () => unknown): KafkaSettingsError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(KafkaSettingsError);
    const e = err as KafkaSettingsError;
    expect(e.name).toBe('KafkaSettingsError');
    expect(e).toBeInstanceOf(Error);
    return e;
  }
  throw new Error('expected a KafkaSettingsError, but nothing was thrown');
}

function tls(s: ConsumerSettings): ConnectionOptions {
  expect(typeof s.client.ssl).toBe('object');
  return s.client.ssl as ConnectionOptions;
}

describe('consumerSettings: brokers', () => {
  it('takes brokers from bootstrap.servers', () => {
    const s = consumerSettings(cluster({ 'bootstrap.servers': 'a:9092,b:9093' }), subscription());
    expect(s.client.brokers).toEqual(['a:9092', 'b:9093']);
  });

  it('takes brokers from metadata.broker.list when bootstrap.servers is absent', () => {
    const s = consumerSettings(cluster({ 'metadata.broker.list': 'm1:9092,m2:9092' }), subscription());
    expect(s.client.brokers).toEqual(['m1:9092', 'm2:9092']);
  });

  it('prefers bootstrap.servers over metadata.broker.list', () => {
    const s = consumerSettings(cluster({ 'bootstrap.servers': 'b:1', 'metadata.broker.list': 'm:2' }), subscription());
    expect(s.client.brokers).toEqual(['b:1']);
  });

  it('falls back to metadata.broker.list when bootstrap.servers is blank', () => {
    const s = consumerSettings(cluster({ 'bootstrap.servers': '   ', 'metadata.broker.list': 'm:2' }), subscription());
    expect(s.client.brokers).toEqual(['m:2']);
  });

  it('strips PLAINTEXT:// and SSL:// (and similar) prefixes', () => {
    const s = consumerSettings(
      cluster({ 'bootstrap.servers': 'PLAINTEXT://a:9092,SSL://b:9093,SASL_SSL://c:9094,plaintext://d:1' }),
      subscription(),
    );
    expect(s.client.brokers).toEqual(['a:9092', 'b:9093', 'c:9094', 'd:1']);
  });

  it('trims whitespace around the list and each broker, and drops empty entries', () => {
    const s = consumerSettings(cluster({ 'bootstrap.servers': '  a:9092 ,  b:9093,, c:1 , ' }), subscription());
    expect(s.client.brokers).toEqual(['a:9092', 'b:9093', 'c:1']);
  });

  it('accepts IP addresses, including bracketed IPv6', () => {
    const s = consumerSettings(cluster({ 'bootstrap.servers': '10.0.0.1:9092,[::1]:9092' }), subscription());
    expect(s.client.brokers).toEqual(['10.0.0.1:9092', '[::1]:9092']);
  });

  it.each(['nohost', 'h:port', 'h:', ':9092', 'h:123456', 'a/b:9092', 'h:9092:1'])('refuses broker %j', (broker) => {
    const e = settingsError(() => consumerSettings(cluster({ 'bootstrap.servers': broker }), subscription()));
    expect(e.message).toContain('bootstrap.servers');
    expect(e.message).toContain(`'${broker}'`);
    expect(e.message).toContain('host:port');
    expect(e.message).toContain('my-cluster');
  });

  it('refuses a bad broker among good ones', () => {
    const e = settingsError(() =>
      consumerSettings(cluster({ 'bootstrap.servers': 'a:9092,nohost,b:9093' }), subscription()),
    );
    expect(e.message).toContain("'nohost'");
  });

  it('refuses a cluster with neither bootstrap.servers nor metadata.broker.list', () => {
    const e = settingsError(() => consumerSettings(cluster({ 'client.id': 'x' }), subscription()));
    expect(e.message).toContain('bootstrap.servers');
    expect(e.message).toContain('metadata.broker.list');
    expect(e.message).toContain('my-cluster');
  });

  it('refuses blank servers', () => {
    settingsError(() => consumerSettings(cluster({ 'bootstrap.servers': '  ' }), subscription()));
    settingsError(() => consumerSettings(cluster({ 'metadata.broker.list': '' }), subscription()));
  });

  it('lets subscription options supply or replace the brokers', () => {
    expect(consumerSettings(cluster({}), subscription({ 'bootstrap.servers': 'opt:1' })).client.brokers).toEqual([
      'opt:1',
    ]);
    expect(
      consumerSettings(cluster({ 'bootstrap.servers': 'cl:1' }), subscription({ 'bootstrap.servers': 'opt:2' })).client
        .brokers,
    ).toEqual(['opt:2']);
  });
});

describe('consumerSettings: group and client ids', () => {
  it("defaults group.id to the subscription id and client.id to 'restate'", () => {
    const s = settings({});
    expect(s.groupId).toBe('sub_1234');
    expect(s.consumer.groupId).toBe('sub_1234');
    expect(s.client.clientId).toBe('restate');
  });

  it('uses group.id and client.id from the cluster properties', () => {
    const s = settings({ 'group.id': 'cluster-group', 'client.id': 'cluster-client' });
    expect(s.groupId).toBe('cluster-group');
    expect(s.consumer.groupId).toBe('cluster-group');
    expect(s.client.clientId).toBe('cluster-client');
  });

  it('lets subscription options override group.id and client.id', () => {
    const s = settings(
      { 'group.id': 'cluster-group', 'client.id': 'cluster-client' },
      { 'group.id': 'sub-group', 'client.id': 'sub-client' },
    );
    expect(s.groupId).toBe('sub-group');
    expect(s.consumer.groupId).toBe('sub-group');
    expect(s.client.clientId).toBe('sub-client');
  });

  it('trims the ids and treats blank ones as absent', () => {
    expect(settings({ 'group.id': '  g  ' }).groupId).toBe('g');
    expect(settings({ 'group.id': '   ', 'client.id': '' }).groupId).toBe('sub_1234');
    expect(settings({ 'client.id': '' }).client.clientId).toBe('restate');
  });

  it('never lets the consumer create topics', () => {
    expect(settings({}).consumer.allowAutoTopicCreation).toBe(false);
  });
});

describe('consumerSettings: auto.offset.reset', () => {
  it.each(['earliest', 'smallest', 'beginning', 'EARLIEST', ' Earliest '])('%j starts from the beginning', (v) => {
    expect(settings({ 'auto.offset.reset': v }).fromBeginning).toBe(true);
  });

  it.each(['latest', 'largest', 'end', 'LATEST'])('%j starts from the end', (v) => {
    expect(settings({ 'auto.offset.reset': v }).fromBeginning).toBe(false);
  });

  it('defaults to the end', () => {
    expect(settings({}).fromBeginning).toBe(false);
  });

  it('refuses an unknown value, naming the property and the value', () => {
    const e = settingsError(() => settings({ 'auto.offset.reset': 'sometimes' }));
    expect(e.message).toContain('auto.offset.reset');
    expect(e.message).toContain('sometimes');
    expect(e.message).toContain('earliest');
    expect(e.message).toContain('latest');
  });

  it('takes the subscription option over the cluster property', () => {
    expect(settings({ 'auto.offset.reset': 'latest' }, { 'auto.offset.reset': 'earliest' }).fromBeginning).toBe(true);
    expect(settings({ 'auto.offset.reset': 'earliest' }, { 'auto.offset.reset': 'latest' }).fromBeginning).toBe(false);
  });
});

describe('consumerSettings: security.protocol', () => {
  it('defaults to plaintext: no ssl, no sasl', () => {
    const s = settings({});
    expect(s.client.ssl).toBeUndefined();
    expect(s.client.sasl).toBeUndefined();
  });

  it.each(['PLAINTEXT', 'plaintext', 'PlainText'])('%j uses neither ssl nor sasl', (p) => {
    const s = settings({ 'security.protocol': p });
    expect(s.client.ssl).toBeUndefined();
    expect(s.client.sasl).toBeUndefined();
  });

  it.each(['SSL', 'ssl', 'Ssl'])('%j uses ssl without sasl', (p) => {
    const s = settings({ 'security.protocol': p });
    expect(s.client.ssl).toEqual({});
    expect(s.client.sasl).toBeUndefined();
  });

  it.each(['SASL_PLAINTEXT', 'sasl_plaintext'])('%j uses sasl without ssl', (p) => {
    const s = settings({ 'security.protocol': p, 'sasl.username': 'u', 'sasl.password': PASSWORD });
    expect(s.client.ssl).toBeUndefined();
    expect(s.client.sasl).toEqual({ mechanism: 'plain', username: 'u', password: PASSWORD });
  });

  it.each(['SASL_SSL', 'sasl_ssl'])('%j uses both sasl and ssl', (p) => {
    const s = settings({ 'security.protocol': p, 'sasl.username': 'u', 'sasl.password': PASSWORD });
    expect(s.client.ssl).toEqual({});
    expect(s.client.sasl).toEqual({ mechanism: 'plain', username: 'u', password: PASSWORD });
  });

  it('refuses an unknown protocol, naming the property, the value and the choices', () => {
    const e = settingsError(() => settings({ 'security.protocol': 'TLS' }));
    expect(e.message).toContain('security.protocol');
    expect(e.message).toContain("'TLS'");
    for (const choice of ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL']) expect(e.message).toContain(choice);
  });

  it('takes the subscription option over the cluster property', () => {
    expect(settings({ 'security.protocol': 'SSL' }, { 'security.protocol': 'PLAINTEXT' }).client.ssl).toBeUndefined();
    expect(settings({ 'security.protocol': 'PLAINTEXT' }, { 'security.protocol': 'SSL' }).client.ssl).toEqual({});
  });
});

describe('consumerSettings: SASL', () => {
  const sasl = { 'security.protocol': 'SASL_SSL', 'sasl.username': 'alice', 'sasl.password': PASSWORD };

  it('defaults to PLAIN', () => {
    expect(settings(sasl).client.sasl).toEqual({ mechanism: 'plain', username: 'alice', password: PASSWORD });
  });

  it.each([
    ['PLAIN', 'plain'],
    ['plain', 'plain'],
    ['SCRAM-SHA-256', 'scram-sha-256'],
    ['scram-sha-256', 'scram-sha-256'],
    ['SCRAM-SHA-512', 'scram-sha-512'],
    ['Scram-Sha-512', 'scram-sha-512'],
  ])('sasl.mechanism %j becomes %j', (given, expected) => {
    expect(settings({ ...sasl, 'sasl.mechanism': given }).client.sasl).toEqual({
      mechanism: expected,
      username: 'alice',
      password: PASSWORD,
    });
  });

  it.each([
    ['PLAIN', 'plain'],
    ['SCRAM-SHA-256', 'scram-sha-256'],
    ['SCRAM-SHA-512', 'scram-sha-512'],
  ])('sasl.mechanisms %j becomes %j', (given, expected) => {
    expect(settings({ ...sasl, 'sasl.mechanisms': given }).client.sasl).toEqual({
      mechanism: expected,
      username: 'alice',
      password: PASSWORD,
    });
  });

  it('prefers sasl.mechanism over sasl.mechanisms', () => {
    const s = settings({ ...sasl, 'sasl.mechanism': 'SCRAM-SHA-512', 'sasl.mechanisms': 'PLAIN' });
    expect(s.client.sasl).toMatchObject({ mechanism: 'scram-sha-512' });
  });

  it('takes credentials from subscription options over cluster properties', () => {
    const s = settings(sasl, { 'sasl.username': 'bob', 'sasl.password': 'other', 'sasl.mechanism': 'SCRAM-SHA-256' });
    expect(s.client.sasl).toEqual({ mechanism: 'scram-sha-256', username: 'bob', password: 'other' });
  });

  it('refuses a missing username', () => {
    const e = settingsError(() => settings({ 'security.protocol': 'SASL_PLAINTEXT', 'sasl.password': PASSWORD }));
    expect(e.message).toContain('sasl.username');
    expect(e.message).toContain('sasl.password');
    expect(e.message).not.toContain(PASSWORD);
  });

  it('refuses a missing password', () => {
    const e = settingsError(() =>
      settings({ 'security.protocol': 'SASL_SSL', 'sasl.mechanism': 'SCRAM-SHA-256', 'sasl.username': 'alice' }),
    );
    expect(e.message).toContain('SCRAM-SHA-256');
    expect(e.message).toContain('sasl.username');
    expect(e.message).toContain('sasl.password');
  });

  it('names the unsupported mechanism before asking for credentials it would not use', () => {
    const e = settingsError(() => settings({ 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'GSSAPI' }));
    expect(e.message).toContain("'sasl.mechanism' is 'GSSAPI'");
    expect(e.message).not.toContain('sasl.username');
  });

  it('refuses a blank password', () => {
    settingsError(() => settings({ ...sasl, 'sasl.password': '   ' }));
  });

  it.each(['GSSAPI', 'OAUTHBEARER', 'oauthbearer'])('refuses unsupported mechanism %j', (m) => {
    const e = settingsError(() => settings({ ...sasl, 'sasl.mechanism': m }));
    expect(e.message).toContain('sasl.mechanism');
    expect(e.message).toContain(`'${m}'`);
    expect(e.message).toContain('PLAIN');
    expect(e.message).toContain('SCRAM-SHA-256');
    expect(e.message).toContain('SCRAM-SHA-512');
    expect(e.message).not.toContain(PASSWORD);
  });

  it('refuses an unsupported mechanism given as sasl.mechanisms', () => {
    const e = settingsError(() => settings({ ...sasl, 'sasl.mechanisms': 'GSSAPI' }));
    expect(e.message).toContain('GSSAPI');
  });

  it('ignores SASL settings unless the protocol uses SASL', () => {
    const s = settings({ 'sasl.username': 'alice', 'sasl.password': PASSWORD, 'sasl.mechanism': 'GSSAPI' });
    expect(s.client.sasl).toBeUndefined();
    expect(s.ignored).toEqual([]);
  });
});

describe('consumerSettings: SSL', () => {
  let dir: string;
  let caFile: string;
  let certFile: string;
  let keyFile: string;
  const CA = '-----BEGIN CERTIFICATE-----\nca-from-file\n-----END CERTIFICATE-----\n';
  const CERT = '-----BEGIN CERTIFICATE-----\ncert-from-file\n-----END CERTIFICATE-----\n';
  const KEY = '-----BEGIN PRIVATE KEY-----\nkey-from-file\n-----END PRIVATE KEY-----\n';

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ratchet-kafka-config-'));
    caFile = join(dir, 'ca.pem');
    certFile = join(dir, 'cert.pem');
    keyFile = join(dir, 'key.pem');
    writeFileSync(caFile, CA);
    writeFileSync(certFile, CERT);
    writeFileSync(keyFile, KEY);
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const ssl = { 'security.protocol': 'SSL' };

  it('takes an inline ssl.ca.pem', () => {
    expect(tls(settings({ ...ssl, 'ssl.ca.pem': 'INLINE-CA' })).ca).toBe('INLINE-CA');
  });

  it('reads ssl.ca.location from a file', () => {
    expect(tls(settings({ ...ssl, 'ssl.ca.location': caFile })).ca).toBe(CA);
  });

  it('prefers the inline ssl.ca.pem over ssl.ca.location', () => {
    expect(tls(settings({ ...ssl, 'ssl.ca.pem': 'INLINE-CA', 'ssl.ca.location': caFile })).ca).toBe('INLINE-CA');
  });

  it('does not read a location when an inline pem is given (even an unreadable one)', () => {
    const s = settings({ ...ssl, 'ssl.ca.pem': 'INLINE-CA', 'ssl.ca.location': join(dir, 'missing.pem') });
    expect(tls(s).ca).toBe('INLINE-CA');
  });

  it('reads the client certificate and key from files, with the key password', () => {
    const t = tls(
      settings({
        ...ssl,
        'ssl.certificate.location': certFile,
        'ssl.key.location': keyFile,
        'ssl.key.password': 'keypass',
      }),
    );
    expect(t.cert).toBe(CERT);
    expect(t.key).toBe(KEY);
    expect(t.passphrase).toBe('keypass');
  });

  it('takes an inline certificate and key', () => {
    const t = tls(settings({ ...ssl, 'ssl.certificate.pem': 'CERT', 'ssl.key.pem': 'KEY' }));
    expect(t.cert).toBe('CERT');
    expect(t.key).toBe('KEY');
    expect(t.ca).toBeUndefined();
    expect(t.passphrase).toBeUndefined();
  });

  it.each(['ssl.ca.location', 'ssl.certificate.location', 'ssl.key.location'])(
    'refuses an unreadable %s, naming the property and the path',
    (property) => {
      const missing = join(dir, 'does-not-exist.pem');
      const e = settingsError(() => settings({ ...ssl, [property]: missing }));
      expect(e.message).toContain(`'${property}'`);
      expect(e.message).toContain(missing);
      expect(e.message).toContain('cannot be read');
    },
  );

  it('refuses a directory as ssl.ca.location', () => {
    const e = settingsError(() => settings({ ...ssl, 'ssl.ca.location': dir }));
    expect(e.message).toContain('ssl.ca.location');
  });

  it('reads SSL files with SASL_SSL too', () => {
    const s = settings({
      'security.protocol': 'SASL_SSL',
      'sasl.username': 'u',
      'sasl.password': PASSWORD,
      'ssl.ca.location': caFile,
    });
    expect(tls(s).ca).toBe(CA);
  });

  it('does not read SSL files unless the protocol uses SSL', () => {
    const s = settings(
      { 'ssl.ca.location': join(dir, 'missing.pem'), 'security.protocol': 'SASL_PLAINTEXT' },
      {
        'sasl.username': 'u',
        'sasl.password': PASSWORD,
      },
    );
    expect(s.client.ssl).toBeUndefined();
  });

  it.each([
    ['true', true],
    ['TRUE', true],
    ['false', false],
    ['False', false],
  ])('enable.ssl.certificate.verification=%j sets rejectUnauthorized=%j', (v, expected) => {
    expect(tls(settings({ ...ssl, 'enable.ssl.certificate.verification': v })).rejectUnauthorized).toBe(expected);
  });

  it('leaves rejectUnauthorized to its default without enable.ssl.certificate.verification', () => {
    expect(tls(settings(ssl)).rejectUnauthorized).toBeUndefined();
  });

  it.each(['yes', '0', 'off'])('refuses enable.ssl.certificate.verification=%j', (v) => {
    const e = settingsError(() => settings({ ...ssl, 'enable.ssl.certificate.verification': v }));
    expect(e.message).toContain('enable.ssl.certificate.verification');
    expect(e.message).toContain(v);
    expect(e.message).toContain('true or false');
  });

  it('turns the host name check off with ssl.endpoint.identification.algorithm=none', () => {
    for (const v of ['none', 'NONE']) {
      const t = tls(settings({ ...ssl, 'ssl.endpoint.identification.algorithm': v }));
      expect(typeof t.checkServerIdentity).toBe('function');
      expect(t.checkServerIdentity?.('some.host', {} as never)).toBeUndefined();
    }
  });

  it('keeps the host name check with ssl.endpoint.identification.algorithm=https or unset', () => {
    expect(tls(settings({ ...ssl, 'ssl.endpoint.identification.algorithm': 'https' })).checkServerIdentity).toBe(
      undefined,
    );
    expect(tls(settings(ssl)).checkServerIdentity).toBeUndefined();
  });

  it('takes SSL options from the subscription over the cluster', () => {
    const t = tls(
      settings(
        { ...ssl, 'ssl.ca.pem': 'CLUSTER-CA', 'enable.ssl.certificate.verification': 'true' },
        { 'ssl.ca.pem': 'SUB-CA', 'enable.ssl.certificate.verification': 'false' },
      ),
    );
    expect(t.ca).toBe('SUB-CA');
    expect(t.rejectUnauthorized).toBe(false);
  });
});

describe('consumerSettings: numeric properties', () => {
  it.each([
    ['session.timeout.ms', 'consumer', 'sessionTimeout'],
    ['heartbeat.interval.ms', 'consumer', 'heartbeatInterval'],
    ['max.poll.interval.ms', 'consumer', 'rebalanceTimeout'],
    ['topic.metadata.refresh.interval.ms', 'consumer', 'metadataMaxAge'],
    ['fetch.min.bytes', 'consumer', 'minBytes'],
    ['fetch.max.bytes', 'consumer', 'maxBytes'],
    ['max.partition.fetch.bytes', 'consumer', 'maxBytesPerPartition'],
    ['fetch.wait.max.ms', 'consumer', 'maxWaitTimeInMs'],
    ['socket.connection.setup.timeout.ms', 'client', 'connectionTimeout'],
    ['request.timeout.ms', 'client', 'requestTimeout'],
    ['socket.timeout.ms', 'client', 'requestTimeout'],
  ] as const)('%s becomes %s.%s', (property, side, key) => {
    const s = settings({ [property]: ' 12345 ' });
    expect((s[side] as unknown as Record<string, unknown>)[key]).toBe(12345);
    expect(s.ignored).not.toContain(property);
  });

  it('sets several at once, on the right side', () => {
    const s = settings({ 'session.timeout.ms': '30000', 'request.timeout.ms': '5000', 'fetch.max.bytes': '1048576' });
    expect(s.consumer).toMatchObject({ sessionTimeout: 30000, maxBytes: 1048576 });
    expect(s.client).toMatchObject({ requestTimeout: 5000 });
    expect(s.client).not.toHaveProperty('sessionTimeout');
    expect(s.consumer).not.toHaveProperty('requestTimeout');
  });

  it('accepts zero', () => {
    expect(settings({ 'fetch.min.bytes': '0' }).consumer.minBytes).toBe(0);
  });

  it('leaves unset numbers undefined', () => {
    const s = settings({});
    expect(s.consumer.sessionTimeout).toBeUndefined();
    expect(s.client.requestTimeout).toBeUndefined();
  });

  it.each(['abc', '-1', '1.5', '10ms', '9007199254740993'])('refuses %j', (v) => {
    const e = settingsError(() => settings({ 'session.timeout.ms': v }));
    expect(e.message).toContain('session.timeout.ms');
    expect(e.message).toContain(v);
    expect(e.message).toContain('whole number');
  });

  it('refuses a bad client-side number too', () => {
    const e = settingsError(() => settings({ 'request.timeout.ms': '-5' }));
    expect(e.message).toContain("'request.timeout.ms'");
  });

  it('takes the subscription option over the cluster property', () => {
    expect(settings({ 'session.timeout.ms': '10000' }, { 'session.timeout.ms': '45000' }).consumer.sessionTimeout).toBe(
      45000,
    );
  });
});

describe('consumerSettings: ignored properties', () => {
  it('is empty when every property is handled', () => {
    const s = settings({
      'client.id': 'c',
      'group.id': 'g',
      'auto.offset.reset': 'earliest',
      'security.protocol': 'PLAINTEXT',
      'metadata.broker.list': 'm:1',
      'enable.auto.commit': 'true',
      'enable.auto.offset.store': 'false',
      'auto.commit.interval.ms': '5000',
      'session.timeout.ms': '10000',
      'ssl.endpoint.identification.algorithm': 'https',
    });
    expect(s.ignored).toEqual([]);
  });

  it('lists unknown properties, sorted', () => {
    const s = settings(
      { 'statistics.interval.ms': '1000', debug: 'all', 'enable.auto.commit': 'false' },
      { 'queued.min.messages': '10', 'api.version.request': 'true' },
    );
    expect(s.ignored).toEqual(['api.version.request', 'debug', 'queued.min.messages', 'statistics.interval.ms']);
  });

  it('does not list auto-commit settings, which are handled (Ratchet commits itself)', () => {
    const s = settings({ 'enable.auto.commit': 'true', 'auto.commit.interval.ms': 'not-a-number' });
    expect(s.ignored).toEqual([]);
  });

  it('lists an unknown property once even when both cluster and subscription give it', () => {
    expect(settings({ 'linger.ms': '1' }, { 'linger.ms': '2' }).ignored).toEqual(['linger.ms']);
  });
});

describe('consumerSettings: subscription options override cluster properties', () => {
  it('applies every option over the cluster', () => {
    const s = consumerSettings(
      cluster({
        'bootstrap.servers': 'cluster:9092',
        'group.id': 'cg',
        'client.id': 'cc',
        'auto.offset.reset': 'latest',
        'session.timeout.ms': '1000',
      }),
      subscription({
        'bootstrap.servers': 'sub:9092',
        'group.id': 'sg',
        'client.id': 'sc',
        'auto.offset.reset': 'earliest',
        'session.timeout.ms': '2000',
      }),
    );
    expect(s.client.brokers).toEqual(['sub:9092']);
    expect(s.client.clientId).toBe('sc');
    expect(s.groupId).toBe('sg');
    expect(s.fromBeginning).toBe(true);
    expect(s.consumer.sessionTimeout).toBe(2000);
  });

  it('does not modify the cluster or subscription objects', () => {
    const c = cluster({ 'bootstrap.servers': 'a:1' });
    const sub = subscription({ 'group.id': 'g' });
    consumerSettings(c, sub);
    expect(c.properties).toEqual({ 'bootstrap.servers': 'a:1' });
    expect(sub.options).toEqual({ 'group.id': 'g' });
  });
});

describe('consumerSettings: secrets stay out of error messages', () => {
  const secrets = { 'sasl.password': PASSWORD, 'ssl.key.password': PASSWORD, 'ssl.key.pem': PASSWORD };

  it('marks the secret properties', () => {
    expect([...SECRET_PROPERTIES].sort()).toEqual(['sasl.password', 'ssl.key.password', 'ssl.key.pem']);
  });

  it.each<[string, Record<string, string>]>([
    ['bad broker', { 'bootstrap.servers': 'nohost' }],
    ['bad protocol', { 'security.protocol': 'bogus' }],
    ['unsupported mechanism', { 'security.protocol': 'SASL_SSL', 'sasl.username': 'u', 'sasl.mechanism': 'GSSAPI' }],
    ['missing username', { 'security.protocol': 'SASL_SSL' }],
    ['bad auto.offset.reset', { 'auto.offset.reset': 'never' }],
    ['bad number', { 'fetch.max.bytes': '-1' }],
    ['bad verification flag', { 'security.protocol': 'SSL', 'enable.ssl.certificate.verification': 'maybe' }],
    ['unreadable ca', { 'security.protocol': 'SSL', 'ssl.ca.location': '/nonexistent/ratchet/ca.pem' }],
  ])('%s', (_, props) => {
    const e = settingsError(() => settings({ ...secrets, ...props }));
    expect(e.message).not.toContain(PASSWORD);
    expect(e.stack ?? '').not.toContain(PASSWORD);
  });
});

describe('consumerSettings: values that only look right', () => {
  it.each([',', ' , ', 'PLAINTEXT://'])('refuses a broker list without a broker (%j)', (servers) => {
    const e = settingsError(() => settings({ 'bootstrap.servers': servers }));
    expect(e.message).toContain('lists no broker');
  });

  it.each(['h:0', 'h:65536', 'h:99999'])('refuses a port out of range (%s)', (broker) => {
    const e = settingsError(() => settings({ 'bootstrap.servers': broker }));
    expect(e.message).toContain(`'${broker}' is not host:port`);
  });

  it.each(['0x10', '1e3', '1.5', '-1'])('refuses a number that is not plain decimal digits (%s)', (raw) => {
    const e = settingsError(() => settings({ 'session.timeout.ms': raw }));
    expect(e.message).toContain(`'session.timeout.ms' is '${raw}'`);
  });

  it('quotes a bad verification flag as written', () => {
    const e = settingsError(() =>
      settings({ 'security.protocol': 'SSL', 'enable.ssl.certificate.verification': 'YES' }),
    );
    expect(e.message).toContain("'YES'");
  });
});

describe('consumerSettings: defaults of librdkafka, not of kafkajs', () => {
  it('waits at most 500 ms for a fetch (fetch.wait.max.ms), unless told otherwise', () => {
    expect(settings({}).consumer.maxWaitTimeInMs).toBe(500);
    expect(settings({}, { 'fetch.wait.max.ms': '100' }).consumer.maxWaitTimeInMs).toBe(100);
  });
});
