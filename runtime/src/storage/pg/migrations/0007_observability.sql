-- Observability: the log lines and spans of every node of the cluster, for the Loki- and Tempo-compatible API on
-- 3100. Written in batches off the invocation path (observability/writer.ts), queried by any node. Both tables are
-- partitioned by time in fixed windows (storage/pg/observability/partitions.ts creates them ahead of the writers and
-- drops them past the retention or over the size bound). Times are Unix nanoseconds.

-- A log stream: one distinct set of stream labels (service_name, level, component, node, cluster). Label queries
-- read this small table; first/last bound the time the stream had lines in.
CREATE TABLE ratchet.log_stream (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  labels jsonb NOT NULL UNIQUE,
  first_ns bigint NOT NULL,
  last_ns bigint NOT NULL
);

CREATE TABLE ratchet.log_line (
  ts_ns bigint NOT NULL,
  -- Insertion order among lines of the same nanosecond.
  seq bigint NOT NULL,
  stream_id bigint NOT NULL,
  -- restate.invocation.id of an invocation-scoped line (its id as the line names it).
  invocation_id text,
  line text NOT NULL
) PARTITION BY RANGE (ts_ns);
CREATE SEQUENCE ratchet.log_line_seq AS bigint CYCLE;
CREATE INDEX log_line_stream_ts ON ratchet.log_line (stream_id, ts_ns);
CREATE INDEX log_line_invocation ON ratchet.log_line (invocation_id) WHERE invocation_id IS NOT NULL;

CREATE TABLE ratchet.span (
  start_ns bigint NOT NULL,
  end_ns bigint NOT NULL,
  trace_id text NOT NULL,
  span_id text NOT NULL,
  parent_span_id text NOT NULL,
  name text NOT NULL,
  kind smallint NOT NULL,
  status_code smallint NOT NULL,
  status_message text NOT NULL,
  -- resource service.name, and restate.invocation.id of the span's attributes: the common search conditions.
  service_name text NOT NULL,
  invocation_id text,
  attributes jsonb NOT NULL,
  events jsonb NOT NULL,
  links jsonb NOT NULL,
  resource jsonb NOT NULL,
  scope text NOT NULL
) PARTITION BY RANGE (start_ns);
CREATE INDEX span_trace ON ratchet.span (trace_id);
CREATE INDEX span_start ON ratchet.span (start_ns);
CREATE INDEX span_invocation ON ratchet.span (invocation_id) WHERE invocation_id IS NOT NULL;

-- The W3C trace context of an invocation's span (traceparent, and tracestate when given): every attempt, on
-- whichever node runs it, parents its spans to it, so that an invocation is one trace across nodes and restarts.
ALTER TABLE ratchet.invocation ADD COLUMN trace_context text;
