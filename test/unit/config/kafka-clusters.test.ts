import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../../runtime/src/config/config.ts';
import { ConfigError } from '../../../runtime/src/errors/config-errors.ts';

/** Kafka clusters of the configuration: `[[kafka-clusters]]` in the file, or JSON in `RATCHET_KAFKA_CLUSTERS`. */

const dir = mkdtempSync(join(tmpdir(), 'ratchet-kafka-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function fromFile(toml: string): Config {
  const path = join(dir, `kafka-${files++}.toml`);
  writeFileSync(path, toml);
  return loadConfig({ env: {}, cwd: dir, configFile: path });
}

function fromEnv(value: string): Config {
  return loadConfig({ env: { RATCHET_KAFKA_CLUSTERS: value }, cwd: dir });
}

function failure(load: () => Config): string {
  try {
    load();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe('RT0002');
    return (error as Error).message;
  }
  throw new Error('expected loadConfig to fail');
}

describe('kafka clusters in the configuration', () => {
  it('has none by default, and pauses a partition at 250 unfinished records', () => {
    expect(loadConfig({ env: {}, cwd: dir }).kafka).toEqual({ clusters: [], maxInflightPerPartition: 250 });
  });

  it('reads the back-pressure limit, and refuses one that cannot work', () => {
    const env = { RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION: '25' };
    expect(loadConfig({ env, cwd: dir }).kafka.maxInflightPerPartition).toBe(25);
    expect(() => loadConfig({ env: { RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION: '0' }, cwd: dir })).toThrow(
      /RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION/,
    );
  });

  it('reads [[kafka-clusters]] tables: brokers become metadata.broker.list, nested tables dotted properties', () => {
    const config = fromFile(`
[[kafka-clusters]]
name = "orders"
brokers = ["kafka-1:9092", "kafka-2:9092"]
"sasl.username" = "me"
security.protocol = "SASL_SSL"

[[kafka-clusters]]
name = "events.eu-1"
"bootstrap.servers" = "eu:9092"
"socket.timeout.ms" = 5000
`);
    expect(config.kafka.clusters).toEqual([
      {
        name: 'orders',
        properties: {
          'metadata.broker.list': 'kafka-1:9092,kafka-2:9092',
          'sasl.username': 'me',
          'security.protocol': 'SASL_SSL',
        },
      },
      { name: 'events.eu-1', properties: { 'bootstrap.servers': 'eu:9092', 'socket.timeout.ms': '5000' } },
    ]);
    expect(Object.isFrozen(config.kafka.clusters[0]?.properties)).toBe(true);
  });

  it('reads the same shape as JSON from RATCHET_KAFKA_CLUSTERS, which wins over the file', () => {
    expect(fromEnv('[{"name":"c","brokers":["h:1"]}]').kafka.clusters).toEqual([
      { name: 'c', properties: { 'metadata.broker.list': 'h:1' } },
    ]);
    const path = join(dir, 'both.toml');
    writeFileSync(path, '[[kafka-clusters]]\nname = "from-file"\nbrokers = ["f:1"]\n');
    const both = loadConfig({
      env: { RATCHET_KAFKA_CLUSTERS: '[{"name":"from-env","brokers":["e:1"]}]' },
      cwd: dir,
      configFile: path,
    });
    expect(both.kafka.clusters.map((c) => c.name)).toEqual(['from-env']);
  });

  it('refuses clusters that cannot work, naming the setting and the cluster', () => {
    const cases: [string, string][] = [
      ['not json', 'RATCHET_KAFKA_CLUSTERS'],
      ['{"name":"c"}', 'expected a list of clusters'],
      ['["c"]', "cluster #1: expected a table, got 'c'"],
      ['[{"brokers":["h:1"]}]', "cluster #1: 'name' must be letters, digits"],
      ['[{"name":"My_Cluster!","brokers":["h:1"]}]', "got 'My_Cluster!'"],
      ['[{"name":"c"}]', "cluster #1 ('c'): needs 'brokers', 'bootstrap.servers' or 'metadata.broker.list'"],
      ['[{"name":"c","brokers":[]}]', "'brokers' must be a non-empty list"],
      ['[{"name":"c","brokers":["h:1"],"acks":["all"]}]', "property 'acks' must be a string"],
      ['[{"name":"c","brokers":["h:1"]},{"name":"c","brokers":["h:2"]}]', "cluster #2: the name 'c' is used twice"],
    ];
    for (const [value, expected] of cases) {
      const message = failure(() => fromEnv(value));
      expect(message, value).toContain(expected);
      expect(message).toContain('RATCHET_KAFKA_CLUSTERS');
    }
    expect(failure(() => fromFile('[[kafka-clusters]]\nname = "x"\n'))).toContain('kafka-clusters in ');
  });
});
