/**
 * What a suspended invocation waits for. V5/V6 send flat lists (resume when any of them is there); V7 sends a tree of
 * combinators which restate evaluates, and so do we: resuming on a leaf that cannot unblock the tree would only make
 * the SDK suspend again, forever.
 */
export interface AwaitingTree {
  combinator: 'first_completed' | 'all_completed' | 'first_succeeded_or_all_failed' | 'all_succeeded_or_first_failed';
  completions: number[];
  signals: number[];
  namedSignals: string[];
  nested: AwaitingTree[];
}

export interface NotificationIndex {
  /** undefined = not there; true = success (value or void); false = failure. */
  completion(id: number): boolean | undefined;
  signal(idx: number): boolean | undefined;
  namedSignal(name: string): boolean | undefined;
}

type Outcome = 'pending' | 'succeeded' | 'failed';

function leaf(v: boolean | undefined): Outcome {
  return v === undefined ? 'pending' : v ? 'succeeded' : 'failed';
}

function evaluate(tree: AwaitingTree, index: NotificationIndex): Outcome {
  const children: Outcome[] = [
    ...tree.completions.map((c) => leaf(index.completion(c))),
    ...tree.signals.map((s) => leaf(index.signal(s))),
    ...tree.namedSignals.map((n) => leaf(index.namedSignal(n))),
    ...tree.nested.map((t) => evaluate(t, index)),
  ];
  if (children.length === 0) return 'pending';
  const done = children.filter((c) => c !== 'pending');
  switch (tree.combinator) {
    case 'first_completed':
      return done[0] ?? 'pending';
    case 'all_completed':
      return done.length === children.length ? 'succeeded' : 'pending';
    case 'first_succeeded_or_all_failed':
      if (done.includes('succeeded')) return 'succeeded';
      return done.length === children.length ? 'failed' : 'pending';
    case 'all_succeeded_or_first_failed':
      if (done.includes('failed')) return 'failed';
      return done.length === children.length ? 'succeeded' : 'pending';
  }
}

/** True when the awaited condition can make progress now. */
export function canResume(tree: AwaitingTree, index: NotificationIndex): boolean {
  return evaluate(tree, index) !== 'pending';
}

/** V5/V6 flat lists behave as "first completed" over all listed ids. */
export function flatAwaiting(completions: number[], signals: number[], namedSignals: string[]): AwaitingTree {
  return { combinator: 'first_completed', completions, signals, namedSignals, nested: [] };
}

export function treeDepth(tree: AwaitingTree): number {
  let max = 0;
  for (const n of tree.nested) max = Math.max(max, treeDepth(n));
  return max + 1;
}
