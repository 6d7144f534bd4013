/*
 * The observability store's data model, shared by the writers (log lines and spans of every node go to PostgreSQL),
 * the query engines (LogQL for the Loki API, TraceQL and tag search for the Tempo API) and the listener on 3100.
 * Times are Unix nanoseconds as bigint everywhere: Loki and OTLP speak nanoseconds, and two lines in the same
 * microsecond keep their order.
 */

/** One log line as stored: the stream it belongs to (its labels) and the line itself (a JSON object, Restate's format). */
export interface LogRecord {
  readonly tsNs: bigint;
  /** Stream labels: `service_name`, `level`, `component`, `node`, `cluster` (and more, see `STREAM_LABELS`). */
  readonly labels: Readonly<Record<string, string>>;
  readonly line: string;
}

/** A log line on its way to the store: `labelsKey` identifies its stream (see `streamKey` in labels.ts). */
export interface LogLineInsert {
  readonly tsNs: bigint;
  readonly labels: Readonly<Record<string, string>>;
  readonly labelsKey: string;
  /** restate.invocation.id of an invocation-scoped line. */
  readonly invocationId: string | undefined;
  /** The line's text ('' for a compact line: the store renders its text when it is read). */
  readonly line: string;
  /** The line is the text of a JSON object, as JSON.stringify wrote it (the store may pass it on without escaping). */
  readonly json?: boolean;
  /** A routine invocation lifecycle line in the store's compact form (see `CompactLine`), instead of `line`. */
  readonly compact?: CompactLine;
}

/**
 * A routine (debug-level) invocation lifecycle line as the store keeps it: the parts its text is made of, rendered into
 * the line by PostgreSQL when a query reads it (migration 0012 documents the format, invocation-log.ts makes them).
 * The invocation's names and the deployment are stored once per chunk and referred to by position.
 */
export interface CompactLine {
  readonly id: string;
  readonly target: string;
  readonly service: string;
  readonly handler: string;
  /** The trace id of its spans, if any. */
  readonly trace: string | null;
  readonly deployment: string | null;
  /** The event, attempt, partition and the event's value (JSON text or '') joined by U+001F. */
  readonly fields: string;
}

/** A stream selector matcher, `{name op "value"}`. Regexes are anchored at both ends, as in Loki and Prometheus. */
export interface LabelMatcher {
  readonly name: string;
  readonly op: '=' | '!=' | '=~' | '!~';
  readonly value: string;
}

/** A line filter that applies to the raw line (before any parser stage): `|= != |~ !~`. */
export interface LineFilter {
  readonly op: '|=' | '!=' | '|~' | '!~';
  readonly value: string;
}

/** What a log query asks the store for; `endNs` is exclusive, as in Loki. */
export interface LogSelection {
  readonly matchers: readonly LabelMatcher[];
  /** Filters the store may apply itself (all must match); the engine applies them again, so a store may skip any. */
  readonly lineFilters: readonly LineFilter[];
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly direction: 'forward' | 'backward';
  /** At most this many records, the first ones in `direction`. */
  readonly limit: number;
}

export interface LogSource {
  /** Matching records, ordered by time in `direction` (ties by insertion), at most `limit`. */
  select(q: LogSelection): Promise<LogRecord[]>;
  /** Label names of the streams with lines in [start, end) that match `matchers` (all streams when empty). */
  labelNames(startNs: bigint, endNs: bigint, matchers: readonly LabelMatcher[]): Promise<string[]>;
  labelValues(name: string, startNs: bigint, endNs: bigint, matchers: readonly LabelMatcher[]): Promise<string[]>;
  /** The distinct label sets of streams with lines in [start, end) matching any of the selectors. */
  series(
    selectors: readonly (readonly LabelMatcher[])[],
    startNs: bigint,
    endNs: bigint,
  ): Promise<Record<string, string>[]>;
}

/** OTLP span kinds (the protobuf enum's numbers). */
export const SpanKind = { unspecified: 0, internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
/** OTLP status codes. */
export const StatusCode = { unset: 0, ok: 1, error: 2 } as const;

export type AttributeValue = string | number | boolean;

export interface SpanEvent {
  readonly timeNs: bigint;
  readonly name: string;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
}

export interface SpanLink {
  readonly traceId: string;
  readonly spanId: string;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
}

/** One finished span as stored. Ids are lower-case hex: trace 32 characters, span 16. */
export interface SpanRecord {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span of this store (its parent may be the caller's, outside it: then it is set). */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly statusCode: number;
  readonly statusMessage: string;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly events: readonly SpanEvent[];
  readonly links: readonly SpanLink[];
  /** Resource attributes (`service.name`, `service.instance.id`, …). */
  readonly resource: Readonly<Record<string, AttributeValue>>;
  /** Instrumentation scope name. */
  readonly scope: string;
}

/**
 * One of the spans every invocation has, when it went as usual (no events, links or error), in the store's compact
 * form (migration 0012): `s` its `invocation-start`, `a` an `invocation-attempt`, `e` its `invocation-end`, `i` the
 * `ingress` span of the request that made it. The store renders it back into the span Ratchet's tracer would have
 * recorded (kind internal, status unset, the attributes of its kind). Times are Unix ns.
 */
export interface CompactSpan {
  readonly kind: 's' | 'a' | 'e' | 'i';
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly id: string;
  readonly target: string;
  readonly service: string;
  readonly handler: string;
  /** `a`: the attempt's number, protocol version and deployment. */
  readonly attempt?: number;
  readonly protocol?: number;
  readonly deployment?: string | undefined;
  /** `i`: the client's address and port, and the HTTP status answered. */
  readonly address?: string | undefined;
  readonly port?: number | undefined;
  readonly status?: number;
}

/** An attribute condition a span store can use to narrow a scan (an index lookup); the engine checks it again. */
export interface SpanHint {
  readonly scope: 'span' | 'resource' | 'any';
  readonly key: string;
  readonly value: AttributeValue;
}

export interface SpanScan {
  readonly startNs: bigint;
  readonly endNs: bigint;
  /** Spans matching all hints (when the store can use them); the engine filters exactly afterwards. */
  readonly hints: readonly SpanHint[];
  /** At most this many spans, newest first. */
  readonly maxSpans: number;
}

export interface SpanSource {
  /** Every span of the trace (any time when the bounds are not given), unordered. */
  trace(traceId: string, startNs?: bigint, endNs?: bigint): Promise<SpanRecord[]>;
  /** Spans that started in [start, end), newest first. */
  scan(q: SpanScan): Promise<SpanRecord[]>;
  /** The spans of these traces (for search results: root span, trace duration). */
  traces(traceIds: readonly string[]): Promise<SpanRecord[]>;
}
