import type { InvocationId } from '../ids/invocation-id.ts';
import type { HandlerSchema } from '../schema/types.ts';
import { accept, admit, afterAdmit, newInvocation, undoAdmit } from './admission.ts';
import { choosePin, startAttempt } from './attempts.ts';
import type * as codec from './codec.ts';
import { onCommand } from './commands/dispatch.ts';
import { onRunProposal } from './commands/run.ts';
import { answerLazyState } from './commands/state.ts';
import { applyMutation, dropCachedStateWith, handOver, resumeInbox } from './handover.ts';
import { cancel } from './lifecycle/cancel.ts';
import { complete } from './lifecycle/complete.ts';
import { forgetNotStarted, kill } from './lifecycle/kill.ts';
import { chooseDeployment, managed } from './lifecycle/management.ts';
import { pause, pauseOnFailure } from './lifecycle/pause.ts';
import { purge, purgeJournal } from './lifecycle/purge.ts';
import { restartAsNew } from './lifecycle/restart-as-new.ts';
import { resume } from './lifecycle/resume.ts';
import { handleFailure } from './lifecycle/retry.ts';
import { onSuspension, recheckSuspended } from './lifecycle/suspend.ts';
import { modifyState } from './modify-state.ts';
import { appendNotification, sendCommitted, signal } from './notifications.ts';
import { enqueue } from './enqueue.ts';
import { deliver, pollOutbox } from './outbox.ts';
import { PartitionProcessor, type EngineDeps, type EngineOptions } from './processor.ts';
import { drop, recover } from './recovery.ts';
import { awaitCompletion, completionWaiters, getCompleted, pollRemoteResults } from './results.ts';
import { disarmRetry, fireTimer } from './timers.ts';
import type { AcceptRequest, AcceptResult, CompletedInvocation, DeploymentChoice, EnqueueResult } from './types.ts';
import type { InvocationRow } from '../storage/rows.ts';
import type { LimitRule } from '../flow-control/limiter.ts';

export type { EngineDeps, EngineOptions };

/**
 * The only writer of invocation state. Every change is a WriteBatch committed through the group committer; effects that
 * others can observe (frames sent to the deployment, results handed to callers) happen only after that commit.
 *
 * This class is the engine's public face: the listeners, the cluster coordinator and the runtime call it. The work is
 * done by the role modules over one PartitionProcessor (see processor.ts and ARCHITECTURE.md).
 */
export class Engine {
  private readonly p: PartitionProcessor;

  constructor(options: EngineOptions, deps: EngineDeps) {
    const p = (this.p = new PartitionProcessor(options, deps));
    p.roles = {
      admit: (...a) => admit(p, ...a),
      afterAdmit: (ctx, runnable) => afterAdmit(p, ctx, runnable),
      answerLazyState: (...a) => answerLazyState(p, ...a),
      appendNotification: (ctx, entry, extra) => appendNotification(p, ctx, entry, extra),
      applyMutation: (op, m) => applyMutation(p, op, m),
      chooseDeployment: (...a) => chooseDeployment(p, ...a),
      choosePin: (serviceName) => choosePin(p, serviceName),
      complete: (ctx, outcome, failed, extra) => complete(p, ctx, outcome, failed, extra),
      deliver: (row) => deliver(p, row),
      dropCachedStateWith: (op, lk) => dropCachedStateWith(p, op, lk),
      fireTimer: (t) => fireTimer(p, t),
      disarmRetry: (ctx) => disarmRetry(p, ctx),
      forgetNotStarted: (ctx) => forgetNotStarted(p, ctx),
      handOver: (lk, op, now, from) => handOver(p, lk, op, now, from),
      handleFailure: (ctx, failure) => handleFailure(p, ctx, failure),
      kill: (id) => kill(p, id),
      managed: (id) => managed(p, id),
      newInvocation: (req, now, caller) => newInvocation(p, req, now, caller),
      onCommand: (ctx, attempt, frame) => onCommand(p, ctx, attempt, frame),
      onRunProposal: (ctx, attempt, frame) => onRunProposal(p, ctx, attempt, frame),
      onSuspension: (ctx, awaiting) => onSuspension(p, ctx, awaiting),
      pauseOnFailure: (ctx, failure) => pauseOnFailure(p, ctx, failure),
      pollRemoteResults: () => pollRemoteResults(p),
      recheckSuspended: (ctx) => recheckSuspended(p, ctx),
      resumeInbox: (lk) => resumeInbox(p, lk),
      sendCommitted: (ctx, e) => sendCommitted(p, ctx, e),
      signal: (...a) => signal(p, ...a),
      startAttempt: (ctx) => startAttempt(p, ctx),
      undoAdmit: (ctx) => undoAdmit(p, ctx),
    };
  }

  /** Whether this process serves `partition` now (requests for others go to their owner). */
  serves(partition: number): boolean {
    return this.p.serves(partition);
  }

  servedPartitions(): number[] {
    return this.p.servedPartitions();
  }

  /** The partition of an invocation id, a virtual-object / workflow key, or a partition key. */
  partitionOf(partitionKey: bigint): number {
    return this.p.partitionOf(partitionKey);
  }

  partitionOfKey(key: string): number {
    return this.p.partitionOfKey(key);
  }

  /** Picks up partitions this process has just taken (see recovery.ts). */
  recover(partitions: number[]): Promise<{ invocations: number; timers: number }> {
    return recover(this.p, partitions);
  }

  /** Forgets everything in memory about `partitions` (see recovery.ts). */
  drop(partitions: Iterable<number>): void {
    drop(this.p, partitions);
  }

  async stop(): Promise<void> {
    const p = this.p;
    p.stopped = true;
    p.timers.clear();
    if (p.remotePoll !== undefined) clearTimeout(p.remotePoll);
    for (const ctx of p.active.values()) ctx.attempt?.abort();
    await p.deps.storage.close();
  }

  /** Whether flow control (scopes, limit keys, virtual queues) is enabled. */
  get flowControl(): boolean {
    return this.p.options.flowControl === true;
  }

  /** The limiter's rules changed (every partition's limiter applies them; waiters that now fit start). */
  setFlowRules(rules: readonly LimitRule[]): void {
    this.p.flow.setRules(rules);
  }

  /**
   * Pauses or resumes a virtual queue of a partition served here: stored first, then applied. While paused nothing of
   * the queue starts (running attempts go on); on resume what waited goes through the limiter again.
   */
  async setVQueuePaused(partitionKey: bigint, queue: string, paused: boolean): Promise<void> {
    const p = this.p;
    const partition = p.partitionOf(partitionKey);
    p.requireServed(partition);
    await p.deps.storage.vqueues.setPaused(partition, queue, paused);
    if (!p.served.has(partition)) return;
    if (paused) p.flow.pause(partition, queue);
    else p.flow.resume(partition, queue);
  }

  /** The limiter's counters of the partitions served here (sys_user_limits), each with its partition. */
  flowCounters(): { partition: number; rows: ReturnType<PartitionProcessor['flow']['counters']> }[] {
    return this.p.servedPartitions().map((partition) => ({ partition, rows: this.p.flow.counters(partition) }));
  }

  /** Stores a new invocation (input as journal entry 0) and starts it once committed. */
  accept(req: AcceptRequest): Promise<AcceptResult> {
    return accept(this.p, req);
  }

  /** Queues new invocations with derived ids for their partitions' owners, on any node (see enqueue.ts). */
  enqueue(requests: AcceptRequest[]): Promise<EnqueueResult[]> {
    return enqueue(this.p, requests);
  }

  /** Of `ids`, the invocations not finished yet (stored and running or waiting, or still queued for admission). */
  unfinished(ids: string[]): Promise<string[]> {
    return this.p.deps.storage.invocations.unfinished(ids);
  }

  /** Replaces the whole state of a virtual object or workflow key, in the key's order (see modify-state.ts). */
  modifyState(
    service: string,
    key: string,
    version: string | undefined,
    entries: { key: Buffer; value: Buffer }[],
  ): Promise<void> {
    return modifyState(this.p, service, key, version, entries);
  }

  /** Resolves when the invocation completes (at once if it already has). */
  awaitCompletion(id: string): Promise<CompletedInvocation | undefined> {
    return awaitCompletion(this.p, id);
  }

  /** How many requests are waiting in `awaitCompletion` for `id` on this replica. */
  completionWaiters(id: string): number {
    return completionWaiters(this.p, id);
  }

  getCompleted(id: string): Promise<{ row: InvocationRow; done?: CompletedInvocation } | undefined> {
    return getCompleted(this.p, id);
  }

  /** Delivers an awakeable completion, a named signal or cancellation to an invocation (see notifications.ts). */
  signal(targetId: InvocationId, sig: { idx: number } | { name: string }, result: codec.EngineResult): Promise<void> {
    return signal(this.p, targetId, sig, result);
  }

  cancel(id: InvocationId): Promise<'accepted' | 'done' | 'not_found' | 'completed'> {
    return cancel(this.p, id);
  }

  kill(id: InvocationId): Promise<void> {
    return kill(this.p, id);
  }

  pause(id: InvocationId): Promise<'paused' | 'already_paused'> {
    return pause(this.p, id);
  }

  resume(id: InvocationId, deployment: DeploymentChoice | undefined): Promise<void> {
    return resume(this.p, id, deployment);
  }

  purge(id: InvocationId): Promise<void> {
    return purge(this.p, id);
  }

  purgeJournal(id: InvocationId): Promise<void> {
    return purgeJournal(this.p, id);
  }

  restartAsNew(id: InvocationId, from: number, deployment: DeploymentChoice | undefined): Promise<string> {
    return restartAsNew(this.p, id, from, deployment);
  }

  /** Reads the outbox of served partitions and delivers what is not being delivered yet (see outbox.ts). */
  pollOutbox(partitions?: number[]): Promise<void> {
    return pollOutbox(this.p, partitions);
  }
}

export type { HandlerSchema };
