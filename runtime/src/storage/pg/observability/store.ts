import type { Logger } from 'pino';
import type { LineChunk, SpanChunk } from '../../../observability/chunks.ts';
import type { ObservabilitySink } from '../../../observability/writer.ts';
import { createPool, type Pool } from '../pool.ts';
import { PgLogStore } from './log-store.ts';
import { Partitions } from './partitions.ts';
import { PgSpanStore } from './span-store.ts';

export interface ObservabilityStoreOptions {
  readonly databaseUrl: string;
  /** Lines and spans older than this are dropped (whole partitions). */
  readonly retentionMs: number;
  /** Each of the two tables (lines, spans) is kept under this many bytes on disk, give or take a partition. */
  readonly maxBytes: number;
  /** A query of the API on 3100 that runs longer is cancelled (and answered with an error). */
  readonly queryTimeoutMs: number;
  /** How often retention and the size bound are enforced. */
  readonly retentionIntervalMs: number;
}

/**
 * The observability store of a node: writes through one small pool, queries through another with a statement
 * timeout, so that neither the writer nor a heavy query ever takes a connection of the invocation path.
 */
export class PgObservabilityStore implements ObservabilitySink {
  readonly logs: PgLogStore;
  readonly spans: PgSpanStore;
  private readonly writePool: Pool;
  private readonly queryPool: Pool;
  private readonly partitions: Partitions;
  private readonly writeLogs: PgLogStore;
  private readonly writeSpans: PgSpanStore;
  private timer: NodeJS.Timeout | undefined;
  private enforcing: Promise<void> | undefined;

  constructor(
    private readonly options: ObservabilityStoreOptions,
    private readonly logger: Logger,
  ) {
    // Lines and spans are not acknowledged to anyone: their commits need not wait for the WAL to reach the disk, nor
    // make the invocations' commits wait behind them as long.
    this.writePool = createPool({
      url: options.databaseUrl,
      max: 2,
      applicationName: 'ratchet-observability-write',
      asynchronousCommit: true,
    });
    this.queryPool = createPool({
      url: options.databaseUrl,
      max: 4,
      applicationName: 'ratchet-observability-query',
      statementTimeoutMs: options.queryTimeoutMs,
    });
    this.partitions = new Partitions(this.writePool);
    this.writeLogs = new PgLogStore(this.writePool, this.partitions);
    this.writeSpans = new PgSpanStore(this.writePool, this.partitions);
    this.logs = new PgLogStore(this.queryPool, this.partitions);
    this.spans = new PgSpanStore(this.queryPool, this.partitions);
  }

  insertLogs(chunks: readonly LineChunk[]): Promise<void> {
    return this.writeLogs.insert(chunks);
  }

  insertSpans(chunks: readonly SpanChunk[]): Promise<void> {
    return this.writeSpans.insert(chunks);
  }

  /** Enforces retention and the size bound now, then every `retentionIntervalMs`. */
  startRetention(): void {
    const tick = (): void => {
      this.enforcing = this.enforce()
        .then(() => undefined)
        .catch((err: unknown) => this.logger.warn({ err }, 'observability retention failed; retrying later'))
        .finally(() => (this.enforcing = undefined));
    };
    tick();
    this.timer = setInterval(tick, this.options.retentionIntervalMs);
    this.timer.unref();
  }

  /** Drops what is past the retention or over the size bound; returns the partitions dropped. */
  async enforce(nowNs: bigint = BigInt(Date.now()) * 1_000_000n): Promise<string[]> {
    const cutoff = nowNs - BigInt(this.options.retentionMs) * 1_000_000n;
    const dropped = [
      ...(await this.partitions.enforce('log_chunk', cutoff, this.options.maxBytes)),
      ...(await this.partitions.enforce('span_chunk', cutoff, this.options.maxBytes)),
    ];
    await this.writeLogs.dropStreamsBefore(cutoff);
    if (dropped.length > 0) this.logger.info({ partitions: dropped }, 'observability partitions dropped');
    return dropped;
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.enforcing;
    await Promise.all([this.writePool.end(), this.queryPool.end()]);
  }
}
