import * as restate from '@restatedev/restate-sdk';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MockKafka } from '../../support/kafka.ts';
import type { TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import type { SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { metricValue, produce, queryRows, startKafkaLab, stopKafkaLab, subscribe, unsubscribe } from './support.ts';

/**
 * Exactly once under failure: the runtime is SIGKILLed while it consumes (records fetched, some enqueued and not
 * yet committed to Kafka, invocations running) and started again; afterwards every record was handled exactly once
 * (each object's state lists its records once, in order). Then the subscription is deleted, the group's offsets set
 * back to the start of the topic, and the subscription created again with the same group: every record is delivered
 * again and none creates a second invocation (their ids are derived from group, topic, partition and offset).
 */

const KEYS = Array.from({ length: 16 }, (_, i) => `k${i}`);
const PER_KEY = 40;
const TOTAL = KEYS.length * PER_KEY;
const GROUP = 'ledger-durability';
/** A killed member leaves the group after the session timeout: short, so the restarted node gets the partitions. */
const FAST_GROUP = {
  'auto.offset.reset': 'earliest',
  'group.id': GROUP,
  'session.timeout.ms': '6000',
  'heartbeat.interval.ms': '500',
  'max.poll.interval.ms': '10000',
};

const tally = restate.object({
  name: 'Tally',
  handlers: {
    add: async (ctx: restate.ObjectContext, input: { n: number }) => {
      const entries = (await ctx.get<number[]>('entries')) ?? [];
      entries.push(input.n);
      ctx.set('entries', entries);
      // Long enough that a kill lands while invocations run.
      await ctx.sleep(20);
    },
    entries: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext) => {
      return (await ctx.get<number[]>('entries')) ?? [];
    }),
  },
});

describe('Kafka subscriptions: exactly once across a SIGKILL and a redelivery', () => {
  let kafka: MockKafka;
  let db: TestDatabase;
  let runtime: RuntimeProcess;
  let endpoint: SdkEndpoint;
  const env = { RATCHET_PARTITIONS: '8' };

  beforeAll(async () => {
    ({ kafka, db, runtime, endpoint } = await startKafkaLab({ services: [tally], brokers: 1, env: env }));
  }, 90_000);

  afterAll(() => stopKafkaLab({ runtime, endpoint, kafka, db }));

  const entriesOf = async (key: string): Promise<number[]> => {
    const res = await fetch(`${runtime.ingressUrl}/Tally/${key}/entries`, { method: 'POST' });
    expect(res.status).toBe(200);
    return (await res.json()) as number[];
  };

  const invocationCount = async (where = ''): Promise<number> => {
    const rows = await queryRows(
      runtime.adminUrl,
      `SELECT count(*) AS n FROM sys_invocation WHERE invoked_by = 'subscription' AND target_service_key LIKE 'k%' ${where}`,
    );
    return Number(rows[0]!['n']);
  };

  const expectEveryRecordOnce = async (): Promise<void> => {
    const expected = Array.from({ length: PER_KEY }, (_, n) => n);
    await waitFor(async () => {
      for (const key of KEYS) expect(await entriesOf(key), key).toEqual(expected);
    }, 90_000);
    expect(await invocationCount()).toBe(TOTAL);
  };

  it('a runtime killed mid-stream and started again handles every record exactly once', async () => {
    const records = [];
    for (let n = 0; n < PER_KEY; n++) for (const key of KEYS) records.push({ key, value: JSON.stringify({ n }) });
    await produce(kafka.brokers, 'tally', records);
    await subscribe(runtime.adminUrl, 'kafka://local/tally', 'service://Tally/add', FAST_GROUP);

    // Some, not all: the kill lands in the middle of the stream.
    const done = "AND status = 'completed'";
    await waitFor(async () => expect(await invocationCount(done)).toBeGreaterThan(TOTAL / 8), 60_000);
    const before = await invocationCount(done);
    await runtime.kill('SIGKILL');
    expect(before).toBeLessThan(TOTAL);

    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports: runtime.ports });
    await expectEveryRecordOnce();
  }, 180_000);

  it('records delivered again to a re-created subscription of the same group create no second invocation', async () => {
    const first = (
      await queryRows(runtime.adminUrl, `SELECT id FROM sys_subscription WHERE source = 'kafka://local/tally'`)
    )[0]!['id'] as string;
    await unsubscribe(runtime.adminUrl, first);

    // Back to the start of every partition: a member of the group (once the deleted subscription's consumer left it)
    // commits offset 0 (the mock cluster has no DescribeGroups, which kafkajs's admin.setOffsets needs).
    const client = new Kafka({ clientId: 'test-admin', brokers: kafka.brokers, logLevel: logLevel.NOTHING });
    const admin = client.admin();
    await admin.connect();
    const partitions = (await admin.fetchTopicOffsets('tally')).map((p) => p.partition);
    await admin.disconnect();
    const rewinder = client.consumer({ groupId: GROUP, sessionTimeout: 6000, heartbeatInterval: 500 });
    const joined = new Promise<number[]>((resolve) =>
      rewinder.on(rewinder.events.GROUP_JOIN, (e) => resolve(e.payload.memberAssignment['tally'] ?? [])),
    );
    await rewinder.connect();
    await rewinder.subscribe({ topics: ['tally'] });
    await rewinder.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: () => Promise.resolve() });
    try {
      // Alone in the group: every partition is its own.
      expect((await joined).sort()).toEqual(partitions.sort());
      await rewinder.commitOffsets(partitions.map((partition) => ({ topic: 'tally', partition, offset: '0' })));
    } finally {
      await rewinder.disconnect();
    }

    const second = await subscribe(runtime.adminUrl, 'kafka://local/tally', 'service://Tally/add', FAST_GROUP);
    await waitFor(
      async () =>
        expect(
          await metricValue(runtime.metricsUrl, 'ratchet_kafka_records_total', {
            subscription: second,
            outcome: 'enqueued',
          }),
        ).toBe(TOTAL),
      60_000,
    );
    // Every record was queued again; each named an invocation that exists, so nothing ran twice.
    await waitFor(async () => {
      const rows = await queryRows(
        runtime.adminUrl,
        `SELECT count(*) AS n FROM sys_invocation WHERE target_handler_name = 'add'`,
      );
      expect(Number(rows[0]!['n'])).toBe(TOTAL);
    });
    await expectEveryRecordOnce();
  }, 120_000);

  it('a runtime killed right after storing a batch, before committing its offsets, creates no second invocation', async () => {
    // A fresh topic and group: the process kills itself (RATCHET_KAFKA_CRASH_POINT) once the first batch is stored as
    // invocations and before Kafka hears of it, so every record of that batch is delivered again after the restart.
    const keys = ['w0', 'w1', 'w2', 'w3'];
    const records = [];
    for (let n = 0; n < 10; n++) for (const key of keys) records.push({ key, value: JSON.stringify({ n }) });
    await produce(kafka.brokers, 'tally-worst', records);
    await runtime.stop();
    runtime = await startRuntimeProcess({
      databaseUrl: db.url,
      env: { ...env, RATCHET_KAFKA_CRASH_POINT: 'after-enqueue' },
      ports: runtime.ports,
    });
    const worst = await subscribe(runtime.adminUrl, 'kafka://local/tally-worst', 'service://Tally/add', {
      ...FAST_GROUP,
      'group.id': 'worst-moment',
    });
    const status = await runtime.exited;
    expect(status.signal).toBe('SIGKILL');

    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports: runtime.ports });
    const expected = Array.from({ length: 10 }, (_, n) => n);
    await waitFor(async () => {
      for (const key of keys) expect(await entriesOf(key), key).toEqual(expected);
    }, 60_000);
    const rows = await queryRows(
      runtime.adminUrl,
      `SELECT count(*) AS n FROM sys_invocation WHERE target_handler_name = 'add' AND target_service_key LIKE 'w%'`,
    );
    expect(Number(rows[0]!['n'])).toBe(records.length);
    // The restarted runtime gets the stored batch again from Kafka (its offsets never reached Kafka) and queues it
    // again (the other partitions' batches may have committed before the kill), which admits nothing new.
    await waitFor(
      async () =>
        expect(
          await metricValue(runtime.metricsUrl, 'ratchet_kafka_records_total', {
            subscription: worst,
            outcome: 'enqueued',
          }),
        ).toBeGreaterThan(0),
      30_000,
    );
    const again = await queryRows(
      runtime.adminUrl,
      `SELECT count(*) AS n FROM sys_invocation WHERE target_handler_name = 'add' AND target_service_key LIKE 'w%'`,
    );
    expect(Number(again[0]!['n'])).toBe(records.length);
    for (const key of keys) expect(await entriesOf(key), key).toEqual(expected);
  }, 120_000);
});
