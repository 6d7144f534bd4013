import { LOG_FIELDS } from '../../telemetry/logger.ts';
import { MessageType } from '../../protocol/message-types.ts';
import { type StateChange } from '../state-cache.ts';
import * as codec from '../codec.ts';
import { type InvocationCtx } from '../invocation.ts';
import { type PartitionProcessor, lockKey } from '../processor.ts';
import type { CommandContext, Verdict } from './context.ts';
import type { Command } from '../codec.ts';
import { stateWrite } from '../../storage/api.ts';

/** State commands: set, clear, clear all, and the eager and lazy reads of a virtual object or workflow key. */
export function stateCommand(
  c: CommandContext,
  cmd: Extract<
    Command,
    {
      kind:
        | 'setState'
        | 'clearState'
        | 'clearAllState'
        | 'getEagerState'
        | 'getEagerStateKeys'
        | 'getLazyState'
        | 'getLazyStateKeys';
    }
  >,
): Verdict {
  const { p, ctx, writes, after, op, reject, canWrite } = c;
  const keyed = ctx.serviceKey !== null;
  switch (cmd.kind) {
    case 'setState':
    case 'clearState':
    case 'clearAllState': {
      if (!keyed || !canWrite) {
        reject(
          'RT0017',
          `${ctx.target} cannot write state: only exclusive handlers of virtual objects and workflows can`,
        );
        return 'stop';
      }
      if (cmd.kind === 'setState')
        writes.push(stateWrite.set(ctx.serviceName, ctx.serviceKey, ctx.partitionKey, cmd.key, cmd.value));
      else if (cmd.kind === 'clearState') writes.push(stateWrite.clear(ctx.serviceName, ctx.serviceKey, cmd.key));
      else writes.push(stateWrite.clearAll(ctx.serviceName, ctx.serviceKey));
      if (ctx.serviceTy === 'VirtualObject') {
        // The cached copy follows the commit (copies: the frame's buffer is not kept alive by the cache).
        const lk = lockKey(ctx.serviceName, ctx.serviceKey);
        const change: StateChange =
          cmd.kind === 'setState'
            ? { kind: 'set', key: Buffer.from(cmd.key), value: Buffer.from(cmd.value) }
            : cmd.kind === 'clearState'
              ? { kind: 'clear', key: Buffer.from(cmd.key) }
              : { kind: 'clearAll' };
        // A dropped invocation's partition was recovered meanwhile (the cache was cleared): never re-apply onto it.
        p.onCommitted(op, () => (ctx.poisoned ? p.stateCache.invalidate(lk) : p.stateCache.apply(lk, change)));
        p.onFailed(op, () => p.stateCache.invalidate(lk));
      }
      break;
    }
    case 'getEagerState':
    case 'getEagerStateKeys': {
      if (!keyed) {
        reject('RT0017', `${ctx.target} has no state: only virtual objects and workflows have state`);
        return 'stop';
      }
      break;
    }
    case 'getLazyState':
    case 'getLazyStateKeys': {
      if (!keyed) {
        reject('RT0017', `${ctx.target} has no state: only virtual objects and workflows have state`);
        return 'stop';
      }
      const completionId = cmd.completionId;
      const stateKey = cmd.kind === 'getLazyState' ? cmd.key : undefined;
      after.push(() => void p.roles.answerLazyState(ctx, completionId, stateKey));
      break;
    }
  }
  return 'append';
}

export async function answerLazyState(
  p: PartitionProcessor,
  ctx: InvocationCtx,
  completionId: number,
  stateKey: Uint8Array | undefined,
): Promise<void> {
  try {
    await ctx.lastWrite;
    let raw: Uint8Array;
    let type: number;
    if (stateKey !== undefined) {
      const value = await p.deps.storage.state.get(ctx.serviceName, ctx.serviceKey!, stateKey);
      raw = codec.notification(
        { kind: 'completion', id: completionId },
        value === undefined ? { kind: 'void' } : { kind: 'value', value },
      );
      type = MessageType.GetLazyStateCompletionNotification;
    } else {
      const rows = await p.deps.storage.state.load(ctx.serviceName, ctx.serviceKey!);
      raw = codec.notification(
        { kind: 'completion', id: completionId },
        { kind: 'stateKeys', keys: rows.map((r) => r.key) },
      );
      type = MessageType.GetLazyStateKeysCompletionNotification;
    }
    await p.roles.appendNotification(ctx, { type, raw, completionId, success: true }, []);
  } catch (err) {
    p.log.warn({ err, [LOG_FIELDS.invocationId]: ctx.id }, 'could not answer a lazy state read');
    p.poison(ctx);
  }
}
