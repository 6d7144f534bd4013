-- Flow control (restate 1.7's experimental vqueues): the scope and limit key an invocation was made with, and the
-- virtual queue it belongs to (set only while the feature is enabled).
ALTER TABLE ratchet.invocation ADD COLUMN scope text, ADD COLUMN limit_key text, ADD COLUMN vqueue_id text;
CREATE INDEX invocation_vqueue_idx ON ratchet.invocation (vqueue_id) WHERE vqueue_id IS NOT NULL;

-- The limiter's rule book, one for the cluster. `version` is the book's version when the rule was created or last
-- changed in a way the limiter sees (limits, disabled); the book's own version is in ratchet.meta.
CREATE TABLE ratchet.limit_rule (
  pattern text PRIMARY KEY,
  concurrency bigint,
  description text,
  disabled boolean NOT NULL DEFAULT false,
  version integer NOT NULL,
  last_modified timestamptz NOT NULL
);
INSERT INTO ratchet.meta (key, value) VALUES ('rule_book_version', '0') ON CONFLICT (key) DO NOTHING;

-- Virtual queues paused through the admin API: their invocations wait until resumed. Written by the partition's owner.
CREATE TABLE ratchet.vqueue_pause (
  vqueue_id text PRIMARY KEY,
  partition_id integer NOT NULL,
  paused_at timestamptz NOT NULL
);
CREATE INDEX vqueue_pause_partition_idx ON ratchet.vqueue_pause (partition_id);
