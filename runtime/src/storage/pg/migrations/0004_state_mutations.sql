-- State replacements from the admin API waiting in a key's inbox (they share its sequence with invocations).
CREATE TABLE ratchet.state_mutation (
  id text PRIMARY KEY,
  partition_id integer NOT NULL,
  service_name text NOT NULL,
  service_key text NOT NULL,
  version text,
  keys bytea[] NOT NULL,
  state_values bytea[] NOT NULL,
  inbox_seq bigint NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX state_mutation_partition_idx ON ratchet.state_mutation (partition_id, inbox_seq);
