import type { Logger } from 'pino';
import type { LogLineInsert, SpanRecord } from './model.ts';
import { encodeSpan, type EncodedSpan } from './span-json.ts';

/** Where the writer puts batches: PostgreSQL in a node (storage/pg/observability), anything in a test. */
export interface ObservabilitySink {
  insertLogs(lines: readonly LogLineInsert[]): Promise<void>;
  insertSpans(spans: readonly EncodedSpan[]): Promise<void>;
}

export interface WriterOptions {
  /** Lines (and, separately, spans) held at most while the store is slow or away; beyond, the oldest go. */
  readonly maxBuffered: number;
  /** At most this many of each per insert. */
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

/** A buffer that keeps the newest `max` items: pushing onto a full one drops the oldest. */
class Bounded<T> {
  private items: T[] = [];
  dropped = 0;

  constructor(private readonly max: number) {}

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    if (this.items.length >= this.max) {
      // Drop a tenth at once: dropping one by one from the front of an array is quadratic.
      const n = Math.max(1, Math.floor(this.max / 10));
      this.items.splice(0, n);
      this.dropped += n;
    }
    this.items.push(item);
  }

  take(n: number): T[] {
    return this.items.splice(0, n);
  }

  /** Puts back what could not be written, in front, as far as there is room (what is newer wins). */
  putBack(batch: T[]): void {
    const room = this.max - this.items.length;
    if (room <= 0) {
      this.dropped += batch.length;
      return;
    }
    const kept = batch.length <= room ? batch : batch.slice(batch.length - room);
    this.dropped += batch.length - kept.length;
    this.items = kept.concat(this.items);
  }
}

/**
 * Writes log lines and spans to the store in batches, off the invocation path: `log` and `span` only push onto a
 * bounded buffer (never wait, never fail); a timer drains it. While the store is away the buffer holds the newest
 * lines and spans and counts what it dropped; the next flush after it is back writes them.
 */
export class ObservabilityWriter {
  private readonly logs: Bounded<LogLineInsert>;
  private readonly spans: Bounded<EncodedSpan>;
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
    this.logs = new Bounded(options.maxBuffered);
    this.spans = new Bounded(options.maxBuffered);
    this.schedule(options.flushIntervalMs);
  }

  log(line: LogLineInsert): void {
    if (!this.closed) this.logs.push(line);
  }

  span(span: SpanRecord): void {
    if (!this.closed) this.spans.push(encodeSpan(span));
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
    while (this.logs.size > 0 || this.spans.size > 0) {
      const logs = this.logs.take(this.options.maxBatch);
      const spans = this.spans.take(this.options.maxBatch);
      try {
        if (logs.length > 0) await this.sink.insertLogs(logs);
      } catch (err) {
        this.logs.putBack(logs);
        this.spans.putBack(spans);
        this.failed(err);
        return;
      }
      this.counters.written.logs += logs.length;
      try {
        if (spans.length > 0) await this.sink.insertSpans(spans);
      } catch (err) {
        this.spans.putBack(spans);
        this.failed(err);
        return;
      }
      this.counters.written.spans += spans.length;
      this.failures = 0;
    }
  }

  private failed(err: unknown): void {
    this.failures += 1;
    const now = Date.now();
    // One warning a minute at most: the warning itself is a log line that goes to this buffer.
    if (now - this.lastWarnedAt >= 60_000) {
      this.lastWarnedAt = now;
      this.logger.warn(
        { err, buffered: { logs: this.logs.size, spans: this.spans.size } },
        'observability store unavailable; logs and spans are buffered (the oldest are dropped when it is full)',
      );
    }
  }
}
