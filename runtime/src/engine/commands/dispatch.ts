import type { ErrorCode } from '../../errors/codes.ts';
import type { AttemptHandle } from '../../invoker/invoker.ts';
import type { Frame } from '../../protocol/framing.ts';
import * as codec from '../codec.ts';
import type { InvocationCtx } from '../invocation.ts';
import { ownWrite, type PartitionProcessor } from '../processor.ts';
import { attachCommand } from './attach.ts';
import { callCommand } from './call.ts';
import type { CommandContext, JournalExtra, Verdict } from './context.ts';
import { promiseCommand } from './promises.ts';
import { signalCommand } from './signals.ts';
import { sleepCommand } from './sleep.ts';
import { stateCommand } from './state.ts';
import { outboxRowsOf, type Write } from '../../storage/api.ts';

/** Persist first (in arrival order), then act. Invalid commands fail the attempt without being persisted. */
export function onCommand(p: PartitionProcessor, ctx: InvocationCtx, attempt: AttemptHandle, frame: Frame): void {
  const cmd = codec.command(frame.type, frame.payload);
  const keyed = ctx.serviceKey !== null;
  const canWrite = ctx.handlerTy === 'Exclusive' || ctx.handlerTy === 'Workflow';
  const now = new Date();
  const writes: Write[] = [];
  const after: (() => void)[] = [];
  const delivered: Write[] = [];
  const deliverAfter = <W extends Write>(w: W): W => {
    delivered.push(w);
    return w;
  };
  const committed = (): void => {
    for (const f of after) f();
    for (const w of delivered) for (const row of outboxRowsOf(w)) void p.roles.deliver(row);
  };
  const journalExtra: JournalExtra = {};
  const op = ownWrite(ctx);
  const reject = (rtCode: ErrorCode, message: string): void => {
    attempt.abort();
    if (ctx.attempt === attempt) ctx.attemptEnded();
    p.roles.handleFailure(ctx, { code: 500, rtCode, message });
  };

  const c: CommandContext = {
    p,
    ctx,
    attempt,
    frame,
    now,
    keyed,
    canWrite,
    writes,
    after,
    journalExtra,
    op,
    reject,
    deliverAfter,
    committed,
  };
  let verdict: Verdict = 'append';
  switch (cmd.kind) {
    case 'input':
      reject('RT0012', 'the deployment sent an Input command');
      return;
    case 'output':
      ctx.output = cmd.outcome;
      break;
    case 'run':
      break;
    case 'setState':
    case 'clearState':
    case 'clearAllState':
    case 'getEagerState':
    case 'getEagerStateKeys':
    case 'getLazyState':
    case 'getLazyStateKeys':
      verdict = stateCommand(c, cmd);
      break;
    case 'sleep':
      verdict = sleepCommand(c, cmd);
      break;
    case 'call':
    case 'oneWayCall':
      verdict = callCommand(c, cmd);
      break;
    case 'sendSignal':
    case 'completeAwakeable':
      verdict = signalCommand(c, cmd);
      break;
    case 'getPromise':
    case 'peekPromise':
    case 'completePromise':
      verdict = promiseCommand(c, cmd);
      break;
    case 'attach':
    case 'getOutput':
      verdict = attachCommand(c, cmd);
      break;
  }
  if (verdict === 'stop') return;
  const entry = p.appendEntry(ctx, op, { type: frame.type, raw: frame.payload }, now, journalExtra);
  ctx.running?.fromSdk.add(entry.index);
  op.writes.push(...writes);
  void p.commit(ctx, op, committed);
}
