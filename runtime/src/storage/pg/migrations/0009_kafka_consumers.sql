-- What each node's Kafka consumer of a subscription is doing, written by the node every few seconds and when it
-- changes: its state in the consumer group, the topic partitions it reads with their positions and lag, and its last
-- error. Any node answers `GET /subscriptions/{id}/status` (and the operator's Subscription status) from here; rows of
-- a node that stopped writing them are stale after a while and ignored.
CREATE TABLE ratchet.kafka_consumer (
  subscription_id text NOT NULL,
  node text NOT NULL,
  group_id text NOT NULL,
  topic text NOT NULL,
  state text NOT NULL,
  member_id text,
  -- [{partition, position, high_watermark, lag, inflight, paused}]
  partitions jsonb NOT NULL,
  error text,
  error_at timestamptz,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (subscription_id, node)
);
