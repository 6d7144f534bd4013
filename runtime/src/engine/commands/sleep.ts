import { insertTimer } from '../../storage/pg/tables/timers.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';

/** Sleep: the timer row is written with the command and armed once it is durable. */
export function sleepCommand(c: CommandContext, cmd: Extract<Command, { kind: 'sleep' }>): Verdict {
  const { p, ctx, stmts, after, journalExtra } = c;
  switch (cmd.kind) {
    case 'sleep': {
      const fireAt = new Date(Number(cmd.wakeUpTime));
      journalExtra.sleepWakeupAt = fireAt;
      const t = {
        partitionId: ctx.partitionId,
        fireAt,
        invocationId: ctx.id,
        kind: 'sleep' as const,
        completionId: cmd.completionId,
      };
      ctx.mayHaveTimers = true;
      stmts.push(insertTimer(t, (id) => after.push(() => p.timers.schedule({ ...t, id }, fireAt.getTime()))));
      break;
    }
  }
  return 'append';
}
