import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockKafka, type MockKafka } from '../../support/kafka.ts';
import { waitFor } from '../../support/wait.ts';

/**
 * The Kafka the Kafka tests run against: librdkafka's mock cluster in `kcat`, reached with kafkajs (the client the
 * runtime's consumers use). What the tests of subscriptions rely on: a producer's records reach a consumer group in
 * order per partition, keys and headers intact, and a group's committed offsets are where a restarted consumer
 * resumes.
 */
describe('mock Kafka cluster (kcat) with kafkajs', () => {
  let kafka: MockKafka;
  let client: Kafka;

  beforeAll(async () => {
    kafka = await startMockKafka({ brokers: 3 });
    client = new Kafka({ clientId: 'mock-test', brokers: kafka.brokers, logLevel: logLevel.NOTHING });
  });

  afterAll(async () => {
    await kafka?.stop();
  });

  it('delivers produced records to a consumer group, in order per key, with keys and headers', async () => {
    const producer = client.producer();
    await producer.connect();
    const records = Array.from({ length: 40 }, (_, i) => ({
      key: `k${i % 5}`,
      value: JSON.stringify({ n: i }),
      headers: { 'x-seq': String(i) },
    }));
    await producer.send({ topic: 'orders', messages: records });
    await producer.disconnect();

    const seen: { key: string; n: number; seq: string; partition: number; offset: string }[] = [];
    const consume = async (): Promise<void> => {
      const consumer = client.consumer({
        groupId: 'g1',
        sessionTimeout: 6000,
        rebalanceTimeout: 10000,
        heartbeatInterval: 500,
      });
      await consumer.connect();
      await consumer.subscribe({ topic: 'orders', fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ message, partition }) => {
          seen.push({
            key: message.key!.toString(),
            n: (JSON.parse(message.value!.toString()) as { n: number }).n,
            seq: message.headers!['x-seq']!.toString(),
            partition,
            offset: message.offset,
          });
          return Promise.resolve();
        },
      });
      await waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(40), 20_000);
      await consumer.disconnect();
    };
    await consume();
    expect(seen).toHaveLength(40);
    for (let k = 0; k < 5; k++) {
      const ns = seen.filter((r) => r.key === `k${k}`).map((r) => r.n);
      expect(ns).toEqual([...ns].sort((a, b) => a - b));
      expect(new Set(seen.filter((r) => r.key === `k${k}`).map((r) => r.partition)).size).toBe(1);
    }
    expect(seen.every((r) => r.seq === String(r.n))).toBe(true);

    // The group committed its offsets: a new consumer of the same group gets only what is produced after.
    const again = client.producer();
    await again.connect();
    await again.send({ topic: 'orders', messages: [{ key: 'k0', value: JSON.stringify({ n: 40 }), headers: {} }] });
    await again.disconnect();
    const later: number[] = [];
    const consumer = client.consumer({
      groupId: 'g1',
      sessionTimeout: 6000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 500,
    });
    await consumer.connect();
    await consumer.subscribe({ topic: 'orders', fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        later.push((JSON.parse(message.value!.toString()) as { n: number }).n);
        return Promise.resolve();
      },
    });
    await waitFor(() => expect(later).toContain(40), 20_000);
    await consumer.disconnect();
    expect(later).toEqual([40]);
  }, 60_000);
});
