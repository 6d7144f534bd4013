import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MockKafka } from '../../support/kafka.ts';
import type { TestDatabase } from '../../support/postgres.ts';
import type { RuntimeProcess } from '../../support/runtime-process.ts';
import type { SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { metricValue, produce, queryRows, startKafkaLab, stopKafkaLab, subscribe } from './support.ts';

/**
 * Records of a Kafka topic (librdkafka's mock cluster, real wire protocol) reach their sinks through a real runtime:
 * a service handler, an exclusive object handler (in order per key), a shared handler and a workflow, with keys,
 * values and headers; a record a keyed sink cannot take (no key, a key that is not UTF-8) is rejected, counted, and
 * the partition goes on.
 */

interface Seen {
  input: unknown;
  key: string | undefined;
  headers: Record<string, string>;
}

/** What handlers saw, by invocation id (a retried attempt overwrites, so each invocation counts once). */
const seenByService = new Map<string, Seen>();
const seenByShared = new Map<string, Seen>();

const headersOf = (ctx: restate.Context | restate.ObjectSharedContext): Record<string, string> =>
  Object.fromEntries(ctx.request().headers.entries());

const sinkService = restate.service({
  name: 'Sink',
  handlers: {
    record: async (ctx: restate.Context, input: unknown) => {
      seenByService.set(ctx.request().id, { input, key: undefined, headers: headersOf(ctx) });
      return Promise.resolve();
    },
  },
});

const ledger = restate.object({
  name: 'Ledger',
  handlers: {
    append: async (ctx: restate.ObjectContext, input: { n: number }) => {
      const entries = (await ctx.get<number[]>('entries')) ?? [];
      entries.push(input.n);
      ctx.set('entries', entries);
    },
    peek: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext, input: unknown) => {
      seenByShared.set(ctx.request().id, { input, key: ctx.key, headers: headersOf(ctx) });
      return Promise.resolve();
    }),
    entries: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext) => {
      return (await ctx.get<number[]>('entries')) ?? [];
    }),
  },
});

const job = restate.workflow({
  name: 'Job',
  handlers: {
    run: async (ctx: restate.WorkflowContext, input: { task: string }) => {
      ctx.set('task', input.task);
      return `done ${ctx.key}`;
    },
  },
});

describe('Kafka subscriptions deliver records to every kind of sink', () => {
  let kafka: MockKafka;
  let db: TestDatabase;
  let runtime: RuntimeProcess;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    ({ kafka, db, runtime, endpoint } = await startKafkaLab({
      services: [sinkService, ledger, job],
      brokers: 3,
      env: { RATCHET_PARTITIONS: '8' },
    }));
  }, 90_000);

  afterAll(() => stopKafkaLab({ runtime, endpoint, kafka, db }));

  const invocationsOf = async (subscription: string): Promise<Record<string, unknown>[]> =>
    queryRows(
      runtime.adminUrl,
      `SELECT id, status, target_service_key, invoked_by, invoked_by_subscription_id, idempotency_key
         FROM sys_invocation WHERE invoked_by_subscription_id = '${subscription}'`,
    );

  it('a service handler gets each record once, with its value and headers', async () => {
    const records = Array.from({ length: 30 }, (_, i) => ({
      key: i % 3 === 0 ? null : `k${i}`,
      value: JSON.stringify({ n: i }),
      headers: { 'x-seq': String(i), 'X-Tenant': 'acme' },
    }));
    await produce(kafka.brokers, 'svc-topic', records);
    const sub = await subscribe(runtime.adminUrl, 'kafka://local/svc-topic', 'service://Sink/record');

    await waitFor(() => expect(seenByService.size).toBe(30), 30_000);
    const seen = [...seenByService.values()].sort((a, b) => Number(a.headers['x-seq']) - Number(b.headers['x-seq']));
    expect(seen.map((s) => (s.input as { n: number }).n)).toEqual(records.map((_, i) => i));
    for (const s of seen) {
      expect(s.headers['x-tenant']).toBe('acme');
      expect(s.headers['restate.subscription.id']).toBe(sub);
      expect(s.headers['kafka.offset']).toMatch(/^\d+$/);
      expect(s.headers['kafka.partition']).toMatch(/^\d+$/);
      expect(s.headers['kafka.timestamp']).toMatch(/^\d+$/);
    }
    await waitFor(async () => {
      const rows = await invocationsOf(sub);
      expect(rows).toHaveLength(30);
      expect(rows.every((r) => r['status'] === 'completed')).toBe(true);
    });
    const rows = await invocationsOf(sub);
    expect(new Set(rows.map((r) => r['invoked_by']))).toEqual(new Set(['subscription']));
    // The invocation is named by its record: group (the subscription id by default), topic, partition, offset.
    for (const r of rows) expect(r['idempotency_key']).toMatch(new RegExp(`^kafka:${sub}:svc-topic:\\d+:\\d+$`));
    expect(
      await metricValue(runtime.metricsUrl, 'ratchet_kafka_records_total', { subscription: sub, outcome: 'enqueued' }),
    ).toBe(30);
  });

  it('an exclusive object handler gets the records of each key in offset order', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `acct-${i}`);
    const perKey = 25;
    const records = [];
    for (let n = 0; n < perKey; n++) {
      for (const key of keys) records.push({ key, value: JSON.stringify({ n }) });
    }
    await produce(kafka.brokers, 'ledger-topic', records);
    const sub = await subscribe(runtime.adminUrl, 'kafka://local/ledger-topic', 'service://Ledger/append');

    const expected = Array.from({ length: perKey }, (_, n) => n);
    await waitFor(async () => {
      for (const key of keys) {
        const res = await fetch(`${runtime.ingressUrl}/Ledger/${key}/entries`, { method: 'POST' });
        expect(await res.json(), key).toEqual(expected);
      }
    }, 60_000);
    const rows = await invocationsOf(sub);
    expect(rows).toHaveLength(keys.length * perKey);
    expect(new Set(rows.map((r) => r['target_service_key']))).toEqual(new Set(keys));
  });

  it('a shared handler gets records with the key as the object key', async () => {
    await produce(kafka.brokers, 'peek-topic', [
      { key: 'a', value: JSON.stringify('one') },
      { key: 'b', value: JSON.stringify('two') },
    ]);
    await subscribe(runtime.adminUrl, 'kafka://local/peek-topic', 'service://Ledger/peek');
    await waitFor(() => expect(seenByShared.size).toBe(2), 30_000);
    const byKey = new Map([...seenByShared.values()].map((s) => [s.key, s.input]));
    expect(byKey).toEqual(
      new Map([
        ['a', 'one'],
        ['b', 'two'],
      ]),
    );
  });

  it('a workflow runs once per record key; a repeated key joins the first run', async () => {
    await produce(kafka.brokers, 'job-topic', [
      { key: 'job-1', value: JSON.stringify({ task: 'first' }) },
      { key: 'job-2', value: JSON.stringify({ task: 'second' }) },
      { key: 'job-1', value: JSON.stringify({ task: 'again' }) },
    ]);
    const sub = await subscribe(runtime.adminUrl, 'kafka://local/job-topic', 'service://Job/run');
    await waitFor(async () => {
      expect(
        await metricValue(runtime.metricsUrl, 'ratchet_kafka_records_total', {
          subscription: sub,
          outcome: 'enqueued',
        }),
      ).toBe(3);
      const rows = await invocationsOf(sub);
      expect(rows.map((r) => r['target_service_key']).sort()).toEqual(['job-1', 'job-2']);
      expect(rows.every((r) => r['status'] === 'completed')).toBe(true);
    }, 30_000);
    const out = await fetch(`${runtime.ingressUrl}/restate/workflow/Job/job-1/output`);
    expect(await out.json()).toBe('done job-1');
  });

  it('rejects records without a UTF-8 key on a keyed sink, counts them, and goes on', async () => {
    await produce(kafka.brokers, 'bad-keys', [
      { key: 'ok-1', value: JSON.stringify({ n: 1 }) },
      { key: null, value: JSON.stringify({ n: 2 }) },
      { key: Buffer.from([0xff, 0xfe, 0x00]), value: JSON.stringify({ n: 3 }) },
      { key: 'ok-1', value: JSON.stringify({ n: 4 }) },
    ]);
    const sub = await subscribe(runtime.adminUrl, 'kafka://local/bad-keys', 'service://Ledger/append');
    await waitFor(async () => {
      const res = await fetch(`${runtime.ingressUrl}/Ledger/ok-1/entries`, { method: 'POST' });
      expect(await res.json()).toEqual([1, 4]);
    }, 30_000);
    // Counted as its batch is handled: under load the count can trail the invocations a moment.
    await waitFor(async () => {
      expect(
        await metricValue(runtime.metricsUrl, 'ratchet_kafka_records_total', {
          subscription: sub,
          outcome: 'rejected',
        }),
      ).toBe(2);
    }, 10_000);
    expect(runtime.output()).toContain('the record has no key');
    expect(runtime.output()).toContain('the record key is not valid UTF-8');
  });
});
