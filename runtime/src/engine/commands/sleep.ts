import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';
import { timerWrite } from '../../storage/api.ts';

/** Sleep: the timer row is written with the command and armed once it is durable. */
export function sleepCommand(c: CommandContext, cmd: Extract<Command, { kind: 'sleep' }>): Verdict {
  const { p, ctx, writes, after, journalExtra } = c;
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
      const timer = timerWrite.insert(t);
      writes.push(timer);
      after.push(() => p.timers.schedule({ ...t, id: timer.id! }, fireAt.getTime()));
      break;
    }
  }
  return 'append';
}
