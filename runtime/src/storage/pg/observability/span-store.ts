import type pg from 'pg';
import type {
  AttributeValue,
  SpanEvent,
  SpanLink,
  SpanRecord,
  SpanScan,
  SpanSource,
} from '../../../observability/model.ts';
import type { SpanChunk } from '../../../observability/chunks.ts';
import { type Partitions, windowStart } from './partitions.ts';
import { readInSlices } from './slices.ts';

/** The attribute with its own indexed column: the invocation id. */
const INVOCATION_ID = 'restate.invocation.id';

interface SpanRow {
  start_ns: string;
  end_ns: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: number;
  status_code: number;
  status_message: string;
  attributes: Record<string, AttributeValue>;
  events: { timeNs: string; name: string; attributes: Record<string, AttributeValue> }[];
  links: SpanLink[];
  resource: Record<string, AttributeValue>;
  scope: string;
}

/** The spans of the chunks a query selects, one row each, with the columns of SpanRow (migration 0012). */
const SPANS = `ratchet.span_chunk c CROSS JOIN LATERAL ratchet.chunk_spans(c.format, c.spans, c.dict) s`;
const COLUMNS = `s.start_ns, s.end_ns, s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.status_code,
  s.status_message, s.attributes, s.events, s.links, c.resource, c.scope`;

function fromRow(r: SpanRow): SpanRecord {
  return {
    traceId: r.trace_id,
    spanId: r.span_id,
    parentSpanId: r.parent_span_id,
    name: r.name,
    kind: r.kind,
    startNs: BigInt(r.start_ns),
    endNs: BigInt(r.end_ns),
    statusCode: r.status_code,
    statusMessage: r.status_message,
    attributes: r.attributes,
    events: r.events.map((e): SpanEvent => ({ timeNs: BigInt(e.timeNs), name: e.name, attributes: e.attributes })),
    links: r.links,
    resource: r.resource,
    scope: r.scope,
  };
}

/** JSON texts of resources (one object per node, shared by its spans). */
const resourceJson = new WeakMap<object, string>();
function resourceText(resource: object): string {
  let text = resourceJson.get(resource);
  if (text === undefined) resourceJson.set(resource, (text = JSON.stringify(resource)));
  return text;
}

/**
 * Finished spans in PostgreSQL (`ratchet.span_chunk`), written by every node and read by any. A batch is stored as one
 * chunk per resource and partition window, so that a span costs PostgreSQL part of a JSON document rather than a row
 * and three index entries; a GIN index on the chunk's keys (its traces and invocations) finds the chunks of a trace.
 */
export class PgSpanStore implements SpanSource {
  constructor(
    private readonly pool: pg.Pool,
    private readonly partitions: Partitions,
  ) {}

  async insert(chunks: readonly SpanChunk[]): Promise<void> {
    if (chunks.length === 0) return;
    await this.partitions.ensure(
      'span_chunk',
      chunks.map((c) => c.startNs),
    );
    for (const c of chunks) {
      await this.pool.query(
        `INSERT INTO ratchet.span_chunk (start_ns, last_start_ns, keys, resource, scope, spans, format, dict)
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7)`,
        [c.startNs.toString(), c.lastStartNs.toString(), c.keys, resourceText(c.resource), c.scope, c.spans, c.dict],
      );
    }
  }

  async trace(traceId: string, startNs?: bigint, endNs?: bigint): Promise<SpanRecord[]> {
    const values: unknown[] = [[`t:${traceId}`], traceId];
    let range = '';
    if (startNs !== undefined) range += ` AND s.start_ns >= $${values.push(startNs.toString())}`;
    if (endNs !== undefined) range += ` AND s.start_ns < $${values.push(endNs.toString())}`;
    const { rows } = await this.pool.query<SpanRow>(
      `SELECT ${COLUMNS} FROM ${SPANS} WHERE c.keys @> $1::text[] AND s.trace_id = $2${range}`,
      values,
    );
    return rows.map(fromRow);
  }

  async traces(traceIds: readonly string[]): Promise<SpanRecord[]> {
    if (traceIds.length === 0) return [];
    const { rows } = await this.pool.query<SpanRow>(
      `SELECT ${COLUMNS} FROM ${SPANS} WHERE c.keys && $1::text[] AND s.trace_id = ANY($2::text[])`,
      [traceIds.map((t) => `t:${t}`), traceIds],
    );
    return rows.map(fromRow);
  }

  /** Spans of the range matching the hints, newest first, read in slices from the end of the range (slices.ts). */
  async scan(q: SpanScan): Promise<SpanRecord[]> {
    const conditions: string[] = [];
    const values: unknown[] = [];
    for (const h of q.hints) {
      if (h.key === INVOCATION_ID && h.scope !== 'resource' && typeof h.value === 'string') {
        const key = `$${values.push([`i:${h.value}`]) + 4}::text[]`;
        conditions.push(`c.keys @> ${key} AND s.attributes ->> '${INVOCATION_ID}' = $${values.push(h.value) + 4}`);
      } else if (h.key === 'service.name' && h.scope !== 'span' && typeof h.value === 'string') {
        const service = `c.resource ->> 'service.name' = $${values.push(h.value) + 4}`;
        conditions.push(
          h.scope === 'resource'
            ? service
            : `(${service} OR s.attributes @> $${values.push(JSON.stringify({ [h.key]: h.value })) + 4}::jsonb)`,
        );
      } else {
        const doc = `$${values.push(JSON.stringify({ [h.key]: h.value })) + 4}::jsonb`;
        if (h.scope === 'span') conditions.push(`s.attributes @> ${doc}`);
        else if (h.scope === 'resource') conditions.push(`c.resource @> ${doc}`);
        else conditions.push(`(s.attributes @> ${doc} OR c.resource @> ${doc})`);
      }
    }
    const rows = await readInSlices(q.startNs, q.endNs, 'backward', q.maxSpans, async (from, to, limit) => {
      const r = await this.pool.query<SpanRow>(
        // A chunk lies in one window: one with spans in the slice starts no earlier than the window of its start.
        `SELECT ${COLUMNS} FROM ${SPANS}
         WHERE c.start_ns >= $4 AND c.start_ns < $2 AND c.last_start_ns >= $1
           AND s.start_ns >= $1 AND s.start_ns < $2${conditions.map((c) => ` AND ${c}`).join('')}
         ORDER BY s.start_ns DESC LIMIT $3`,
        [from.toString(), to.toString(), limit, windowStart(from).toString(), ...values],
      );
      return r.rows;
    });
    return rows.map(fromRow);
  }
}
