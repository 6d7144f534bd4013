import type { ErrorCode } from '../../errors/codes.ts';
import type { Attempt } from '../../invoker/attempt.ts';
import type { Frame } from '../../protocol/framing.ts';
import type { Stmt, WriteOp } from '../../storage/api.ts';
import type { OutboxRow } from '../../storage/pg/tables/outbox.ts';
import type { InvocationCtx } from '../invocation.ts';
import type { PartitionProcessor } from '../processor.ts';

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
 * committed. A command family adds statements to `stmts` (or to `op` directly) and follow-ups to `after`.
 */
export interface CommandContext {
  readonly p: PartitionProcessor;
  readonly ctx: InvocationCtx;
  readonly attempt: Attempt;
  readonly frame: Frame;
  readonly now: Date;
  readonly keyed: boolean;
  /** Exclusive handlers of virtual objects and workflows' run handler may write state. */
  readonly canWrite: boolean;
  readonly stmts: Stmt[];
  readonly after: (() => void)[];
  readonly journalExtra: JournalExtra;
  readonly op: WriteOp;
  /** Fails the attempt without persisting the command. */
  readonly reject: (rtCode: ErrorCode, message: string) => void;
  /** Outbox rows this command writes are delivered once it is committed. */
  readonly deliverAfter: (row: OutboxRow) => void;
}

/** `append`: journal the command and commit; `stop`: the family rejected it, or committed it itself. */
export type Verdict = 'append' | 'stop';
