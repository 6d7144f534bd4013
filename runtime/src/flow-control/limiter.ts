import { formatLimitKey, type LimitKey } from './names.ts';
import { rank, type Level, type RulePattern } from './pattern.ts';

/**
 * The concurrency limiter of one partition (all invocations of a scope live in one partition, so its owner alone
 * counts them). Counters form a tree: a scope counts every running invocation of the scope, a level-1 counter those
 * with that first limit-key level, a level-2 counter those with the full two-level key. The rule of each level that
 * matches most specifically sets the counter's limit; a level no rule matches is unlimited. An invocation runs only
 * when every counter on its path has room; one that does not wait in line behind the deepest full counter, and a
 * release wakes at most one waiter per counter it frees (deepest first). Lowering a limit never stops what runs: the
 * counter drains below it before anyone else starts.
 */

export interface LimitRule {
  readonly pattern: RulePattern;
  /** Concurrent running invocations; undefined = unlimited. */
  readonly concurrency: number | undefined;
}

export interface Permit {
  readonly scope: string;
  readonly key: LimitKey | undefined;
}

interface Counter {
  usage: number;
  /** Invocation ids waiting for this counter, oldest first. */
  waiters: string[];
}

interface Waiting extends Permit {
  counter: string;
}

export interface CounterRow {
  readonly scope: string;
  readonly l1: string | undefined;
  readonly l2: string | undefined;
  readonly level: Level;
  readonly usage: number;
  readonly limit: number | undefined;
  readonly pattern: string | undefined;
  readonly waiters: number;
}

function counterKeys(p: Permit): { level: Level; key: string }[] {
  const keys: { level: Level; key: string }[] = [{ level: 'scope', key: p.scope }];
  if (p.key !== undefined) {
    keys.push({ level: 'l1', key: `${p.scope}/${p.key.l1}` });
    if (p.key.l2 !== undefined) keys.push({ level: 'l2', key: `${p.scope}/${p.key.l1}/${p.key.l2}` });
  }
  return keys;
}

export class ConcurrencyLimiter {
  private readonly rules = new Map<string, LimitRule>();
  private readonly counters = new Map<string, Counter>();
  private readonly holders = new Map<string, Permit>();
  private readonly waiting = new Map<string, Waiting>();

  /** Replaces the rule set (enabled rules only); returns the waiters that may now run, their permits taken. */
  setRules(rules: readonly LimitRule[]): string[] {
    this.rules.clear();
    for (const r of rules) this.rules.set(r.pattern.text, r);
    // Rule changes are rare: every waiter is looked at again, oldest line first.
    const woken: string[] = [];
    for (const [id, w] of [...this.waiting]) {
      this.unqueue(id, w);
      if (this.tryAcquire(id, w) === undefined) woken.push(id);
    }
    return woken;
  }

  /** The most specific enabled rule of `level` for this scope and key. */
  ruleFor(level: Level, scope: string, key: LimitKey | undefined): LimitRule | undefined {
    let best: LimitRule | undefined;
    let bestRank = -1;
    for (const r of this.rules.values()) {
      if (r.pattern.level !== level) continue;
      const score = rank(r.pattern, scope, key);
      if (score !== undefined && score > bestRank) {
        best = r;
        bestRank = score;
      }
    }
    return best;
  }

  private limitOf(level: Level, p: Permit): number | undefined {
    if (this.rules.size === 0) return undefined;
    return this.ruleFor(level, p.scope, p.key)?.concurrency;
  }

  private counter(key: string): Counter {
    let c = this.counters.get(key);
    if (c === undefined) {
      c = { usage: 0, waiters: [] };
      this.counters.set(key, c);
    }
    return c;
  }

  /** The deepest counter on the path with no room, or undefined when the invocation may run. */
  blockedAt(p: Permit): string | undefined {
    let blocked: string | undefined;
    for (const { level, key } of counterKeys(p)) {
      const limit = this.limitOf(level, p);
      if (limit !== undefined && (this.counters.get(key)?.usage ?? 0) >= limit) blocked = key;
    }
    return blocked;
  }

  /**
   * Takes a permit for `id` when every counter has room (true), or puts it in line (false). An id holding a permit
   * already keeps it (true); one already waiting stays where it is (false).
   */
  acquire(id: string, p: Permit): boolean {
    if (this.holders.has(id)) return true;
    if (this.waiting.has(id)) return false;
    return this.tryAcquire(id, p) === undefined;
  }

  private tryAcquire(id: string, p: Permit): string | undefined {
    const blocked = this.blockedAt(p);
    if (blocked !== undefined) {
      this.counter(blocked).waiters.push(id);
      this.waiting.set(id, { scope: p.scope, key: p.key, counter: blocked });
      return blocked;
    }
    for (const { key } of counterKeys(p)) this.counter(key).usage++;
    this.holders.set(id, { scope: p.scope, key: p.key });
    return undefined;
  }

  /** Counts `id` as running without looking at the limits (an attempt found running when a partition is taken over). */
  hold(id: string, p: Permit): void {
    if (this.holders.has(id)) return;
    this.forget(id);
    for (const { key } of counterKeys(p)) this.counter(key).usage++;
    this.holders.set(id, { scope: p.scope, key: p.key });
  }

  holds(id: string): boolean {
    return this.holders.has(id);
  }

  isWaiting(id: string): boolean {
    return this.waiting.has(id);
  }

  /**
   * Gives back `id`'s permit (it completed, suspended or paused) or its place in line. Returns the waiters that may run
   * now, their permits taken.
   */
  release(id: string): string[] {
    const held = this.holders.get(id);
    if (held === undefined) {
      this.forget(id);
      return [];
    }
    this.holders.delete(id);
    const path = counterKeys(held);
    for (const { key } of path) {
      const c = this.counters.get(key);
      if (c !== undefined) c.usage = Math.max(0, c.usage - 1);
    }
    const woken: string[] = [];
    // One slot freed per counter: one waiter of each gets to try, the deepest first.
    for (const { key } of path.reverse()) {
      const c = this.counters.get(key);
      const next = c?.waiters.shift();
      if (next === undefined) continue;
      const w = this.waiting.get(next)!;
      this.waiting.delete(next);
      if (this.tryAcquire(next, w) === undefined) woken.push(next);
    }
    for (const { key } of path) this.prune(key);
    return woken;
  }

  /** Forgets a waiter (cancelled, killed, paused, or its partition moved away). */
  forget(id: string): void {
    const w = this.waiting.get(id);
    if (w !== undefined) this.unqueue(id, w);
  }

  private unqueue(id: string, w: Waiting): void {
    this.waiting.delete(id);
    const c = this.counters.get(w.counter);
    if (c === undefined) return;
    const i = c.waiters.indexOf(id);
    if (i !== -1) c.waiters.splice(i, 1);
    this.prune(w.counter);
  }

  private prune(key: string): void {
    const c = this.counters.get(key);
    if (c !== undefined && c.usage === 0 && c.waiters.length === 0) this.counters.delete(key);
  }

  /** Everything about `id`, for dropping a partition: permits and places in line are forgotten without waking anyone. */
  drop(id: string): void {
    const held = this.holders.get(id);
    if (held !== undefined) {
      this.holders.delete(id);
      for (const { key } of counterKeys(held)) {
        const c = this.counters.get(key);
        if (c !== undefined) c.usage = Math.max(0, c.usage - 1);
        this.prune(key);
      }
    }
    this.forget(id);
  }

  /** One row per live counter (sys_user_limits). */
  counterRows(): CounterRow[] {
    const rows: CounterRow[] = [];
    for (const [key, c] of this.counters) {
      const [scope, l1, l2] = key.split('/') as [string, string | undefined, string | undefined];
      const level: Level = l2 !== undefined ? 'l2' : l1 !== undefined ? 'l1' : 'scope';
      const rule = this.ruleFor(level, scope, l1 === undefined ? undefined : { l1, l2 });
      rows.push({
        scope,
        l1,
        l2,
        level,
        usage: c.usage,
        limit: rule?.concurrency,
        pattern: rule?.pattern.text,
        waiters: c.waiters.length,
      });
    }
    return rows;
  }

  /** What an invocation waits for, for introspection: the counter and the rule that holds it back. */
  waitingFor(id: string): { counter: string; pattern: string | undefined; limit: number | undefined } | undefined {
    const w = this.waiting.get(id);
    if (w === undefined) return undefined;
    const parts = w.counter.split('/');
    const level: Level = parts.length === 3 ? 'l2' : parts.length === 2 ? 'l1' : 'scope';
    const rule = this.ruleFor(level, w.scope, w.key);
    return { counter: w.counter, pattern: rule?.pattern.text, limit: rule?.concurrency };
  }

  static describe(p: Permit): string {
    const key = formatLimitKey(p.key);
    return key === undefined ? p.scope : `${p.scope}/${key}`;
  }
}
