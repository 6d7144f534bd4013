/**
 * What a subscription's consumers report: each node's consumer (its state in the group, the topic partitions it
 * reads) and, summed up over the cluster, whether the subscription is consuming (`GET /subscriptions/{id}/status`,
 * the operator's Subscription status).
 */

/**
 * - `starting`: connecting, joining the group; `assigned`: a member of the group with partitions to read;
 * - `joined`: a member with no partition (more members than partitions); `failed`: stopped by an error, starting
 *   again after a backoff (`error` says why); `stopped`: stopped for good (subscription or cluster removed).
 */
export type ConsumerState = 'starting' | 'assigned' | 'joined' | 'failed' | 'stopped';

export interface PartitionStatus {
  partition: number;
  /** The next offset to read (one past the last record enqueued); undefined before the first batch. */
  position?: string | undefined;
  highWatermark?: string | undefined;
  lag?: number | undefined;
  inflight: number;
  paused: boolean;
}

export interface ConsumerStatus {
  subscriptionId: string;
  groupId: string;
  topic: string;
  state: ConsumerState;
  memberId?: string | undefined;
  partitions: PartitionStatus[];
  error?: { message: string; at: string } | undefined;
}

/** One node's consumer as the cluster's store has it. */
export interface NodeConsumerStatus extends ConsumerStatus {
  node: string;
  updatedAt: string;
}

/** Where nodes report their consumers, and any node reads them back (PostgreSQL: `ratchet.kafka_consumer`). */
export interface ConsumerStatusStore {
  /** Replaces every report of `node` with `statuses`. */
  report(node: string, statuses: ConsumerStatus[]): Promise<void>;
  /** The consumers of a subscription whose node reported within `freshWithinMs`. */
  read(subscriptionId: string, freshWithinMs: number): Promise<NodeConsumerStatus[]>;
  /** Removes every report of `node` (it stops). */
  forget(node: string): Promise<void>;
}

/** The answer of `GET /subscriptions/{id}/status`. */
export interface SubscriptionStatus {
  subscription_id: string;
  group_id: string;
  topic: string;
  /** Some node's consumer is a member of the group with partitions assigned. */
  ready: boolean;
  /** Why not, when not ready (no consumer reported, all still joining, or the last error). */
  reason: string | null;
  assigned_partitions: number[];
  /** Records of the assigned partitions not yet enqueued (null until every assigned partition read a batch). */
  lag: number | null;
  consumers: {
    node: string;
    state: ConsumerState;
    member_id: string | null;
    partitions: {
      partition: number;
      position: string | null;
      high_watermark: string | null;
      lag: number | null;
      inflight: number;
      paused: boolean;
    }[];
    error: { message: string; at: string } | null;
    updated_at: string;
  }[];
  /** The latest error any consumer reported (a consumer that recovered since reports none). */
  error: { message: string; at: string } | null;
}

export function summarize(
  subscriptionId: string,
  groupId: string,
  topic: string,
  consumers: NodeConsumerStatus[],
): SubscriptionStatus {
  const assigned = consumers.filter((c) => c.state === 'assigned');
  const partitions = assigned.flatMap((c) => c.partitions);
  const errors = consumers
    .map((c) => c.error)
    .filter((e) => e !== undefined)
    .sort((a, b) => b.at.localeCompare(a.at));
  const ready = assigned.length > 0;
  let reason: string | null = null;
  if (!ready) {
    if (consumers.length === 0) reason = 'no runtime node reports a consumer of this subscription yet';
    else if (errors[0] !== undefined) reason = `the consumer failed: ${errors[0].message}`;
    else reason = `the consumer is joining consumer group ${groupId}`;
  }
  const lags = partitions.map((p) => p.lag);
  return {
    subscription_id: subscriptionId,
    group_id: groupId,
    topic,
    ready,
    reason,
    assigned_partitions: partitions.map((p) => p.partition).sort((a, b) => a - b),
    lag: lags.length > 0 && lags.every((l) => l !== undefined) ? lags.reduce((a, b) => a + b, 0) : null,
    consumers: consumers.map((c) => ({
      node: c.node,
      state: c.state,
      member_id: c.memberId ?? null,
      partitions: c.partitions.map((p) => ({
        partition: p.partition,
        position: p.position ?? null,
        high_watermark: p.highWatermark ?? null,
        lag: p.lag ?? null,
        inflight: p.inflight,
        paused: p.paused,
      })),
      error: c.error ?? null,
      updated_at: c.updatedAt,
    })),
    error: errors[0] ?? null,
  };
}
