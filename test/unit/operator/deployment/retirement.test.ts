import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DELETION_POLICIES,
  type DeletionPolicy,
  type SupersededDeployment,
} from '../../../../operator/src/api/v1alpha1/deployment.ts';
import { drainCountsSql, parseDrainCounts } from '../../../../operator/src/controllers/deployment/drain.ts';
import {
  MAX_SUPERSEDED,
  addSuperseded,
  drainDeadline,
  markDeregistered,
  planDeletion,
  stepSuperseded,
  type DeletionInput,
} from '../../../../operator/src/controllers/deployment/retirement.ts';

/*
 * The retirement state machine's safety and liveness rules, as properties over arbitrary observations and clocks
 * (operator.md §7 L0; restate-operator #137, #172/#173/#176).
 */

const T0 = Date.parse('2026-03-01T00:00:00.000Z');
const MINUTE = 60_000;

const counts = fc.record({ pinned: fc.nat(5), unpinned: fc.nat(5) });
const policy = fc.constantFrom<DeletionPolicy>(...DELETION_POLICIES);
const version = fc.record({
  deploymentId: fc.stringMatching(/^dp_[a-z0-9]{4}$/),
  exists: fc.boolean(),
  counts: fc.option(counts, { nil: undefined }),
});
const deletionInput: fc.Arbitrary<DeletionInput> = fc.record({
  policy,
  now: fc.integer({ min: 0, max: 600 * MINUTE }).map((ms) => new Date(T0 + ms)),
  deletionStartedAt: fc.constant(new Date(T0)),
  drainTimeoutMs: fc.integer({ min: 0, max: 240 * MINUTE }),
  versions: fc.uniqueArray(version, { selector: (v) => v.deploymentId, maxLength: 6 }),
});

function entry(id: string, state: SupersededDeployment['state'] = 'Draining'): SupersededDeployment {
  return {
    deploymentId: id,
    endpoint: `http://${id}/`,
    supersededAt: new Date(T0).toISOString(),
    state,
    pendingInvocations: 0,
  };
}

describe('deletion plan', () => {
  it('never deregisters a version with unfinished invocations unless the policy forces (Force, DrainThenForce after its timeout)', () => {
    fc.assert(
      fc.property(deletionInput, (input) => {
        const plan = planDeletion(input);
        const pastTimeout = input.now.getTime() >= drainDeadline(input).getTime();
        const forcing = input.policy === 'Force' || (input.policy === 'DrainThenForce' && pastTimeout);
        for (const p of plan.deregister) {
          const v = input.versions.find((x) => x.deploymentId === p.deploymentId)!;
          expect(v.exists).toBe(true);
          const pending = v.counts === undefined ? undefined : v.counts.pinned + v.counts.unpinned;
          if (pending !== 0) expect(forcing).toBe(true);
          // Force on refusal only where our own count found nothing, or the policy forces anyway.
          if (p.forceOnRefusal && !forcing) expect(pending).toBe(0);
        }
      }),
    );
  });

  it('Orphan never deregisters anything and never blocks', () => {
    fc.assert(
      fc.property(deletionInput, (input) => {
        const plan = planDeletion({ ...input, policy: 'Orphan' });
        expect(plan.deregister).toEqual([]);
        expect(plan.blocked).toEqual([]);
      }),
    );
  });

  it('a version with nothing unfinished never blocks deletion, latest of its services or not (#172/#173)', () => {
    fc.assert(
      fc.property(policy, fc.stringMatching(/^dp_[a-z0-9]{4}$/), fc.nat(10 * MINUTE), (p, id, elapsed) => {
        const plan = planDeletion({
          policy: p,
          now: new Date(T0 + elapsed),
          deletionStartedAt: new Date(T0),
          drainTimeoutMs: 60 * MINUTE,
          versions: [{ deploymentId: id, exists: true, counts: { pinned: 0, unpinned: 0 } }],
        });
        expect(plan.blocked).toEqual([]);
        expect(plan.deregister.map((d) => d.deploymentId)).toEqual(p === 'Orphan' ? [] : [id]);
      }),
    );
  });

  it('everything that blocks is named with its counts; versions already gone neither block nor get deleted', () => {
    fc.assert(
      fc.property(deletionInput, (input) => {
        const plan = planDeletion(input);
        const named = new Set([
          ...plan.blocked.map((b) => b.deploymentId),
          ...plan.deregister.map((d) => d.deploymentId),
        ]);
        for (const v of input.versions) expect(named.has(v.deploymentId)).toBe(v.exists && input.policy !== 'Orphan');
        for (const b of plan.blocked) {
          const v = input.versions.find((x) => x.deploymentId === b.deploymentId)!;
          if (v.counts !== undefined) expect(b.counts).toEqual(v.counts);
        }
      }),
    );
  });
});

describe('superseded versions', () => {
  it('a step never deregisters a version that is latest for a service or has unfinished invocations', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<SupersededDeployment['state']>('Draining', 'Drained'),
        counts,
        fc.array(fc.constantFrom('A', 'B'), { maxLength: 2 }),
        fc.nat(20 * MINUTE),
        fc.nat(20 * MINUTE),
        (state, c, latestFor, grace, elapsed) => {
          const start =
            state === 'Drained'
              ? {
                  ...entry('dp_x', 'Drained'),
                  drainedAt: new Date(T0).toISOString(),
                  removeAfter: new Date(T0 + grace).toISOString(),
                }
              : entry('dp_x');
          const step = stepSuperseded(start, { exists: true, latestFor, counts: c }, new Date(T0 + elapsed), grace);
          if (c.pinned + c.unpinned > 0 || latestFor.length > 0) {
            expect(step.deregister).toBeUndefined();
            expect(step.entry?.state).toBe('Draining');
            expect(step.entry?.pendingInvocations).toBe(c.pinned + c.unpinned);
          }
        },
      ),
    );
  });

  it('always ends Deregistered once its invocations finish, never deregistering before', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ pinned: fc.boolean(), finishesAfter: fc.nat(8) }), { maxLength: 6 }),
        fc.nat(10), // reconciles while it is still the latest of a service
        fc.integer({ min: 0, max: 10 * MINUTE }), // grace period
        fc.array(fc.integer({ min: 5_000, max: 5 * MINUTE }), { minLength: 1, maxLength: 5 }), // reconcile intervals
        (invocations, latestUntil, grace, intervals) => {
          let current: SupersededDeployment | undefined = entry('dp_old');
          let registered = true;
          let now = T0;
          for (let step = 0; step < 1000 && current !== undefined; step++) {
            const live = invocations.filter((i) => i.finishesAfter > step);
            const c = { pinned: live.filter((i) => i.pinned).length, unpinned: live.filter((i) => !i.pinned).length };
            const latestFor = step < latestUntil ? ['Greeter'] : [];
            const result = stepSuperseded(current, { exists: registered, latestFor, counts: c }, new Date(now), grace);
            if (result.deregister !== undefined) {
              expect(c.pinned + c.unpinned).toBe(0);
              expect(latestFor).toEqual([]);
              registered = false;
              current = markDeregistered(result.entry!);
              continue;
            }
            if (current.state === 'Deregistered') expect(result.entry).toBeUndefined();
            current = result.entry;
            now += intervals[step % intervals.length]!;
          }
          expect(registered).toBe(false);
          expect(current).toBeUndefined();
        },
      ),
    );
  });

  it('a Drained version that gets work again goes back to Draining and loses its removal time', () => {
    const drained = stepSuperseded(
      entry('dp_x'),
      { exists: true, latestFor: [], counts: { pinned: 0, unpinned: 0 } },
      new Date(T0),
      5 * MINUTE,
    );
    expect(drained.transition).toBe('Drained');
    expect(drained.entry?.removeAfter).toBe(new Date(T0 + 5 * MINUTE).toISOString());
    expect(drained.deregister).toBeUndefined();
    const again = stepSuperseded(
      drained.entry!,
      { exists: true, latestFor: [], counts: { pinned: 1, unpinned: 0 } },
      new Date(T0 + MINUTE),
      5 * MINUTE,
    );
    expect(again.transition).toBe('Draining');
    expect(again.entry).toEqual({ ...entry('dp_x'), pendingInvocations: 1 });
  });

  it('a version removed by someone else is recorded as Deregistered, then dropped', () => {
    const gone = stepSuperseded(
      entry('dp_x'),
      { exists: false, latestFor: [], counts: { pinned: 0, unpinned: 0 } },
      new Date(T0),
      0,
    );
    expect(gone).toEqual({ entry: { ...entry('dp_x'), state: 'Deregistered' }, transition: 'Deregistered' });
    expect(
      stepSuperseded(
        gone.entry!,
        { exists: false, latestFor: [], counts: { pinned: 0, unpinned: 0 } },
        new Date(T0),
        0,
      ),
    ).toEqual({
      entry: undefined,
    });
  });

  it('the list stays bounded, giving up finished entries first and never the newest', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom<SupersededDeployment['state']>('Draining', 'Drained', 'Deregistered'), {
          minLength: MAX_SUPERSEDED,
          maxLength: MAX_SUPERSEDED,
        }),
        (states) => {
          const list = states.map((s, i) => entry(`dp_${i}`, s));
          const { list: next, dropped } = addSuperseded(list, entry('dp_new'));
          expect(next).toHaveLength(MAX_SUPERSEDED);
          expect(next.at(-1)?.deploymentId).toBe('dp_new');
          expect(dropped).toHaveLength(1);
          const rank = { Deregistered: 0, Drained: 1, Draining: 2 } as const;
          for (const kept of next.slice(0, -1)) expect(rank[dropped[0]!.state]).toBeLessThanOrEqual(rank[kept.state]);
        },
      ),
    );
  });
});

describe('drain query', () => {
  it('counts pinned invocations, and unpinned ones that can still reach the deployment', () => {
    expect(drainCountsSql({ deploymentId: 'dp_1', latestForServices: ['Greeter', "O'Brien"] })).toBe(
      [
        'SELECT',
        "  count(CASE WHEN pinned_deployment_id = 'dp_1' THEN 1 END) AS pinned,",
        '  count(CASE WHEN pinned_deployment_id IS NULL THEN 1 END) AS unpinned',
        'FROM sys_invocation',
        "WHERE status <> 'completed'",
        "  AND (pinned_deployment_id = 'dp_1' OR (pinned_deployment_id IS NULL AND (last_attempt_deployment_id = 'dp_1' OR target_service_name IN ('Greeter', 'O''Brien'))))",
      ].join('\n'),
    );
    expect(drainCountsSql({ deploymentId: 'dp_1', latestForServices: [] })).not.toContain(' IN (');
  });

  it('reads counts as numbers or strings, a missing (NULL) column as zero', () => {
    expect(parseDrainCounts([{ pinned: 2, unpinned: '3' }])).toEqual({ pinned: 2, unpinned: 3 });
    expect(parseDrainCounts([{}])).toEqual({ pinned: 0, unpinned: 0 });
    expect(parseDrainCounts([])).toEqual({ pinned: 0, unpinned: 0 });
  });
});
