import { accept } from './admission.ts';
import { encodeNewInvocation } from './outbox-requests.ts';
import { deliver, notifyOwner, pollOutbox } from './outbox.ts';
import type { PartitionProcessor } from './processor.ts';
import type { AcceptRequest, EnqueueResult } from './types.ts';
import type { QueuedRequest } from '../storage/api.ts';

/**
 * Stores new invocations for the owners of their partitions, whichever node serves them, in the order given (so the
 * requests for one key are admitted in order). Resolves once every one is committed: from then on the invocations
 * will run even if this process dies. Every request must have a derived id (an idempotency key, or a workflow run's
 * key): storing the same request twice admits one invocation.
 *
 * - A request for a partition served here is admitted at once, as the ingress admits (`accept`), after whatever
 *   other nodes queued for that partition and this node has not carried out yet (read first, so a key's older
 *   records, queued by the node that read them before a rebalance, keep their place).
 * - The others are queued in the outbox for their owners (one commit for all; the owners carry them out in order and
 *   are told to look).
 *
 * This is how sources that are not tied to a partition (Kafka subscriptions) hand work to the engine; the ingress uses
 * `accept` on the owner, and answers with the result.
 */
export async function enqueue(p: PartitionProcessor, requests: AcceptRequest[]): Promise<EnqueueResult[]> {
  const now = new Date();
  const planned = requests.map((req) => {
    const workflowRun = req.service.ty === 'Workflow' && req.handler.ty === 'Workflow';
    if (!workflowRun && req.idempotencyKey === undefined) {
      throw new Error(`enqueue needs a derived invocation id: ${req.service.name}/${req.handler.name} has none`);
    }
    return { req, workflowRun, ...p.roles.newInvocation(req, now, undefined) };
  });
  const local = [...new Set(planned.map((r) => r.ctxRow.partitionId).filter((n) => p.served.has(n)))];
  if (local.length > 0) await pollOutbox(p, local);

  const results: EnqueueResult[] = [];
  const queued: QueuedRequest[] = [];
  const admitted: Promise<unknown>[] = [];
  // Synchronously from here to the last `accept` call: each admission takes its place in its key's queue in order.
  for (const { req, workflowRun, ctxRow, inputRaw } of planned) {
    results.push({ id: ctxRow.id, partition: ctxRow.partitionId });
    if (p.served.has(ctxRow.partitionId)) {
      admitted.push(accept(p, req));
      continue;
    }
    p.startTrace(ctxRow, req.traceContext, undefined);
    queued.push({
      partition: ctxRow.partitionId,
      targetInvocationId: ctxRow.id,
      request: {
        kind: 'invoke',
        invocation: encodeNewInvocation(ctxRow),
        input: Buffer.from(inputRaw).toString('base64'),
        workflowRun,
        deterministic: true,
      },
    });
  }
  const stored = queued.length > 0 ? p.deps.storage.outbox.enqueue(queued) : Promise.resolve([]);
  const [rows] = await Promise.all([stored, ...admitted]);
  // Partitions served here meanwhile carry their rows out at once; the owners of the others are told.
  for (const row of rows) {
    if (p.served.has(row.partitionId)) void deliver(p, row);
    else notifyOwner(p, row.partitionId);
  }
  return results;
}
