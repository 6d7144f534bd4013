import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LifecycleEvent, ObservedInvocation } from '../../../runtime/src/engine/observer.ts';
import { lineChunks, spanChunks } from '../../../runtime/src/observability/chunks.ts';
import { compactLine, storedLine } from '../../../runtime/src/observability/invocation-log.ts';
import { streamKey } from '../../../runtime/src/observability/labels.ts';
import type { LogLineInsert, SpanRecord } from '../../../runtime/src/observability/model.ts';
import { chunkMustContain } from '../../../runtime/src/observability/store-format.ts';
import { asCompact, expandCompactSpan } from '../../../runtime/src/observability/span-json.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { PgObservabilityStore } from '../../../runtime/src/storage/pg/observability/store.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * The store's compact format (migration 0012): routine invocation lines and spans are stored as compact records and
 * rendered by PostgreSQL when read. What a query returns must be exactly what the full form would have been: the line
 * text byte for byte (as invocation-log.ts writes it in full), the span field for field; and the chunk pre-filter of
 * `|=` line filters must never skip a chunk with a matching line.
 */

const silent = pino({ level: 'silent' });
const MS = 1_000_000n;
const T0 = 1_795_000_000_000n * MS;

function iso(ns: bigint): string {
  return new Date(Number(ns / MS)).toISOString();
}

function invocation(over: Partial<ObservedInvocation> = {}): ObservedInvocation {
  return {
    id: 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz',
    target: 'Greeter/greet',
    service: 'Greeter',
    handler: 'greet',
    key: null,
    deploymentId: 'dp_11SEqaxbnkPYrT2kmAT9tMY',
    attempt: 0,
    partition: 7,
    traceContext: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    ...over,
  };
}

const ROUTINE: LifecycleEvent[] = [
  { kind: 'accepted', idempotencyKey: null },
  { kind: 'accepted', idempotencyKey: 'order-"42"\\\n\u0001é😀' },
  { kind: 'scheduled', at: new Date('2026-12-01T10:00:00.123Z') },
  { kind: 'inboxed' },
  { kind: 'started', protocolVersion: 6 },
  { kind: 'replayed', entries: 12 },
  { kind: 'suspended' },
  { kind: 'resumed', by: 'notification' },
  { kind: 'resumed', by: 'admin' },
  { kind: 'completed', outcome: 'success', code: undefined, message: undefined },
];

function lineOf(
  labels: Record<string, string>,
  tsNs: bigint,
  inv: ObservedInvocation,
  e: LifecycleEvent,
): LogLineInsert {
  const compact = compactLine(inv, e);
  if (compact === undefined) throw new Error(`${e.kind} has no compact form`);
  return { tsNs, labels, labelsKey: streamKey(labels), invocationId: inv.id, line: '', compact };
}

describe('observability store: compact records', () => {
  let db: TestDatabase;
  let store: PgObservabilityStore;
  let stream = 0;
  const labels = (): Record<string, string> => ({
    service_name: `Compact${++stream}`,
    level: 'debug',
    component: 'invocation',
    node: 'n1',
    cluster: 'c',
  });

  async function read(l: Record<string, string>, from: bigint, to: bigint, filter?: string): Promise<string[]> {
    const rows = await store.logs.select({
      matchers: [{ name: 'service_name', op: '=', value: l.service_name! }],
      lineFilters: filter === undefined ? [] : [{ op: '|=', value: filter }],
      startNs: from,
      endNs: to,
      direction: 'forward',
      limit: 10_000,
    });
    return rows.map((r) => r.line);
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    const pool = createPool({ url: db.url, max: 1, applicationName: 'compact-test' });
    const client = await pool.connect();
    await migrate(client);
    client.release();
    await pool.end();
    store = new PgObservabilityStore(
      {
        databaseUrl: db.url,
        retentionMs: 7 * 86_400_000,
        maxBytes: 1e12,
        queryTimeoutMs: 10_000,
        retentionIntervalMs: 60_000,
      },
      silent,
    );
  });

  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('renders every routine event exactly as the full line, beside lines stored as they are', async () => {
    const l = labels();
    const invs = [
      invocation(),
      invocation({ key: 'k "1"', target: 'Counter/k "1"/add', service: 'Counter', handler: 'add', attempt: 3 }),
      invocation({ deploymentId: null, traceContext: null, partition: 0 }),
    ];
    const lines: LogLineInsert[] = [];
    const expected: string[] = [];
    let ts = T0;
    for (const inv of invs) {
      for (const e of ROUTINE) {
        ts += MS;
        lines.push(lineOf(l, ts, inv, e));
        expected.push(storedLine(inv, e, iso(ts)));
      }
    }
    // Lines stored in full in the same chunk, including texts that hold the format's separators.
    for (const text of [
      'plain text line',
      '\u0010starts like a compact record',
      'a\u001eb\u001fc',
      '\u0011x',
      '{"a":1}',
    ]) {
      ts += MS;
      lines.push({ tsNs: ts, labels: l, labelsKey: streamKey(l), invocationId: undefined, line: text });
      expected.push(text);
    }
    const chunks = lineChunks(lines);
    expect(chunks).toHaveLength(1);
    // Each invocation's ids once in the chunk, not once per line.
    expect(chunks[0]!.lines.split('inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz')).toHaveLength(1);
    await store.insertLogs(chunks);
    expect(await read(l, T0, ts + 1n)).toEqual(expected);
    // Full lines parse as JSON with the fields of the event.
    for (const text of expected.slice(0, ROUTINE.length)) expect(() => JSON.parse(text) as unknown).not.toThrow();
  });

  it('renders routine lines of any target, key and idempotency key exactly as the full line', async () => {
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            key: fc.option(text, { nil: null }),
            idem: fc.option(text, { nil: null }),
            handler: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 8 }),
            attempt: fc.nat(1_000_000),
            event: fc.integer({ min: 0, max: ROUTINE.length - 1 }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        async (cases) => {
          const l = labels();
          const lines: LogLineInsert[] = [];
          const expected: string[] = [];
          let ts = T0 + 3_600_000n * MS;
          for (const c of cases) {
            ts += MS;
            const inv = invocation({
              key: c.key,
              handler: c.handler,
              target: c.key === null ? `Svc/${c.handler}` : `Svc/${c.key}/${c.handler}`,
              attempt: c.attempt,
            });
            const e =
              ROUTINE[c.event]!.kind === 'accepted'
                ? { kind: 'accepted' as const, idempotencyKey: c.idem }
                : ROUTINE[c.event]!;
            lines.push(lineOf(l, ts, inv, e));
            // PostgreSQL text holds no U+0000, and the writer's UTF-8 has no lone surrogates: JSON escapes both.
            expected.push(storedLine(inv, e, iso(ts)));
          }
          await store.insertLogs(lineChunks(lines));
          expect(await read(l, T0, ts + 1n)).toEqual(expected);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('never skips a chunk whose line holds a |= filter value (the pre-filter on stored text)', async () => {
    const l = labels();
    const lines: LogLineInsert[] = [];
    const rendered: string[] = [];
    let ts = T0 + 7_200_000n * MS;
    for (const [i, e] of ROUTINE.entries()) {
      ts += MS;
      const inv = invocation({ id: `inv_${i}x${'abc'.repeat(i)}`, attempt: i, partition: i * 11 });
      lines.push(lineOf(l, ts, inv, e));
      rendered.push(storedLine(inv, e, iso(ts)));
    }
    ts += MS;
    lines.push({ tsNs: ts, labels: l, labelsKey: streamKey(l), invocationId: undefined, line: 'an error: timeout' });
    rendered.push('an error: timeout');
    await store.insertLogs(lineChunks(lines));
    const from = T0 + 7_200_000n * MS;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: rendered.length - 1 }),
        fc.nat(),
        fc.integer({ min: 1, max: 30 }),
        async (which, at, length) => {
          const text = rendered[which]!;
          const start = at % text.length;
          const value = text.slice(start, start + length);
          // Half of a surrogate pair is no text a query can send (its UTF-8 has no such character).
          if (!(value as string & { isWellFormed(): boolean }).isWellFormed()) return;
          const found = await read(l, from, ts + 1n, value);
          expect(found).toContain(text);
        },
      ),
      { numRuns: 150 },
    );
    // The pre-filter does skip: values it may use are not in other chunks' lines.
    expect(chunkMustContain('inv_3xabcabcabc')).toBe(true);
    expect(await read(l, from, ts + 1n, 'inv_3xabcabcabc')).toHaveLength(1);
    expect(chunkMustContain('invocation accepted')).toBe(false);
    expect(chunkMustContain('2026-12')).toBe(false);
    expect(chunkMustContain('1 started')).toBe(false);
  });

  it('stores the spans of every invocation compactly and reads them back field for field', async () => {
    const traceId = 'ff0af7651916cd43dd8448eb211c8031';
    const resource = { 'service.name': 'Ratchet', 'service.instance.id': 'c/n1' };
    const common = {
      'restate.invocation.id': 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz',
      'restate.invocation.target': 'Counter/k "ü"/add',
      'rpc.service': 'Counter',
      'rpc.method': 'add',
    };
    const base = {
      traceId,
      kind: 1,
      statusCode: 0,
      statusMessage: '',
      events: [],
      links: [],
      resource,
      scope: 'services',
    };
    const at = T0 + 10_800_000n * MS;
    const spans: SpanRecord[] = [
      {
        ...base,
        spanId: '1000000000000001',
        parentSpanId: '',
        name: 'ingress Counter/{key}/add',
        startNs: at,
        endNs: at + 9n * MS,
        attributes: {
          'rpc.service': 'Counter',
          'rpc.method': 'add',
          'restate.invocation.target': common['restate.invocation.target'],
          'client.socket.address': '127.0.0.1',
          'client.socket.port': 50123,
          'restate.invocation.id': common['restate.invocation.id'],
          'http.response.status_code': 200,
        },
      },
      {
        ...base,
        spanId: '1000000000000002',
        parentSpanId: '1000000000000001',
        name: 'invocation-start Counter/{key}/add',
        startNs: at + MS,
        endNs: at + MS,
        attributes: common,
      },
      {
        ...base,
        spanId: '1000000000000003',
        parentSpanId: '1000000000000002',
        name: 'invocation-attempt Counter/{key}/add',
        startNs: at + 2n * MS,
        endNs: at + 7n * MS,
        attributes: {
          ...common,
          'rpc.system': 'restate',
          'restate.invocation.attempt': 0,
          'restate.deployment.service_protocol_version': 6,
          'restate.deployment.id': 'dp_11SEqaxbnkPYrT2kmAT9tMY',
        },
      },
      {
        ...base,
        spanId: '1000000000000004',
        parentSpanId: '1000000000000002',
        name: 'invocation-end Counter/{key}/add',
        startNs: at + 8n * MS,
        endNs: at + 8n * MS,
        attributes: { ...common, 'restate.invocation.result': 'success' },
      },
      // Not compact: an event, an error, an attribute of its own, an ingress span without an invocation.
      {
        ...base,
        spanId: '1000000000000005',
        parentSpanId: '1000000000000002',
        name: 'invocation-attempt Counter/{key}/add',
        startNs: at + 3n * MS,
        endNs: at + 4n * MS,
        statusCode: 2,
        statusMessage: '[RT0007] boom',
        attributes: {
          ...common,
          'rpc.system': 'restate',
          'restate.invocation.attempt': 1,
          'restate.deployment.service_protocol_version': 6,
          'restate.error.code': 'RT0007',
        },
        events: [{ timeNs: at + 4n * MS, name: 'exception', attributes: { 'exception.message': 'boom' } }],
      },
      {
        ...base,
        spanId: '1000000000000006',
        parentSpanId: '',
        name: 'invocation-end Counter/{key}/add',
        startNs: at + 5n * MS,
        endNs: at + 5n * MS,
        attributes: { ...common, 'restate.invocation.result': 'success', extra: true },
      },
      {
        ...base,
        spanId: '1000000000000007',
        parentSpanId: '',
        name: 'ingress Counter/{key}/add',
        startNs: at + 6n * MS,
        endNs: at + 6n * MS,
        attributes: {
          'rpc.service': 'Counter',
          'rpc.method': 'add',
          'restate.invocation.target': 'Counter/k/add',
          'http.response.status_code': 404,
        },
      },
    ];
    const chunks = spanChunks(spans);
    expect(chunks).toHaveLength(1);
    const records = chunks[0]!.spans.split('\u001e');
    expect(records.map((r) => r.startsWith('\u0010'))).toEqual([true, true, true, true, false, false, false]);
    // The Node side's rendering (for sinks other than the store) agrees with PostgreSQL's.
    for (const s of spans.slice(0, 4)) expect(expandCompactSpan(asCompact(s)!, s.resource, s.scope)).toEqual(s);
    for (const s of spans.slice(4)) expect(asCompact(s)).toBeUndefined();
    await store.insertSpans(chunks);
    const read = await store.spans.trace(traceId);
    const byId = (a: SpanRecord, b: SpanRecord): number => a.spanId.localeCompare(b.spanId);
    expect(read.sort(byId)).toEqual([...spans].sort(byId));
    // Found by invocation through the scan too (the chunk's keys and the rendered attributes).
    const scanned = await store.spans.scan({
      startNs: at,
      endNs: at + 10n * MS,
      hints: [{ scope: 'span', key: 'restate.invocation.id', value: common['restate.invocation.id'] }],
      maxSpans: 100,
    });
    expect(scanned.map((s) => s.spanId).sort()).toEqual(
      spans
        .slice(0, 6)
        .map((s) => s.spanId)
        .sort(),
    );
  });
});
