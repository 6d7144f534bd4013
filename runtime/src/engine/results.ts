import { InvocationId } from '../ids/invocation-id.ts';
import type { CompletedInvocation, Outcome } from './types.ts';
import { type PartitionProcessor, type Waiter } from './processor.ts';
import type { InvocationRow } from '../storage/rows.ts';

/** Resolves when the invocation completes (at once if it already has). */
export async function awaitCompletion(p: PartitionProcessor, id: string): Promise<CompletedInvocation | undefined> {
  let resolve!: Waiter;
  const done = new Promise<CompletedInvocation | undefined>((r) => (resolve = r));
  let set = p.waiters.get(id);
  if (set === undefined) p.waiters.set(id, (set = new Set()));
  set.add(resolve);
  try {
    if (!p.active.has(id)) {
      const row = await p.deps.storage.invocations.get(id);
      if (row === undefined || isExpired(row)) return undefined;
      if (row.status === 'completed') return completedFromRow(row);
      // Not served here: its owner completes it elsewhere, and the result is read from PostgreSQL.
      if (!p.served.has(row.partitionId)) pollRemoteResults(p);
    }
    return await done;
  } finally {
    set.delete(resolve);
    if (set.size === 0 && p.waiters.get(id) === set) p.waiters.delete(id);
  }
}

/** How many requests are waiting in `awaitCompletion` for `id` on this replica. */
export function completionWaiters(p: PartitionProcessor, id: string): number {
  return p.waiters.get(id)?.size ?? 0;
}

/**
 * Results awaited here of invocations whose partition this process does not serve (another node completes them, or
 * the partition moved away while the request waited) are read from PostgreSQL, every 200 ms while there are any.
 */
export function pollRemoteResults(p: PartitionProcessor): void {
  if (p.remotePoll !== undefined || p.stopped) return;
  const remote = (): string[] => {
    const ids: string[] = [];
    for (const id of p.waiters.keys()) {
      const parsed = InvocationId.tryParse(id);
      if (parsed !== undefined && !p.served.has(p.partitionOf(InvocationId.partitionKey(parsed)))) ids.push(id);
    }
    return ids;
  };
  const tick = async (): Promise<void> => {
    const ids = remote();
    if (ids.length === 0) {
      p.remotePoll = undefined;
      return;
    }
    try {
      const found = new Map<string, InvocationRow>();
      for (const row of await p.deps.storage.invocations.getMany(ids)) found.set(row.id, row);
      for (const id of ids) {
        const row = found.get(id);
        const done = row === undefined || isExpired(row) ? undefined : row.status === 'completed' ? row : null;
        if (done === null) continue;
        const set = p.waiters.get(id);
        if (set !== undefined) for (const w of set) w(done === undefined ? undefined : completedFromRow(done));
      }
    } catch (err) {
      p.log.debug({ err }, 'could not read awaited results; trying again');
    }
    if (p.stopped) return;
    p.remotePoll = setTimeout(() => void tick(), REMOTE_POLL_MS);
  };
  p.remotePoll = setTimeout(() => void tick(), REMOTE_POLL_MS);
}

export async function getCompleted(
  p: PartitionProcessor,
  id: string,
): Promise<{ row: InvocationRow; done?: CompletedInvocation } | undefined> {
  const row = await p.deps.storage.invocations.get(id);
  if (row === undefined || isExpired(row)) return undefined;
  return row.status === 'completed' ? { row, done: completedFromRow(row) } : { row };
}

/** A completed invocation whose retention ended is gone, even before the cleaner removed its row. */
export function isExpired(row: InvocationRow): boolean {
  return row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
}

export function completedFromRow(row: InvocationRow): CompletedInvocation {
  const outcome: Outcome =
    row.resultKind === 'success'
      ? { kind: 'success', value: row.output ?? Buffer.alloc(0) }
      : {
          kind: 'failure',
          failure: {
            code: row.failureCode ?? 500,
            message: row.failureMessage ?? '',
            ...(row.failureMetadata === null ? {} : { metadata: row.failureMetadata }),
          },
        };
  return {
    id: row.id,
    outcome,
    completedAt: row.completedAt ?? row.createdAt,
    completionRetentionMs: row.completionRetentionMs,
  };
}

/** How often results awaited here of invocations served elsewhere are read from PostgreSQL. */
const REMOTE_POLL_MS = 200;
