import { InvocationCtx } from './invocation.ts';
import { type PartitionProcessor, lockKey } from './processor.ts';

/**
 * Picks up partitions this process has just taken (or taken back after a failure): everything in flight in them,
 * exactly as after a restart: running attempts restart from their journal, timers, inboxes, key locks, queued
 * state replacements and the outbox are re-armed. Reads everything before changing memory, so a failed read leaves
 * the partitions unserved (the caller retries). The caller holds the leases and never recovers a served partition.
 */
export async function recover(
  p: PartitionProcessor,
  partitions: number[],
): Promise<{ invocations: number; timers: number }> {
  const wanted = partitions.filter((n) => !p.served.has(n));
  if (wanted.length === 0 || p.stopped) return { invocations: 0, timers: 0 };
  // Held at these epochs now; a partition given up or re-taken while it is read is not installed from this read.
  const epochs = wanted.map((n) => p.deps.storage.epochOf(n));
  const ids = wanted;
  const locks = await p.deps.storage.locks.list(ids);
  const rows = await p.deps.storage.invocations.listActive(ids);
  const timers = await p.deps.storage.timers.list(ids);
  const mutations = await p.deps.storage.stateMutations.list(ids);
  const outbox = await p.deps.storage.outbox.list(ids);
  const paused = p.options.flowControl === true ? await p.deps.storage.vqueues.listPaused(ids) : [];
  if (p.stopped) return { invocations: 0, timers: 0 };
  if (ids.some((n, i) => epochs[i] === undefined || p.deps.storage.epochOf(n) !== epochs[i])) {
    throw new Error(`partitions ${ids.join(', ')} were given up or re-taken while they were being recovered`);
  }
  for (const n of ids) p.served.add(n);
  for (const l of locks) p.keys.locks.set(lockKey(l.service, l.key), l.invocationId);
  const timed = new Set(timers.filter((t) => t.kind !== 'sleep').map((t) => t.invocationId));
  const inboxed: InvocationCtx[] = [];
  const recovered: InvocationCtx[] = [];
  for (const row of rows) {
    // Admitted meanwhile by a call from a partition served here (it is newer than what was read): keep it.
    if (p.active.has(row.id)) continue;
    const ctx = new InvocationCtx(row);
    p.active.set(ctx.id, ctx);
    recovered.push(ctx);
    if (ctx.status === 'inboxed') inboxed.push(ctx);
  }
  // Inboxed invocations and queued state replacements share the inbox sequence: rebuild each key's queue in it.
  const queued: { seq: bigint; lk: string; entry: string }[] = inboxed.map((ctx) => ({
    seq: ctx.phase.status === 'inboxed' ? (ctx.phase.inboxSeq ?? 0n) : 0n,
    lk: lockKey(ctx.serviceName, ctx.serviceKey!),
    entry: ctx.id,
  }));
  for (const m of mutations) {
    const memId = p.keys.remember(m);
    queued.push({ seq: m.inboxSeq, lk: lockKey(m.service, m.key), entry: memId });
  }
  queued.sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
  const touched = new Set<string>();
  for (const q of queued) {
    p.keys.queue(q.lk).push(q.entry);
    touched.add(q.lk);
  }
  // A key whose waiters have no lock holder (nothing would hand it over): the oldest takes it now.
  for (const lk of touched) p.roles.resumeInbox(lk);
  for (const t of timers) p.timers.schedule(t, t.fireAt.getTime());
  for (const n of ids)
    p.flow.loadPaused(
      n,
      paused.filter((q) => q.partitionId === n).map((q) => q.vqueueId),
    );
  // Flow control: those that were running keep their permits; the others queue for theirs, oldest first.
  const started = new Set(rows.filter((r) => r.scope !== null && r.lastStartAt !== null).map((r) => r.id));
  for (const ctx of recovered) if (ctx.status === 'invoked' && started.has(ctx.id)) p.flow.hold(ctx);
  const created = new Map(rows.map((r) => [r.id, r.createdAt.getTime()]));
  const order = (c: InvocationCtx): number => (started.has(c.id) ? 0 : (created.get(c.id) ?? 0));
  recovered.sort((a, b) => order(a) - order(b));
  for (const ctx of recovered) {
    if (ctx.status === 'invoked' && !timed.has(ctx.id)) void p.roles.startAttempt(ctx);
    else if (ctx.status === 'suspended') void p.roles.recheckSuspended(ctx);
  }
  for (const row of outbox) void p.roles.deliver(row);
  return { invocations: rows.length, timers: timers.length };
}

/**
 * Forgets everything in memory about `partitions` (given up, lost, or suspect after a failed write): attempts are
 * aborted, timers disarmed, locks and inboxes forgotten. Their rows are the truth and whoever serves the partitions
 * next recovers them. Requests waiting here for results of these partitions keep waiting, through PostgreSQL.
 */
export function drop(p: PartitionProcessor, partitions: Iterable<number>): void {
  const set = new Set<number>();
  for (const n of partitions) if (p.served.delete(n)) set.add(n);
  if (set.size === 0) return;
  p.generation += 1;
  for (const [id, ctx] of p.active) {
    if (!set.has(ctx.partitionId)) continue;
    // Dead for every callback still holding it: commits' follow-ups check `poisoned`.
    ctx.poisoned = true;
    ctx.attempt?.abort();
    ctx.attemptEnded();
    p.active.delete(id);
  }
  p.timers.removeWhere((t) => set.has(t.partitionId));
  for (const n of set) p.flow.dropPartition(n);
  for (const lk of p.keys.locks.keys()) if (set.has(p.lockPartition(lk))) p.keys.locks.delete(lk);
  for (const lk of p.keys.inboxes.keys()) if (set.has(p.lockPartition(lk))) p.keys.inboxes.delete(lk);
  for (const [memId, m] of p.keys.mutations) if (set.has(m.partitionId)) p.keys.mutations.delete(memId);
  for (const [seq, seen] of p.outbox.seen) if (set.has(seen.partition)) p.outbox.seen.delete(seq);
  p.stateCache.clear();
  p.roles.pollRemoteResults();
}
