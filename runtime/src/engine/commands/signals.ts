import { InvocationId } from '../../ids/invocation-id.ts';
import { parseAwakeableId } from '../../ids/awakeable-id.ts';
import { MessageType } from '../../protocol/message-types.ts';
import * as codec from '../codec.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';
import { outboxWrite } from '../../storage/api.ts';
import { partitionFor } from '../../ids/partition-key.ts';

/** Send signal and complete awakeable: a signal notification for the target, delivered through the outbox. */
export function signalCommand(
  c: CommandContext,
  cmd: Extract<Command, { kind: 'sendSignal' | 'completeAwakeable' }>,
): Verdict {
  const { p, writes, deliverAfter, reject } = c;
  switch (cmd.kind) {
    case 'sendSignal':
    case 'completeAwakeable': {
      let targetId: string;
      let idx: number | undefined;
      let name: string | undefined;
      if (cmd.kind === 'completeAwakeable') {
        let parsed;
        try {
          parsed = parseAwakeableId(cmd.awakeableId);
        } catch (err) {
          reject('RT0017', `bad awakeable id '${cmd.awakeableId}': ${(err as Error).message}`);
          return 'stop';
        }
        // A legacy prom_1 id carries a journal entry index where sign_1 carries a signal index; protocol V5+
        // journals have no entry-indexed awakeables, so both are delivered as the signal with that index.
        targetId = parsed.invocationId;
        idx = parsed.index;
      } else {
        targetId = cmd.targetInvocationId;
        idx = cmd.idx;
        name = cmd.name;
      }
      const targetParsed = InvocationId.tryParse(targetId);
      if (targetParsed === undefined) {
        reject('RT0017', `bad target invocation id '${targetId}'`);
        return 'stop';
      }
      writes.push(
        deliverAfter(
          outboxWrite.insert({
            partitionId: partitionFor(InvocationId.partitionKey(targetParsed), p.options.partitions),
            targetInvocationId: targetParsed,
            entryType: MessageType.SignalNotification,
            completionId: null,
            signalIdx: idx ?? null,
            signalName: name ?? null,
            sourceInvocationId: null,
            raw: Buffer.from(
              codec.notification(
                idx !== undefined ? { kind: 'signal', idx } : { kind: 'signalName', name: name! },
                cmd.result,
              ),
            ),
          }),
        ),
      );
      break;
    }
  }
  return 'append';
}
