-- Observability in chunks: log lines and spans are stored many to a row, as the writer of a node flushes them, instead
-- of one row per line and per span. A row per line cost PostgreSQL a heap tuple and two index entries for every
-- lifecycle line of every invocation, and a row per span three more; in chunks the store's cost per invocation is a
-- fraction of that (bench/README.md, session 9). The chunks are stored out of line without compression (STORAGE
-- EXTERNAL): PostgreSQL's pglz (this build has no lz4) cost more CPU per invocation than the rest of the store.
-- Queries unnest the chunks they select (storage/pg/observability).
-- Lines and spans stored by format 7 are dropped: the store was new and off by default.
DROP TABLE ratchet.log_line;
DROP SEQUENCE ratchet.log_line_seq;
DROP TABLE ratchet.span;

-- The lines of one stream that one node flushed together, all in one partition window, in time order.
CREATE TABLE ratchet.log_chunk (
  -- Time of its first and last line (Unix ns); start_ns is the partition key.
  start_ns bigint NOT NULL,
  end_ns bigint NOT NULL,
  -- Order among chunks (for lines of different chunks in the same nanosecond).
  seq bigint NOT NULL,
  stream_id bigint NOT NULL,
  -- JSON arrays as text, made by the writer and parsed only by queries: the lines' times, and the lines (a line that
  -- is a JSON object as that object, any other line as a JSON string).
  ts_ns text STORAGE EXTERNAL NOT NULL,
  lines text STORAGE EXTERNAL NOT NULL
) PARTITION BY RANGE (start_ns);
CREATE SEQUENCE ratchet.log_chunk_seq AS bigint CYCLE;
CREATE INDEX log_chunk_stream_start ON ratchet.log_chunk (stream_id, start_ns);

-- The spans that one node flushed together, all started in one partition window. Found by trace and by invocation
-- through `keys` ('t:' || trace id, 'i:' || restate.invocation.id of each span), a GIN index: its pending list takes
-- a chunk's keys as one cheap append, where a row per trace would cost a B-tree insertion at a random place each.
CREATE TABLE ratchet.span_chunk (
  -- Earliest and latest start of its spans (Unix ns); start_ns is the partition key.
  start_ns bigint NOT NULL,
  last_start_ns bigint NOT NULL,
  keys text[] NOT NULL,
  -- The resource and instrumentation scope of its spans (those of the node that wrote it).
  resource jsonb NOT NULL,
  scope text NOT NULL,
  -- [{trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status_code, status_message, attributes, events,
  --   links}]
  -- (JSON as text: the writer's JSON.stringify makes it, and PostgreSQL need not parse it until a query reads it)
  spans text STORAGE EXTERNAL NOT NULL
) PARTITION BY RANGE (start_ns);
CREATE INDEX span_chunk_keys ON ratchet.span_chunk USING gin (keys);
CREATE INDEX span_chunk_start ON ratchet.span_chunk (start_ns);

-- One row per line and per span, as format 7 stored them: for SQL by hand (psql on the database) and tests.
CREATE VIEW ratchet.log_line AS
  SELECT u.ts_ns, c.seq, u.position, c.stream_id,
    substring(u.line FROM '"restate\.invocation\.id":"([^"]+)"') AS invocation_id, u.line
  FROM ratchet.log_chunk c CROSS JOIN LATERAL (
    SELECT t::bigint AS ts_ns, CASE json_typeof(e) WHEN 'string' THEN e #>> '{}' ELSE e::text END AS line, position
    FROM ROWS FROM (json_array_elements_text(c.ts_ns::json), json_array_elements(c.lines::json)) WITH ORDINALITY
      AS x(t, e, position)) u;

CREATE VIEW ratchet.span AS
  SELECT s.start_ns, s.end_ns, s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.status_code,
    s.status_message, c.resource ->> 'service.name' AS service_name,
    s.attributes ->> 'restate.invocation.id' AS invocation_id, s.attributes, s.events, s.links, c.resource, c.scope
  FROM ratchet.span_chunk c CROSS JOIN LATERAL json_to_recordset(c.spans::json) AS s(trace_id text, span_id text,
    parent_span_id text, name text, kind smallint, start_ns bigint, end_ns bigint, status_code smallint,
    status_message text, attributes jsonb, events jsonb, links jsonb);
