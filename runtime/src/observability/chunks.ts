/*
 * Chunks: the unit the writer hands to the store, many lines or spans each, assembled as they arrive. A line or span
 * is copied into a chunk's byte buffer the moment it is written (its objects die young), so that what waits for the
 * next flush sits outside V8's heap instead of being promoted to the old generation and traced by every major GC —
 * with the store on, that garbage collection was the largest cost per invocation (bench/README.md, session 9).
 */
import type { AttributeValue, CompactSpan, LogLineInsert, SpanRecord } from './model.ts';
import { encodeCompactSpan, encodeSpan } from './span-json.ts';
import { ChunkDict, COMPACT, FS, literalRecord, RS } from './store-format.ts';

/** Chunks never span two of the store's partition windows (storage/pg/observability/partitions.ts). */
export const CHUNK_WINDOW_NS = 6n * 3600n * 1_000_000_000n;

export function chunkWindow(ns: bigint): bigint {
  return ns - (((ns % CHUNK_WINDOW_NS) + CHUNK_WINDOW_NS) % CHUNK_WINDOW_NS);
}

/** The lines of one stream, in time order: their times and texts (see `ratchet.log_chunk`, format 1). */
export interface LineChunk {
  readonly labels: Readonly<Record<string, string>>;
  readonly labelsKey: string;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly count: number;
  /** `[ts,…]`: the lines' times in Unix ns. */
  readonly times: string;
  /** The lines' records, separated by U+001E (migration 0012). */
  readonly lines: string;
  /** The texts compact records refer to: a JSON array of strings, or null. */
  readonly dict: string | null;
}

/** Spans of one resource and scope: their records and the keys that find them (see `ratchet.span_chunk`, format 1). */
export interface SpanChunk {
  readonly resource: Readonly<Record<string, AttributeValue>>;
  readonly scope: string;
  readonly startNs: bigint;
  readonly lastStartNs: bigint;
  readonly count: number;
  /** `t:<trace id>` and `i:<restate.invocation.id>` of its spans, each once. */
  readonly keys: readonly string[];
  /** The spans' records, separated by U+001E (migration 0012). */
  readonly spans: string;
  readonly dict: string | null;
}

/** Text appended into a byte buffer that grows by doubling (off V8's heap once it is larger than a few kB). */
class ByteText {
  private buf: Buffer;
  private used = 0;

  constructor(initial: number) {
    this.buf = Buffer.allocUnsafe(initial);
  }

  get empty(): boolean {
    return this.used === 0;
  }

  append(text: string): void {
    const max = text.length * 3;
    if (this.used + max > this.buf.length) {
      const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.used + max));
      this.buf.copy(next, 0, 0, this.used);
      this.buf = next;
    }
    this.used += this.buf.write(text, this.used);
  }

  text(): string {
    return this.buf.toString('utf8', 0, this.used);
  }
}

export class LineChunkBuilder {
  private readonly times = new ByteText(1024);
  private readonly lines = new ByteText(16 * 1024);
  private readonly dict = new ChunkDict();
  private first = 0n;
  private last = 0n;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    readonly labelsKey: string,
    readonly window: bigint,
  ) {}

  /** Lines arrive in time order from a node's capture (it makes their times strictly increasing). */
  add(line: LogLineInsert): void {
    const first = this.count === 0;
    if (first) this.first = line.tsNs;
    if (line.tsNs > this.last || first) this.last = line.tsNs;
    if (line.tsNs < this.first) this.first = line.tsNs;
    this.times.append(first ? `${line.tsNs}` : `,${line.tsNs}`);
    const c = line.compact;
    const record =
      c === undefined
        ? literalRecord(line.line, line.json === true)
        : `${COMPACT}${this.dict.lineHeader(c.id, c.target, c.service, c.handler, c.trace)}${FS}${
            c.deployment === null ? '' : this.dict.value(c.deployment)
          }${FS}${c.fields}`;
    this.lines.append(first ? record : RS + record);
    this.count++;
  }

  seal(): LineChunk {
    return {
      labels: this.labels,
      labelsKey: this.labelsKey,
      startNs: this.first,
      endNs: this.last,
      count: this.count,
      times: `[${this.times.text()}]`,
      lines: this.lines.text(),
      dict: this.dict.json(),
    };
  }
}

export class SpanChunkBuilder {
  private readonly spans = new ByteText(32 * 1024);
  /** Trace ids and invocation ids of its spans (its keys, prefixed when sealed). */
  private readonly traces = new Set<string>();
  private readonly invocations = new Set<string>();
  private readonly dict = new ChunkDict();
  private first = 0n;
  private last = 0n;
  count = 0;

  constructor(
    readonly resource: Readonly<Record<string, AttributeValue>>,
    readonly scope: string,
    readonly window: bigint,
  ) {}

  add(span: SpanRecord): void {
    const e = encodeSpan(span, this.dict);
    this.append(e.startNs, e.traceId, e.invocationId, e.record);
  }

  /** A span that its tracer made compact (Ratchet's own tracer, for the spans every invocation has). */
  addCompact(c: CompactSpan): void {
    this.append(c.startNs, c.traceId, c.id, encodeCompactSpan(c, this.dict));
  }

  private append(startNs: bigint, traceId: string, invocationId: string | undefined, record: string): void {
    if (this.count === 0 || startNs < this.first) this.first = startNs;
    if (this.count === 0 || startNs > this.last) this.last = startNs;
    this.traces.add(traceId);
    if (invocationId !== undefined) this.invocations.add(invocationId);
    this.spans.append(this.count === 0 ? record : RS + record);
    this.count++;
  }

  seal(): SpanChunk {
    return {
      resource: this.resource,
      scope: this.scope,
      startNs: this.first,
      lastStartNs: this.last,
      count: this.count,
      keys: [...[...this.traces].map((t) => `t:${t}`), ...[...this.invocations].map((i) => `i:${i}`)],
      spans: this.spans.text(),
      dict: this.dict.json(),
    };
  }
}

/** The chunks of some lines (in time order per stream), as the writer would make them: for tests and tools. */
export function lineChunks(lines: readonly LogLineInsert[]): LineChunk[] {
  const builders = new Map<string, LineChunkBuilder>();
  for (const l of [...lines].sort((a, b) => (a.tsNs < b.tsNs ? -1 : a.tsNs > b.tsNs ? 1 : 0))) {
    const window = chunkWindow(l.tsNs);
    const key = `${window} ${l.labelsKey}`;
    let b = builders.get(key);
    if (b === undefined) builders.set(key, (b = new LineChunkBuilder(l.labels, l.labelsKey, window)));
    b.add(l);
  }
  return [...builders.values()].map((b) => b.seal());
}

/** The chunks of some spans, as the writer would make them: for tests and tools. */
export function spanChunks(spans: readonly SpanRecord[]): SpanChunk[] {
  const builders = new Map<string, SpanChunkBuilder>();
  for (const s of spans) {
    const window = chunkWindow(s.startNs);
    const key = `${window} ${JSON.stringify(s.resource)} ${s.scope}`;
    let b = builders.get(key);
    if (b === undefined) builders.set(key, (b = new SpanChunkBuilder(s.resource, s.scope, window)));
    b.add(s);
  }
  return [...builders.values()].map((b) => b.seal());
}
