import type { admit, afterAdmit, newInvocation, undoAdmit } from './admission.ts';
import type { choosePin, startAttempt } from './attempts.ts';
import type { onCommand } from './commands/dispatch.ts';
import type { onRunProposal } from './commands/run.ts';
import type { answerLazyState } from './commands/state.ts';
import type { applyMutation, dropCachedStateWith, handOver, resumeInbox } from './handover.ts';
import type { complete } from './lifecycle/complete.ts';
import type { forgetNotStarted, kill } from './lifecycle/kill.ts';
import type { chooseDeployment, managed } from './lifecycle/management.ts';
import type { pauseOnFailure } from './lifecycle/pause.ts';
import type { handleFailure } from './lifecycle/retry.ts';
import type { onSuspension, recheckSuspended } from './lifecycle/suspend.ts';
import type { appendNotification, sendCommitted, signal } from './notifications.ts';
import type { deliver } from './outbox.ts';
import type { pollRemoteResults } from './results.ts';
import type { disarmRetry, fireTimer } from './timers.ts';
import type { PartitionProcessor } from './processor.ts';

/** A role function with the processor bound: what one role calls of another. */
type Bound<F> = F extends (p: PartitionProcessor, ...args: infer A) => infer R ? (...args: A) => R : never;

/**
 * What the roles call of each other, bound to one processor by the Engine. Going through this table rather than
 * importing each other keeps the role modules free of import cycles: each imports the processor shell only.
 */
export interface Roles {
  admit: Bound<typeof admit>;
  afterAdmit: Bound<typeof afterAdmit>;
  answerLazyState: Bound<typeof answerLazyState>;
  appendNotification: Bound<typeof appendNotification>;
  applyMutation: Bound<typeof applyMutation>;
  chooseDeployment: Bound<typeof chooseDeployment>;
  choosePin: Bound<typeof choosePin>;
  complete: Bound<typeof complete>;
  deliver: Bound<typeof deliver>;
  dropCachedStateWith: Bound<typeof dropCachedStateWith>;
  fireTimer: Bound<typeof fireTimer>;
  disarmRetry: Bound<typeof disarmRetry>;
  forgetNotStarted: Bound<typeof forgetNotStarted>;
  handOver: Bound<typeof handOver>;
  handleFailure: Bound<typeof handleFailure>;
  kill: Bound<typeof kill>;
  managed: Bound<typeof managed>;
  newInvocation: Bound<typeof newInvocation>;
  onCommand: Bound<typeof onCommand>;
  onRunProposal: Bound<typeof onRunProposal>;
  onSuspension: Bound<typeof onSuspension>;
  pauseOnFailure: Bound<typeof pauseOnFailure>;
  pollRemoteResults: Bound<typeof pollRemoteResults>;
  recheckSuspended: Bound<typeof recheckSuspended>;
  resumeInbox: Bound<typeof resumeInbox>;
  sendCommitted: Bound<typeof sendCommitted>;
  signal: Bound<typeof signal>;
  startAttempt: Bound<typeof startAttempt>;
  undoAdmit: Bound<typeof undoAdmit>;
}
