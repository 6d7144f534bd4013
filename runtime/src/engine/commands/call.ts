import { MessageType } from '../../protocol/message-types.ts';
import { encodeNewInvocation } from '../outbox-requests.ts';
import * as codec from '../codec.ts';
import { type InvocationCtx } from '../invocation.ts';
import type { AcceptRequest } from '../types.ts';
import { orderKey } from '../processor.ts';
import { answerCall } from '../call-answer.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';
import { outboxWrite, type Write, type InsertInvocation } from '../../storage/api.ts';
import { formatLimitKey, LimitKeyError, parseLimitKey, restrictedValueProblem } from '../../flow-control/names.ts';

/**
 * Why a call's scope or limit key cannot be used (RT0024, worded as restate-server 1.7.12 words it), or undefined.
 * Without flow control any scope or limit key is refused.
 */
function flowControlProblem(
  enabled: boolean,
  cmd: { scope?: string | undefined; limitKey?: string | undefined },
): string | undefined {
  if (cmd.scope === undefined && cmd.limitKey === undefined) return undefined;
  if (!enabled) {
    return 'scoped invocations require flow control experimental feature to be enabled (Ratchet: set RATCHET_EXPERIMENTAL_ENABLE_VQUEUES=true, or remove the scope and limit key)';
  }
  if (cmd.scope === undefined) {
    return 'limit key was provided without a scope. Limit keys take effect only when used in combination with scope';
  }
  const problem = restrictedValueProblem(cmd.scope);
  if (problem !== undefined) return `the provided scope '${cmd.scope}' is invalid: ${problem}`;
  if (cmd.limitKey !== undefined) {
    try {
      parseLimitKey(cmd.limitKey);
    } catch (err) {
      if (err instanceof LimitKeyError) return `the provided limit key '${cmd.limitKey}' is invalid: ${err.message}`;
      throw err;
    }
  }
  return undefined;
}

/** Call and one-way call (send): the callee is admitted in the same write (or asked of its owner through the outbox). */
export function callCommand(c: CommandContext, cmd: Extract<Command, { kind: 'call' | 'oneWayCall' }>): Verdict {
  const { p, ctx, frame, now, writes, after, deliverAfter, journalExtra, op, reject } = c;
  switch (cmd.kind) {
    case 'call':
    case 'oneWayCall': {
      const flowProblem = flowControlProblem(p.options.flowControl === true, cmd);
      if (flowProblem !== undefined) {
        reject('RT0024', flowProblem);
        return 'stop';
      }
      const target = p.deps.registry.service(cmd.service);
      const handler = target?.schema.handlers.find((h) => h.name === cmd.handler);
      if (target === undefined || handler === undefined) {
        reject('RT0018', `the call targets ${cmd.service}/${cmd.handler}, which is not registered`);
        return 'stop';
      }
      if (cmd.scope !== undefined && target.schema.ty !== 'Service') {
        const ty = target.schema.ty === 'VirtualObject' ? 'Virtual Object' : target.schema.ty;
        reject(
          'RT0024',
          `the call to ${cmd.service}/${cmd.handler} has a scope, which is not supported for ${ty} targets`,
        );
        return 'stop';
      }
      const keyedTarget = target.schema.ty !== 'Service';
      const childReq: AcceptRequest = {
        service: { name: target.schema.name, ty: target.schema.ty },
        handler,
        key: keyedTarget ? cmd.key : undefined,
        body: cmd.parameter,
        headers: cmd.headers,
        delayMs: cmd.kind === 'oneWayCall' && cmd.invokeTime > 0n ? Number(cmd.invokeTime) - now.getTime() : undefined,
        idempotencyKey: cmd.idempotencyKey,
        invokedBy: 'service',
        scope: cmd.scope,
        limitKey: cmd.limitKey === undefined ? undefined : formatLimitKey(parseLimitKey(cmd.limitKey)),
      };
      const { ctxRow, inputRaw } = p.roles.newInvocation(childReq, now, { id: ctx.id, target: ctx.target });
      p.startTrace(ctxRow, undefined, ctx.traceContext);
      // The callee's rows (its insert, or the waiter on a running one) are written here too.
      op.keys!.push(orderKey(ctxRow.partitionKey));
      if (cmd.kind === 'oneWayCall' && ctxRow.status === 'scheduled')
        ctxRow.scheduledStartAt = new Date(Number(cmd.invokeTime));
      // A callee in a partition served elsewhere is admitted by its owner, asked in this write (and so is the
      // caller's wait for its result); the invocation id is known here, so the caller goes on at once.
      const remote = !p.served.has(ctxRow.partitionId);
      // An idempotent call whose callee is running already joins it; one that completed gets its stored result.
      let child: { writes: Write[]; ctx: InvocationCtx; insert: InsertInvocation } | undefined;
      let childRunnable = false;
      if (remote) {
        writes.push(
          deliverAfter(
            outboxWrite.request(ctxRow.partitionId, ctxRow.id, {
              kind: 'invoke',
              invocation: encodeNewInvocation(ctxRow),
              input: Buffer.from(inputRaw).toString('base64'),
              caller:
                cmd.kind === 'call'
                  ? {
                      id: ctx.id,
                      partition: ctx.partitionId,
                      completionId: cmd.resultCompletionId,
                      entryType: MessageType.CallCompletionNotification,
                    }
                  : undefined,
              workflowRun: target.schema.ty === 'Workflow' && handler.ty === 'Workflow',
              deterministic: ctxRow.idempotencyKey !== null,
            }),
          ),
        );
      } else if (!p.active.has(ctxRow.id)) {
        // Both partitions are written: both leases must hold.
        if (ctxRow.partitionId !== ctx.partitionId) op.partitions.push(ctxRow.partitionId);
        child = p.roles.admit(ctxRow, inputRaw, now, ctxRow.idempotencyKey !== null);
        childRunnable = ctxRow.status === 'invoked';
        writes.push(...child.writes);
      }
      journalExtra.invokedId = ctxRow.id;
      journalExtra.invokedTarget = keyedTarget
        ? `${cmd.service}/${cmd.key}/${cmd.handler}`
        : `${cmd.service}/${cmd.handler}`;
      after.push(() => {
        if (child === undefined) return;
        if (child.insert.inserted !== false) p.roles.afterAdmit(child.ctx, childRunnable);
        else p.roles.undoAdmit(child.ctx);
      });
      if (child !== undefined) {
        // The caller's write failed: the callee was not stored either (the caller is reloaded and calls again).
        const admitted = child.ctx;
        p.onFailed(op, () => p.roles.undoAdmit(admitted));
      }
      // The entry itself goes first; the invocation-id notification follows it in the same transaction.
      const entry = p.appendEntry(ctx, op, { type: frame.type, raw: frame.payload }, now, journalExtra);
      ctx.running?.fromSdk.add(entry.index);
      const idNote = p.appendEntry(
        ctx,
        op,
        {
          type: MessageType.CallInvocationIdCompletionNotification,
          raw: codec.notification(
            { kind: 'completion', id: cmd.invocationIdCompletionId },
            { kind: 'invocationId', invocationId: ctxRow.id },
          ),
          completionId: cmd.invocationIdCompletionId,
          success: true,
        },
        now,
      );
      if (cmd.kind === 'call' && !remote) {
        const caller = {
          id: ctx.id,
          partition: ctx.partitionId,
          completionId: cmd.resultCompletionId,
          entryType: MessageType.CallCompletionNotification,
        };
        const workflowRun = target.schema.ty === 'Workflow' && handler.ty === 'Workflow';
        for (const w of answerCall(ctxRow.id, caller, workflowRun, child?.insert)) writes.push(deliverAfter(w));
      }
      op.writes.push(...writes);
      void p.commit(ctx, op, () => {
        c.committed();
        p.roles.sendCommitted(ctx, idNote);
      });
      return 'stop';
    }
  }
  return 'append';
}
