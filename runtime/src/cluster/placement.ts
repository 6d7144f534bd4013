/**
 * Fair share of partitions among nodes: each of N nodes owns ⌊P/N⌋ partitions, and the first P mod N of them (by
 * name) one more. Every node computes the same targets from the same member list, so they agree without talking.
 */
export function fairShare(members: readonly string[], partitions: number): Map<string, number> {
  const names = [...new Set(members)].sort();
  const targets = new Map<string, number>();
  if (names.length === 0) return targets;
  const base = Math.floor(partitions / names.length);
  const extra = partitions % names.length;
  names.forEach((name, i) => targets.set(name, base + (i < extra ? 1 : 0)));
  return targets;
}

export interface PlacementInput {
  self: string;
  partitions: number;
  /** Nodes counted in the fair share (alive, not leaving, settled), this one included when it serves. */
  members: readonly string[];
  /** Live owner of each partition (undefined: free or expired). */
  owners: readonly (string | undefined)[];
  /** Partitions this node holds now (owned or being recovered). */
  mine: number;
  /** Most partitions this node gives up in one step. */
  maxRelease: number;
}

export interface PlacementStep {
  /** How many free partitions to take now. */
  take: number;
  /** How many of its partitions to give up now, for members that are short. */
  release: number;
  target: number;
}

/**
 * What one node does in one step: take free partitions while it is below its share (or, when every member is at its
 * share, one free partition at a time so that none stays without an owner), and give partitions up, at most
 * `maxRelease` at a time, only while it is above its share and some member is below its own.
 */
export function placementStep(input: PlacementInput): PlacementStep {
  const targets = fairShare(input.members, input.partitions);
  const target = targets.get(input.self) ?? 0;
  const held = new Map<string, number>();
  let free = 0;
  for (const owner of input.owners) {
    if (owner === undefined) free += 1;
    else held.set(owner, (held.get(owner) ?? 0) + 1);
  }
  let take = 0;
  if (targets.has(input.self) && free > 0) {
    if (input.mine < target) take = Math.min(free, target - input.mine);
    else {
      let deficit = 0;
      for (const [name, t] of targets) if (name !== input.self) deficit += Math.max(0, t - (held.get(name) ?? 0));
      // Nobody else is short, so nobody else takes them: keep no partition ownerless.
      if (deficit === 0) take = 1;
    }
  }
  let release = 0;
  if (input.mine > target) {
    let short = 0;
    for (const [name, t] of targets) if (name !== input.self) short += Math.max(0, t - (held.get(name) ?? 0));
    const excess = input.mine - target;
    // Free partitions will fill the short nodes anyway: give up only what they cannot get otherwise.
    const needed = Math.max(0, short - free);
    release = Math.min(excess, needed, input.maxRelease);
    if (!targets.has(input.self)) release = Math.min(input.mine, input.maxRelease);
  }
  return { take, release, target };
}
