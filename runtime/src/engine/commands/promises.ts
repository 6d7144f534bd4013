import { MessageType } from '../../protocol/message-types.ts';
import * as codec from '../codec.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';
import { promiseWrite } from '../../storage/api.ts';

/** Durable promises of a workflow: get, peek, complete. */
export function promiseCommand(
  c: CommandContext,
  cmd: Extract<Command, { kind: 'getPromise' | 'peekPromise' | 'completePromise' }>,
): Verdict {
  const { ctx, writes, deliverAfter, journalExtra, reject } = c;
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
        writes.push(
          deliverAfter(
            promiseWrite.await(
              ref,
              ctx.id,
              ctx.partitionId,
              cmd.completionId,
              MessageType.GetPromiseCompletionNotification,
            ),
          ),
        );
      } else if (cmd.kind === 'peekPromise') {
        writes.push(
          deliverAfter(
            promiseWrite.peek(
              ref,
              ctx.id,
              ctx.partitionId,
              cmd.completionId,
              MessageType.PeekPromiseCompletionNotification,
            ),
          ),
        );
      } else {
        const id = { kind: 'completion' as const, id: cmd.completionId };
        writes.push(
          deliverAfter(
            promiseWrite.complete(
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
            ),
          ),
        );
      }
      break;
    }
  }
  return 'append';
}
