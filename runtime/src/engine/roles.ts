import type { InvocationId } from '../ids/invocation-id.ts';
import type { AttemptHandle } from '../invoker/invoker.ts';
import type { Frame } from '../protocol/framing.ts';
import type { InsertInvocation, Write, WriteBatch } from '../storage/api.ts';
import type { InvocationUpdate, NewInvocation, OutboxRow, StateMutationRow, TimerRow } from '../storage/rows.ts';
import type { AwaitingTree } from './awaiting.ts';
import type { EngineResult } from './codec.ts';
import type { InvocationCtx } from './invocation.ts';
import type { AcceptRequest, DeploymentChoice, EngineFailure, JournalEntry, Outcome, PinChoice } from './types.ts';

/**
 * What the roles call of each other, bound to one processor by the Engine (engine.ts), which also checks that each
 * role function fits its signature here. Going through this table rather than importing each other keeps the role
 * modules free of import cycles: each imports the processor shell, and this table imports no role.
 */
export interface Roles {
  // admission.ts
  newInvocation(
    req: AcceptRequest,
    now: Date,
    caller: { id: string; target: string } | undefined,
  ): { ctxRow: NewInvocation; inputRaw: Uint8Array; executionTime: Date | undefined };
  admit(
    row: NewInvocation,
    inputRaw: Uint8Array,
    now: Date,
    deterministic: boolean,
  ): { writes: Write[]; ctx: InvocationCtx; insert: InsertInvocation };
  afterAdmit(ctx: InvocationCtx, admittedRunnable: boolean): void;
  undoAdmit(ctx: InvocationCtx): void;
  // attempts.ts
  choosePin(serviceName: string): PinChoice;
  startAttempt(ctx: InvocationCtx): Promise<void>;
  // commands/
  onCommand(ctx: InvocationCtx, attempt: AttemptHandle, frame: Frame): void;
  onRunProposal(ctx: InvocationCtx, attempt: AttemptHandle, frame: Frame): void;
  answerLazyState(ctx: InvocationCtx, completionId: number, stateKey: Uint8Array | undefined): Promise<void>;
  // handover.ts
  handOver(lk: string, op: WriteBatch, now: Date, from?: InvocationCtx): InvocationCtx | undefined;
  resumeInbox(lk: string): void;
  dropCachedStateWith(op: WriteBatch, lk: string): void;
  applyMutation(op: WriteBatch, m: StateMutationRow): void;
  // lifecycle/
  complete(ctx: InvocationCtx, outcome: Outcome, failed?: InvocationUpdate, extra?: Write[]): Promise<boolean>;
  kill(id: InvocationId): Promise<void>;
  forgetNotStarted(ctx: InvocationCtx): void;
  managed(id: InvocationId): Promise<InvocationCtx>;
  chooseDeployment(
    id: string,
    serviceName: string,
    choice: DeploymentChoice,
    version: number,
    what: 'resume' | 'restart',
  ): string;
  pauseOnFailure(ctx: InvocationCtx, failure: EngineFailure): void;
  handleFailure(ctx: InvocationCtx, failure: EngineFailure): void;
  onSuspension(ctx: InvocationCtx, awaiting: AwaitingTree): Promise<void>;
  recheckSuspended(ctx: InvocationCtx): Promise<void>;
  // notifications.ts
  appendNotification(ctx: InvocationCtx, entry: Omit<JournalEntry, 'index'>, extra: Write[]): Promise<void>;
  sendCommitted(ctx: InvocationCtx, e: JournalEntry): void;
  signal(targetId: InvocationId, signal: { idx: number } | { name: string }, result: EngineResult): Promise<void>;
  // outbox.ts, results.ts, timers.ts
  deliver(row: OutboxRow): Promise<void>;
  pollRemoteResults(): void;
  fireTimer(t: TimerRow): Promise<void>;
  disarmRetry(ctx: InvocationCtx): Write[];
}
