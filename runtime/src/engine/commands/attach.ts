import { InvocationId } from '../../ids/invocation-id.ts';
import { MessageType } from '../../protocol/message-types.ts';
import type { InvocationTarget } from '../../protocol/messages.ts';
import { orderKey } from '../processor.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';
import { outboxWrite } from '../../storage/api.ts';

/** Attach to an invocation, or get its output: answered through the outbox once the target completes (or at once). */
export function attachCommand(c: CommandContext, cmd: Extract<Command, { kind: 'attach' | 'getOutput' }>): Verdict {
  const { p, ctx, writes, deliverAfter, op, reject } = c;
  switch (cmd.kind) {
    case 'attach':
    case 'getOutput': {
      const targetId = resolveTarget(cmd.target, (name) => {
        const svc = p.deps.registry.service(name);
        return svc !== undefined && svc.schema.ty !== 'Service';
      });
      if (targetId === undefined) {
        reject('RT0017', `the ${cmd.kind === 'attach' ? 'attach' : 'get-output'} command names a bad invocation id`);
        return 'stop';
      }
      if (cmd.kind === 'attach') {
        // Its waiter row must not race the target's completion, which collects the waiters.
        op.keys!.push(orderKey(InvocationId.partitionKey(targetId)));
        writes.push(
          deliverAfter(
            outboxWrite.awaitResult(
              targetId,
              ctx.id,
              ctx.partitionId,
              cmd.completionId,
              MessageType.AttachInvocationCompletionNotification,
            ),
          ),
        );
      } else {
        // Answered with the target's state as of delivery: its result, or void while it runs.
        writes.push(
          deliverAfter(
            outboxWrite.insert({
              partitionId: ctx.partitionId,
              targetInvocationId: ctx.id,
              entryType: MessageType.GetInvocationOutputCompletionNotification,
              completionId: cmd.completionId,
              signalIdx: null,
              signalName: null,
              sourceInvocationId: targetId,
              raw: null,
            }),
          ),
        );
      }
      break;
    }
  }
  return 'append';
}

/** The invocation an attach / get-output command names. */
function resolveTarget(t: InvocationTarget, keyed: (service: string) => boolean): InvocationId | undefined {
  switch (t.kind) {
    case 'invocationId':
      return InvocationId.tryParse(t.invocationId);
    case 'idempotentRequest':
      return InvocationId.forIdempotent(
        t.serviceName,
        keyed(t.serviceName) ? (t.serviceKey ?? '') : undefined,
        t.handlerName,
        t.idempotencyKey,
      );
    case 'workflow':
      return InvocationId.forWorkflow(t.workflowName, t.workflowKey);
  }
}
