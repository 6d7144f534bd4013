import type { Logger } from 'pino';
import type { LimitRule } from './limiter.ts';
import { parseRulePattern } from './pattern.ts';
import type { RuleBookStore, StoredRule } from './rule-book.ts';

/**
 * What a runtime process knows of the rule book: the enabled rules, reloaded whenever the book's version moves
 * (checked every `pollMs`, and at once after a change made through this process). Listeners (the engine's
 * limiters) get the new rules.
 */
export class RuleBookFollower {
  private version = -1;
  private rules: LimitRule[] = [];
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private readonly listeners = new Set<(rules: readonly LimitRule[]) => void>();

  constructor(
    private readonly store: RuleBookStore,
    private readonly logger: Logger,
    private readonly pollMs = 1_000,
  ) {}

  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => {
      this.check().catch((err: unknown) => this.logger.warn({ err }, 'could not read the limiter rule book'));
    }, this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  current(): readonly LimitRule[] {
    return this.rules;
  }

  onChange(listener: (rules: readonly LimitRule[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reloads when the book changed since the last load; concurrent callers share one check. */
  check(): Promise<void> {
    this.checking ??= this.reload().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async reload(): Promise<void> {
    const version = await this.store.version();
    if (version === this.version) return;
    const stored = await this.store.list();
    this.version = version;
    this.rules = activeRules(stored);
    for (const listener of this.listeners) listener(this.rules);
  }
}

/** The rules the limiter applies: enabled ones with a limit. */
export function activeRules(stored: readonly StoredRule[]): LimitRule[] {
  return stored
    .filter((r) => !r.disabled && r.concurrency !== undefined)
    .map((r) => ({ pattern: parseRulePattern(r.pattern), concurrency: r.concurrency }));
}
