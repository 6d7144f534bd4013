import type { InvocationCtx } from '../engine/invocation.ts';
import { ConcurrencyLimiter, type LimitRule, type Permit } from './limiter.ts';
import { parseLimitKey } from './names.ts';

/**
 * Where flow control meets the engine: every attempt start of an invocation with a virtual queue passes here. It may
 * start when its queue is not paused and, for a scoped one, when the limiter gives it a permit; otherwise it waits
 * (in memory: the row stays as it is) until a permit is released, the rules change or its queue is resumed, and the
 * gate starts it then. A permit is held from the start of its first attempt until it suspends, pauses or completes
 * (retries keep it). One gate per partition processor; each partition has its own limiter and paused queues, because
 * all invocations of a scope (and of a queue) live in one partition.
 */
export class FlowGate {
  private readonly limiters = new Map<number, ConcurrencyLimiter>();
  /** Per partition: paused queues, and the invocations waiting for each to be resumed. */
  private readonly paused = new Map<number, Map<string, Set<string>>>();
  private rules: readonly LimitRule[] = [];

  constructor(
    /** Starts an invocation the gate let through later (it looks it up by id; gone ones are skipped). */
    private readonly start: (id: string) => void,
  ) {}

  /** True when `ctx` may start now; false when it was put in line (the gate starts it later). */
  mayStart(ctx: InvocationCtx): boolean {
    const queue = ctx.vqueueId;
    if (queue === null) return true;
    const paused = this.paused.get(ctx.partitionId)?.get(queue);
    if (paused !== undefined) {
      paused.add(ctx.id);
      ctx.onStopRunning ??= (c) => paused.delete(c.id);
      return false;
    }
    const permit = permitOf(ctx);
    if (permit === undefined) return true;
    const limiter = this.limiter(ctx.partitionId);
    const ok = limiter.acquire(ctx.id, permit);
    ctx.onStopRunning ??= (c) => this.releaseOf(c.partitionId, c.id);
    return ok;
  }

  /** Whether `ctx` waits for a permit or for its queue to be resumed. */
  isWaiting(ctx: InvocationCtx): boolean {
    if (ctx.vqueueId !== null && this.paused.get(ctx.partitionId)?.get(ctx.vqueueId)?.has(ctx.id) === true) return true;
    return this.limiters.get(ctx.partitionId)?.isWaiting(ctx.id) ?? false;
  }

  /** Counts `ctx` as running without asking (found running when its partition was taken over). */
  hold(ctx: InvocationCtx): void {
    const permit = permitOf(ctx);
    if (permit === undefined) return;
    this.limiter(ctx.partitionId).hold(ctx.id, permit);
    ctx.onStopRunning ??= (c) => this.releaseOf(c.partitionId, c.id);
  }

  private releaseOf(partition: number, id: string): void {
    const limiter = this.limiters.get(partition);
    if (limiter === undefined) return;
    for (const next of limiter.release(id)) this.start(next);
  }

  private limiter(partition: number): ConcurrencyLimiter {
    let l = this.limiters.get(partition);
    if (l === undefined) {
      l = new ConcurrencyLimiter();
      l.setRules(this.rules);
      this.limiters.set(partition, l);
    }
    return l;
  }

  setRules(rules: readonly LimitRule[]): void {
    this.rules = rules;
    for (const limiter of this.limiters.values()) for (const id of limiter.setRules(rules)) this.start(id);
  }

  /** The queues paused in a partition just taken over (before its invocations are started). */
  loadPaused(partition: number, queues: readonly string[]): void {
    const map = new Map<string, Set<string>>();
    for (const q of queues) map.set(q, new Set());
    this.paused.set(partition, map);
  }

  pause(partition: number, queue: string): void {
    let map = this.paused.get(partition);
    if (map === undefined) {
      map = new Map();
      this.paused.set(partition, map);
    }
    if (!map.has(queue)) map.set(queue, new Set());
  }

  /** Resumes a queue: what waited for it goes through the gate again (the limiter may still hold it back). */
  resume(partition: number, queue: string): void {
    const waiting = this.paused.get(partition)?.get(queue);
    if (waiting === undefined) return;
    this.paused.get(partition)!.delete(queue);
    for (const id of waiting) this.start(id);
  }

  isPaused(partition: number, queue: string): boolean {
    return this.paused.get(partition)?.has(queue) ?? false;
  }

  /** A partition moved away: what the gate knew of it is dropped (its new owner rebuilds it from the rows). */
  dropPartition(partition: number): void {
    this.limiters.delete(partition);
    this.paused.delete(partition);
  }

  counters(partition: number): ReturnType<ConcurrencyLimiter['counterRows']> {
    return this.limiters.get(partition)?.counterRows() ?? [];
  }
}

function permitOf(ctx: InvocationCtx): Permit | undefined {
  if (ctx.scope === null) return undefined;
  return { scope: ctx.scope, key: ctx.limitKey === null ? undefined : parseLimitKey(ctx.limitKey) };
}
