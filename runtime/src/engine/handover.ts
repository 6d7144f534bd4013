import { type InvocationCtx } from './invocation.ts';
import { type PartitionProcessor } from './processor.ts';
import { invocationWrite, lockWrite, stateMutationWrite, newWriteBatch, type WriteBatch } from '../storage/api.ts';
import type { InvocationUpdate, StateMutationRow } from '../storage/rows.ts';
import { partitionKeyForKey } from '../ids/partition-key.ts';

/** The key's lock is free but invocations wait for it (a pending head held it back): the oldest takes it now. */
export function resumeInbox(p: PartitionProcessor, lk: string): void {
  if (p.keys.locks.has(lk) || !p.keys.inboxes.has(lk)) return;
  const op = newWriteBatch();
  const next = handOver(p, lk, op, new Date());
  if (next !== undefined) {
    op.partitions.push(next.partitionId);
    void p.commit(next, op, () => void p.roles.startAttempt(next));
  } else if (op.writes.length > 0) {
    // Only queued state replacements were applied.
    void p.submit(op).catch((err: unknown) => {
      p.log.error({ err }, 'queued state replacement could not be applied');
    });
  }
}

/**
 * The key's lock is free: the oldest inboxed invocation takes it (statements into `op`). Returns it, to be started
 * once `op` committed. `from` is the holder that released it in `op` (its lock row is handed over, or deleted
 * when nobody waits); without it the lock row does not exist yet.
 */
export function handOver(
  p: PartitionProcessor,
  lk: string,
  op: WriteBatch,
  now: Date,
  from?: InvocationCtx,
): InvocationCtx | undefined {
  const queue = p.keys.inboxes.get(lk);
  let next: InvocationCtx | undefined;
  while (next === undefined && queue !== undefined && queue.length > 0) {
    // The oldest waiter may be a duplicate of an invocation that exists already (its insert's outcome is not known
    // yet): handing it the lock could mark a completed invocation running again. The lock stays free until its
    // insert settles (admitConfirmed / undoAdmit hand it over then); later arrivals queue behind it.
    if (p.active.get(queue[0]!)?.insertPending === true) break;
    const nextId = queue.shift()!;
    const mutation = p.keys.mutations.get(nextId);
    if (mutation !== undefined) {
      // A state replacement whose turn came: applied in the same write, after the previous holder's changes.
      p.keys.mutations.delete(nextId);
      applyMutation(p, op, mutation);
      op.writes.push(stateMutationWrite.delete(mutation.id));
      dropCachedStateWith(p, op, lk);
      continue;
    }
    next = p.active.get(nextId);
  }
  if (queue !== undefined && queue.length === 0) p.keys.inboxes.delete(lk);
  if (next === undefined) {
    if (from !== undefined) op.writes.push(lockWrite.release(from.serviceName, from.serviceKey!, from.id));
    return undefined;
  }
  p.keys.locks.set(lk, next.id);
  next.toInvoked();
  // It starts as soon as `op` commits: its pin and attempt start go into this update, as for an invocation
  // admitted runnable (startAttempt then writes no start update for this attempt).
  const started: InvocationUpdate = {};
  if (next.deploymentId === null) {
    const pin = p.roles.choosePin(next.serviceName);
    if (!('failure' in pin)) {
      next.deploymentId = pin.deployment.id;
      next.protocolVersion = pin.protocolVersion;
      started.deploymentId = pin.deployment.id;
      started.protocolVersion = pin.protocolVersion;
    }
  }
  if (next.deploymentId !== null && next.protocolVersion !== null) {
    started.lastStartAt = now;
    started.runningAt = now;
    started.lastAttemptDeploymentId = next.deploymentId;
    next.startRecorded = true;
  }
  op.writes.push(
    from === undefined
      ? lockWrite.take(next.serviceName, next.serviceKey!, next.id)
      : lockWrite.transfer(next.serviceName, next.serviceKey!, from.id, next.id),
    invocationWrite.update(next.id, { status: 'invoked', inboxSeq: null, ...started }, now),
  );
  return next;
}

/** `op` replaces a key's state wholesale: the cached copy is dropped now and again once `op` settles. */
export function dropCachedStateWith(p: PartitionProcessor, op: WriteBatch, lk: string): void {
  p.stateCache.invalidate(lk);
  p.onCommitted(op, () => p.stateCache.invalidate(lk));
  p.onFailed(op, () => p.stateCache.invalidate(lk));
}

/** Adds a queued state replacement to `op`; one whose version no longer matched is reported once `op` committed. */
export function applyMutation(p: PartitionProcessor, op: WriteBatch, m: StateMutationRow): void {
  const apply = stateMutationWrite.apply(m.service, m.key, partitionKeyForKey(m.key), m.version, m.entries);
  op.writes.push(apply);
  p.onCommitted(op, () => {
    if (apply.applied === false) {
      p.log.warn(
        { service: m.service, key: m.key, version: m.version },
        'state replacement not applied: the state changed since the version it was based on',
      );
    }
  });
}
