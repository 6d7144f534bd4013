import type { NewInvocation } from '../storage/rows.ts';

/**
 * A new invocation as it travels in an outbox request (JSON): from the node of a caller to the owner of the callee's
 * partition, which admits it (see `Engine.admitRequested`).
 */
export function encodeNewInvocation(row: NewInvocation): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    if (v === undefined) continue;
    out[k] = typeof v === 'bigint' ? v.toString() : v instanceof Date ? v.toISOString() : v;
  }
  return out;
}

export function decodeNewInvocation(j: Record<string, unknown>): NewInvocation {
  const str = (k: string): string => {
    const v = j[k];
    if (typeof v !== 'string') throw new Error(`outbox request: ${k} is not a string`);
    return v;
  };
  const optStr = (k: string): string | null => (j[k] === null || j[k] === undefined ? null : str(k));
  const optNum = (k: string): number | null => (typeof j[k] === 'number' ? j[k] : null);
  const status = str('status');
  if (status !== 'invoked' && status !== 'scheduled') throw new Error(`outbox request: bad status ${status}`);
  const scheduled = optStr('scheduledStartAt');
  return {
    id: str('id'),
    partitionKey: BigInt(str('partitionKey')),
    partitionId: Number(j['partitionId']),
    serviceName: str('serviceName'),
    serviceKey: optStr('serviceKey'),
    handlerName: str('handlerName'),
    serviceTy: str('serviceTy'),
    handlerTy: optStr('handlerTy'),
    status,
    idempotencyKey: optStr('idempotencyKey'),
    invokedBy: str('invokedBy'),
    invokedById: optStr('invokedById'),
    invokedByTarget: optStr('invokedByTarget'),
    randomSeed: BigInt(str('randomSeed')),
    journalLength: 1,
    inboxSeq: false,
    createdAt: new Date(str('createdAt')),
    scheduledStartAt: scheduled === null ? null : new Date(scheduled),
    completionRetentionMs: optNum('completionRetentionMs'),
    journalRetentionMs: optNum('journalRetentionMs'),
    traceContext: optStr('traceContext'),
    // Flow control: only on invocations made with it.
    ...(optStr('scope') === null ? {} : { scope: optStr('scope') }),
    ...(optStr('limitKey') === null ? {} : { limitKey: optStr('limitKey') }),
    ...(optStr('vqueueId') === null ? {} : { vqueueId: optStr('vqueueId') }),
  };
}
