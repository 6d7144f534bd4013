import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fairShare, placementStep } from '../../../runtime/src/cluster/placement.ts';

describe('fairShare', () => {
  it('gives every node ⌊P/N⌋ or ⌈P/N⌉, the extra ones to the first names, summing to P', () => {
    expect([...fairShare(['c', 'a', 'b'], 64)]).toEqual([
      ['a', 22],
      ['b', 21],
      ['c', 21],
    ]);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 1, max: 4096 }),
        (names, p) => {
          const shares = [...fairShare(names, p).values()];
          expect(shares.reduce((a, b) => a + b, 0)).toBe(p);
          expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
        },
      ),
    );
  });

  it('is the same whatever order the members are listed in (every node computes the same targets)', () => {
    expect([...fairShare(['b', 'a'], 5)]).toEqual([...fairShare(['a', 'b'], 5)]);
  });
});

describe('placementStep', () => {
  const owners = (spec: Record<string, number>, free = 0): (string | undefined)[] => [
    ...Object.entries(spec).flatMap(([name, n]) => Array<string | undefined>(n).fill(name)),
    ...Array<undefined>(free).fill(undefined),
  ];

  it('takes free partitions up to its share', () => {
    expect(
      placementStep({
        self: 'a',
        partitions: 12,
        members: ['a', 'b'],
        owners: owners({ b: 6 }, 6),
        mine: 0,
        maxRelease: 4,
      }),
    ).toEqual({
      take: 6,
      release: 0,
      target: 6,
    });
  });

  it('gives partitions up, a few at a time, only while another member is short', () => {
    // a holds everything, b just joined: a releases at most maxRelease per step.
    expect(
      placementStep({
        self: 'a',
        partitions: 12,
        members: ['a', 'b'],
        owners: owners({ a: 12 }),
        mine: 12,
        maxRelease: 4,
      }),
    ).toEqual({
      take: 0,
      release: 4,
      target: 6,
    });
    // Nobody short: nothing moves, even above the share (e.g. b not counted yet).
    expect(
      placementStep({ self: 'a', partitions: 12, members: ['a'], owners: owners({ a: 12 }), mine: 12, maxRelease: 4 })
        .release,
    ).toBe(0);
    // Free partitions go to the short member first: only what they cannot cover is given up (b needs 6, 4 are free).
    expect(
      placementStep({
        self: 'a',
        partitions: 12,
        members: ['a', 'b'],
        owners: owners({ a: 8 }, 4),
        mine: 8,
        maxRelease: 4,
      }).release,
    ).toBe(2);
  });

  it('takes a free partition nobody else will take, even at its share (no partition stays ownerless)', () => {
    // b is at its share by a's count; c (dead, not a member) left partitions behind.
    expect(
      placementStep({
        self: 'a',
        partitions: 12,
        members: ['a', 'b'],
        owners: owners({ a: 6, b: 6 }),
        mine: 6,
        maxRelease: 4,
      }).take,
    ).toBe(0);
    expect(
      placementStep({
        self: 'a',
        partitions: 13,
        members: ['a', 'b'],
        owners: owners({ a: 6, b: 6 }, 1),
        mine: 6,
        maxRelease: 4,
      }).take,
    ).toBe(1);
  });

  it('converges: nodes stepping in turn reach a balance within ±1 with every partition owned', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 200 }), (n, p) => {
        const names = Array.from({ length: n }, (_, i) => `n${i}`);
        // n0 starts with everything, as the first node of a cluster does.
        const owner: (string | undefined)[] = Array<string>(p).fill('n0');
        for (let round = 0; round < 400; round++) {
          for (const self of names) {
            const mine = owner.filter((o) => o === self).length;
            const step = placementStep({
              self,
              partitions: p,
              members: names,
              owners: owner,
              mine,
              maxRelease: Math.max(1, Math.ceil(p / 16)),
            });
            for (let i = 0, left = step.release; i < p && left > 0; i++) {
              if (owner[p - 1 - i] === self) {
                owner[p - 1 - i] = undefined;
                left--;
              }
            }
            for (let i = 0, left = step.take; i < p && left > 0; i++) {
              if (owner[i] === undefined) {
                owner[i] = self;
                left--;
              }
            }
          }
        }
        expect(owner.every((o) => o !== undefined)).toBe(true);
        const counts = names.map((name) => owner.filter((o) => o === name).length);
        expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
      }),
      { numRuns: 60 },
    );
  });
});
