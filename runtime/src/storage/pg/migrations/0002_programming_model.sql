-- Durable promises, attach/get-output waiters, and retention bookkeeping.

-- Which notification a waiter receives: CallCompletion (0x800D) or AttachInvocationCompletion (0x8012).
ALTER TABLE ratchet.completion_waiter ADD COLUMN entry_type integer NOT NULL DEFAULT 32781;

-- Durable promises of a workflow key; they outlive the run handler and are removed with the workflow's result.
CREATE TABLE ratchet.promise (
  service_name text NOT NULL,
  service_key text NOT NULL,
  key text NOT NULL,
  partition_key bigint NOT NULL,
  result_kind text NOT NULL,
  value bytea,
  failure_code integer,
  failure_message text,
  completed_at timestamptz NOT NULL,
  PRIMARY KEY (service_name, service_key, key)
);

-- Invocations blocked on `GetPromise` of a promise not completed yet.
CREATE TABLE ratchet.promise_waiter (
  service_name text NOT NULL,
  service_key text NOT NULL,
  key text NOT NULL,
  invocation_id text NOT NULL,
  completion_id integer NOT NULL,
  PRIMARY KEY (service_name, service_key, key, invocation_id, completion_id)
);

-- An outbox row may carry the state of a promise (rendered when delivered) instead of raw bytes or an invocation result.
ALTER TABLE ratchet.outbox ADD COLUMN source_promise_service text;
ALTER TABLE ratchet.outbox ADD COLUMN source_promise_key text;
ALTER TABLE ratchet.outbox ADD COLUMN source_promise_name text;

-- Retention: a completed invocation is purged at expires_at; its journal at journal_expires_at (NULL once removed).
ALTER TABLE ratchet.invocation ADD COLUMN expires_at timestamptz;
ALTER TABLE ratchet.invocation ADD COLUMN journal_expires_at timestamptz;
CREATE INDEX invocation_expiry_idx ON ratchet.invocation (partition_id, expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX invocation_journal_expiry_idx ON ratchet.invocation (partition_id, journal_expires_at)
  WHERE journal_expires_at IS NOT NULL;
