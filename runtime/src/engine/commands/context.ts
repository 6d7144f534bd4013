import type { ErrorCode } from '../../errors/codes.ts';
import type { AttemptHandle } from '../../invoker/invoker.ts';
import type { Frame } from '../../protocol/framing.ts';
import type { InvocationCtx } from '../invocation.ts';
import type { PartitionProcessor } from '../processor.ts';
import { type Write, type WriteBatch } from '../../storage/api.ts';

/** Columns of the journal row that some commands fill (what introspection shows of them). */
export interface JournalExtra {
  name?: string;
  invokedId?: string;
  invokedTarget?: string;
  sleepWakeupAt?: Date;
  promiseName?: string;
}

/**
 * One command the deployment sent, on its way to the journal: the write it goes into and what runs once that write
 * committed. A command family adds statements to `writes` (or to `op` directly) and follow-ups to `after`.
 */
export interface CommandContext {
  readonly p: PartitionProcessor;
  readonly ctx: InvocationCtx;
  readonly attempt: AttemptHandle;
  readonly frame: Frame;
  readonly now: Date;
  readonly keyed: boolean;
  /** Exclusive handlers of virtual objects and workflows' run handler may write state. */
  readonly canWrite: boolean;
  readonly writes: Write[];
  readonly after: (() => void)[];
  readonly journalExtra: JournalExtra;
  readonly op: WriteBatch;
  /** Fails the attempt without persisting the command. */
  readonly reject: (rtCode: ErrorCode, message: string) => void;
  /** Marks a write whose outbox rows are delivered once the command is committed; returns it. */
  readonly deliverAfter: <W extends Write>(w: W) => W;
  /** What runs once the command's write committed: the `after` steps, then the deliveries. */
  readonly committed: () => void;
}

/** `append`: journal the command and commit; `stop`: the family rejected it, or committed it itself. */
export type Verdict = 'append' | 'stop';
