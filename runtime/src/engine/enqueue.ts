import { encodeNewInvocation } from './outbox-requests.ts';
import { deliver, notifyOwner } from './outbox.ts';
import type { PartitionProcessor } from './processor.ts';
import type { AcceptRequest, EnqueueResult } from './types.ts';
import type { QueuedRequest } from '../storage/api.ts';

/**
 * Queues new invocations for the owners of their partitions, whichever node serves them: one outbox request per
 * invocation, all in one commit, carried out by each owner in the order given (so the requests for one key are
 * admitted in order). Resolves once the requests are committed: from then on the invocations will be admitted even if
 * this process dies. Every request must have a derived id (an idempotency key, or a workflow run's key): queuing the
 * same request twice admits one invocation.
 *
 * This is how sources that are not tied to a partition (Kafka subscriptions) hand work to the engine; the ingress uses
 * `accept` on the owner instead, which also answers with the result.
 */
export async function enqueue(p: PartitionProcessor, requests: AcceptRequest[]): Promise<EnqueueResult[]> {
  const now = new Date();
  const queued: QueuedRequest[] = [];
  const results: EnqueueResult[] = [];
  for (const req of requests) {
    const workflowRun = req.service.ty === 'Workflow' && req.handler.ty === 'Workflow';
    if (!workflowRun && req.idempotencyKey === undefined) {
      throw new Error(`enqueue needs a derived invocation id: ${req.service.name}/${req.handler.name} has none`);
    }
    const { ctxRow, inputRaw } = p.roles.newInvocation(req, now, undefined);
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
    results.push({ id: ctxRow.id, partition: ctxRow.partitionId });
  }
  const rows = await p.deps.storage.outbox.enqueue(queued);
  // Carried out here at once for partitions served here (in order: each admission takes its place synchronously);
  // their owners are told of the others (and poll in any case).
  for (const row of rows) {
    if (p.served.has(row.partitionId)) void deliver(p, row);
    else notifyOwner(p, row.partitionId);
  }
  return results;
}
