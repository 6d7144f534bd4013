import { InvocationId } from '../ids/invocation-id.ts';
import { newUlidString, randomU64 } from '../ids/ulid.ts';
import { MessageType } from '../protocol/message-types.ts';
import * as codec from './codec.ts';
import { InvocationCtx } from './invocation.ts';
import { invocationRetention } from '../schema/handler-settings.ts';
import type { AcceptRequest, AcceptResult } from './types.ts';
import { type PartitionProcessor, orderKey, lockKey, rerouteIfFenced } from './processor.ts';
import {
  invocationWrite,
  lockWrite,
  timerWrite,
  newWriteBatch,
  onlyIfInserted,
  type Write,
  type InsertInvocation,
} from '../storage/api.ts';
import { insertedRow, type NewInvocation } from '../storage/rows.ts';
import { partitionFor, partitionKeyForKey, randomPartitionKey } from '../ids/partition-key.ts';
import { vqueueId } from '../ids/vqueue-id.ts';

/** A keyless call with a generated idempotency key whose draw fell on a partition served elsewhere. */
export function shouldRedraw(p: PartitionProcessor, req: AcceptRequest, partition: number): boolean {
  // A scoped one is on its scope's partition whatever the key.
  return (
    req.idempotencyKeyGenerated === true &&
    req.key === undefined &&
    req.scope === undefined &&
    p.served.size > 0 &&
    !p.served.has(partition)
  );
}

/** Stores a new invocation (input as journal entry 0) and starts it once committed. */
export async function accept(p: PartitionProcessor, req: AcceptRequest): Promise<AcceptResult> {
  const now = new Date();
  let invocation = newInvocation(p, req, now, undefined);
  // A generated idempotency key of a keyless call is random: one whose invocation lands in a partition served here
  // is as good as any, and saves sending the request to another node (which would draw a partition of its own).
  for (let i = 0; i < PLACEMENT_DRAWS && shouldRedraw(p, req, invocation.ctxRow.partitionId); i++) {
    req.idempotencyKey = newUlidString();
    invocation = newInvocation(p, req, now, undefined);
  }
  const { ctxRow, inputRaw, executionTime } = invocation;
  p.requireServed(ctxRow.partitionId);
  if (p.active.has(ctxRow.id)) return { id: ctxRow.id, created: false, executionTime };
  p.startTrace(ctxRow, req.traceContext, undefined);
  const op = newWriteBatch(ctxRow.partitionId, [orderKey(ctxRow.partitionKey)]);
  const deterministic = ctxRow.idempotencyKey !== null && req.idempotencyKeyGenerated !== true;
  const { writes, ctx, insert } = admit(p, ctxRow, inputRaw, now, deterministic);
  const runnable = ctxRow.status === 'invoked';
  op.writes.push(...writes);
  try {
    await p.submit(op);
  } catch (err) {
    // Not stored (or not known to be): forget it here; a retry of the request finds the row if it exists.
    undoAdmit(p, ctx);
    throw rerouteIfFenced(err, ctxRow.partitionId);
  }
  if (insert.inserted === false) {
    undoAdmit(p, ctx);
    return { id: ctxRow.id, created: false, executionTime };
  }
  p.deps.metrics.invocationsAccepted.inc({ invoked_by: req.invokedBy });
  afterAdmit(p, ctx, runnable);
  return { id: ctxRow.id, created: true, executionTime };
}

export function newInvocation(
  p: PartitionProcessor,
  req: AcceptRequest,
  now: Date,
  caller: { id: string; target: string } | undefined,
): { ctxRow: NewInvocation; inputRaw: Uint8Array; executionTime: Date | undefined } {
  const key = req.key ?? null;
  const workflowRun = req.service.ty === 'Workflow' && req.handler.ty === 'Workflow';
  let id: string;
  const scope = req.scope;
  if (workflowRun) {
    id = InvocationId.forWorkflow(req.service.name, key!, scope);
  } else if (req.idempotencyKey !== undefined) {
    id = InvocationId.forIdempotent(req.service.name, key ?? undefined, req.handler.name, req.idempotencyKey, scope);
  } else if (scope !== undefined) {
    // Every invocation of a scope is on the scope's partition key, so one partition counts its concurrency.
    id = InvocationId.generate(partitionKeyForKey(scope));
  } else {
    id = InvocationId.generate(key === null ? randomPartitionKey(req.service.name) : partitionKeyForKey(key));
  }
  const pk = InvocationId.partitionKey(id as InvocationId);
  const executionTime =
    req.delayMs !== undefined && req.delayMs > 0 ? new Date(now.getTime() + req.delayMs) : undefined;
  // Retained as restate retains it: a workflow run for the workflow completion retention, a call with an idempotency
  // key for the idempotency retention, any other for its journal retention.
  const settings = p.settingsOf(req.service.name, req.handler.name) ?? p.deps.registry.defaults;
  const retention = invocationRetention(settings, {
    workflowRun,
    idempotencyKey: req.idempotencyKey !== undefined,
  });
  return {
    ctxRow: {
      id,
      partitionKey: pk,
      partitionId: partitionFor(pk, p.options.partitions),
      serviceName: req.service.name,
      serviceKey: key,
      handlerName: req.handler.name,
      serviceTy: req.service.ty,
      handlerTy: req.handler.ty ?? null,
      status: executionTime === undefined ? 'invoked' : 'scheduled',
      idempotencyKey: req.idempotencyKey ?? null,
      invokedBy: req.invokedBy,
      invokedById: caller?.id ?? req.subscriptionId ?? null,
      invokedByTarget: caller?.target ?? null,
      randomSeed: randomU64(),
      journalLength: 1,
      inboxSeq: false,
      createdAt: now,
      scheduledStartAt: executionTime ?? null,
      completionRetentionMs: retention.completionRetentionMs,
      journalRetentionMs: retention.journalRetentionMs,
      scope: scope ?? null,
      limitKey: req.limitKey ?? null,
      vqueueId: p.options.flowControl === true ? queueOf(pk, req, key, scope) : null,
    },
    inputRaw: codec.inputCommand(req.headers, req.body),
    executionTime,
  };
}

/**
 * Builds the statements that create an invocation: row, Input entry, and either a start timer (delayed), a place
 * in the key's inbox (exclusive handler of a busy key) or the key's lock. Memory is updated at once; `undoAdmit`
 * reverts it when the row turned out to exist already.
 */
export function admit(
  p: PartitionProcessor,
  row: NewInvocation,
  inputRaw: Uint8Array,
  now: Date,
  deterministic: boolean,
): { writes: Write[]; ctx: InvocationCtx; insert: InsertInvocation } {
  const writes: Write[] = [];
  // A deterministic id (idempotency or workflow key) may name a completed invocation whose retention ended but which
  // the cleaner has not removed yet: it is gone for good, so this request starts afresh.
  if (deterministic) writes.push(invocationWrite.purgeIfExpired(row.id));
  const exclusive = row.serviceKey !== null && (row.handlerTy === 'Exclusive' || row.handlerTy === 'Workflow');
  const lk = exclusive ? lockKey(row.serviceName, row.serviceKey!) : undefined;
  // Busy: the lock is held, or others wait already (the lock can be free for a moment while the oldest waiter's
  // own insert is still pending; see handOver).
  if (row.status === 'invoked' && lk !== undefined && (p.keys.locks.has(lk) || p.keys.inboxes.has(lk))) {
    row.status = 'inboxed';
    row.inboxSeq = true;
  }
  // Flow control may hold it back: its first attempt start is then written when the gate lets it through.
  const gated = row.vqueueId != null && (row.scope != null || p.flow.isPaused(row.partitionId, row.vqueueId));
  if (row.status === 'invoked' && !gated) {
    // It starts as soon as this write commits: its pin and first attempt start go into the insert, which saves
    // the attempt-start transaction (startAttempt writes nothing for this attempt). Without a usable deployment,
    // startAttempt pins (and fails) as usual.
    if (row.deploymentId == null) {
      const pin = p.roles.choosePin(row.serviceName);
      if (!('failure' in pin)) {
        row.deploymentId = pin.deployment.id;
        row.protocolVersion = pin.protocolVersion;
      }
    }
    if (row.deploymentId != null && row.protocolVersion != null) row.attemptStartAt = now;
  }
  const insert = invocationWrite.insert(row, inputRaw);
  writes.push(insert);
  const ctx = new InvocationCtx(insertedRow(row, null));
  ctx.journal = [{ index: 0, type: MessageType.InputCommand, raw: inputRaw }];
  ctx.mayHaveTimers = row.status === 'scheduled';
  ctx.startRecorded = row.attemptStartAt != null;
  // A random id (no idempotency key of the caller's, not a workflow run) cannot exist yet, so its insert always
  // inserts; any other may turn out to be a duplicate.
  const random = !deterministic && row.handlerTy !== 'Workflow' && row.restartedFrom == null;
  ctx.insertPending = !random;
  if (row.status === 'scheduled') {
    // Armed in memory once the insert committed (see afterAdmit).
    const startTimer = onlyIfInserted(
      timerWrite.insert({
        partitionId: row.partitionId,
        fireAt: row.scheduledStartAt!,
        invocationId: row.id,
        kind: 'start',
        completionId: null,
      }),
      insert,
    );
    ctx.toScheduled(startTimer);
    writes.push(startTimer);
  } else if (row.status === 'inboxed') {
    p.keys.queue(lk!).push(row.id);
  } else if (lk !== undefined) {
    p.keys.locks.set(lk, row.id);
    // A random id's insert always inserts: no need to wait for its result, which would split the transaction's
    // pipeline into two round trips.
    const take = lockWrite.take(row.serviceName, row.serviceKey!, row.id);
    writes.push(random ? take : onlyIfInserted(take, insert));
  }
  p.active.set(row.id, ctx);
  return { writes, ctx, insert };
}

/** The row existed already (a completed duplicate): forget what `admit` put in memory. */
export function undoAdmit(p: PartitionProcessor, ctx: InvocationCtx): void {
  ctx.insertPending = false;
  if (p.active.get(ctx.id) === ctx) p.active.delete(ctx.id);
  if (ctx.serviceKey === null) return;
  const lk = lockKey(ctx.serviceName, ctx.serviceKey);
  p.keys.remove(lk, ctx.id);
  // Others may have queued behind the lock it seemed to take meanwhile, or behind it while it waited.
  if (p.keys.locks.get(lk) === ctx.id) p.keys.locks.delete(lk);
  p.roles.resumeInbox(lk);
}

/** The insert of an invocation admitted with a possibly existing id inserted: an inboxed one may now get the lock. */
export function admitConfirmed(p: PartitionProcessor, ctx: InvocationCtx): void {
  if (!ctx.insertPending) return;
  ctx.insertPending = false;
  if (ctx.status === 'inboxed') p.roles.resumeInbox(lockKey(ctx.serviceName, ctx.serviceKey!));
}

/**
 * Once the admitting write committed and inserted it: confirm the insert (an inboxed one may now be handed its key's
 * lock), arm its start timer, or start it if it was admitted runnable. One admitted
 * into a key's inbox is never started here, even if it took the key's lock meanwhile: the holder's completion
 * (and its state writes) may not be durable yet, and that completion starts it once it is.
 */
export function afterAdmit(p: PartitionProcessor, ctx: InvocationCtx, admittedRunnable: boolean): void {
  admitConfirmed(p, ctx);
  p.observe(ctx, { kind: 'accepted', idempotencyKey: ctx.idempotencyKey });
  if (ctx.phase.status === 'inboxed') p.observe(ctx, { kind: 'inboxed' });
  if (ctx.phase.status === 'scheduled') {
    const timer = ctx.phase.startTimer;
    ctx.phase.startTimer = undefined;
    if (timer?.id !== undefined) {
      p.timers.schedule({ ...timer.timer, id: timer.id }, timer.timer.fireAt.getTime());
      p.observe(ctx, { kind: 'scheduled', at: timer.timer.fireAt });
    }
  }
  if (admittedRunnable && ctx.status === 'invoked') void p.roles.startAttempt(ctx);
}

/**
 * The virtual queue of a new invocation, as restate 1.7 groups them: per partition key, service, scope, limit key and
 * lock (an exclusive handler's object key, or a workflow run's key).
 */
function queueOf(pk: bigint, req: AcceptRequest, key: string | null, scope: string | undefined): string {
  const exclusive = key !== null && (req.handler.ty === 'Exclusive' || req.handler.ty === 'Workflow');
  return vqueueId(pk, {
    service: req.service.name,
    scope: scope ?? null,
    limitKey: req.limitKey ?? null,
    lock: exclusive && req.service.ty !== 'Workflow' ? `${req.service.name}/${key}` : null,
  });
}

/** Draws of a generated idempotency key at most, to land in a partition served here (each hits with served / P). */
const PLACEMENT_DRAWS = 64;
