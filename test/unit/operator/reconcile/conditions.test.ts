import { describe, expect, it } from 'vitest';
import { findCondition, isTrue, setConditions } from '../../../../operator/src/reconcile/conditions.ts';

const T0 = new Date('2026-01-01T00:00:00Z');
const T1 = new Date('2026-01-01T00:05:00Z');

describe('setConditions', () => {
  it('stamps observedGeneration and moves lastTransitionTime only when the status changes', () => {
    const first = setConditions(
      undefined,
      [
        { type: 'Ready', status: 'False', reason: 'Progressing', message: 'waiting for pods' },
        { type: 'Reconciling', status: 'True', reason: 'Progressing', message: 'creating children' },
      ],
      1,
      T0,
    );
    expect(first).toEqual([
      {
        type: 'Ready',
        status: 'False',
        observedGeneration: 1,
        lastTransitionTime: T0.toISOString(),
        reason: 'Progressing',
        message: 'waiting for pods',
      },
      {
        type: 'Reconciling',
        status: 'True',
        observedGeneration: 1,
        lastTransitionTime: T0.toISOString(),
        reason: 'Progressing',
        message: 'creating children',
      },
    ]);

    // Same status, new reason and generation: the transition time stays.
    const second = setConditions(
      first,
      [{ type: 'Ready', status: 'False', reason: 'PodsNotReady', message: '1/3 ready' }],
      2,
      T1,
    );
    expect(findCondition(second, 'Ready')).toMatchObject({
      reason: 'PodsNotReady',
      observedGeneration: 2,
      lastTransitionTime: T0.toISOString(),
    });
    // Conditions not mentioned are kept as they were.
    expect(findCondition(second, 'Reconciling')).toEqual(first[1]);

    const third = setConditions(second, [{ type: 'Ready', status: 'True', reason: 'Ready', message: '' }], 2, T1);
    expect(findCondition(third, 'Ready')?.lastTransitionTime).toBe(T1.toISOString());
    expect(isTrue(third, 'Ready')).toBe(true);
    expect(isTrue(third, 'Stalled')).toBe(false);
    // The input is not modified.
    expect(findCondition(second, 'Ready')?.status).toBe('False');
  });
});
