import type { StateMutationRow } from '../storage/rows.ts';

/**
 * The exclusive handlers' queue of each virtual-object or workflow key, in memory: which invocation holds the key's
 * lock, the FIFO inbox of invocations (and queued state replacements) waiting behind it. Entries are invocation ids,
 * or `mutation:<n>` for a queued state replacement (see `mutations`). Rows in PostgreSQL are the truth; this is the
 * owner's copy, rebuilt by recovery.
 */
export class KeyQueue {
  /** Lock holder per lock key (`service\0key`). */
  readonly locks = new Map<string, string>();
  readonly inboxes = new Map<string, string[]>();
  /** Queued state replacements by their in-memory inbox entry (`mutation:<n>`). */
  readonly mutations = new Map<string, StateMutationRow>();
  private mutationSeq = 0;

  /** The key's inbox, created when missing. */
  queue(lk: string): string[] {
    let q = this.inboxes.get(lk);
    if (q === undefined) this.inboxes.set(lk, (q = []));
    return q;
  }

  /** Whether an exclusive invocation admitted now must wait: the lock is held, or others wait already. */
  busy(lk: string): boolean {
    return this.locks.has(lk) || this.inboxes.has(lk);
  }

  /** Takes an entry out of its key's inbox wherever it is (the one place that removes an inbox entry). */
  remove(lk: string, entry: string): void {
    const q = this.inboxes.get(lk);
    if (q === undefined) return;
    const i = q.indexOf(entry);
    if (i >= 0) q.splice(i, 1);
    if (q.length === 0) this.inboxes.delete(lk);
  }

  /** Queues a state replacement at the end of its key's inbox; returns its inbox entry. */
  queueMutation(lk: string, m: StateMutationRow): string {
    const memId = this.remember(m);
    this.queue(lk).push(memId);
    return memId;
  }

  /** Remembers a queued state replacement without queueing it (recovery rebuilds the order itself). */
  remember(m: StateMutationRow): string {
    const memId = `mutation:${++this.mutationSeq}`;
    this.mutations.set(memId, m);
    return memId;
  }

  /** Forgets a queued state replacement that was not stored. */
  forgetMutation(lk: string, memId: string): void {
    this.mutations.delete(memId);
    this.remove(lk, memId);
  }

  /** Forgets every key whose partition is in `partitions`. */
  drop(partitions: Set<number>, partitionOfLock: (lk: string) => number): void {
    for (const lk of this.locks.keys()) if (partitions.has(partitionOfLock(lk))) this.locks.delete(lk);
    for (const lk of this.inboxes.keys()) if (partitions.has(partitionOfLock(lk))) this.inboxes.delete(lk);
    for (const [memId, m] of this.mutations) if (partitions.has(m.partitionId)) this.mutations.delete(memId);
  }
}
