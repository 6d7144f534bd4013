import type { Logger } from 'pino';
import type { SchemaRegistry } from '../schema/registry.ts';
import type { KafkaClusterSchema, SubscriptionSchema } from '../schema/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { SubscriptionConsumer, type ConsumerOptions, type ConsumerStatus, type KafkaEngine } from './consumer.ts';
import type { Sink } from './records.ts';

export interface KafkaSubscriptionsDeps {
  registry: SchemaRegistry;
  engine: KafkaEngine;
  logger: Logger;
  metrics: Metrics;
  options: ConsumerOptions;
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
  }

  /** Every consumer of this node leaves its group. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    const all = [...this.consumers.values()].map(({ consumer }) => consumer.stop());
    this.consumers.clear();
    await Promise.all([...all, ...this.stopping]);
  }

  /** This node's consumers, by subscription id. */
  status(): ConsumerStatus[] {
    return [...this.consumers.values()].map(({ consumer }) => consumer.status());
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
