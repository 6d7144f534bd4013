-- Kafka clusters and subscriptions, registered through the admin API. Clusters from the configuration file are not
-- stored: they come and go with the file. Both tables are part of the schema registry: every change is made under
-- the schema lock and announced on the schema NOTIFY channel, like deployments.

-- Properties and options are `json`, not `jsonb`: they are echoed back in the order the user gave them.
CREATE TABLE ratchet.kafka_cluster (
  name text PRIMARY KEY,
  properties json NOT NULL,
  created_at timestamptz NOT NULL
);

-- No foreign keys: a forced cluster deletion leaves its subscriptions behind (orphans), as restate does, and a
-- subscription may name a cluster that only the configuration file defines.
CREATE TABLE ratchet.subscription (
  id text PRIMARY KEY,
  source text NOT NULL,
  sink text NOT NULL,
  cluster text NOT NULL,
  topic text NOT NULL,
  service_name text NOT NULL,
  handler_name text NOT NULL,
  options json NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX subscription_cluster_idx ON ratchet.subscription (cluster);
