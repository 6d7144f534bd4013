import { isExpired } from '../results.ts';
import { InvocationId } from '../../ids/invocation-id.ts';
import {
  DeploymentNotFoundError,
  IncompatibleDeploymentError,
  InvocationNotFoundError,
  PartitionNotServedError,
} from '../management-errors.ts';
import { type InvocationCtx } from '../invocation.ts';
import type { DeploymentChoice } from '../types.ts';
import { type PartitionProcessor } from '../processor.ts';

/** A non-expired invocation of an owned partition, from memory when it is live. */
export async function managed(p: PartitionProcessor, id: InvocationId): Promise<InvocationCtx> {
  p.requireServed(p.partitionOf(InvocationId.partitionKey(id)));
  const ctx = await p.load(id);
  if (ctx === undefined) throw new InvocationNotFoundError(id);
  if (ctx.poisoned) throw new PartitionNotServedError(ctx.partitionId);
  if (ctx.status === 'completed') {
    const row = await p.deps.storage.invocations.get(id);
    if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
  }
  return ctx;
}

/** The deployment a resume / restart should pin: the service's latest, or one by id; it must speak `version`. */
export function chooseDeployment(
  p: PartitionProcessor,
  id: string,
  serviceName: string,
  choice: DeploymentChoice,
  version: number,
  what: 'resume' | 'restart',
): string {
  const registry = p.deps.registry;
  let deploymentId: string | undefined;
  if (choice.kind === 'id') {
    deploymentId = choice.id;
  } else {
    deploymentId = registry.service(serviceName)?.deploymentId;
  }
  const d = deploymentId === undefined ? undefined : registry.deployment(deploymentId);
  if (d === undefined) throw new DeploymentNotFoundError(id, what);
  if (version < d.minProtocolVersion || version > d.maxProtocolVersion) {
    throw new IncompatibleDeploymentError(id, version, d.id, d.minProtocolVersion, d.maxProtocolVersion);
  }
  return d.id;
}
