import type { OperatorMetrics } from '../telemetry/metrics.ts';
import { keyString, type ObjectKey } from './types.ts';

/*
 * The per-controller work queue, after client-go's workqueue:
 * - a key is either waiting (at most once: adds while waiting coalesce), processing, or both: an add while it is
 *   processing marks it dirty, and it goes back in line when the current run ends. So one key never runs twice at
 *   once, and a change during a run is never lost;
 * - at most `concurrency` keys are processed at once;
 * - a failed run re-adds the key after max(per-key exponential backoff, global token bucket delay): 5 ms doubling to
 *   1000 s per key, reset by a success; 10 qps with a burst of 100 overall (client-go's DefaultControllerRateLimiter);
 * - `addAfter` (requeueAfter) keeps one timer per key, and the earliest deadline wins;
 * - `shutDown` stops taking work and waits, up to a deadline, for the runs in flight.
 */

export interface RateLimitOptions {
  /** Per-key backoff: first retry delay and cap. Defaults 5 ms and 1000 s. */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Global token bucket over retries. Defaults 10 per second, burst 100. */
  readonly qps?: number;
  readonly burst?: number;
}

export interface WorkQueueOptions {
  /** The queue's name in metrics (the controller's name). */
  readonly name: string;
  readonly concurrency: number;
  /** Processes one key; a rejection counts as a failure (retried with backoff). */
  readonly process: (key: ObjectKey) => Promise<ProcessResult>;
  readonly rateLimit?: RateLimitOptions;
  readonly metrics?: OperatorMetrics;
  /** Milliseconds, monotonic enough for durations; default Date.now. */
  readonly now?: () => number;
  /** Called when process() failed, with the retry delay and how long the run took (for logging). */
  readonly onError?: (key: ObjectKey, err: unknown, retryInMs: number, durationMs: number) => void;
}

export interface ProcessResult {
  /** Add the key again after this long. */
  readonly requeueAfterMs?: number;
}

export interface ShutdownResult {
  /** False when the deadline passed with runs still in flight. */
  readonly drained: boolean;
  /** Keys still processing at the deadline. */
  readonly inFlight: string[];
}

/** Global token bucket (golang.org/x/time/rate semantics: tokens may go negative, the delay is the debt). */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly now: () => number,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  /** Takes one token; the delay in milliseconds until it is really available. */
  reserve(): number {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.qps) / 1000);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.qps);
  }
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly keys = new Map<string, ObjectKey>();
  /** Keys that need a run: waiting in `queue`, or processing and to run again afterwards. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  /** When each waiting key was added (for queue_duration). */
  private readonly addedAt = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly bucket: TokenBucket;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => number;
  private shuttingDown = false;
  private readonly idleWaiters = new Set<() => void>();

  constructor(private readonly options: WorkQueueOptions) {
    if (!(options.concurrency >= 1)) throw new Error('work queue concurrency must be at least 1');
    this.now = options.now ?? Date.now;
    this.baseDelayMs = options.rateLimit?.baseDelayMs ?? 5;
    this.maxDelayMs = options.rateLimit?.maxDelayMs ?? 1_000_000;
    this.bucket = new TokenBucket(options.rateLimit?.qps ?? 10, options.rateLimit?.burst ?? 100, this.now);
  }

  /** Keys waiting to run (not counting delayed ones or those processing). */
  get length(): number {
    return this.queue.length;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  /** Adds the key now. Coalesces with a waiting copy; marks a processing key to run once more after. */
  add(key: ObjectKey): void {
    if (this.shuttingDown) return;
    const k = keyString(key);
    this.options.metrics?.workqueueAdds.inc({ name: this.options.name });
    if (this.dirty.has(k)) return;
    this.keys.set(k, key);
    this.dirty.add(k);
    if (this.processing.has(k)) return;
    this.enqueue(k);
  }

  /** Adds the key after `delayMs`; of several pending delays for one key, the earliest wins. */
  addAfter(key: ObjectKey, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const k = keyString(key);
    const at = this.now() + delayMs;
    const pending = this.delayed.get(k);
    if (pending !== undefined && pending.at <= at) return;
    if (pending !== undefined) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(k);
      this.add(key);
    }, delayMs);
    this.delayed.set(k, { at, timer });
  }

  /** Re-adds a failed key after max(its backoff, the global bucket's delay); returns that delay. */
  addRateLimited(key: ObjectKey): number {
    const k = keyString(key);
    const n = this.failures.get(k) ?? 0;
    this.failures.set(k, n + 1);
    const backoff = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n);
    const delay = Math.max(backoff, this.bucket.reserve());
    this.options.metrics?.workqueueRetries.inc({ name: this.options.name });
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets the key's backoff (after a success). */
  forget(key: ObjectKey): void {
    this.failures.delete(keyString(key));
  }

  /** Failures since the key's last success. */
  retries(key: ObjectKey): number {
    return this.failures.get(keyString(key)) ?? 0;
  }

  /**
   * Stops taking new work (adds are dropped, delayed adds cancelled) and waits until no run is in flight or the
   * deadline passes. Runs cannot be interrupted: those still going at the deadline are reported, not awaited.
   */
  async shutDown(deadlineMs: number): Promise<ShutdownResult> {
    this.shuttingDown = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.dirty.clear();
    this.addedAt.clear();
    this.updateDepth();
    if (this.processing.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.idleWaiters.add(resolve)),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, deadlineMs);
        }),
      ]);
      clearTimeout(timer);
    }
    return { drained: this.processing.size === 0, inFlight: [...this.processing] };
  }

  private enqueue(k: string): void {
    this.queue.push(k);
    this.addedAt.set(k, this.now());
    this.updateDepth();
    this.pump();
  }

  private pump(): void {
    while (!this.shuttingDown && this.processing.size < this.options.concurrency && this.queue.length > 0) {
      const k = this.queue.shift();
      if (k === undefined) break;
      const key = this.keys.get(k);
      if (key === undefined) continue;
      this.dirty.delete(k);
      this.processing.add(k);
      const added = this.addedAt.get(k);
      this.addedAt.delete(k);
      if (added !== undefined) {
        this.options.metrics?.workqueueQueueDuration.observe({ name: this.options.name }, (this.now() - added) / 1000);
      }
      void this.run(k, key);
    }
    this.updateDepth();
  }

  private async run(k: string, key: ObjectKey): Promise<void> {
    const started = this.now();
    let result: ProcessResult | undefined;
    let error: unknown;
    let failed = false;
    try {
      result = await this.options.process(key);
    } catch (err) {
      failed = true;
      error = err;
    }
    const durationMs = this.now() - started;
    this.options.metrics?.workqueueWorkDuration.observe({ name: this.options.name }, durationMs / 1000);
    this.processing.delete(k);
    if (!this.shuttingDown) {
      if (failed) {
        const delay = this.addRateLimited(key);
        this.options.onError?.(key, error, delay, durationMs);
      } else {
        this.forget(key);
        if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
      }
      // Changed while it ran: back in line now.
      if (this.dirty.has(k)) this.enqueue(k);
    }
    if (!this.dirty.has(k) && !this.delayed.has(k) && !this.processing.has(k)) this.keys.delete(k);
    if (this.processing.size === 0) {
      for (const resolve of this.idleWaiters) resolve();
      this.idleWaiters.clear();
    }
    this.pump();
  }

  private updateDepth(): void {
    this.options.metrics?.workqueueDepth.set({ name: this.options.name }, this.queue.length);
  }
}
