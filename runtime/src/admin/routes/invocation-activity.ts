import { InvalidRequestFieldError, RatchetError } from '../../errors/errors.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { InvocationId } from '../../ids/invocation-id.ts';
import type { LogSource, SpanRecord, SpanSource } from '../../observability/model.ts';
import { parseTimestamp } from '../../observability/loki/params.ts';
import { InvalidQueryStringError } from '../errors.ts';
import {
  InvocationActivityQuery,
  type InvocationLogsResponse,
  type InvocationTraceResponse,
} from '../model/invocation-activity.ts';
import { sendJson } from '../reply.ts';
import { readQuery } from '../request.ts';
import type { AdminRoutes } from './context.ts';

/**
 * `GET /invocations/{id}/logs` and `GET /invocations/{id}/trace`: what an invocation did, from the observability
 * store (any node answers: every node writes there), for the web console on the same origin. Ratchet's own routes.
 */

/** Where the store is, and how far back it keeps (the default start of a lookup). */
export interface ActivitySources {
  readonly logs: LogSource;
  readonly spans: SpanSource;
  readonly retentionMs: number;
}

class StoreOffError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;
  constructor() {
    super(
      'This node keeps no logs or spans: its observability store is off (RATCHET_OBSERVABILITY_STORE=off). Turn it on ' +
        'to see what invocations did.',
    );
  }
}

const MAX_LINES = 5000;
const DEFAULT_LINES = 1000;
/** Traces of one invocation read at most (one, unless restarted or retried under other contexts). */
const MAX_TRACES = 10;
const MAX_SPANS = 5000;
const MS = 1_000_000n;

interface IdParams {
  Params: { id: string };
}

function invocationParam(raw: string): string {
  try {
    return InvocationId.parse(raw);
  } catch (err) {
    throw new InvalidRequestFieldError('invocation_id', err instanceof InvalidIdError ? err.reason : String(err));
  }
}

function range(query: unknown, retentionMs: number): { startNs: bigint; endNs: bigint; limit: number } {
  const q = readQuery(InvocationActivityQuery, query);
  const nowNs = BigInt(Date.now()) * MS;
  let startNs: bigint;
  try {
    startNs = parseTimestamp(q.since, nowNs - BigInt(retentionMs) * MS, 'since');
  } catch (err) {
    throw new InvalidQueryStringError(`since: ${err instanceof Error ? err.message : String(err)}`);
  }
  let limit = DEFAULT_LINES;
  if (q.limit !== undefined) {
    limit = Number(q.limit);
    if (!/^\d+$/.test(q.limit) || limit < 1 || limit > MAX_LINES) {
      throw new InvalidQueryStringError(`limit: expected an integer from 1 to ${MAX_LINES}, got \`${q.limit}\``);
    }
  }
  // Lines are written in batches: a little past now too.
  return { startNs, endNs: nowNs + 60_000n * MS, limit };
}

function iso(ns: bigint): string {
  const ms = Number(ns / MS);
  return Number.isFinite(ms) && Math.abs(ms) < 8.64e15 ? new Date(ms).toISOString() : String(ns);
}

function spanJson(s: SpanRecord): InvocationTraceResponse['spans'][number] {
  const node = s.resource['service.instance.id'];
  return {
    trace_id: s.traceId,
    span_id: s.spanId,
    parent_span_id: s.parentSpanId,
    name: s.name,
    start_ns: s.startNs.toString(),
    end_ns: s.endNs.toString(),
    status_code: s.statusCode,
    status_message: s.statusMessage,
    attributes: s.attributes,
    events: s.events.map((e) => ({ time_ns: e.timeNs.toString(), name: e.name, attributes: e.attributes })),
    node: typeof node === 'string' ? node : null,
  };
}

export function invocationActivityRoutes(sources: ActivitySources | undefined): AdminRoutes {
  return (scope) => {
    scope.get<IdParams>('/invocations/:id/logs', async (req, reply) => {
      const id = invocationParam(req.params.id);
      const { startNs, endNs, limit } = range(req.query, sources?.retentionMs ?? 0);
      if (sources === undefined) throw new StoreOffError();
      const records = await sources.logs.select({
        matchers: [],
        lineFilters: [{ op: '|=', value: id }],
        startNs,
        endNs,
        direction: 'forward',
        limit: limit + 1,
      });
      const body: InvocationLogsResponse = {
        lines: records.slice(0, limit).map((r) => ({
          timestamp: iso(r.tsNs),
          ts_ns: r.tsNs.toString(),
          labels: { ...r.labels },
          line: r.line,
        })),
        limited: records.length > limit,
      };
      return sendJson(reply, body);
    });

    scope.get<IdParams>('/invocations/:id/trace', async (req, reply) => {
      const id = invocationParam(req.params.id);
      const { startNs, endNs } = range(req.query, sources?.retentionMs ?? 0);
      if (sources === undefined) throw new StoreOffError();
      const own = await sources.spans.scan({
        startNs,
        endNs,
        hints: [{ scope: 'span', key: 'restate.invocation.id', value: id }],
        maxSpans: MAX_SPANS,
      });
      const traceIds = [
        ...new Set(own.filter((s) => s.attributes['restate.invocation.id'] === id).map((s) => s.traceId)),
      ].slice(0, MAX_TRACES);
      const spans = traceIds.length === 0 ? [] : await sources.spans.traces(traceIds);
      spans.sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
      const body: InvocationTraceResponse = { trace_ids: traceIds, spans: spans.slice(0, MAX_SPANS).map(spanJson) };
      return sendJson(reply, body);
    });
  };
}
