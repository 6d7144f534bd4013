import { LOG_FIELDS } from '../../telemetry/logger.ts';
import { isExpired } from '../results.ts';
import { InvocationId } from '../../ids/invocation-id.ts';
import { randomU64 } from '../../ids/ulid.ts';
import { MessageType, isCommand } from '../../protocol/message-types.ts';
import {
  BadManagementRequestError,
  DeploymentCannotChangeError,
  InputUnavailableError,
  InvocationNotFoundError,
  InvocationNotStartedError,
  InvocationStillRunningError,
  PartitionUnavailableError,
  RestartUnsupportedError,
} from '../management-errors.ts';
import * as codec from '../codec.ts';
import type { DeploymentChoice, JournalEntry } from '../types.ts';
import { type PartitionProcessor, rerouteIfFenced } from '../processor.ts';
import { newWriteBatch } from '../../storage/api.ts';
import { type NewInvocation, sameTarget } from '../../storage/rows.ts';
import { FencingError } from '../../storage/errors.ts';

/**
 * Starts a new invocation (new id, same partition key) from a completed one: with its input only (`from` 0), or
 * with the journal prefix up to entry `from` plus the completions of the commands in it, pinned as `deployment`
 * says. The new invocation records where it was restarted from.
 */
export async function restartAsNew(
  p: PartitionProcessor,
  id: InvocationId,
  from: number,
  deployment: DeploymentChoice | undefined,
): Promise<string> {
  const row = await p.deps.storage.invocations.get(id);
  if (row === undefined || isExpired(row)) throw new InvocationNotFoundError(id);
  if (row.status === 'scheduled' || row.status === 'inboxed') throw new InvocationNotStartedError(id, 'restarted');
  if (row.status !== 'completed') throw new InvocationStillRunningError(id);
  if (row.serviceTy === 'Workflow' && row.handlerTy === 'Workflow') throw new RestartUnsupportedError(id);
  if (row.protocolVersion !== null && row.protocolVersion < 5) throw new RestartUnsupportedError(id);
  p.requireServed(row.partitionId);
  if (deployment !== undefined && from === 0) {
    throw new BadManagementRequestError('the deployment parameter can be used only together with from > 0');
  }
  const journal = await p.loadEntries(id);
  const input = journal.find((e) => e.index === 0);
  if (input === undefined || input.type !== MessageType.InputCommand) throw new InputUnavailableError(id);

  const entries: JournalEntry[] = [];
  let pin: { deploymentId: string | null; protocolVersion: number | null } = {
    deploymentId: null,
    protocolVersion: null,
  };
  if (from > 0) {
    if (from >= journal.length) {
      throw new BadManagementRequestError(
        `from ${from} is past the end of the journal of '${id}', which has ${journal.length} entries`,
      );
    }
    const prefix = journal.slice(1, from + 1);
    const needed = new Set<number>();
    for (const e of prefix) for (const c of codec.completionIdsOf(e.type, e.raw)) needed.add(c);
    const completions = new Map<number, JournalEntry>();
    for (const e of journal) {
      if (e.completionId !== undefined && needed.has(e.completionId) && !isCommand(e.type)) {
        completions.set(e.completionId, e);
      }
    }
    const missing = [...needed].filter((c) => !completions.has(c));
    if (missing.length > 0) {
      throw new BadManagementRequestError(
        `the journal prefix up to entry ${from} of '${id}' contains commands that were not completed ` +
          `(completion ids ${missing.join(', ')}); choose an earlier entry`,
      );
    }
    const inPrefix = new Set(prefix.map((e) => e.index));
    entries.push(...prefix);
    for (const e of journal) {
      if (!inPrefix.has(e.index) && e.completionId !== undefined && needed.has(e.completionId) && !isCommand(e.type)) {
        entries.push(e);
      }
    }
    const protocolVersion = row.protocolVersion;
    if (protocolVersion === null) throw new DeploymentCannotChangeError(id);
    const choice = deployment ?? { kind: 'latest' };
    if (choice.kind === 'keep') {
      if (row.deploymentId === null) throw new DeploymentCannotChangeError(id);
      pin = { deploymentId: row.deploymentId, protocolVersion };
    } else {
      pin = {
        deploymentId: p.roles.chooseDeployment(id, row.serviceName, choice, protocolVersion, 'restart'),
        protocolVersion,
      };
    }
  }

  const service = p.deps.registry.service(row.serviceName);
  const handler = service?.schema.handlers.find((h) => h.name === row.handlerName);
  if (service === undefined || handler === undefined) {
    throw new BadManagementRequestError(`${row.serviceName}/${row.handlerName} is no longer registered`);
  }
  const now = new Date();
  const newId = InvocationId.withSamePartition(id);
  const newRow: NewInvocation = {
    ...sameTarget(row),
    id: newId,
    status: 'invoked',
    idempotencyKey: null,
    invokedBy: 'restart_as_new',
    invokedById: null,
    invokedByTarget: null,
    randomSeed: randomU64(),
    journalLength: 1 + entries.length,
    inboxSeq: false,
    createdAt: now,
    scheduledStartAt: null,
    completionRetentionMs: row.completionRetentionMs,
    journalRetentionMs: row.journalRetentionMs,
    restartedFrom: id,
    deploymentId: pin.deploymentId,
    protocolVersion: pin.protocolVersion,
    // Same partition, same queue: the restarted one keeps its scope, limit key and virtual queue.
    scope: row.scope,
    limitKey: row.limitKey,
    vqueueId: row.vqueueId,
  };
  p.startTrace(newRow, undefined, row.traceContext);
  const op = newWriteBatch(row.partitionId);
  const { writes, ctx } = p.roles.admit(newRow, input.raw, now, false);
  const runnable = newRow.status === 'invoked';
  op.writes.push(...writes);
  for (const { index: _index, ...e } of entries) p.appendEntry(ctx, op, e, now);
  try {
    await p.submit(op);
  } catch (err) {
    p.roles.undoAdmit(ctx);
    if (err instanceof FencingError) throw rerouteIfFenced(err, row.partitionId);
    p.log.warn({ err, [LOG_FIELDS.invocationId]: id }, 'restart-as-new could not be stored');
    throw new PartitionUnavailableError(id);
  }
  p.deps.metrics.invocationsAccepted.inc({ invoked_by: 'restart_as_new' });
  p.roles.afterAdmit(ctx, runnable);
  return newId;
}
