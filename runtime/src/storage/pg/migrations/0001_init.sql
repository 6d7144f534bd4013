-- Ratchet storage format 1: everything the runtime knows lives in these tables.
-- Forward-only: never edit a released migration, add a new one.

CREATE TABLE ratchet.meta (
  key text PRIMARY KEY,
  value text NOT NULL
);

-- One row per partition; the owner writes only while its (owner, epoch) still matches (fencing).
CREATE TABLE ratchet.partition_lease (
  partition_id integer PRIMARY KEY,
  owner text,
  epoch bigint NOT NULL DEFAULT 0,
  expires_at timestamptz
);

CREATE TABLE ratchet.deployment (
  id text PRIMARY KEY,
  uri text,
  arn text,
  assume_role_arn text,
  protocol_type text NOT NULL,
  http_version text,
  additional_headers jsonb NOT NULL DEFAULT '{}',
  metadata jsonb NOT NULL DEFAULT '{}',
  min_protocol_version integer NOT NULL,
  max_protocol_version integer NOT NULL,
  sdk_version text,
  manifest jsonb NOT NULL,
  services jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX deployment_uri_idx ON ratchet.deployment (uri);

-- Every revision of every service, as registered (the deployment that introduced it and its metadata).
CREATE TABLE ratchet.service_revision (
  name text NOT NULL,
  revision integer NOT NULL,
  deployment_id text NOT NULL,
  metadata jsonb NOT NULL,
  PRIMARY KEY (name, revision)
);

-- The latest revision of each service plus the settings changed through the admin API.
CREATE TABLE ratchet.service (
  name text PRIMARY KEY,
  revision integer NOT NULL,
  deployment_id text NOT NULL,
  ty text NOT NULL,
  overrides jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE ratchet.invocation (
  id text PRIMARY KEY,
  partition_key bigint NOT NULL,
  partition_id integer NOT NULL,
  service_name text NOT NULL,
  service_key text,
  handler_name text NOT NULL,
  service_ty text NOT NULL,
  handler_ty text,
  status text NOT NULL,
  deployment_id text,
  protocol_version integer,
  idempotency_key text,
  invoked_by text NOT NULL,
  invoked_by_id text,
  invoked_by_target text,
  restarted_from text,
  random_seed bigint NOT NULL,
  journal_length integer NOT NULL DEFAULT 0,
  retry_count integer NOT NULL DEFAULT 0,
  retry_count_since_append integer NOT NULL DEFAULT 0,
  last_append_at timestamptz,
  next_retry_at timestamptz,
  last_failure text,
  last_failure_code text,
  last_failure_related_command_index integer,
  last_failure_related_command_name text,
  last_failure_related_command_type text,
  last_attempt_deployment_id text,
  last_start_at timestamptz,
  awaiting jsonb,
  inbox_seq bigint,
  created_at timestamptz NOT NULL,
  modified_at timestamptz NOT NULL,
  scheduled_start_at timestamptz,
  running_at timestamptz,
  completed_at timestamptz,
  completion_retention_ms bigint,
  journal_retention_ms bigint,
  result_kind text,
  output bytea,
  failure_code integer,
  failure_message text,
  failure_metadata jsonb
);
CREATE INDEX invocation_active_idx ON ratchet.invocation (partition_id, status) WHERE status <> 'completed';
CREATE INDEX invocation_inbox_idx ON ratchet.invocation (service_name, service_key, inbox_seq) WHERE status = 'inboxed';

-- Journal entries stored as the exact protocol payload bytes (replay must be byte-identical), plus the
-- decoded columns that lookups and introspection need.
CREATE TABLE ratchet.journal (
  invocation_id text NOT NULL,
  index integer NOT NULL,
  entry_type integer NOT NULL,
  completion_id integer,
  signal_idx integer,
  signal_name text,
  name text,
  raw bytea NOT NULL,
  appended_at timestamptz NOT NULL,
  invoked_id text,
  invoked_target text,
  sleep_wakeup_at timestamptz,
  promise_name text,
  PRIMARY KEY (invocation_id, index)
);

CREATE TABLE ratchet.timer (
  id bigserial PRIMARY KEY,
  partition_id integer NOT NULL,
  fire_at timestamptz NOT NULL,
  invocation_id text NOT NULL,
  kind text NOT NULL,
  completion_id integer
);
CREATE INDEX timer_partition_idx ON ratchet.timer (partition_id, fire_at);
CREATE INDEX timer_invocation_idx ON ratchet.timer (invocation_id);

-- Who receives the result of an invocation when it completes (a caller's completion id).
CREATE TABLE ratchet.completion_waiter (
  invocation_id text NOT NULL,
  caller_id text NOT NULL,
  caller_completion_id integer NOT NULL,
  PRIMARY KEY (invocation_id, caller_id, caller_completion_id)
);

-- Transactional outbox: notifications for other invocations, written in the same transaction as the change that
-- produced them and delivered afterwards by the owner of the target's partition.
CREATE TABLE ratchet.outbox (
  seq bigserial PRIMARY KEY,
  partition_id integer NOT NULL,
  target_invocation_id text NOT NULL,
  entry_type integer NOT NULL,
  completion_id integer,
  signal_idx integer,
  signal_name text,
  -- NULL raw: the notification carries the result of source_invocation_id, rendered when delivered.
  source_invocation_id text,
  raw bytea
);
CREATE INDEX outbox_partition_idx ON ratchet.outbox (partition_id, seq);

CREATE TABLE ratchet.state (
  service_name text NOT NULL,
  service_key text NOT NULL,
  key bytea NOT NULL,
  value bytea NOT NULL,
  partition_key bigint NOT NULL,
  PRIMARY KEY (service_name, service_key, key)
);

-- The invocation currently holding the exclusive lock of a virtual object / workflow key.
CREATE TABLE ratchet.keyed_lock (
  service_name text NOT NULL,
  service_key text NOT NULL,
  invocation_id text NOT NULL,
  PRIMARY KEY (service_name, service_key)
);
CREATE SEQUENCE ratchet.inbox_seq;
