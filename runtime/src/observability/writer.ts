import type { Logger } from 'pino';
import { chunkWindow, LineChunkBuilder, SpanChunkBuilder, type LineChunk, type SpanChunk } from './chunks.ts';
import type { AttributeValue, CompactSpan, LogLineInsert, SpanRecord } from './model.ts';

/** Where the writer puts chunks: PostgreSQL in a node (storage/pg/observability), anything in a test. */
export interface ObservabilitySink {
  insertLogs(chunks: readonly LineChunk[]): Promise<void>;
  insertSpans(chunks: readonly SpanChunk[]): Promise<void>;
}

export interface WriterOptions {
  /** Lines (and, separately, spans) held at most while the store is slow or away; beyond, the oldest go. */
  readonly maxBuffered: number;
  /** At most this many lines (spans) per chunk, and per insert. */
  readonly maxBatch: number;
  readonly flushIntervalMs: number;
}

export const DEFAULT_WRITER_OPTIONS: WriterOptions = { maxBuffered: 50_000, maxBatch: 2_000, flushIntervalMs: 500 };

export interface WriterCounters {
  /** Lines and spans stored. */
  written: { logs: number; spans: number };
  /** Lines and spans dropped because the buffer was full (the oldest first). */
  dropped: { logs: number; spans: number };
}

interface Counted {
  readonly count: number;
}

/**
 * Sealed chunks waiting for the store, oldest first, and the chunks being filled. Over `max` items in all, the oldest
 * chunk goes (whole: what was written together is dropped together).
 */
class ChunkQueue<B extends Counted & { seal(): C }, C extends Counted> {
  private sealed: C[] = [];
  private readonly open = new Map<string, B>();
  private size = 0;
  dropped = 0;

  constructor(
    private readonly max: number,
    private readonly perChunk: number,
  ) {}

  get items(): number {
    return this.size;
  }

  /**
   * Adds one item with `fill` to the chunk being filled for `key` (made by `make` if there is none, it is full or it is
   * not `fits` for the item: another time window or scope). `key` is a string the caller keeps (its hash is cached).
   */
  add(key: string, fits: (b: B) => boolean, make: () => B, fill: (b: B) => void): void {
    let b = this.open.get(key);
    if (b !== undefined && (b.count >= this.perChunk || !fits(b))) {
      this.open.delete(key);
      this.sealed.push(b.seal());
      b = undefined;
    }
    if (b === undefined) this.open.set(key, (b = make()));
    fill(b);
    this.size++;
    while (this.size > this.max) this.dropOldest();
  }

  /** Everything waiting, as sealed chunks (the open ones are sealed now). */
  takeAll(): C[] {
    for (const b of this.open.values()) this.sealed.push(b.seal());
    this.open.clear();
    const all = this.sealed;
    this.sealed = [];
    this.size = 0;
    return all;
  }

  /** Puts back chunks that could not be written, in front, as far as there is room (what is newer wins). */
  putBack(chunks: readonly C[]): void {
    const kept: C[] = [];
    let room = this.max - this.size;
    for (let i = chunks.length - 1; i >= 0; i--) {
      const c = chunks[i]!;
      if (c.count <= room) {
        kept.unshift(c);
        room -= c.count;
      } else {
        this.dropped += c.count;
      }
    }
    this.sealed = kept.concat(this.sealed);
    this.size += kept.reduce((n, c) => n + c.count, 0);
  }

  private dropOldest(): void {
    const oldest = this.sealed.shift();
    if (oldest !== undefined) {
      this.size -= oldest.count;
      this.dropped += oldest.count;
      return;
    }
    // Nothing sealed: the fullest open chunk goes (with one huge stream, the only one).
    let victim: string | undefined;
    for (const [k, b] of this.open) if (victim === undefined || b.count > this.open.get(victim)!.count) victim = k;
    if (victim === undefined) return;
    const b = this.open.get(victim)!;
    this.open.delete(victim);
    this.size -= b.count;
    this.dropped += b.count;
  }
}

/** JSON texts of resources, one per resource object (a node has one). */
const resourceKeys = new WeakMap<object, string>();

function resourceKey(resource: object): string {
  let key = resourceKeys.get(resource);
  if (key === undefined) resourceKeys.set(resource, (key = JSON.stringify(resource)));
  return key;
}

/**
 * Writes log lines and spans to the store in chunks, off the invocation path: `log` and `span` only copy into the chunk
 * being filled (never wait, never fail; chunks.ts); a timer hands the chunks to the store. While the store is away the
 * writer holds the newest lines and spans and counts what it dropped; the next flush after it is back writes them.
 */
export class ObservabilityWriter {
  private readonly logs: ChunkQueue<LineChunkBuilder, LineChunk>;
  private readonly spans: ChunkQueue<SpanChunkBuilder, SpanChunk>;
  private readonly counters: WriterCounters = { written: { logs: 0, spans: 0 }, dropped: { logs: 0, spans: 0 } };
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private failures = 0;
  private lastWarnedAt = 0;
  private closed = false;

  constructor(
    private readonly sink: ObservabilitySink,
    private readonly logger: Logger,
    private readonly options: WriterOptions = DEFAULT_WRITER_OPTIONS,
  ) {
    this.logs = new ChunkQueue(options.maxBuffered, options.maxBatch);
    this.spans = new ChunkQueue(options.maxBuffered, options.maxBatch);
    this.schedule(options.flushIntervalMs);
  }

  log(line: LogLineInsert): void {
    if (this.closed) return;
    const window = chunkWindow(line.tsNs);
    this.logs.add(
      line.labelsKey,
      (b) => b.window === window,
      () => new LineChunkBuilder(line.labels, line.labelsKey, window),
      (b) => b.add(line),
    );
  }

  span(span: SpanRecord): void {
    if (this.closed) return;
    const window = chunkWindow(span.startNs);
    this.spans.add(
      resourceKey(span.resource),
      (b) => b.window === window && b.scope === span.scope,
      () => new SpanChunkBuilder(span.resource, span.scope, window),
      (b) => b.add(span),
    );
  }

  /** One of an invocation's routine spans in the store's compact form, from the node's tracer (`resource`, `scope`). */
  compactSpan(c: CompactSpan, resource: Readonly<Record<string, AttributeValue>>, scope: string): void {
    if (this.closed) return;
    const window = chunkWindow(c.startNs);
    this.spans.add(
      resourceKey(resource),
      (b) => b.window === window && b.scope === scope,
      () => new SpanChunkBuilder(resource, scope, window),
      (b) => b.addCompact(c),
    );
  }

  stats(): WriterCounters {
    return {
      written: { ...this.counters.written },
      dropped: { logs: this.logs.dropped, spans: this.spans.dropped },
    };
  }

  /** Writes everything buffered now (tests, and a stopping node). */
  async flush(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
    this.flushing = this.drain().finally(() => (this.flushing = undefined));
    await this.flushing;
  }

  /** Stops the timer after a last flush (at most `timeoutMs`); what cannot be written by then is lost. */
  async close(timeoutMs = 2_000): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    let timeout: NodeJS.Timeout | undefined;
    await Promise.race([
      this.flush().catch(() => undefined),
      new Promise<void>((resolve) => (timeout = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timeout);
    this.closed = true;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      void this.flush()
        .catch(() => undefined)
        .finally(() => {
          if (this.timer === undefined) return;
          // Back off while the store fails: 0.5 s, 1 s, 2 s … up to 10 s.
          const backoff = Math.min(10_000, this.options.flushIntervalMs * 2 ** Math.min(this.failures, 5));
          this.schedule(this.failures === 0 ? this.options.flushIntervalMs : backoff);
        });
    }, delayMs);
    this.timer.unref();
  }

  private async drain(): Promise<void> {
    const logs = this.logs.takeAll();
    const spans = this.spans.takeAll();
    if (logs.length === 0 && spans.length === 0) return;
    try {
      if (logs.length > 0) await this.sink.insertLogs(logs);
    } catch (err) {
      this.logs.putBack(logs);
      this.spans.putBack(spans);
      this.failed(err);
      return;
    }
    this.counters.written.logs += logs.reduce((n, c) => n + c.count, 0);
    try {
      if (spans.length > 0) await this.sink.insertSpans(spans);
    } catch (err) {
      this.spans.putBack(spans);
      this.failed(err);
      return;
    }
    this.counters.written.spans += spans.reduce((n, c) => n + c.count, 0);
    this.failures = 0;
  }

  private failed(err: unknown): void {
    this.failures += 1;
    const now = Date.now();
    // One warning a minute at most: the warning itself is a log line that goes to this buffer.
    if (now - this.lastWarnedAt >= 60_000) {
      this.lastWarnedAt = now;
      this.logger.warn(
        { err, buffered: { logs: this.logs.items, spans: this.spans.items } },
        'observability store unavailable; logs and spans are buffered (the oldest are dropped when it is full)',
      );
    }
  }
}
