import { type InvocationId } from '../../ids/invocation-id.ts';
import {
  DeploymentCannotChangeError,
  InvocationCompletedCannotResumeError,
  InvocationNotStartedError,
} from '../management-errors.ts';
import type { DeploymentChoice } from '../types.ts';
import { type PartitionProcessor } from '../processor.ts';
import { invocationWrite, type Write } from '../../storage/api.ts';
import { rerun } from '../../flow-control/rerun.ts';

/**
 * Resumes a paused or suspended invocation (one backing off retries at once; a running one is left alone).
 * `deployment` replaces the pinned deployment; only for paused or suspended invocations that have one.
 */
export async function resume(
  p: PartitionProcessor,
  id: InvocationId,
  deployment: DeploymentChoice | undefined,
): Promise<void> {
  const ctx = await p.roles.managed(id);
  // The retry timer of an earlier failure is armed once its write commits.
  await p.settled(ctx);
  if (ctx.status === 'completed') throw new InvocationCompletedCannotResumeError(id);
  if (ctx.status === 'scheduled' || ctx.status === 'inboxed') throw new InvocationNotStartedError(id, 'resumed');
  const writes: Write[] = [];
  if (deployment !== undefined && deployment.kind !== 'keep') {
    if ((ctx.status !== 'paused' && ctx.status !== 'suspended') || ctx.deploymentId === null) {
      throw new DeploymentCannotChangeError(id);
    }
    const chosen = p.roles.chooseDeployment(id, ctx.serviceName, deployment, ctx.protocolVersion!, 'resume');
    ctx.deploymentId = chosen;
    writes.push(invocationWrite.update(ctx.id, { deploymentId: chosen }, new Date()));
  }
  const now = new Date();
  if (ctx.status === 'paused' || ctx.status === 'suspended') {
    ctx.toInvoked();
    writes.push(
      invocationWrite.update(ctx.id, { status: 'invoked', awaiting: null, nextRetryAt: null, ...rerun(ctx) }, now),
    );
  } else if (ctx.attempt === undefined || ctx.attempt.isFinished) {
    // Backing off: the attempt starts now, and the backoff it skips is disarmed.
    const disarm = p.roles.disarmRetry(ctx);
    if (disarm.length > 0) writes.push(...disarm, invocationWrite.update(ctx.id, { nextRetryAt: null }, now));
  }
  if (writes.length > 0) p.write(ctx, writes);
  await p.settled(ctx);
  if (ctx.poisoned) throw p.unavailable(id, ctx.partitionId);
  p.observe(ctx, { kind: 'resumed', by: 'admin' });
  void p.roles.startAttempt(ctx);
}
