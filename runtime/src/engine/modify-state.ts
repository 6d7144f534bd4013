import { randomUUID } from 'node:crypto';
import { type PartitionProcessor, lockKey, rerouteIfFenced } from './processor.ts';
import { stateMutationWrite, newWriteBatch } from '../storage/api.ts';
import type { StateMutationRow } from '../storage/rows.ts';
import { partitionFor, partitionKeyForKey } from '../ids/partition-key.ts';

/**
 * Replaces the whole state of a virtual object or workflow key (`POST /services/{s}/state`). It runs in the key's
 * order: at once when the key is idle, otherwise after the exclusive invocations queued before it. With `version`,
 * it applies only if the state it finds still has that version. Resolves once it is durable (queued or applied).
 */
export async function modifyState(
  p: PartitionProcessor,
  service: string,
  key: string,
  version: string | undefined,
  entries: { key: Buffer; value: Buffer }[],
): Promise<void> {
  const partitionId = partitionFor(partitionKeyForKey(key), p.options.partitions);
  p.requireServed(partitionId);
  const lk = lockKey(service, key);
  const m: StateMutationRow = {
    id: randomUUID(),
    partitionId,
    service,
    key,
    version: version ?? null,
    entries,
    inboxSeq: 0n,
  };
  if (!p.keys.locks.has(lk) && (p.keys.inboxes.get(lk)?.length ?? 0) === 0) {
    const op = newWriteBatch(partitionId);
    p.roles.applyMutation(op, m);
    p.roles.dropCachedStateWith(op, lk);
    await p.submit(op).catch((err: unknown) => {
      throw rerouteIfFenced(err, partitionId);
    });
    return;
  }
  // Queued now, in memory, so that whatever is admitted after this call comes after it.
  const memId = p.keys.queueMutation(lk, m);
  try {
    await p.submitWrites(partitionId, [stateMutationWrite.insert(m)]);
  } catch (err) {
    p.keys.forgetMutation(lk, memId);
    throw rerouteIfFenced(err, partitionId);
  }
}
