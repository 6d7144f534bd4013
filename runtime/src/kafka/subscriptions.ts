import type { Logger } from 'pino';
import type { SchemaRegistry } from '../schema/registry.ts';
import type { KafkaClusterSchema, SubscriptionSchema } from '../schema/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { SubscriptionConsumer, type ConsumerOptions, type KafkaEngine } from './consumer.ts';
import type { Sink } from './records.ts';
import { summarize, type ConsumerStatus, type ConsumerStatusStore, type SubscriptionStatus } from './status.ts';

export interface KafkaSubscriptionsDeps {
  registry: SchemaRegistry;
  engine: KafkaEngine;
  logger: Logger;
  metrics: Metrics;
  options: ConsumerOptions;
  /** This node's name: its consumers' reports are filed under it. */
  node: string;
  /** Where consumers' states are reported for the whole cluster; without it only this node's are known. */
  statusStore?: ConsumerStatusStore | undefined;
  /** How often this node reports its consumers (and a report older than three of these is stale). */
  reportIntervalMs: number;
}

/** What a consumer was started with: a change to any of it starts a new consumer. */
function fingerprint(subscription: SubscriptionSchema, cluster: KafkaClusterSchema): string {
  return JSON.stringify([subscription.id, subscription.topic, subscription.options, cluster.name, cluster.properties]);
}

/**
 * The consumers of this node, one per subscription whose Kafka cluster is known, kept in step with the schema
 * registry: a subscription created, deleted or changed (or its cluster's properties) starts, stops or restarts its
 * consumer as soon as the registry reloads, on every node, without a restart of the runtime. A subscription whose
 * cluster was deleted (with `force`) has no consumer, and says so in the log.
 */
export class KafkaSubscriptions {
  private readonly consumers = new Map<string, { consumer: SubscriptionConsumer; fingerprint: string }>();
  private readonly orphans = new Set<string>();
  private unsubscribe: (() => void) | undefined;
  private stopped = false;
  private readonly log: Logger;
  /** Stops of replaced consumers still leaving their group. */
  private readonly stopping = new Set<Promise<void>>();

  constructor(private readonly deps: KafkaSubscriptionsDeps) {
    this.log = deps.logger.child({ component: 'kafka' });
  }

  start(): void {
    this.unsubscribe = this.deps.registry.onChange(() => this.reconcile());
    this.reconcile();
    this.scheduleReport();
  }

  /** Every consumer of this node leaves its group; its reports are withdrawn. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.reportTimer !== undefined) clearTimeout(this.reportTimer);
    const all = [...this.consumers.values()].map(({ consumer }) => consumer.stop());
    this.consumers.clear();
    await Promise.all([...all, ...this.stopping]);
    await this.reporting;
    await this.deps.statusStore
      ?.forget(this.deps.node)
      .catch((err: unknown) => this.log.debug({ err }, 'could not withdraw the Kafka consumer reports'));
  }

  /** This node's consumers. */
  local(): ConsumerStatus[] {
    return [...this.consumers.values()].map(({ consumer }) => consumer.status());
  }

  /**
   * A subscription's consumers on every node (from the reports; this node's own as they are now) and whether it
   * consumes; undefined when there is no such subscription.
   */
  async status(subscriptionId: string): Promise<SubscriptionStatus | undefined> {
    const subscription = this.deps.registry.subscription(subscriptionId);
    if (subscription === undefined) return undefined;
    const reported = (await this.deps.statusStore?.read(subscriptionId, this.deps.reportIntervalMs * 3)) ?? [];
    const mine = this.consumers.get(subscriptionId)?.consumer.status();
    const consumers = reported.filter((c) => c.node !== this.deps.node);
    if (mine !== undefined) consumers.push({ ...mine, node: this.deps.node, updatedAt: new Date().toISOString() });
    consumers.sort((a, b) => a.node.localeCompare(b.node));
    const groupId = subscription.options['group.id'] ?? subscription.id;
    return summarize(subscriptionId, groupId, subscription.topic, consumers);
  }

  private reportTimer: NodeJS.Timeout | undefined;
  private reporting: Promise<void> | undefined;

  private scheduleReport(): void {
    if (this.stopped || this.deps.statusStore === undefined) return;
    this.reportTimer = setTimeout(() => {
      this.reporting = this.report().finally(() => {
        this.reporting = undefined;
        this.scheduleReport();
      });
    }, this.deps.reportIntervalMs);
    this.reportTimer.unref();
  }

  private async report(): Promise<void> {
    try {
      await this.deps.statusStore?.report(this.deps.node, this.local());
    } catch (err) {
      this.log.debug({ err }, 'could not report the Kafka consumers; trying again');
    }
  }

  private reconcile(): void {
    if (this.stopped) return;
    const wanted = new Map<string, { subscription: SubscriptionSchema; cluster: KafkaClusterSchema }>();
    for (const subscription of this.deps.registry.subscriptions()) {
      const cluster = this.deps.registry.kafkaCluster(subscription.cluster);
      if (cluster === undefined) {
        if (!this.orphans.has(subscription.id)) {
          this.orphans.add(subscription.id);
          this.log.warn(
            { 'subscription.id': subscription.id, 'kafka.cluster': subscription.cluster },
            `subscription ${subscription.id} reads from Kafka cluster '${subscription.cluster}', which is not ` +
              'registered: nothing is consumed until the cluster is registered again or the subscription deleted',
          );
        }
        continue;
      }
      this.orphans.delete(subscription.id);
      wanted.set(subscription.id, { subscription, cluster });
    }
    for (const [id, running] of [...this.consumers]) {
      const want = wanted.get(id);
      if (want !== undefined && fingerprint(want.subscription, want.cluster) === running.fingerprint) continue;
      this.consumers.delete(id);
      this.retire(running.consumer, want === undefined ? 'subscription removed' : 'settings changed');
    }
    for (const [id, { subscription, cluster }] of wanted) {
      if (this.consumers.has(id)) continue;
      const consumer = new SubscriptionConsumer(subscription, cluster, {
        engine: this.deps.engine,
        sink: (s) => this.sink(s),
        logger: this.deps.logger,
        metrics: this.deps.metrics,
        options: this.deps.options,
      });
      this.consumers.set(id, { consumer, fingerprint: fingerprint(subscription, cluster) });
      this.log.info(
        { 'subscription.id': id, source: subscription.source, sink: subscription.sink },
        `Kafka consumer of subscription ${id} starting`,
      );
      consumer.start();
    }
  }

  private retire(consumer: SubscriptionConsumer, why: string): void {
    this.log.info({ 'subscription.id': consumer.subscription.id, why }, 'Kafka consumer stopping');
    const done = consumer
      .stop()
      .catch((err: unknown) => this.log.warn({ err }, 'Kafka consumer did not stop cleanly'))
      .finally(() => this.stopping.delete(done));
    this.stopping.add(done);
  }

  private sink(subscription: SubscriptionSchema): Sink | undefined {
    const service = this.deps.registry.service(subscription.serviceName);
    const handler = service?.schema.handlers.find((h) => h.name === subscription.handlerName);
    if (service === undefined || handler === undefined) return undefined;
    return { service: { name: service.schema.name, ty: service.schema.ty }, handler };
  }
}
