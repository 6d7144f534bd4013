import { Type, type Static } from '@sinclair/typebox';
import { Component, Nullable } from './json-schema.ts';

/*
 * Ratchet's own routes (not restate's): what an invocation did, from the observability store, for the web console and
 * anyone who would rather not run Grafana. The same lines and spans as the Loki and Tempo APIs on 3100.
 */

export const InvocationActivityQuery = Type.Object({
  since: Type.Optional(
    Type.String({
      description:
        'Look from this time on (RFC 3339, or Unix nanoseconds); by default over the whole retention. Pass a little ' +
        'before the invocation was created: the lookup then reads only that range.',
    }),
  ),
  limit: Type.Optional(Type.String({ description: 'At most this many lines (1 to 5000, default 1000).' })),
});

export const InvocationLogsResponse = Component(
  'InvocationLogsResponse',
  Type.Object({
    lines: Type.Array(
      Type.Object({
        timestamp: Type.String({ description: 'RFC 3339, milliseconds' }),
        ts_ns: Type.String({ description: 'Unix nanoseconds' }),
        labels: Type.Record(Type.String(), Type.String(), { description: 'The stream labels (as Loki shows them)' }),
        line: Type.String({ description: "The line as stored (Restate's JSON format)" }),
      }),
    ),
    limited: Type.Boolean({ description: 'More lines mention the invocation than `limit`' }),
  }),
);
export type InvocationLogsResponse = Static<typeof InvocationLogsResponse>;

export const InvocationTraceResponse = Component(
  'InvocationTraceResponse',
  Type.Object({
    trace_ids: Type.Array(Type.String()),
    spans: Type.Array(
      Type.Object({
        trace_id: Type.String(),
        span_id: Type.String(),
        parent_span_id: Type.String(),
        name: Type.String(),
        start_ns: Type.String(),
        end_ns: Type.String(),
        status_code: Type.Integer({ description: 'OTLP: 0 unset, 1 ok, 2 error' }),
        status_message: Type.String(),
        attributes: Type.Record(Type.String(), Type.Unknown()),
        events: Type.Array(
          Type.Object({
            time_ns: Type.String(),
            name: Type.String(),
            attributes: Type.Record(Type.String(), Type.Unknown()),
          }),
        ),
        node: Nullable(Type.String({ description: 'The runtime node that recorded it (service.instance.id)' })),
      }),
    ),
  }),
);
export type InvocationTraceResponse = Static<typeof InvocationTraceResponse>;
