import { Kafka, logLevel, type Message, type Producer } from 'kafkajs';
import { startMockKafka, type MockKafka } from '../test/support/kafka.ts';
import { describe, log, sleep, type Abort } from './control.ts';
import { summarizeKafka, type KafkaResult, type KafkaRun } from './kafka-report.ts';
import { treeCpuSeconds } from './procfs.ts';
import type { RuntimeName, RuntimeUnderTest } from './runtimes.ts';
import { OBJECT_KEYS, type KafkaSink } from './workloads.ts';

/**
 * The `kafka` workload: records produced to a Kafka topic, each consumed by the runtime's subscription and run as one
 * invocation of an SDK handler. Not driven by a load generator: a backlog of N records is produced as fast as kafkajs
 * can, and the harness measures how long the runtime takes from the first record produced to the last invocation
 * completed, the consumer lag while it works, and the CPU the runtime used per record. Both runtimes consume from the
 * same mock Kafka (librdkafka's mock cluster in `kcat`, `test/support/kafka.ts`), each run from a topic of its own.
 */

const SINK_URI: Record<KafkaSink, string> = { noop: 'service://Bench/noop', add: 'service://Counter/add' };

export interface KafkaSettings {
  /** Records per run (besides the one warm-up record). */
  readonly records: number;
  readonly rounds: number;
  readonly sinks: readonly KafkaSink[];
}

export interface KafkaStack {
  readonly runtimes: ReadonlyMap<RuntimeName, RuntimeUnderTest>;
  /** PID of each runtime's SDK service host. */
  readonly services: ReadonlyMap<RuntimeName, number>;
}

/** The name both runtimes know the mock cluster by (`kafka://bench/<topic>`). */
const CLUSTER = 'bench';
const SAMPLE_MS = 500;
/** Records per `producer.send`: one produce request per slice keeps each partition's records in the order given. */
const SLICE = 1000;
/** A run fails when neither invocations created nor completed moved for this long. */
const STALL_MS = 60_000;
/** The first record of a subscription must be handled within this (the consumer joins its group first). */
const WARMUP_TIMEOUT_MS = 90_000;
/**
 * Subscription options, the same for both runtimes. `fetch.wait.max.ms` is librdkafka's default (restate-server's
 * consumer) set explicitly, because kafkajs's (Ratchet's) is 5 000 and the mock broker answers a fetch that finds no
 * records only after the whole wait, even when records arrive meanwhile (librdkafka's `rdkafka_mock_handlers.c`: "we
 * should cut the wait short ... but that is too much of a hassle"); a real broker answers as soon as records arrive.
 * Without it, Ratchet's consumer, idle after the warm-up record, would see the first records up to 5 s late.
 */
const SUBSCRIPTION_OPTIONS = { 'auto.offset.reset': 'earliest', 'fetch.wait.max.ms': '500' };
/** Ratchet's consumer reports its status to the store every few seconds, so the status read is best effort. */
const STATUS_TIMEOUT_MS = 2_000;

async function admin(runtime: RuntimeUnderTest, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${runtime.adminUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${runtime.name}: ${method} ${path} answered ${res.status}: ${text}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

/** JSON rows of a SQL query on the admin API (both runtimes answer Arrow unless asked for JSON). */
async function query(runtime: RuntimeUnderTest, sql: string): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${runtime.adminUrl}/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: sql }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${runtime.name}: query answered ${res.status}: ${text}\n${sql}`);
  return (JSON.parse(text) as { rows: Record<string, unknown>[] }).rows;
}

interface Progress {
  /** Rows in sys_invocation: records the consumer turned into invocations. */
  readonly created: number;
  readonly completed: number;
  /** Completed with a failure. */
  readonly failed: number;
  /** `max(completed_at)`, ms since the epoch; undefined if none completed or unparsable. */
  readonly lastCompletedAt: number | undefined;
}

/** The invocations of one subscription, by status: the same query on both runtimes. */
async function progress(runtime: RuntimeUnderTest, subscriptionId: string): Promise<Progress> {
  const rows = await query(
    runtime,
    `SELECT status, completion_result, count(*) AS n, max(completed_at) AS last FROM sys_invocation ` +
      `WHERE invoked_by_subscription_id = '${subscriptionId}' GROUP BY status, completion_result`,
  );
  let created = 0;
  let completed = 0;
  let failed = 0;
  let lastCompletedAt: number | undefined;
  for (const row of rows) {
    const n = Number(row['n']);
    created += n;
    if (row['status'] !== 'completed') continue;
    completed += n;
    if (row['completion_result'] === 'failure') failed += n;
    const last = typeof row['last'] === 'string' ? Date.parse(row['last']) : Number.NaN;
    if (Number.isFinite(last)) lastCompletedAt = Math.max(lastCompletedAt ?? 0, last);
  }
  return { created, completed, failed, lastCompletedAt };
}

/** Ratchet's own lag (`GET /subscriptions/{id}/status`): records of the assigned partitions not yet enqueued. */
async function ratchetLag(runtime: RuntimeUnderTest, subscriptionId: string): Promise<number | undefined> {
  try {
    const res = await fetch(`${runtime.adminUrl}/subscriptions/${subscriptionId}/status`, {
      signal: AbortSignal.timeout(STATUS_TIMEOUT_MS),
    });
    if (res.status !== 200) return undefined;
    const status = (await res.json()) as { lag?: number | null };
    return typeof status.lag === 'number' ? status.lag : undefined;
  } catch {
    return undefined;
  }
}

function messages(sink: KafkaSink, count: number, first: number): Message[] {
  return Array.from({ length: count }, (_, j) => {
    const i = first + j;
    return sink === 'add' ? { key: `key-${i % OBJECT_KEYS}`, value: '1' } : { value: JSON.stringify({ n: i }) };
  });
}

async function cpuNow(runtime: RuntimeUnderTest, stack: KafkaStack, kafka: MockKafka) {
  const [cpu, service, broker] = await Promise.all([
    runtime.cpu(),
    treeCpuSeconds(stack.services.get(runtime.name) ?? -1),
    treeCpuSeconds(kafka.pid),
  ]);
  return { at: process.hrtime.bigint(), runtime: cpu.runtime, postgres: cpu.postgres, service, broker };
}

class SkipRuntime extends Error {}

/**
 * Produces the warm-up record, subscribes, and waits until it was handled: the consumer has joined its group and holds
 * every partition of the topic (one consumer per subscription on a single node), so the measured part starts with a
 * consumer that is reading, as it would in production, and not with the group join (kafkajs: ~3 s).
 */
async function subscribeAndWarmUp(
  runtime: RuntimeUnderTest,
  producer: Producer,
  topic: string,
  sink: KafkaSink,
  abort: Abort,
): Promise<string> {
  await abort.race(producer.send({ topic, messages: messages(sink, 1, 0) }));
  const sub = (await admin(runtime, 'POST', '/subscriptions', {
    source: `kafka://${CLUSTER}/${topic}`,
    sink: SINK_URI[sink],
    options: SUBSCRIPTION_OPTIONS,
  })) as { id: string };
  const deadline = Date.now() + WARMUP_TIMEOUT_MS;
  let last = '';
  for (;;) {
    try {
      const p = await abort.race(progress(runtime, sub.id));
      if (p.completed >= 1) {
        if (p.failed > 0) throw new Error(`${runtime.name}: the warm-up record's invocation failed`);
        return sub.id;
      }
      last = `${p.created} invocation(s) created, none completed`;
    } catch (err) {
      if (abort.reason !== undefined) throw err;
      last = describe(err);
    }
    if (Date.now() > deadline) {
      const why =
        runtime.name === 'ratchet'
          ? JSON.stringify(await admin(runtime, 'GET', `/subscriptions/${sub.id}/status`))
          : '';
      throw new SkipRuntime(
        `${runtime.name} did not handle a record of ${topic} within ${WARMUP_TIMEOUT_MS / 1000} s of subscribing ` +
          `(last: ${last}) ${why}\n${runtime.output().slice(-2000)}`,
      );
    }
    await sleep(200);
  }
}

/** One run: N records produced, consumed and handled; the lag sampled every 500 ms until the last one completed. */
async function runOnce(
  runtime: RuntimeUnderTest,
  stack: KafkaStack,
  kafka: MockKafka,
  producer: Producer,
  settings: KafkaSettings,
  round: number,
  sink: KafkaSink,
  abort: Abort,
): Promise<KafkaRun> {
  const topic = `bench-${runtime.name}-${sink}-r${round}`;
  const subscriptionId = await subscribeAndWarmUp(runtime, producer, topic, sink, abort);
  const expected = settings.records + 1; // the warm-up record's invocation is the subscription's too
  const slices: Message[][] = [];
  for (let i = 0; i < settings.records; i += SLICE)
    slices.push(messages(sink, Math.min(SLICE, settings.records - i), i + 1));

  let produced = 0;
  let producedAt: number | undefined;
  const before = await cpuNow(runtime, stack, kafka);
  const t0 = Date.now();
  const producing = (async () => {
    for (const slice of slices) {
      await producer.send({ topic, messages: slice });
      produced += slice.length;
    }
    producedAt = Date.now();
  })();
  let produceError: unknown;
  producing.catch((err: unknown) => (produceError = err)); // observed in the loop below

  const lagSamples: number[] = [];
  const unfinishedSamples: number[] = [];
  let ownLagMax: number | undefined;
  let peakRss = 0;
  let last: Progress = { created: 1, completed: 1, failed: 0, lastCompletedAt: undefined };
  let lastMoved = Date.now();
  let detectedAt = t0;
  for (let tick = 1; ; tick++) {
    await abort.race(sleep(Math.max(0, t0 + tick * SAMPLE_MS - Date.now())));
    if (produceError !== undefined) throw new Error(`producing to ${topic} failed`, { cause: produceError });
    const producedNow = produced;
    const [p, memory, own] = await abort.race(
      Promise.all([
        // A query that fails now and then (a timeout under load) leaves a gap; one that keeps failing is a stall.
        progress(runtime, subscriptionId).catch((err: unknown) => {
          log(`kafka: ${runtime.name} sampling: ${describe(err)}`);
          return undefined;
        }),
        runtime.memory(false),
        runtime.name === 'ratchet' ? ratchetLag(runtime, subscriptionId) : Promise.resolve(undefined),
      ]),
    );
    peakRss = Math.max(peakRss, memory.runtimeRss);
    if (own !== undefined) ownLagMax = Math.max(ownLagMax ?? 0, own);
    if (p === undefined) {
      if (Date.now() - lastMoved > STALL_MS) throw new Error(`${runtime.name}: ${topic}: no answer to the query`);
      continue;
    }
    // Records produced (acknowledged) but not yet turned into an invocation; the consumer may see a record a moment
    // before its producer has the acknowledgement, hence the floor.
    lagSamples.push(Math.max(0, producedNow - (p.created - 1)));
    unfinishedSamples.push(p.created - p.completed);
    if (p.created !== last.created || p.completed !== last.completed) lastMoved = Date.now();
    last = p;
    if (p.completed >= expected && producedAt !== undefined) {
      detectedAt = Date.now();
      break;
    }
    if (Date.now() - lastMoved > STALL_MS) {
      throw new Error(
        `${runtime.name}: ${topic} stalled for ${STALL_MS / 1000} s at ${p.created - 1} of ${settings.records} ` +
          `records invoked, ${p.completed - 1} completed (${produced} produced; is kcat, pid ${kafka.pid}, alive?)`,
      );
    }
  }
  await producing;
  const after = await cpuNow(runtime, stack, kafka);
  await admin(runtime, 'DELETE', `/subscriptions/${subscriptionId}`).catch((err: unknown) =>
    log(`kafka: removing ${runtime.name}'s subscription ${subscriptionId}: ${describe(err)}`),
  );
  // The end is the last completion as the runtime recorded it (ms), not when the 500 ms sampling noticed it.
  const end =
    last.lastCompletedAt !== undefined && last.lastCompletedAt >= t0 && last.lastCompletedAt <= detectedAt
      ? last.lastCompletedAt
      : detectedAt;
  const endToEndS = (end - t0) / 1000;
  return {
    round,
    sink,
    runtime: runtime.name,
    topic,
    subscriptionId,
    records: settings.records,
    produceS: ((producedAt ?? detectedAt) - t0) / 1000,
    endToEndS,
    recordsPerS: settings.records / endToEndS,
    lagSamples,
    unfinishedSamples,
    ...(ownLagMax === undefined ? {} : { ownLagMax }),
    failed: last.failed,
    cpu: {
      windowS: Number(after.at - before.at) / 1e9,
      runtime: after.runtime - before.runtime,
      postgres: after.postgres - before.postgres,
      service: after.service - before.service,
      kafka: after.broker - before.broker,
    },
    peakRuntimeRss: peakRss,
  };
}

/**
 * The `kafka` workload on every runtime of the stack: one mock Kafka for all, the cluster registered with each runtime,
 * then rounds × sinks × runtimes runs, the runtimes taking turns (Ratchet first in odd rounds). A restate-server whose
 * consumer handles nothing is left out with the reason (reported); a Ratchet that does not fails the benchmark.
 */
export async function measureKafka(settings: KafkaSettings, stack: KafkaStack, abort: Abort): Promise<KafkaResult> {
  log(`kafka: starting the mock Kafka (kcat, 3 brokers)`);
  const kafka = await abort.race(startMockKafka({ brokers: 3 }));
  const producer = new Kafka({
    clientId: 'ratchet-bench',
    brokers: kafka.brokers,
    logLevel: logLevel.NOTHING,
  }).producer();
  const skipped: { runtime: RuntimeName; reason: string }[] = [];
  const runs: KafkaRun[] = [];
  try {
    await abort.race(producer.connect());
    const active: RuntimeUnderTest[] = [];
    for (const runtime of stack.runtimes.values()) {
      try {
        await admin(runtime, 'POST', '/kafka-clusters', {
          name: CLUSTER,
          properties: { 'bootstrap.servers': kafka.brokers.join(',') },
        });
        active.push(runtime);
      } catch (err) {
        if (runtime.name === 'ratchet') throw err;
        skipped.push({ runtime: runtime.name, reason: describe(err) });
      }
    }
    const total = settings.rounds * settings.sinks.length * active.length;
    let n = 0;
    for (let round = 1; round <= settings.rounds; round++) {
      for (const sink of settings.sinks) {
        const order = round % 2 === 1 ? [...active] : [...active].reverse();
        for (const runtime of order) {
          if (skipped.some((s) => s.runtime === runtime.name)) continue;
          n++;
          let run: KafkaRun;
          try {
            run = await runOnce(runtime, stack, kafka, producer, settings, round, sink, abort);
          } catch (err) {
            if (!(err instanceof SkipRuntime) || runtime.name === 'ratchet') throw err;
            log(`kafka: leaving ${runtime.name} out: ${err.message}`);
            skipped.push({ runtime: runtime.name, reason: err.message.split('\n')[0]! });
            continue;
          }
          runs.push(run);
          const cpu = run.cpu.runtime + run.cpu.postgres;
          log(
            `[kafka ${n}/${total}] round ${round} ${sink} ${runtime.name}: ${run.records} records produced in ` +
              `${run.produceS.toFixed(2)} s, all completed after ${run.endToEndS.toFixed(2)} s ` +
              `(${run.recordsPerS.toFixed(0)} records/s), lag max ${Math.max(0, ...run.lagSamples)}` +
              (run.ownLagMax === undefined ? '' : ` (Ratchet's own lag max ${run.ownLagMax})`) +
              `, CPU ${cpu.toFixed(2)} s (${((cpu / run.records) * 1000).toFixed(3)} ms/record)` +
              (run.failed > 0 ? `; ${run.failed} FAILED` : ''),
          );
        }
      }
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    await kafka.stop().catch(() => undefined);
  }
  return {
    settings: {
      records: settings.records,
      rounds: settings.rounds,
      sinks: settings.sinks.map((s) => `${s} (${SINK_URI[s]}${s === 'add' ? `, ${OBJECT_KEYS} keys` : ''})`),
      kafka: 'librdkafka mock cluster in kcat, 3 brokers, 4 partitions per topic (test/support/kafka.ts)',
      producer: `kafkajs, slices of ${SLICE} records per send, one after the other, acks from all replicas`,
      subscriptionOptions: SUBSCRIPTION_OPTIONS,
      sampleMs: SAMPLE_MS,
    },
    skipped,
    runs,
    ...summarizeKafka(runs),
  };
}
