import type { Condition } from '../kube/types.ts';

export type ConditionStatus = Condition['status'];

export interface ConditionInput {
  readonly type: string;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
}

/**
 * Sets conditions on a copy of `current`: `lastTransitionTime` moves only when a condition's status changes, every
 * condition written carries `observedGeneration`, and conditions not mentioned are kept.
 */
export function setConditions(
  current: readonly Condition[] | undefined,
  updates: readonly ConditionInput[],
  generation: number,
  now: Date,
): Condition[] {
  const next = [...(current ?? [])];
  for (const u of updates) {
    const i = next.findIndex((c) => c.type === u.type);
    const previous = i >= 0 ? next[i] : undefined;
    const condition: Condition = {
      type: u.type,
      status: u.status,
      observedGeneration: generation,
      lastTransitionTime:
        previous !== undefined && previous.status === u.status ? previous.lastTransitionTime : now.toISOString(),
      reason: u.reason,
      message: u.message,
    };
    if (i >= 0) next[i] = condition;
    else next.push(condition);
  }
  return next;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}
