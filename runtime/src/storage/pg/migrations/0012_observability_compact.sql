-- Observability chunks, format 1: what every invocation writes routinely is stored as a compact record and rendered
-- into Restate's log line or span by PostgreSQL when a query reads it. The lines `accepted`, `started`, `completed` …
-- and the spans `ingress`, `invocation-start`, `invocation-attempt`, `invocation-end` of every invocation repeat the
-- same ids, target and names: building, buffering and storing them in full was most of what the store cost an
-- invocation (bench/README.md, session 13). Chunks written before stay in format 0 and are read as before.
--
-- Format 1 of a chunk:
--   lines / spans  records separated by U+001E. A record that starts with U+0010 is compact (below); one that starts
--                  with U+0011 is a JSON string holding the text (a text that itself holds U+001E or starts with
--                  U+0010/U+0011); any other record is the text of the line (of the span's JSON object) itself.
--   dict           a JSON array of strings that compact records refer to by position (from 0): an invocation's
--                  header (its JSON-encoded ids and names, joined by U+001F) and other texts many records repeat.
-- A compact record is fields joined by U+001F after the U+0010; values are JSON texts unless said otherwise.
--   log line:  header ref, deployment ref or '', event, attempt, partition, extra (the event's one value or '')
--              header: invocation id, target, service, handler, trace id or ''
--   span:      header ref, kind (s start, a attempt, e end, i ingress), span id, parent span id, start ns, end ns,
--              then for a: attempt, protocol version, deployment ref or ''; for i: client address ref or '', client
--              port or '', HTTP status
--              header: trace id (bare), invocation id, target, service, handler; the span's name is its kind's
--              prefix and the target as Restate's span names show it (`{key}` in place of an object's key)
-- JSON.stringify never writes U+0010, U+0011, U+001E or U+001F unescaped, so no JSON text holds a separator.
ALTER TABLE ratchet.log_chunk ADD COLUMN format smallint NOT NULL DEFAULT 0, ADD COLUMN dict text;
ALTER TABLE ratchet.span_chunk ADD COLUMN format smallint NOT NULL DEFAULT 0, ADD COLUMN dict text;

-- A Unix time in ns as JavaScript's Date#toISOString writes it (milliseconds, UTC).
CREATE FUNCTION ratchet.obs_time(ns bigint) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN to_char(timestamp '1970-01-01' + ((ns / 1000000)::float8 * interval '1 millisecond'),
    'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

-- A dictionary's entries (format 1), as an array indexed from 1.
CREATE FUNCTION ratchet.obs_dict(dict text) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN CASE WHEN dict IS NULL THEN '{}'::text[] ELSE ARRAY(SELECT json_array_elements_text(dict::json)) END;

-- One record of a format-1 log chunk as the line it stands for (invocation-log.ts writes the same lines in full).
CREATE FUNCTION ratchet.render_line(r text, ts bigint, d text[]) RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  f text[];
  h text[];
  msg text;
  extra text := '';
BEGIN
  IF left(r, 1) = E'\x11' THEN
    RETURN substr(r, 2)::json #>> '{}';
  ELSIF left(r, 1) <> E'\x10' THEN
    RETURN r;
  END IF;
  f := string_to_array(substr(r, 2), E'\x1f');
  h := string_to_array(d[f[1]::int + 1], E'\x1f');
  CASE f[3]
    WHEN 'accepted' THEN
      msg := 'invocation accepted';
      IF f[6] <> '' THEN extra := ',"restate.idempotency.key":' || f[6]; END IF;
    WHEN 'scheduled' THEN
      msg := 'invocation scheduled for ' || (f[6]::json #>> '{}');
      extra := ',"restate.invocation.execution_time":' || f[6];
    WHEN 'inboxed' THEN
      msg := 'invocation inboxed: its key is busy';
    WHEN 'started' THEN
      msg := 'invocation attempt ' || f[4] || ' started';
      extra := ',"restate.deployment.service_protocol_version":' || f[6];
    WHEN 'replayed' THEN
      msg := 'journal replayed: ' || f[6] || ' entries';
      extra := ',"restate.journal.length":' || f[6];
    WHEN 'suspended' THEN
      msg := 'invocation suspended';
    WHEN 'resumed' THEN
      msg := CASE f[6] WHEN '"admin"' THEN 'invocation resumed by the admin API' ELSE 'invocation resumed' END;
    WHEN 'completed' THEN
      msg := 'invocation completed';
      extra := ',"restate.invocation.result":"success"';
    ELSE
      RAISE EXCEPTION 'unknown compact log record %', f[3];
  END CASE;
  RETURN '{"timestamp":"' || ratchet.obs_time(ts) || '","level":"DEBUG","fields":{"restate.invocation.id":' || h[1]
    || ',"message":' || to_json(msg)::text || ',"service.invocation.id":' || h[1]
    || ',"restate.invocation.target":' || h[2] || ',"rpc.service":' || h[3] || ',"rpc.method":' || h[4]
    || ',"restate.invocation.attempt":' || f[4] || ',"restate.partition.id":' || f[5]
    || ',"restate.invocation.event":"' || f[3] || '"'
    || CASE WHEN f[2] <> '' THEN ',"restate.deployment.id":' || d[f[2]::int + 1] ELSE '' END
    || CASE WHEN h[5] <> '' THEN ',"trace_id":' || h[5] ELSE '' END
    || extra || '},"target":"invocation"}';
END $$;

-- The lines of a chunk (either format) with their times and places in it.
CREATE FUNCTION ratchet.chunk_lines(format smallint, times text, lines text, dict text)
  RETURNS TABLE (ts_ns bigint, line text, o bigint) LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  d text[];
BEGIN
  IF format = 0 THEN
    RETURN QUERY SELECT x.t::bigint, CASE json_typeof(x.e) WHEN 'string' THEN x.e #>> '{}' ELSE x.e::text END, x.o
      FROM ROWS FROM (json_array_elements_text(times::json), json_array_elements(lines::json)) WITH ORDINALITY
        AS x(t, e, o);
    RETURN;
  END IF;
  d := ratchet.obs_dict(dict);
  RETURN QUERY SELECT x.t::bigint, ratchet.render_line(x.r, x.t::bigint, d), x.o
    FROM ROWS FROM (json_array_elements_text(times::json), unnest(string_to_array(lines, E'\x1e'))) WITH ORDINALITY
      AS x(t, r, o);
END $$;

-- One record of a format-1 span chunk as the span's JSON object (span-json.ts writes the same objects in full).
CREATE FUNCTION ratchet.render_span(r text, d text[]) RETURNS json LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  f text[];
  h text[];
  prefix text;
  attrs text;
  target text;
  service text;
  handler text;
BEGIN
  IF left(r, 1) = E'\x11' THEN
    RETURN (substr(r, 2)::json #>> '{}')::json;
  ELSIF left(r, 1) <> E'\x10' THEN
    RETURN r::json;
  END IF;
  f := string_to_array(substr(r, 2), E'\x1f');
  h := string_to_array(d[f[1]::int + 1], E'\x1f');
  target := h[3]::json #>> '{}';
  service := h[4]::json #>> '{}';
  handler := h[5]::json #>> '{}';
  CASE f[2]
    WHEN 's' THEN
      prefix := 'invocation-start ';
      attrs := '';
    WHEN 'a' THEN
      prefix := 'invocation-attempt ';
      attrs := ',"rpc.system":"restate","restate.invocation.attempt":' || f[7]
        || ',"restate.deployment.service_protocol_version":' || f[8]
        || CASE WHEN f[9] <> '' THEN ',"restate.deployment.id":' || d[f[9]::int + 1] ELSE '' END;
    WHEN 'e' THEN
      prefix := 'invocation-end ';
      attrs := ',"restate.invocation.result":"success"';
    WHEN 'i' THEN
      prefix := 'ingress ';
      attrs := CASE WHEN f[7] <> '' THEN ',"client.socket.address":' || d[f[7]::int + 1] ELSE '' END
        || CASE WHEN f[8] <> '' THEN ',"client.socket.port":' || f[8] ELSE '' END
        || ',"http.response.status_code":' || f[9];
    ELSE
      RAISE EXCEPTION 'unknown compact span record %', f[2];
  END CASE;
  RETURN ('{"trace_id":"' || h[1] || '","span_id":"' || f[3] || '","parent_span_id":"' || f[4] || '","name":'
    || to_json(prefix || service || CASE WHEN target = service || '/' || handler THEN '/' ELSE '/{key}/' END
      || handler)::text || ',"kind":1,"start_ns":' || f[5] || ',"end_ns":' || f[6]
    || ',"status_code":0,"status_message":"","attributes":{"restate.invocation.id":' || h[2]
    || ',"restate.invocation.target":' || h[3] || ',"rpc.service":' || h[4] || ',"rpc.method":' || h[5] || attrs
    || '},"events":[],"links":[]}')::json;
END $$;

-- The spans of a chunk (either format), one row each.
CREATE FUNCTION ratchet.chunk_spans(format smallint, spans text, dict text)
  RETURNS TABLE (trace_id text, span_id text, parent_span_id text, name text, kind smallint, start_ns bigint,
    end_ns bigint, status_code smallint, status_message text, attributes jsonb, events jsonb, links jsonb)
  LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  d text[];
BEGIN
  IF format = 0 THEN
    RETURN QUERY SELECT * FROM json_to_recordset(spans::json) AS s(trace_id text, span_id text, parent_span_id text,
      name text, kind smallint, start_ns bigint, end_ns bigint, status_code smallint, status_message text,
      attributes jsonb, events jsonb, links jsonb);
    RETURN;
  END IF;
  d := ratchet.obs_dict(dict);
  RETURN QUERY SELECT s.* FROM unnest(string_to_array(spans, E'\x1e')) AS r(rec)
    CROSS JOIN LATERAL json_to_record(ratchet.render_span(r.rec, d)) AS s(trace_id text, span_id text,
      parent_span_id text, name text, kind smallint, start_ns bigint, end_ns bigint, status_code smallint,
      status_message text, attributes jsonb, events jsonb, links jsonb);
END $$;

-- The views of format 8, over both formats.
CREATE OR REPLACE VIEW ratchet.log_line AS
  SELECT u.ts_ns, c.seq, u.o AS position, c.stream_id,
    substring(u.line FROM '"restate\.invocation\.id":"([^"]+)"') AS invocation_id, u.line
  FROM ratchet.log_chunk c CROSS JOIN LATERAL ratchet.chunk_lines(c.format, c.ts_ns, c.lines, c.dict) u;

CREATE OR REPLACE VIEW ratchet.span AS
  SELECT s.start_ns, s.end_ns, s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.status_code,
    s.status_message, c.resource ->> 'service.name' AS service_name,
    s.attributes ->> 'restate.invocation.id' AS invocation_id, s.attributes, s.events, s.links, c.resource, c.scope
  FROM ratchet.span_chunk c CROSS JOIN LATERAL ratchet.chunk_spans(c.format, c.spans, c.dict) s;
