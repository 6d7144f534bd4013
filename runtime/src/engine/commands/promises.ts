import { MessageType } from '../../protocol/message-types.ts';
import { awaitPromise, completePromise, peekPromise } from '../../storage/pg/tables/promises.ts';
import * as codec from '../codec.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';

/** Durable promises of a workflow: get, peek, complete. */
export function promiseCommand(
  c: CommandContext,
  cmd: Extract<Command, { kind: 'getPromise' | 'peekPromise' | 'completePromise' }>,
): Verdict {
  const { ctx, stmts, deliverAfter, journalExtra, reject } = c;
  switch (cmd.kind) {
    case 'getPromise':
    case 'peekPromise':
    case 'completePromise': {
      if (ctx.serviceTy !== 'Workflow' || ctx.serviceKey === null) {
        reject('RT0017', `${ctx.target} cannot use durable promises: only workflows have them`);
        return 'stop';
      }
      journalExtra.promiseName = cmd.key;
      const ref = { service: ctx.serviceName, key: ctx.serviceKey, name: cmd.key };
      if (cmd.kind === 'getPromise') {
        stmts.push(
          awaitPromise(
            ref,
            ctx.id,
            ctx.partitionId,
            cmd.completionId,
            MessageType.GetPromiseCompletionNotification,
            deliverAfter,
          ),
        );
      } else if (cmd.kind === 'peekPromise') {
        stmts.push(
          peekPromise(
            ref,
            ctx.id,
            ctx.partitionId,
            cmd.completionId,
            MessageType.PeekPromiseCompletionNotification,
            deliverAfter,
          ),
        );
      } else {
        const id = { kind: 'completion' as const, id: cmd.completionId };
        stmts.push(
          completePromise(
            ref,
            ctx.partitionKey,
            cmd.result,
            {
              id: ctx.id,
              partition: ctx.partitionId,
              completionId: cmd.completionId,
              entryType: MessageType.CompletePromiseCompletionNotification,
            },
            codec.notification(id, { kind: 'void' }),
            codec.notification(id, {
              kind: 'failure',
              failure: { code: 409, message: 'promise was already completed' },
            }),
            MessageType.GetPromiseCompletionNotification,
            deliverAfter,
          ),
        );
      }
      break;
    }
  }
  return 'append';
}
