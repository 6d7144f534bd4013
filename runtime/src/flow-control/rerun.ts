import type { InvocationCtx } from '../engine/invocation.ts';

/**
 * The columns to write when a suspended or paused invocation becomes runnable again: under flow control it has no
 * permit until its next attempt starts, and its row says so (no start since it became runnable), so that a new owner
 * of its partition queues it rather than counting it as running.
 */
export function rerun(ctx: InvocationCtx): { lastStartAt?: null } {
  return ctx.scope !== null ? { lastStartAt: null } : {};
}
