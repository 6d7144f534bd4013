import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockKafka, type MockKafka } from '../../support/kafka.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { startNode, waitForBalance, waitForService, type ClusterNode } from '../cluster/support.ts';
import { produce, queryRows, registerKafkaCluster, subscribe } from './support.ts';

/**
 * Three runtime nodes on one database consume one topic: every node joins the subscription's consumer group and
 * Kafka spreads the topic's partitions over them; each record's invocation is queued for the owner of its Ratchet
 * partition, wherever that is. One node is SIGKILLed mid-stream: its Kafka partitions move to the others (after the
 * session timeout), its Ratchet partitions too (after the lease timeout), and every record is still handled exactly
 * once, in order per key.
 */

const PARTITIONS = 6;
const KEYS = Array.from({ length: 12 }, (_, i) => `acct-${i}`);
const PER_KEY = 30;

const ledger = restate.object({
  name: 'Ledger',
  handlers: {
    append: async (ctx: restate.ObjectContext, input: { n: number }) => {
      const entries = (await ctx.get<number[]>('entries')) ?? [];
      entries.push(input.n);
      ctx.set('entries', entries);
      await ctx.sleep(10);
    },
    entries: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext) => {
      return (await ctx.get<number[]>('entries')) ?? [];
    }),
  },
});

interface Status {
  ready: boolean;
  assigned_partitions: number[];
  consumers: { node: string; state: string; partitions: { partition: number }[] }[];
}

describe('Kafka subscriptions on three replicas', () => {
  let kafka: MockKafka;
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  const nodes = new Map<string, ClusterNode>();
  const env = { RATCHET_PARTITIONS: String(PARTITIONS), RATCHET_LOG_LEVEL: 'info' };

  beforeAll(async () => {
    kafka = await startMockKafka({ brokers: 3 });
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [ledger], transport: 'h2' });
    for (const name of ['kafka-a', 'kafka-b', 'kafka-c']) nodes.set(name, await startNode(db.url, name, env));
    const a = nodes.get('kafka-a')!;
    await registerEndpoint(a.process, endpoint);
    for (const n of nodes.values()) await waitForService(n, 'Ledger');
    await waitForBalance(a, [...nodes.keys()], PARTITIONS);
    await registerKafkaCluster(a.process.adminUrl, 'local', kafka.brokers);
  }, 120_000);

  afterAll(async () => {
    for (const n of nodes.values()) await n.process.stop();
    await endpoint?.close();
    await kafka?.stop();
    await db?.drop();
  });

  const output = (): string => [...nodes.values()].map((n) => `--- ${n.name}\n${n.process.output()}`).join('\n');

  it('spreads the topic over the nodes, and loses or doubles nothing when one is killed', async () => {
    const a = nodes.get('kafka-a')!;
    const sub = await subscribe(a.process.adminUrl, 'kafka://local/ledger', 'service://Ledger/append', {
      'auto.offset.reset': 'earliest',
      'session.timeout.ms': '6000',
      'heartbeat.interval.ms': '500',
      'max.poll.interval.ms': '10000',
    });
    // Every node joined; the topic's partitions are spread over more than one of them.
    await waitFor(async () => {
      const res = await fetch(`${a.process.adminUrl}/subscriptions/${sub}/status`);
      const status = (await res.json()) as Status;
      expect(status.ready).toBe(true);
      expect(status.consumers.map((c) => c.node)).toEqual(['kafka-a', 'kafka-b', 'kafka-c']);
      expect(status.consumers.filter((c) => c.partitions.length > 0).length).toBeGreaterThan(1);
      expect(status.assigned_partitions).toEqual([0, 1, 2, 3]);
    }, 60_000);

    const records = [];
    for (let n = 0; n < PER_KEY; n++) for (const key of KEYS) records.push({ key, value: JSON.stringify({ n }) });
    await produce(kafka.brokers, 'ledger', records);

    const count = async (node: ClusterNode, where = ''): Promise<number> => {
      const rows = await queryRows(
        node.process.adminUrl,
        `SELECT count(*) AS n FROM sys_invocation WHERE invoked_by_subscription_id = '${sub}' ${where}`,
      );
      return Number(rows[0]!['n']);
    };
    // Killed while records are being handled: some done, most still queued or running.
    await waitFor(
      async () => expect(await count(a, "AND status = 'completed'")).toBeGreaterThan(records.length / 10),
      60_000,
    );
    const victim = nodes.get('kafka-b')!;
    await victim.process.kill('SIGKILL');
    nodes.delete('kafka-b');

    const expected = Array.from({ length: PER_KEY }, (_, n) => n);
    try {
      await waitFor(async () => {
        for (const key of KEYS) {
          const res = await fetch(`${a.process.ingressUrl}/Ledger/${key}/entries`, { method: 'POST' });
          expect(await res.json(), key).toEqual(expected);
        }
      }, 120_000);
      expect(await count(a)).toBe(records.length);
    } catch (err) {
      console.log(output());
      throw err;
    }
    // The killed node's partitions went to the nodes that stay.
    await waitFor(async () => {
      const res = await fetch(`${a.process.adminUrl}/subscriptions/${sub}/status`);
      const status = (await res.json()) as Status;
      expect(status.consumers.map((c) => c.node)).toEqual(['kafka-a', 'kafka-c']);
      expect(status.assigned_partitions).toEqual([0, 1, 2, 3]);
    }, 30_000);
  }, 240_000);
});
