import { describe, expect, it } from 'vitest';
import {
  canResume,
  flatAwaiting,
  type AwaitingTree,
  type NotificationIndex,
} from '../../../runtime/src/engine/awaiting.ts';

function index(completions: Record<number, boolean>, signals: Record<number, boolean> = {}): NotificationIndex {
  return {
    completion: (id) => completions[id],
    signal: (idx) => signals[idx],
    namedSignal: () => undefined,
  };
}

const tree = (t: Partial<AwaitingTree> & Pick<AwaitingTree, 'combinator'>): AwaitingTree => ({
  completions: [],
  signals: [],
  namedSignals: [],
  nested: [],
  ...t,
});

describe('suspension await trees', () => {
  // Promise.all([Promise.race([sleep#1, awakeable#17]), sleep#2]) as the SDK sends it (V7), wrapped in the cancel race.
  const all = tree({
    combinator: 'first_completed',
    signals: [1],
    nested: [
      tree({
        combinator: 'all_succeeded_or_first_failed',
        completions: [2],
        nested: [tree({ combinator: 'first_completed', completions: [1], signals: [17] })],
      }),
    ],
  });

  it('does not resume while a Promise.all still misses a member', () => {
    expect(canResume(all, index({ 2: true }))).toBe(false);
    expect(canResume(all, index({ 1: true }))).toBe(false);
  });

  it('resumes when every member of the Promise.all is there, or one failed, or on cancellation', () => {
    expect(canResume(all, index({ 1: true, 2: true }))).toBe(true);
    expect(canResume(all, index({ 2: false }))).toBe(true);
    expect(canResume(all, index({}, { 1: true }))).toBe(true);
    expect(canResume(all, index({ 2: true }, { 17: true }))).toBe(true);
  });

  it('Promise.any resumes on the first success or once all failed; allSettled once all completed', () => {
    const any = tree({ combinator: 'first_succeeded_or_all_failed', completions: [1, 2] });
    expect(canResume(any, index({ 1: false }))).toBe(false);
    expect(canResume(any, index({ 1: false, 2: false }))).toBe(true);
    expect(canResume(any, index({ 2: true }))).toBe(true);
    const settled = tree({ combinator: 'all_completed', completions: [1, 2] });
    expect(canResume(settled, index({ 1: false }))).toBe(false);
    expect(canResume(settled, index({ 1: false, 2: true }))).toBe(true);
  });

  it('V5/V6 flat lists resume on any listed id', () => {
    const flat = flatAwaiting([2, 1], [1, 17], []);
    expect(canResume(flat, index({}))).toBe(false);
    expect(canResume(flat, index({ 1: true }))).toBe(true);
    expect(canResume(flat, index({}, { 17: false }))).toBe(true);
  });
});
