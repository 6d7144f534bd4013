import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamKey } from '../../../runtime/src/observability/labels.ts';
import type { LogLineInsert, SpanRecord } from '../../../runtime/src/observability/model.ts';
import { lineChunks, spanChunks, type LineChunk, type SpanChunk } from '../../../runtime/src/observability/chunks.ts';
import { ObservabilityWriter, type ObservabilitySink } from '../../../runtime/src/observability/writer.ts';
import { migrate } from '../../../runtime/src/storage/pg/migrate.ts';
import { WINDOW_NS } from '../../../runtime/src/storage/pg/observability/partitions.ts';
import { PgObservabilityStore } from '../../../runtime/src/storage/pg/observability/store.ts';
import { createPool } from '../../../runtime/src/storage/pg/pool.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';

/**
 * The observability store in PostgreSQL: lines by stream and time, spans by trace and attribute, time partitions
 * created on demand and dropped past the retention or over the size bound; and the writer that batches into it off
 * the invocation path, dropping the oldest when the store is away for long.
 */

const silent = pino({ level: 'silent' });
const MS = 1_000_000n;
const T0 = 1_790_000_000_000n * MS; // 2026-09-21, a fixed past time: partitions of old windows are the point.

function line(tsNs: bigint, labels: Record<string, string>, text: string, invocationId?: string): LogLineInsert {
  return { tsNs, labels, labelsKey: streamKey(labels), invocationId, line: text };
}

function span(traceId: string, spanId: string, startNs: bigint, attributes: SpanRecord['attributes']): SpanRecord {
  return {
    traceId,
    spanId,
    parentSpanId: '',
    name: `span ${spanId}`,
    kind: 1,
    startNs,
    endNs: startNs + 5n * MS,
    statusCode: 0,
    statusMessage: '',
    attributes,
    events: [{ timeNs: startNs + MS, name: 'restate.invocation.lifecycle.new_command', attributes: { n: 1 } }],
    links: [],
    resource: { 'service.name': 'Ratchet', 'service.instance.id': 'c/n1' },
    scope: 'services',
  };
}

describe('observability store', () => {
  let db: TestDatabase;
  let store: PgObservabilityStore;
  const engine = { service_name: 'Greeter', level: 'info', component: 'engine', node: 'n1', cluster: 'c' };
  const admin = { service_name: 'ratchet', level: 'warn', component: 'admin', node: 'n2', cluster: 'c' };

  beforeAll(async () => {
    db = await createTestDatabase();
    const pool = createPool({ url: db.url, max: 1, applicationName: 'obs-test' });
    const client = await pool.connect();
    await migrate(client);
    client.release();
    await pool.end();
    store = new PgObservabilityStore(
      {
        databaseUrl: db.url,
        retentionMs: 7 * 86_400_000,
        maxBytes: 1e12,
        queryTimeoutMs: 5_000,
        retentionIntervalMs: 60_000,
      },
      silent,
    );
    await store.insertLogs(
      lineChunks([
        line(T0 + 1n, engine, '{"fields":{"message":"started","restate.invocation.id":"inv_a"}}', 'inv_a'),
        line(T0 + 2n, admin, '{"fields":{"message":"registered"}}'),
        line(T0 + 2n, engine, '{"fields":{"message":"completed","restate.invocation.id":"inv_a"}}', 'inv_a'),
        // Another window: the store makes its partition.
        line(T0 + WINDOW_NS, engine, '{"fields":{"message":"later"}}'),
      ]),
    );
  });

  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('selects lines by stream matchers and time, newest or oldest first, with an exclusive end', async () => {
    const all = { matchers: [], lineFilters: [], startNs: T0, endNs: T0 + 2n * WINDOW_NS, limit: 100 };
    const backward = await store.logs.select({ ...all, direction: 'backward' });
    expect(backward.map((r) => r.tsNs - T0)).toEqual([WINDOW_NS, 2n, 2n, 1n]);
    // Same nanosecond in two streams (only lines of different nodes can share one): the order of their chunks, which
    // is the order in which the batch first had a line of each stream (engine's first).
    expect(backward[1]!.labels).toEqual(admin);
    const forward = await store.logs.select({ ...all, direction: 'forward', limit: 2 });
    expect(forward.map((r) => r.line)).toEqual([
      '{"fields":{"message":"started","restate.invocation.id":"inv_a"}}',
      '{"fields":{"message":"completed","restate.invocation.id":"inv_a"}}',
    ]);
    const exclusive = await store.logs.select({ ...all, endNs: T0 + WINDOW_NS, direction: 'forward' });
    expect(exclusive).toHaveLength(3);

    const engineOnly = await store.logs.select({
      ...all,
      direction: 'forward',
      matchers: [
        { name: 'component', op: '=~', value: 'eng.*' },
        { name: 'level', op: '!=', value: 'warn' },
      ],
    });
    expect(engineOnly.map((r) => r.labels.component)).toEqual(['engine', 'engine', 'engine']);
    const missingLabel = await store.logs.select({
      ...all,
      direction: 'forward',
      matchers: [{ name: 'kubernetes_container_name', op: '=', value: '' }],
    });
    expect(missingLabel).toHaveLength(4);
  });

  it('applies substring line filters in PostgreSQL', async () => {
    const rows = await store.logs.select({
      matchers: [],
      lineFilters: [
        { op: '|=', value: 'inv_a' },
        { op: '!=', value: 'started' },
      ],
      startNs: T0,
      endNs: T0 + 2n * WINDOW_NS,
      direction: 'backward',
      limit: 10,
    });
    expect(rows.map((r) => r.line)).toEqual(['{"fields":{"message":"completed","restate.invocation.id":"inv_a"}}']);
  });

  it('answers label names, label values and series from the streams of the range', async () => {
    const end = T0 + 2n * WINDOW_NS;
    expect(await store.logs.labelNames(T0, end, [])).toEqual(['cluster', 'component', 'level', 'node', 'service_name']);
    expect(await store.logs.labelValues('component', T0, end, [])).toEqual(['admin', 'engine']);
    expect(await store.logs.labelValues('node', T0, end, [{ name: 'level', op: '=', value: 'warn' }])).toEqual(['n2']);
    // A range after the admin stream's last line does not see it.
    expect(await store.logs.labelValues('component', T0 + 3n, end, [])).toEqual(['engine']);
    expect(await store.logs.series([[{ name: 'node', op: '=', value: 'n2' }]], T0, end)).toEqual([admin]);
  });

  it('stores spans and finds them by trace, by invocation id and by attribute', async () => {
    const trace = 'a'.repeat(32);
    await store.insertSpans(
      spanChunks([
        span(trace, '1'.repeat(16), T0, { 'restate.invocation.id': 'inv_a', 'rpc.service': 'Greeter' }),
        span(trace, '2'.repeat(16), T0 + MS, { 'restate.invocation.id': 'inv_a', 'rpc.service': 'Greeter', n: 2 }),
        span('b'.repeat(32), '3'.repeat(16), T0 + 2n * MS, {
          'restate.invocation.id': 'inv_b',
          'rpc.service': 'Other',
        }),
      ]),
    );
    const got = await store.spans.trace(trace);
    expect(got.map((s) => s.spanId).sort()).toEqual(['1'.repeat(16), '2'.repeat(16)]);
    expect(got.find((s) => s.spanId === '2'.repeat(16))).toMatchObject({
      startNs: T0 + MS,
      endNs: T0 + 6n * MS,
      attributes: { n: 2 },
      events: [{ timeNs: T0 + 2n * MS, name: 'restate.invocation.lifecycle.new_command', attributes: { n: 1 } }],
      resource: { 'service.name': 'Ratchet' },
    });
    const range = { startNs: T0, endNs: T0 + WINDOW_NS, maxSpans: 100 };
    const byInvocation = await store.spans.scan({
      ...range,
      hints: [{ scope: 'any', key: 'restate.invocation.id', value: 'inv_b' }],
    });
    expect(byInvocation.map((s) => s.traceId)).toEqual(['b'.repeat(32)]);
    const byAttribute = await store.spans.scan({ ...range, hints: [{ scope: 'span', key: 'n', value: 2 }] });
    expect(byAttribute.map((s) => s.spanId)).toEqual(['2'.repeat(16)]);
    const byResource = await store.spans.scan({
      ...range,
      hints: [{ scope: 'resource', key: 'service.name', value: 'Ratchet' }],
    });
    expect(byResource.map((s) => s.spanId)).toEqual(['3'.repeat(16), '2'.repeat(16), '1'.repeat(16)]);
    expect(await store.spans.traces(['b'.repeat(32), 'c'.repeat(32)])).toHaveLength(1);
  });

  it('reads a long range in slices from the end it starts at, and keeps lines byte for byte', async () => {
    // Twelve lines ten minutes apart, far from the other tests' times, in two batches (so in several chunks).
    const T1 = T0 + 40n * WINDOW_NS;
    const slices = { ...engine, component: 'slices' };
    const at = (i: number): bigint => T1 + BigInt(i) * 600_000n * MS;
    const texts = Array.from({ length: 12 }, (_, i) =>
      i % 2 === 0 ? `plain "quoted" \\ line ${i}\nsecond line, ünïcödé` : `{"fields":{"message":"json  line ${i}"}}`,
    );
    const batch = (from: number, to: number): LogLineInsert[] =>
      texts.slice(from, to).map((t, k) => ({ ...line(at(from + k), slices, t), json: t.startsWith('{') }));
    await store.insertLogs(lineChunks(batch(0, 5)));
    await store.insertLogs(lineChunks(batch(5, 12)));
    const q = {
      matchers: [{ name: 'component', op: '=' as const, value: 'slices' }],
      lineFilters: [],
      startNs: T1,
      endNs: T1 + 3n * WINDOW_NS,
    };
    const newest = await store.logs.select({ ...q, direction: 'backward', limit: 3 });
    expect(newest.map((r) => r.line)).toEqual([texts[11], texts[10], texts[9]]);
    const oldest = await store.logs.select({ ...q, direction: 'forward', limit: 3 });
    expect(oldest.map((r) => r.tsNs)).toEqual([at(0), at(1), at(2)]);
    const all = await store.logs.select({ ...q, direction: 'forward', limit: 100 });
    expect(all.map((r) => r.line)).toEqual(texts);
    // A range that starts inside: the first line is the one at or after its start, never one before.
    const inside = await store.logs.select({ ...q, startNs: at(4) + 1n, direction: 'forward', limit: 2 });
    expect(inside.map((r) => r.tsNs)).toEqual([at(5), at(6)]);
  });

  it('scans spans newest first across slices, up to the limit', async () => {
    const T2 = T0 + 50n * WINDOW_NS;
    const spans = Array.from({ length: 8 }, (_, i) =>
      span('d'.repeat(32), `${i}`.repeat(16), T2 + BigInt(i) * 900_000n * MS, { 'restate.invocation.id': 'inv_s' }),
    );
    await store.insertSpans(spanChunks(spans.slice(0, 3)));
    await store.insertSpans(spanChunks(spans.slice(3)));
    const range = { startNs: T2, endNs: T2 + WINDOW_NS };
    const two = await store.spans.scan({ ...range, hints: [], maxSpans: 2 });
    expect(two.map((s) => s.spanId)).toEqual(['7'.repeat(16), '6'.repeat(16)]);
    const byInvocation = await store.spans.scan({
      ...range,
      hints: [{ scope: 'span', key: 'restate.invocation.id', value: 'inv_s' }],
      maxSpans: 100,
    });
    expect(byInvocation).toHaveLength(8);
    expect((await store.spans.trace('d'.repeat(32))).length).toBe(8);
  });

  it('drops the partitions past the retention, then the oldest while over the size bound, never the newest', async () => {
    const other = await createTestDatabase();
    const pool = createPool({ url: other.url, max: 1, applicationName: 'obs-test' });
    const client = await pool.connect();
    await migrate(client);
    client.release();
    const options = { databaseUrl: other.url, queryTimeoutMs: 5_000, retentionIntervalMs: 60_000 };
    const s = new PgObservabilityStore({ ...options, retentionMs: 86_400_000, maxBytes: 1e12 }, silent);
    try {
      const windows = [0n, 1n, 2n, 8n, 9n].map((w) => T0 - (T0 % WINDOW_NS) + w * WINDOW_NS);
      await s.insertLogs(lineChunks(windows.map((t) => line(t, engine, `line at ${t}`))));
      const now = windows[4]! + 1n;
      // Retention one day (four windows): the windows that ended a day before `now` go.
      const dropped = await s.enforce(now);
      expect(dropped).toHaveLength(3);
      const left = await s.logs.select({
        matchers: [],
        lineFilters: [],
        startNs: 0n,
        endNs: now + WINDOW_NS,
        direction: 'forward',
        limit: 10,
      });
      expect(left.map((r) => r.tsNs)).toEqual([windows[3], windows[4]]);

      // Over the size bound: the oldest goes, the one being written stays.
      const tiny = new PgObservabilityStore({ ...options, retentionMs: 365 * 86_400_000, maxBytes: 1 }, silent);
      try {
        expect(await tiny.enforce(now)).toHaveLength(1);
        expect(await tiny.enforce(now)).toEqual([]);
      } finally {
        await tiny.close();
      }
      const last = await s.logs.select({
        matchers: [],
        lineFilters: [],
        startNs: 0n,
        endNs: now + WINDOW_NS,
        direction: 'forward',
        limit: 10,
      });
      expect(last.map((r) => r.tsNs)).toEqual([windows[4]]);
      // Writing into a dropped window again makes its partition again.
      await s.insertLogs(lineChunks([line(windows[0]!, engine, 'late line')]));
    } finally {
      await s.close();
      await pool.end();
      await other.drop();
    }
  });
});

describe('observability writer', () => {
  class FlakySink implements ObservabilitySink {
    up = true;
    logs: { line: string }[] = [];
    spans: unknown[] = [];
    chunks = 0;
    insertLogs(chunks: readonly LineChunk[]): Promise<void> {
      if (!this.up) return Promise.reject(new Error('store away'));
      for (const c of chunks) {
        this.chunks++;
        // Format 1: records separated by U+001E (these lines are stored as they are).
        const lines = c.lines.split('\u001e');
        const times = JSON.parse(c.times) as number[];
        expect(lines).toHaveLength(c.count);
        expect(times).toHaveLength(c.count);
        this.logs.push(...lines.map((l) => ({ line: l })));
      }
      return Promise.resolve();
    }
    insertSpans(chunks: readonly SpanChunk[]): Promise<void> {
      if (!this.up) return Promise.reject(new Error('store away'));
      for (const c of chunks) this.spans.push(...c.spans.split('\u001e'));
      return Promise.resolve();
    }
  }
  const labels = { service_name: 'ratchet', level: 'info', component: 'x', node: 'n', cluster: 'c' };

  it('writes in batches of at most maxBatch, in order', async () => {
    const sink = new FlakySink();
    const w = new ObservabilityWriter(sink, silent, { maxBuffered: 100, maxBatch: 7, flushIntervalMs: 60_000 });
    for (let i = 0; i < 20; i++) w.log(line(BigInt(i), labels, `l${i}`));
    w.span(span('a'.repeat(32), '1'.repeat(16), 1n, {}));
    await w.flush();
    expect(sink.logs.map((l) => l.line)).toEqual(Array.from({ length: 20 }, (_, i) => `l${i}`));
    expect(sink.spans).toHaveLength(1);
    expect(w.stats()).toEqual({ written: { logs: 20, spans: 1 }, dropped: { logs: 0, spans: 0 } });
    await w.close();
  });

  it('keeps the newest lines while the store is away, counts the dropped ones, and writes the rest once it is back', async () => {
    const sink = new FlakySink();
    sink.up = false;
    const w = new ObservabilityWriter(sink, silent, { maxBuffered: 10, maxBatch: 4, flushIntervalMs: 60_000 });
    for (let i = 0; i < 25; i++) w.log(line(BigInt(i), labels, `l${i}`));
    await w.flush();
    for (let i = 25; i < 28; i++) w.log(line(BigInt(i), labels, `l${i}`));
    sink.up = true;
    await w.flush();
    const written = sink.logs.map((l) => Number(l.line.slice(1)));
    const { dropped } = w.stats();
    expect(written.length + dropped.logs).toBe(28);
    // What survived is the newest, in order.
    expect(written).toEqual([...written].sort((a, b) => a - b));
    expect(written.at(-1)).toBe(27);
    expect(written.length).toBeLessThanOrEqual(10);
    await w.close();
  });

  it('never waits for the store: log() returns at once even while a flush hangs', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const hanging: ObservabilitySink = { insertLogs: () => gate, insertSpans: () => Promise.resolve() };
    const w = new ObservabilityWriter(hanging, silent, { maxBuffered: 5, maxBatch: 5, flushIntervalMs: 60_000 });
    w.log(line(0n, labels, 'first'));
    const flushing = w.flush();
    for (let i = 0; i < 100; i++) w.log(line(BigInt(i), labels, `l${i}`));
    expect(w.stats().dropped.logs).toBeGreaterThan(0);
    release();
    await flushing;
    await w.close(100);
  });
});
