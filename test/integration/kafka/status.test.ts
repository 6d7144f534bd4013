import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MockKafka } from '../../support/kafka.ts';
import { freePort } from '../../support/ports.ts';
import type { TestDatabase } from '../../support/postgres.ts';
import type { RuntimeProcess } from '../../support/runtime-process.ts';
import type { SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { metricValue, produce, startKafkaLab, stopKafkaLab, subscribe, unsubscribe } from './support.ts';

/**
 * What a user sees of a subscription's consumers: `GET /subscriptions/{id}/status` says whether it consumes (group,
 * assigned partitions, lag) or why not (an unreachable broker, bad credentials), errors are counted and retried
 * without a crash, and changing or deleting the cluster or the subscription starts, restarts or stops consumers
 * without a restart of the runtime.
 */

interface Status {
  subscription_id: string;
  group_id: string;
  topic: string;
  ready: boolean;
  reason: string | null;
  assigned_partitions: number[];
  lag: number | null;
  consumers: { node: string; state: string; partitions: { partition: number; lag: number | null }[] }[];
  error: { message: string; at: string } | null;
}

const SECRET = 'hunter2-not-in-logs';

const echo = restate.service({
  name: 'Echo',
  handlers: { take: async (_ctx: restate.Context, input: unknown) => Promise.resolve(input) },
});

describe('Kafka subscription status and errors', () => {
  let kafka: MockKafka;
  let db: TestDatabase;
  let runtime: RuntimeProcess;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    ({ kafka, db, runtime, endpoint } = await startKafkaLab({
      services: [echo],
      brokers: 1,
      env: { RATCHET_PARTITIONS: '4' },
    }));
  }, 90_000);

  afterAll(() => stopKafkaLab({ runtime, endpoint, kafka, db }));

  const admin = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> => {
    const res = await fetch(`${runtime.adminUrl}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    });
    const text = await res.text();
    const json = res.headers.get('content-type')?.includes('json') === true ? (JSON.parse(text) as unknown) : text;
    return { status: res.status, json };
  };

  const statusOf = async (id: string): Promise<Status> => {
    const res = await admin('GET', `/subscriptions/${id}/status`);
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    return res.json as Status;
  };

  it('an unreachable broker is reported, counted and retried; fixing the cluster starts consuming', async () => {
    const dead = await freePort();
    expect(
      (
        await admin('POST', '/kafka-clusters', {
          name: 'flaky',
          properties: { 'bootstrap.servers': `127.0.0.1:${dead}` },
        })
      ).status,
    ).toBe(201);
    await produce(kafka.brokers, 'status-topic', [{ key: 'a', value: JSON.stringify('x') }]);
    const sub = await subscribe(runtime.adminUrl, 'kafka://flaky/status-topic', 'service://Echo/take');

    await waitFor(async () => {
      const status = await statusOf(sub);
      expect(status.ready).toBe(false);
      expect(status.consumers.map((c) => c.state)).toEqual(['failed']);
      expect(status.error?.message).toMatch(/connect|ECONNREFUSED/i);
      expect(status.reason).toContain('the consumer failed');
    }, 30_000);
    expect(
      await metricValue(runtime.metricsUrl, 'ratchet_kafka_consumer_errors_total', { subscription: sub }),
    ).toBeGreaterThan(0);
    expect((await fetch(`${runtime.adminUrl}/health`)).status).toBe(200);

    // The cluster's address fixed through the admin API: the consumer starts again with it, no restart.
    const patched = await admin('PATCH', '/kafka-clusters/flaky', {
      properties: { 'bootstrap.servers': kafka.brokers.join(',') },
    });
    expect(patched.status, JSON.stringify(patched.json)).toBe(200);
    await waitFor(async () => {
      const status = await statusOf(sub);
      expect(status.ready).toBe(true);
      expect(status.group_id).toBe(sub);
      expect(status.topic).toBe('status-topic');
      expect(status.assigned_partitions.length).toBeGreaterThan(0);
      expect(status.lag).toBe(0);
      expect(status.error).toBeNull();
    }, 60_000);
    expect(
      await metricValue(runtime.metricsUrl, 'ratchet_kafka_records_total', { subscription: sub, outcome: 'enqueued' }),
    ).toBe(1);

    // Deleted: its consumer stops, and so does its status.
    await unsubscribe(runtime.adminUrl, sub);
    expect((await admin('GET', `/subscriptions/${sub}/status`)).status).toBe(404);
  }, 120_000);

  // The mock cluster has no SASL (its brokers refuse the handshake), so this is the failure of a SASL client against
  // a broker that will not authenticate it; what matters is that it is reported and the password shown nowhere.
  it('a SASL failure is reported without the password appearing anywhere', async () => {
    expect(
      (
        await admin('POST', '/kafka-clusters', {
          name: 'locked',
          properties: {
            'bootstrap.servers': kafka.brokers.join(','),
            'security.protocol': 'SASL_PLAINTEXT',
            'sasl.mechanism': 'SCRAM-SHA-256',
            'sasl.username': 'ratchet',
            'sasl.password': SECRET,
          },
        })
      ).status,
    ).toBe(201);
    const sub = await subscribe(runtime.adminUrl, 'kafka://locked/status-topic', 'service://Echo/take');
    await waitFor(async () => {
      const status = await statusOf(sub);
      expect(status.ready).toBe(false);
      expect(status.error?.message).toBeTruthy();
    }, 30_000);
    const status = await statusOf(sub);
    expect(JSON.stringify(status)).not.toContain(SECRET);
    expect(runtime.output()).not.toContain(SECRET);
    await unsubscribe(runtime.adminUrl, sub);
  }, 60_000);

  it('answers 400 for a malformed subscription id', async () => {
    const res = await admin('GET', '/subscriptions/nope/status');
    expect(res.status).toBe(400);
    expect(String(res.json)).toContain('nope');
  });
});
