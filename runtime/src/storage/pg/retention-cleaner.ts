import type { Logger } from 'pino';
import type { PartitionLeases } from './leases.ts';
import { dropExpiredJournals, purgeExpired } from './tables/retention.ts';

export interface RetentionCleanerOptions {
  intervalMs: number;
  /** Rows per statement: small enough that a batch never holds locks for long. */
  batchSize: number;
}

/**
 * Removes completed invocations whose result retention ended (idempotency / workflow completion retention) and
 * journals whose journal retention ended, in the partitions this process owns. It runs on its own connections,
 * batch by batch, outside the group committer (the invocation path never waits for it), each batch in a transaction
 * fenced by the same lease guard as the committer's: a process that lost a partition removes nothing of it. Reads
 * treat an expired row as gone already, so how soon the cleaner comes does not change what users see.
 */
export class RetentionCleaner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly log: Logger;

  constructor(
    private readonly leases: PartitionLeases,
    logger: Logger,
    private readonly options: RetentionCleanerOptions,
  ) {
    this.log = logger.child({ component: 'retention' });
  }

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.running;
  }

  /** One full pass (every batch until nothing expired is left); returns what it removed. */
  async runOnce(): Promise<{ invocations: number; journals: number }> {
    const partitions = this.leases.owned();
    const fence = new Set(partitions);
    const limit = this.options.batchSize;
    let invocations = 0;
    let journals = 0;
    if (partitions.length === 0) return { invocations, journals };
    for (;;) {
      const n = await this.leases.fenced(fence, (db) => dropExpiredJournals(db, partitions, limit));
      journals += n;
      if (n < this.options.batchSize || this.stopped) break;
    }
    for (;;) {
      const n = await this.leases.fenced(fence, (db) => purgeExpired(db, partitions, limit));
      invocations += n;
      if (n < this.options.batchSize || this.stopped) break;
    }
    return { invocations, journals };
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.runOnce()
        .then((removed) => {
          if (removed.invocations + removed.journals > 0)
            this.log.debug(removed, 'expired results and journals removed');
        })
        .catch((err: unknown) => this.log.warn({ err }, 'retention cleanup failed; it runs again next interval'))
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.options.intervalMs);
    this.timer.unref();
  }
}
