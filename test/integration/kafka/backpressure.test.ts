import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MockKafka } from '../../support/kafka.ts';
import type { TestDatabase } from '../../support/postgres.ts';
import type { RuntimeProcess } from '../../support/runtime-process.ts';
import type { SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { metricValue, produce, queryRows, startKafkaLab, stopKafkaLab, subscribe } from './support.ts';

/**
 * Back-pressure: with RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION=3 and a handler that does not finish, a consumer
 * enqueues at most three records per topic partition and pauses the partition (shown in the status and the metrics)
 * instead of filling PostgreSQL; once invocations finish, it resumes and every record is handled.
 */

const LIMIT = 3;
const RECORDS = 40;

let open: () => void = () => undefined;
let gate = new Promise<void>((resolve) => (open = resolve));

const slow = restate.service({
  name: 'Slow',
  handlers: {
    take: async (ctx: restate.Context, input: { n: number }) => {
      await ctx.run('wait for the gate', () => gate);
      return input.n;
    },
  },
});

interface Status {
  consumers: { partitions: { partition: number; inflight: number; paused: boolean }[] }[];
}

describe('Kafka back-pressure', () => {
  let kafka: MockKafka;
  let db: TestDatabase;
  let runtime: RuntimeProcess;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    ({ kafka, db, runtime, endpoint } = await startKafkaLab({
      services: [slow],
      brokers: 1,
      env: { RATCHET_PARTITIONS: '4', RATCHET_KAFKA_MAX_INFLIGHT_PER_PARTITION: String(LIMIT) },
    }));
  }, 90_000);

  afterAll(() => stopKafkaLab({ runtime, endpoint, kafka, db }));

  it('pauses a partition at the limit of unfinished invocations and resumes as they finish', async () => {
    await produce(
      kafka.brokers,
      'slow-topic',
      Array.from({ length: RECORDS }, (_, n) => ({ key: `k${n}`, value: JSON.stringify({ n }) })),
    );
    const sub = await subscribe(runtime.adminUrl, 'kafka://local/slow-topic', 'service://Slow/take');
    const invocations = async (): Promise<{ total: number; unfinished: number }> => {
      const rows = await queryRows(
        runtime.adminUrl,
        `SELECT count(*) AS total, count(*) FILTER (WHERE status <> 'completed') AS unfinished
           FROM sys_invocation WHERE invoked_by_subscription_id = '${sub}'`,
      );
      return { total: Number(rows[0]!['total']), unfinished: Number(rows[0]!['unfinished']) };
    };

    // Every partition that has records fills up to the limit and pauses.
    let paused: { partition: number; inflight: number }[] = [];
    await waitFor(async () => {
      const res = await fetch(`${runtime.adminUrl}/subscriptions/${sub}/status`);
      const status = (await res.json()) as Status;
      const partitions = status.consumers.flatMap((c) => c.partitions);
      paused = partitions.filter((p) => p.paused);
      expect(paused.length).toBeGreaterThan(0);
      expect(paused.every((p) => p.inflight === LIMIT)).toBe(true);
    }, 30_000);
    expect(
      await metricValue(runtime.metricsUrl, 'ratchet_kafka_paused_partitions', { subscription: sub }),
    ).toBeGreaterThan(0);
    const held = await invocations();
    // At most the limit per topic partition (the mock cluster creates 4) was enqueued: the rest waits in Kafka.
    expect(held.total).toBeLessThanOrEqual(4 * LIMIT);
    expect(held.total).toBeLessThan(RECORDS);
    expect(held.unfinished).toBe(held.total);

    open();
    gate = Promise.resolve();
    await waitFor(async () => {
      const now = await invocations();
      expect(now).toEqual({ total: RECORDS, unfinished: 0 });
    }, 60_000);
    await waitFor(async () =>
      expect(await metricValue(runtime.metricsUrl, 'ratchet_kafka_paused_partitions', { subscription: sub })).toBe(0),
    );
  }, 120_000);
});
