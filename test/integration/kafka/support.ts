import { Kafka, logLevel, type Message } from 'kafkajs';
import { expect } from 'vitest';
import { startMockKafka, type MockKafka } from '../../support/kafka.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint, type StartEndpointOptions } from '../../support/sdk-endpoint.ts';

/** What the Kafka subscription tests share: the admin calls that set a subscription up, producing, reading back. */

async function call(url: string, method: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
}

export async function registerKafkaCluster(adminUrl: string, name: string, brokers: string[]): Promise<void> {
  const res = await call(`${adminUrl}/kafka-clusters`, 'POST', {
    name,
    properties: { 'bootstrap.servers': brokers.join(',') },
  });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
}

export async function subscribe(
  adminUrl: string,
  source: string,
  sink: string,
  options: Record<string, string> = { 'auto.offset.reset': 'earliest' },
): Promise<string> {
  const res = await call(`${adminUrl}/subscriptions`, 'POST', { source, sink, options });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return (res.json as { id: string }).id;
}

export async function unsubscribe(adminUrl: string, id: string): Promise<void> {
  const res = await call(`${adminUrl}/subscriptions/${id}`, 'DELETE');
  expect(res.status).toBe(202);
}

export async function produce(brokers: string[], topic: string, messages: Message[]): Promise<void> {
  const kafka = new Kafka({ clientId: 'test-producer', brokers, logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  try {
    // In slices: one produce request per slice keeps each partition's records in the order given.
    for (let i = 0; i < messages.length; i += 200) {
      await producer.send({ topic, messages: messages.slice(i, i + 200) });
    }
  } finally {
    await producer.disconnect();
  }
}

/** JSON rows of a SQL statement through the admin API's `POST /query`. */
export async function queryRows(adminUrl: string, sql: string): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${adminUrl}/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: sql }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`query failed (${res.status}): ${text}\n${sql}`);
  return (JSON.parse(text) as { rows: Record<string, unknown>[] }).rows;
}

/** The sum of a Prometheus counter's or gauge's samples whose labels include `labels`, from `/metrics`. */
export async function metricValue(metricsUrl: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const match = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) continue;
    const have = new Map([...(match[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(match[2]);
  }
  return sum;
}

/** What a Kafka test runs against: a mock Kafka cluster, a database, one runtime, the SDK services it calls. */
export interface KafkaLab {
  kafka: MockKafka;
  db: TestDatabase;
  runtime: RuntimeProcess;
  endpoint: SdkEndpoint;
}

/**
 * Starts a lab: the runtime (with `env`) has the services of `services` registered and the mock cluster registered
 * as the Kafka cluster `local`.
 */
export async function startKafkaLab(options: {
  services: StartEndpointOptions['services'];
  brokers?: number;
  env?: Record<string, string>;
}): Promise<KafkaLab> {
  const kafka = await startMockKafka({ brokers: options.brokers ?? 1 });
  const db = await createTestDatabase();
  const runtime = await startRuntimeProcess({ databaseUrl: db.url, env: options.env ?? {} });
  const endpoint = await startEndpoint({ services: options.services, transport: 'h2' });
  await registerEndpoint(runtime, endpoint);
  await registerKafkaCluster(runtime.adminUrl, 'local', kafka.brokers);
  return { kafka, db, runtime, endpoint };
}

/** Stops what a lab started (each part that exists), the runtime first. */
export async function stopKafkaLab(lab: Partial<KafkaLab>): Promise<void> {
  await lab.runtime?.stop();
  await lab.endpoint?.close();
  await lab.kafka?.stop();
  await lab.db?.drop();
}
