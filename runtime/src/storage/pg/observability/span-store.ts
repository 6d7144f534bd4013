import type pg from 'pg';
import type {
  AttributeValue,
  SpanEvent,
  SpanLink,
  SpanRecord,
  SpanScan,
  SpanSource,
} from '../../../observability/model.ts';
import type { Partitions } from './partitions.ts';

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

const COLUMNS = `start_ns, end_ns, trace_id, span_id, parent_span_id, name, kind, status_code, status_message,
  attributes, events, links, resource, scope`;

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

/** Finished spans in PostgreSQL (`ratchet.span`), written by every node and read by any. */
export class PgSpanStore implements SpanSource {
  constructor(
    private readonly pool: pg.Pool,
    private readonly partitions: Partitions,
  ) {}

  async insert(spans: readonly SpanRecord[]): Promise<void> {
    if (spans.length === 0) return;
    await this.partitions.ensure(
      'span',
      spans.map((s) => s.startNs),
    );
    const col = <T>(f: (s: SpanRecord) => T): T[] => spans.map(f);
    await this.pool.query(
      `INSERT INTO ratchet.span (${COLUMNS}, service_name, invocation_id)
       SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
         $7::smallint[], $8::smallint[], $9::text[], $10::jsonb[], $11::jsonb[], $12::jsonb[], $13::jsonb[],
         $14::text[], $15::text[], $16::text[])`,
      [
        col((s) => s.startNs.toString()),
        col((s) => s.endNs.toString()),
        col((s) => s.traceId),
        col((s) => s.spanId),
        col((s) => s.parentSpanId),
        col((s) => s.name),
        col((s) => s.kind),
        col((s) => s.statusCode),
        col((s) => s.statusMessage),
        col((s) => JSON.stringify(s.attributes)),
        col((s) =>
          s.events.length === 0
            ? '[]'
            : JSON.stringify(
                s.events.map((e) => ({ timeNs: e.timeNs.toString(), name: e.name, attributes: e.attributes })),
              ),
        ),
        col((s) => (s.links.length === 0 ? '[]' : JSON.stringify(s.links))),
        col((s) => resourceText(s.resource)),
        col((s) => s.scope),
        col((s) => String(s.resource['service.name'] ?? '')),
        col((s) => {
          const id = s.attributes[INVOCATION_ID];
          return typeof id === 'string' ? id : null;
        }),
      ],
    );
  }

  async trace(traceId: string, startNs?: bigint, endNs?: bigint): Promise<SpanRecord[]> {
    const values: unknown[] = [traceId];
    let range = '';
    if (startNs !== undefined) range += ` AND start_ns >= $${values.push(startNs.toString())}`;
    if (endNs !== undefined) range += ` AND start_ns < $${values.push(endNs.toString())}`;
    const { rows } = await this.pool.query<SpanRow>(
      `SELECT ${COLUMNS} FROM ratchet.span WHERE trace_id = $1${range}`,
      values,
    );
    return rows.map(fromRow);
  }

  async traces(traceIds: readonly string[]): Promise<SpanRecord[]> {
    if (traceIds.length === 0) return [];
    const { rows } = await this.pool.query<SpanRow>(
      `SELECT ${COLUMNS} FROM ratchet.span WHERE trace_id = ANY($1::text[])`,
      [traceIds],
    );
    return rows.map(fromRow);
  }

  async scan(q: SpanScan): Promise<SpanRecord[]> {
    const values: unknown[] = [q.startNs.toString(), q.endNs.toString(), q.maxSpans];
    const conditions: string[] = [];
    for (const h of q.hints) {
      if (h.key === INVOCATION_ID && h.scope !== 'resource' && typeof h.value === 'string') {
        conditions.push(`invocation_id = $${values.push(h.value)}`);
      } else if (h.key === 'service.name' && h.scope !== 'span' && typeof h.value === 'string') {
        conditions.push(
          h.scope === 'resource'
            ? `service_name = $${values.push(h.value)}`
            : `(service_name = $${values.push(h.value)} OR attributes @> $${values.push(JSON.stringify({ [h.key]: h.value }))}::jsonb)`,
        );
      } else {
        const doc = `$${values.push(JSON.stringify({ [h.key]: h.value }))}::jsonb`;
        if (h.scope === 'span') conditions.push(`attributes @> ${doc}`);
        else if (h.scope === 'resource') conditions.push(`resource @> ${doc}`);
        else conditions.push(`(attributes @> ${doc} OR resource @> ${doc})`);
      }
    }
    const { rows } = await this.pool.query<SpanRow>(
      `SELECT ${COLUMNS} FROM ratchet.span
       WHERE start_ns >= $1 AND start_ns < $2${conditions.map((c) => ` AND ${c}`).join('')}
       ORDER BY start_ns DESC LIMIT $3`,
      values,
    );
    return rows.map(fromRow);
  }
}
