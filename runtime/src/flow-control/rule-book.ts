import { RatchetError } from '../errors/errors.ts';
import type { RulePattern } from './pattern.ts';

/**
 * The limiter's rule book (admin tag `rule`): one cluster-wide set of rules, each keyed by its pattern. Every
 * change is a batch applied atomically; the book has a version bumped by every batch that changes something. A new
 * rule takes the book's new version; a change the limiter sees (its limits, `disabled`) adds one to the rule's
 * version; a change of the description alone keeps it (and its last-modified time), as restate-server 1.7.12 does.
 * Preconditions make optimistic concurrency possible.
 */

export interface StoredRule {
  readonly pattern: string;
  /** Concurrent running invocations; undefined = no limit of this kind. */
  readonly concurrency: number | undefined;
  readonly description: string | undefined;
  readonly disabled: boolean;
  readonly version: number;
  readonly lastModified: Date;
}

export type Precondition = { type: 'none' } | { type: 'matches'; version: number } | { type: 'does_not_exist' };

export interface RuleUpsert {
  readonly pattern: RulePattern;
  readonly concurrency: number | undefined;
  readonly description: string | undefined;
  readonly disabled: boolean;
  readonly precondition: Precondition;
}

export interface RuleDelete {
  readonly pattern: RulePattern;
  readonly expectedVersion: number | undefined;
}

/** 409: a precondition of the batch did not hold; nothing of the batch was applied. Worded as restate words it. */
export class RulePreconditionFailedError extends RatchetError {
  readonly code = undefined;
  readonly status = 409;

  constructor(pattern: string, expected: Precondition, actual: number | undefined) {
    const wanted = expected.type === 'matches' ? `Matches(v${expected.version})` : 'DoesNotExist';
    const found = actual === undefined ? 'None' : `Some(v${actual})`;
    super(`rule precondition ${wanted} for pattern ${pattern} failed (actual version: ${found})`);
  }
}

/** 409: the rule book holds as many rules as it may. */
export class RuleBookFullError extends RatchetError {
  readonly code = undefined;
  readonly status = 409;

  constructor(cap: number) {
    super(`the rule book holds ${cap} rules, the most it may: delete rules before adding others`);
  }
}

/** restate's cap, which keeps the book small enough to load on every change. */
export const MAX_RULES = 10_000;

/**
 * Applies a batch of upserts to `current` (pattern → rule): the new rules, or the error to refuse the batch with.
 * Entries apply in order, so a pattern given twice ends as its last entry says. Pure: the store runs it inside its
 * transaction.
 */
export function applyUpserts(
  current: ReadonlyMap<string, StoredRule>,
  batch: readonly RuleUpsert[],
  nextVersion: number,
  now: Date,
): { rules: Map<string, StoredRule>; changed: Set<string> } {
  const rules = new Map(current);
  const changed = new Set<string>();
  for (const u of batch) {
    const key = u.pattern.text;
    const existing = rules.get(key);
    const pre = u.precondition;
    if (pre.type === 'does_not_exist' && existing !== undefined) {
      throw new RulePreconditionFailedError(key, pre, existing.version);
    }
    if (pre.type === 'matches' && existing?.version !== pre.version) {
      throw new RulePreconditionFailedError(key, pre, existing?.version);
    }
    if (existing === undefined) {
      if (rules.size >= MAX_RULES) throw new RuleBookFullError(MAX_RULES);
      rules.set(key, {
        pattern: key,
        concurrency: u.concurrency,
        description: u.description,
        disabled: u.disabled,
        version: nextVersion,
        lastModified: now,
      });
      changed.add(key);
      continue;
    }
    const runtimeChange = existing.concurrency !== u.concurrency || existing.disabled !== u.disabled;
    if (runtimeChange) {
      rules.set(key, {
        ...existing,
        concurrency: u.concurrency,
        description: u.description,
        disabled: u.disabled,
        // Also for a rule created earlier in the same batch (restate-server 1.7.12 does the same).
        version: existing.version + 1,
        lastModified: now,
      });
      changed.add(key);
    } else if (existing.description !== u.description) {
      rules.set(key, { ...existing, description: u.description });
      changed.add(key);
    }
  }
  return { rules, changed };
}

/** Applies a batch of deletes: the patterns removed (in batch order), or the error to refuse the batch with. */
export function applyDeletes(
  current: ReadonlyMap<string, StoredRule>,
  batch: readonly RuleDelete[],
): { rules: Map<string, StoredRule>; removed: string[] } {
  const rules = new Map(current);
  const removed: string[] = [];
  // restate reports a pattern named twice twice, though it removed it once.
  const removedOnce = new Set<string>();
  for (const d of batch) {
    const key = d.pattern.text;
    const existing = rules.get(key);
    if (d.expectedVersion !== undefined && existing?.version !== d.expectedVersion) {
      throw new RulePreconditionFailedError(key, { type: 'matches', version: d.expectedVersion }, existing?.version);
    }
    if (existing !== undefined) {
      rules.delete(key);
      removedOnce.add(key);
      removed.push(key);
    } else if (removedOnce.has(key)) {
      removed.push(key);
    }
  }
  return { rules, removed };
}

/** Where the rule book is kept (PostgreSQL in production); every runtime process sees every change. */
export interface RuleBookStore {
  list(): Promise<StoredRule[]>;
  upsert(batch: readonly RuleUpsert[]): Promise<StoredRule[]>;
  bulkDelete(batch: readonly RuleDelete[]): Promise<string[]>;
  /** The book's version: it moves with every batch that changed something, whichever process applied it. */
  version(): Promise<number>;
}
