import { Kafka, logLevel, type Admin, type Batch, type Consumer, type EachBatchPayload, type LogEntry } from 'kafkajs';
import type { Logger } from 'pino';
import type { AcceptRequest, EnqueueResult } from '../engine/types.ts';
import type { KafkaClusterSchema, SubscriptionSchema } from '../schema/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { consumerSettings, KafkaSettingsError } from './client-config.ts';
import { explainKafkaError } from './errors.ts';
import { recordToRequest, type RecordSource, type Sink } from './records.ts';
import type { ConsumerState, ConsumerStatus, PartitionStatus } from './status.ts';

/** What a consumer needs of the engine: queue invocations on any node, and ask which are still unfinished. */
export interface KafkaEngine {
  enqueue(requests: AcceptRequest[]): Promise<EnqueueResult[]>;
  unfinished(ids: string[]): Promise<string[]>;
}

export interface ConsumerOptions {
  /** Back-pressure: a topic partition pauses while this many of its records' invocations are unfinished. */
  maxInflightPerPartition: number;
  /** How often a paused partition asks whether its records' invocations finished. */
  backpressureCheckMs: number;
  /** First and longest wait before a failed consumer starts again (doubling in between). */
  retryMinMs: number;
  retryMaxMs: number;
  /** How often the lag of assigned partitions is read from the brokers (also of partitions without new records). */
  lagRefreshMs: number;
  /** Fault injection for the durability tests (see `KafkaConfig.crashPoint`). */
  crashPoint?: 'after-enqueue' | undefined;
}

export interface ConsumerDeps {
  engine: KafkaEngine;
  /** The subscription's sink as the registry knows it now (undefined: not registered any more). */
  sink(subscription: SubscriptionSchema): Sink | undefined;
  logger: Logger;
  metrics: Metrics;
  options: ConsumerOptions;
}

/** Chunks of a batch enqueued in one commit. */
const ENQUEUE_CHUNK = 500;

/**
 * One subscription's Kafka consumer on this node. It joins the subscription's consumer group (every node does; Kafka
 * spreads the topic's partitions over them) and turns each record of its partitions into an invocation:
 *
 * 1. the records of a batch become invocation requests with ids derived from (group, topic, partition, offset);
 * 2. they are queued for their partitions' owners in one commit (`Engine.enqueue`), in offset order;
 * 3. only then is the next offset committed to Kafka.
 *
 * A crash between 2 and 3 redelivers records whose invocations exist: their derived ids admit nothing new. A partition
 * with `maxInflightPerPartition` unfinished invocations is paused until some finish. Every failure (an unreachable
 * broker, a missing topic, bad credentials, PostgreSQL away) is logged, counted, shown in `status()` and retried with
 * backoff; none stops the process.
 */
export class SubscriptionConsumer {
  private state: ConsumerState = 'starting';
  private consumer: Consumer | undefined;
  private stopping = false;
  private memberId: string | undefined;
  private error: { message: string; at: string } | undefined;
  private readonly partitions = new Map<number, PartitionStatus>();
  /** Invocation ids enqueued per topic partition and not known to be finished. */
  private readonly inflight = new Map<number, Set<string>>();
  private readonly pausedPartitions = new Set<number>();
  private backpressureTimer: NodeJS.Timeout | undefined;
  private lagTimer: NodeJS.Timeout | undefined;
  private fromBeginning = false;
  private wake: (() => void) | undefined;
  private running: Promise<void> | undefined;
  private readonly log: Logger;
  private readonly groupId: string;

  constructor(
    readonly subscription: SubscriptionSchema,
    readonly cluster: KafkaClusterSchema,
    private readonly deps: ConsumerDeps,
  ) {
    this.groupId = subscription.options['group.id'] ?? subscription.id;
    this.log = deps.logger.child({
      component: 'kafka',
      'subscription.id': subscription.id,
      'kafka.group': this.groupId,
      'kafka.topic': subscription.topic,
    });
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Leaves the group (committed offsets stay) and stops for good. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    if (this.backpressureTimer !== undefined) clearTimeout(this.backpressureTimer);
    if (this.lagTimer !== undefined) clearTimeout(this.lagTimer);
    await this.consumer?.disconnect().catch(() => undefined);
    await this.running;
    this.state = 'stopped';
    const labels = { subscription: this.subscription.id };
    this.deps.metrics.kafkaPausedPartitions.remove(labels);
    for (const partition of this.partitions.keys()) this.forgetPartitionMetrics(partition);
  }

  status(): ConsumerStatus {
    return {
      subscriptionId: this.subscription.id,
      groupId: this.groupId,
      topic: this.subscription.topic,
      state: this.state,
      memberId: this.memberId,
      partitions: [...this.partitions.values()]
        .sort((a, b) => a.partition - b.partition)
        .map((p) => ({ ...p, inflight: this.inflight.get(p.partition)?.size ?? 0 })),
      error: this.error,
    };
  }

  private async loop(): Promise<void> {
    let delay = this.deps.options.retryMinMs;
    while (!this.stopping) {
      const began = Date.now();
      try {
        await this.runOnce();
      } catch (err) {
        if (this.stopping) break;
        this.fail(err instanceof KafkaSettingsError ? 'settings' : 'connect', err);
      }
      if (this.stopping) break;
      // A consumer that ran for a while before failing starts again soon; one that keeps failing waits longer.
      if (Date.now() - began > this.deps.options.retryMaxMs) delay = this.deps.options.retryMinMs;
      this.log.info({ retryInMs: delay }, 'Kafka consumer starts again after a backoff');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
      delay = Math.min(delay * 2, this.deps.options.retryMaxMs);
    }
  }

  private fail(kind: string, err: unknown): void {
    const message = explainKafkaError(err, this.subscription.topic, this.groupId);
    this.state = 'failed';
    this.error = { message, at: new Date().toISOString() };
    this.deps.metrics.kafkaConsumerErrors.inc({ subscription: this.subscription.id, kind });
    this.log.warn({ err: message, kind }, `Kafka consumer of subscription ${this.subscription.id} failed: ${message}`);
  }

  /** Connects, joins and consumes until the consumer crashes (rejects) or is stopped (resolves). */
  private async runOnce(): Promise<void> {
    this.state = 'starting';
    this.partitions.clear();
    this.inflight.clear();
    this.pausedPartitions.clear();
    const settings = consumerSettings(this.cluster, this.subscription);
    if (settings.ignored.length > 0) {
      this.log.info({ properties: settings.ignored }, 'Kafka properties not used by Ratchet’s Kafka client');
    }
    const kafka = new Kafka({
      ...settings.client,
      logLevel: logLevel.INFO,
      logCreator: () => (entry) => this.kafkajsLog(entry),
      retry: { initialRetryTime: 300, retries: 5 },
    });
    const consumer = kafka.consumer({
      ...settings.consumer,
      // A crash ends this run; `loop` starts a fresh consumer after a backoff, with the failure in the status.
      retry: { initialRetryTime: 300, retries: 5, restartOnFailure: () => Promise.resolve(false) },
    });
    this.consumer = consumer;
    this.fromBeginning = settings.fromBeginning;
    const admin = kafka.admin({ retry: { initialRetryTime: 300, retries: 2 } });
    const crashed = new Promise<never>((_, reject) => {
      consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error));
    });
    crashed.catch(() => undefined);
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      const assigned = e.payload.memberAssignment[this.subscription.topic] ?? [];
      this.memberId = e.payload.memberId;
      this.onAssigned(assigned);
    });
    consumer.on(consumer.events.REBALANCING, () => {
      if (this.state === 'assigned' || this.state === 'joined') this.state = 'starting';
    });
    try {
      if (this.stopping) return;
      await consumer.connect();
      await consumer.subscribe({ topics: [this.subscription.topic], fromBeginning: settings.fromBeginning });
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: 16,
        eachBatch: (payload) => this.onBatch(payload),
      });
      this.error = undefined;
      await admin.connect();
      this.scheduleLagRefresh(admin);
      await Promise.race([crashed, new Promise<void>((resolve) => consumer.on(consumer.events.STOP, () => resolve()))]);
    } finally {
      if (this.lagTimer !== undefined) clearTimeout(this.lagTimer);
      this.lagTimer = undefined;
      await consumer.disconnect().catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
      if (this.consumer === consumer) this.consumer = undefined;
    }
  }

  private scheduleLagRefresh(admin: Admin): void {
    if (this.stopping) return;
    this.lagTimer = setTimeout(() => {
      void this.refreshLag(admin).finally(() => {
        if (this.lagTimer !== undefined) this.scheduleLagRefresh(admin);
      });
    }, this.deps.options.lagRefreshMs);
    this.lagTimer.unref();
  }

  /**
   * The lag of every assigned partition from the brokers' high watermarks: against the position this consumer
   * reached, or, for a partition it has read nothing of yet, the group's committed offset (none committed: the
   * whole partition when the group starts at the beginning, nothing when at the end).
   */
  private async refreshLag(admin: Admin): Promise<void> {
    if (this.partitions.size === 0) return;
    try {
      const topic = this.subscription.topic;
      const [watermarks, committed] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        admin.fetchOffsets({ groupId: this.groupId, topics: [topic] }),
      ]);
      const committedOf = new Map(
        (committed.find((t) => t.topic === topic)?.partitions ?? []).map((p) => [p.partition, p.offset]),
      );
      for (const w of watermarks) {
        const status = this.partitions.get(w.partition);
        if (status === undefined) continue;
        status.highWatermark = w.high;
        const at = status.position ?? committedOf.get(w.partition);
        const from = at !== undefined && at !== '-1' ? at : this.fromBeginning ? w.low : w.high;
        status.lag = Math.max(0, Number(BigInt(w.high) - BigInt(from)));
        this.deps.metrics.kafkaLag.set(this.partitionLabels(w.partition), status.lag);
      }
    } catch (err) {
      this.log.debug({ err: describe(err) }, 'could not read the lag of the Kafka partitions');
    }
  }

  private onAssigned(assigned: number[]): void {
    const now = new Set(assigned);
    for (const partition of [...this.partitions.keys()]) {
      if (now.has(partition)) continue;
      this.partitions.delete(partition);
      this.inflight.delete(partition);
      this.pausedPartitions.delete(partition);
      this.forgetPartitionMetrics(partition);
    }
    for (const partition of assigned) {
      if (!this.partitions.has(partition)) this.partitions.set(partition, { partition, inflight: 0, paused: false });
    }
    this.state = assigned.length > 0 ? 'assigned' : 'joined';
    this.error = undefined;
    this.deps.metrics.kafkaPausedPartitions.set({ subscription: this.subscription.id }, this.pausedPartitions.size);
    this.log.info(
      { partitions: [...assigned].sort((a, b) => a - b), memberId: this.memberId },
      assigned.length > 0
        ? `Kafka consumer joined group ${this.groupId} with ${assigned.length} partition(s) of ${this.subscription.topic}`
        : `Kafka consumer joined group ${this.groupId} without partitions (more members than partitions)`,
    );
  }

  private async onBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    const partition = batch.partition;
    const source: RecordSource = {
      subscriptionId: this.subscription.id,
      groupId: this.groupId,
      topic: batch.topic,
      partition,
    };
    const labels = { subscription: this.subscription.id };
    let status = this.partitions.get(partition);
    if (status === undefined) {
      status = { partition, inflight: 0, paused: false };
      this.partitions.set(partition, status);
    }
    status.highWatermark = batch.highWatermark;
    let index = 0;
    while (index < batch.messages.length) {
      if (!payload.isRunning() || payload.isStale() || this.stopping) return;
      const pending = this.inflight.get(partition) ?? new Set<string>();
      this.inflight.set(partition, pending);
      const room = this.deps.options.maxInflightPerPartition - pending.size;
      if (room <= 0) {
        await this.refreshInflight(partition);
        if (pending.size >= this.deps.options.maxInflightPerPartition) {
          this.pausePartition(batch, payload);
          return;
        }
        continue;
      }
      const sink = this.deps.sink(this.subscription);
      if (sink === undefined) {
        // The sink's service is gone (its deployment removed): nothing is committed, so the records wait for it.
        throw new Error(
          `the sink ${this.subscription.sink} is not registered: records of ${batch.topic} wait until it is again`,
        );
      }
      const chunk = batch.messages.slice(index, index + Math.min(room, ENQUEUE_CHUNK));
      const requests: AcceptRequest[] = [];
      for (const message of chunk) {
        const verdict = recordToRequest(sink, source, message);
        if ('request' in verdict) {
          requests.push(verdict.request);
        } else {
          this.deps.metrics.kafkaRecords.inc({ ...labels, outcome: 'rejected' });
          this.log.warn(
            { 'kafka.partition': partition, 'kafka.offset': message.offset },
            `Kafka record rejected: ${verdict.rejected}; it is skipped and the partition goes on`,
          );
        }
      }
      this.deps.metrics.kafkaRecords.inc({ ...labels, outcome: 'consumed' }, chunk.length);
      const enqueued = await this.enqueueWithRetry(requests, payload);
      if (enqueued === undefined) return;
      if (this.deps.options.crashPoint === 'after-enqueue' && enqueued.length > 0) {
        this.log.warn('RATCHET_KAFKA_CRASH_POINT=after-enqueue: records stored, offsets not committed; killing myself');
        process.kill(process.pid, 'SIGKILL');
      }
      for (const e of enqueued) pending.add(e.id);
      this.deps.metrics.kafkaRecords.inc({ ...labels, outcome: 'enqueued' }, enqueued.length);
      const last = chunk[chunk.length - 1]!.offset;
      const next = (BigInt(last) + 1n).toString();
      payload.resolveOffset(last);
      // Stored: now Kafka may forget these records for this group.
      try {
        await payload.commitOffsetsIfNecessary({
          topics: [{ topic: batch.topic, partitions: [{ partition, offset: next }] }],
        });
      } catch (err) {
        this.deps.metrics.kafkaConsumerErrors.inc({ ...labels, kind: 'commit' });
        throw err;
      }
      status.position = next;
      status.lag = Math.max(0, Number(BigInt(batch.highWatermark) - BigInt(next)));
      this.deps.metrics.kafkaLag.set(this.partitionLabels(partition), status.lag);
      this.deps.metrics.kafkaInflight.set(this.partitionLabels(partition), pending.size);
      index += chunk.length;
    }
  }

  /** Queues the requests; while PostgreSQL is away, waits and tries again (heartbeating, so the group keeps us). */
  private async enqueueWithRetry(
    requests: AcceptRequest[],
    payload: EachBatchPayload,
  ): Promise<EnqueueResult[] | undefined> {
    let delay = 200;
    for (;;) {
      try {
        return await this.deps.engine.enqueue(requests);
      } catch (err) {
        this.deps.metrics.kafkaConsumerErrors.inc({ subscription: this.subscription.id, kind: 'enqueue' });
        this.log.warn({ err: describe(err) }, 'Kafka records could not be stored as invocations; trying again');
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5_000);
        if (!payload.isRunning() || payload.isStale() || this.stopping) return undefined;
        await payload.heartbeat();
      }
    }
  }

  private pausePartition(batch: Batch, payload: EachBatchPayload): void {
    payload.pause();
    this.pausedPartitions.add(batch.partition);
    const status = this.partitions.get(batch.partition);
    if (status !== undefined) status.paused = true;
    this.deps.metrics.kafkaPausedPartitions.set({ subscription: this.subscription.id }, this.pausedPartitions.size);
    this.log.info(
      { 'kafka.partition': batch.partition, inflight: this.inflight.get(batch.partition)?.size },
      'Kafka partition paused: too many of its records are still being handled',
    );
    this.scheduleBackpressureCheck();
  }

  private scheduleBackpressureCheck(): void {
    if (this.backpressureTimer !== undefined || this.stopping) return;
    this.backpressureTimer = setTimeout(() => {
      this.backpressureTimer = undefined;
      void this.checkPaused();
    }, this.deps.options.backpressureCheckMs);
  }

  private async checkPaused(): Promise<void> {
    for (const partition of [...this.pausedPartitions]) {
      try {
        await this.refreshInflight(partition);
      } catch (err) {
        this.log.debug({ err: describe(err) }, 'could not check unfinished Kafka invocations; checking again');
        continue;
      }
      const size = this.inflight.get(partition)?.size ?? 0;
      // Resumed once half the limit finished: each pause lets a good share through, rather than one record at a time
      // (every pause and resume costs a fetch and a check).
      if (size > Math.floor(this.deps.options.maxInflightPerPartition / 2)) continue;
      this.pausedPartitions.delete(partition);
      const status = this.partitions.get(partition);
      if (status !== undefined) status.paused = false;
      this.consumer?.resume([{ topic: this.subscription.topic, partitions: [partition] }]);
      this.log.info({ 'kafka.partition': partition, inflight: size }, 'Kafka partition resumed');
    }
    this.deps.metrics.kafkaPausedPartitions.set({ subscription: this.subscription.id }, this.pausedPartitions.size);
    if (this.pausedPartitions.size > 0) this.scheduleBackpressureCheck();
  }

  private async refreshInflight(partition: number): Promise<void> {
    const pending = this.inflight.get(partition);
    if (pending === undefined || pending.size === 0) return;
    const unfinished = new Set(await this.deps.engine.unfinished([...pending]));
    for (const id of pending) if (!unfinished.has(id)) pending.delete(id);
    this.deps.metrics.kafkaInflight.set(this.partitionLabels(partition), pending.size);
  }

  private partitionLabels(partition: number): { subscription: string; topic: string; partition: string } {
    return { subscription: this.subscription.id, topic: this.subscription.topic, partition: String(partition) };
  }

  private forgetPartitionMetrics(partition: number): void {
    this.deps.metrics.kafkaLag.remove(this.partitionLabels(partition));
    this.deps.metrics.kafkaInflight.remove(this.partitionLabels(partition));
  }

  /**
   * kafkajs's own lines, through pino at debug: they repeat for every retry of every connection, and what comes of
   * them is this consumer's own warning (failed, and why) and its status.
   */
  private kafkajsLog(entry: LogEntry): void {
    const { message, ...rest } = entry.log;
    this.log.debug({ kafkajs: entry.namespace, kafkajsLevel: entry.level, ...rest }, `kafkajs: ${message}`);
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error && !err.message.includes(cause.message)
      ? `${err.message} (${cause.message})`
      : err.message;
  }
  return String(err);
}
