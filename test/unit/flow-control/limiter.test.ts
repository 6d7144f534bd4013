import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, type LimitRule } from '../../../runtime/src/flow-control/limiter.ts';
import { parseLimitKey, LimitKeyError } from '../../../runtime/src/flow-control/names.ts';
import { parseRulePattern, PatternError, rank } from '../../../runtime/src/flow-control/pattern.ts';
import {
  applyDeletes,
  applyUpserts,
  RulePreconditionFailedError,
  type StoredRule,
} from '../../../runtime/src/flow-control/rule-book.ts';

const rule = (pattern: string, concurrency: number): LimitRule => ({ pattern: parseRulePattern(pattern), concurrency });
const key = (text: string | undefined) => (text === undefined ? undefined : parseLimitKey(text));

describe('rule patterns', () => {
  it('parses the three levels, wildcards and a trailing slash', () => {
    expect(parseRulePattern('*')).toMatchObject({ level: 'scope', scope: undefined, text: '*' });
    expect(parseRulePattern(' scope1/ ')).toMatchObject({ level: 'scope', scope: 'scope1', text: 'scope1' });
    expect(parseRulePattern('scope1/*')).toMatchObject({ level: 'l1', scope: 'scope1', l1: undefined });
    expect(parseRulePattern('*/foo/bar')).toMatchObject({ level: 'l2', l1: 'foo', l2: 'bar', text: '*/foo/bar' });
  });

  it.each([
    ['', 'pattern cannot be empty'],
    ['**', 'invalid component: value contains characters outside the allowed set [a-zA-Z0-9_.-]'],
    ['a/b/c/d', 'too many path components (max 3)'],
    ['/scope1', 'invalid component: value cannot be empty'],
    ['scope1//x', 'invalid component: value cannot be empty'],
    ['a'.repeat(37), 'invalid component: value too long: 37 bytes (max 36)'],
  ])('refuses %j: %s', (pattern, message) => {
    expect(() => parseRulePattern(pattern)).toThrow(new PatternError(message));
  });

  it('ranks exact components above wildcards, the scope weighing most', () => {
    const k = key('foo/bar');
    expect(rank(parseRulePattern('*/*/*'), 's', k)).toBe(0);
    expect(rank(parseRulePattern('*/*/bar'), 's', k)).toBe(1);
    expect(rank(parseRulePattern('*/foo/*'), 's', k)).toBe(2);
    expect(rank(parseRulePattern('s/*/*'), 's', k)).toBe(4);
    expect(rank(parseRulePattern('s/foo/bar'), 's', k)).toBe(7);
    expect(rank(parseRulePattern('t/*/*'), 's', k)).toBeUndefined();
    // A level-1 pattern needs a limit key; a level-2 one a two-level key.
    expect(rank(parseRulePattern('s/*'), 's', undefined)).toBeUndefined();
    expect(rank(parseRulePattern('s/*/*'), 's', key('foo'))).toBeUndefined();
  });
});

describe('limit keys', () => {
  it('takes one or two levels', () => {
    expect(parseLimitKey('a')).toEqual({ l1: 'a' });
    expect(parseLimitKey('a/b')).toEqual({ l1: 'a', l2: 'b' });
    expect(parseLimitKey('a/')).toEqual({ l1: 'a' });
  });
  it.each([
    ['a/b/c', 'too many path components in the given limit-key (max 2)'],
    ['a//b', 'invalid limit-key component: value cannot be empty'],
    ['/a', 'invalid limit-key component: value cannot be empty'],
    ['é', 'invalid limit-key component: value contains characters outside the allowed set [a-zA-Z0-9_.-]'],
  ])('refuses %j', (text, message) => {
    expect(() => parseLimitKey(text)).toThrow(new LimitKeyError(message));
  });
});

describe('concurrency limiter', () => {
  it('limits each first-level key under `scope/*` and leaves keyless invocations alone', () => {
    const l = new ConcurrencyLimiter();
    l.setRules([rule('s/*', 1)]);
    expect(l.acquire('a1', { scope: 's', key: key('a') })).toBe(true);
    expect(l.acquire('a2', { scope: 's', key: key('a') })).toBe(false);
    expect(l.acquire('b1', { scope: 's', key: key('b') })).toBe(true);
    expect(l.acquire('n1', { scope: 's', key: undefined })).toBe(true);
    expect(l.acquire('n2', { scope: 's', key: undefined })).toBe(true);
    expect(l.release('a1')).toEqual(['a2']);
    expect(l.holds('a2')).toBe(true);
  });

  it('stacks levels: a scope total and a per-key limit both hold', () => {
    const l = new ConcurrencyLimiter();
    l.setRules([rule('s', 2), rule('s/*', 1)]);
    expect(l.acquire('a1', { scope: 's', key: key('a') })).toBe(true);
    expect(l.acquire('a2', { scope: 's', key: key('a') })).toBe(false);
    expect(l.acquire('b1', { scope: 's', key: key('b') })).toBe(true);
    expect(l.acquire('c1', { scope: 's', key: key('c') })).toBe(false);
    // a1 frees both its key and the scope: a2 (blocked on key a) and c1 (blocked on the scope) may try.
    const woken = l.release('a1');
    expect(woken.length).toBe(1);
    expect(l.counterRows().find((r) => r.level === 'scope')).toMatchObject({ usage: 2, limit: 2, pattern: 's' });
  });

  it('picks the most specific rule of a level', () => {
    const l = new ConcurrencyLimiter();
    l.setRules([rule('s/*', 1), rule('s/vip', 3), rule('*/*', 5)]);
    for (let i = 0; i < 3; i++) expect(l.acquire(`v${i}`, { scope: 's', key: key('vip') })).toBe(true);
    expect(l.acquire('v3', { scope: 's', key: key('vip') })).toBe(false);
    for (let i = 0; i < 5; i++) expect(l.acquire(`o${i}`, { scope: 'other', key: key('x') })).toBe(true);
    expect(l.acquire('o5', { scope: 'other', key: key('x') })).toBe(false);
  });

  it('starts waiters in arrival order, wakes them when a rule is raised or removed, and forgets cancelled ones', () => {
    const l = new ConcurrencyLimiter();
    l.setRules([rule('s/*/*', 1)]);
    const p = { scope: 's', key: key('a/b') };
    expect(l.acquire('1', p)).toBe(true);
    expect(l.acquire('2', p)).toBe(false);
    expect(l.acquire('3', p)).toBe(false);
    expect(l.acquire('4', p)).toBe(false);
    l.forget('3');
    expect(l.release('1')).toEqual(['2']);
    expect(l.setRules([rule('s/*/*', 3)])).toEqual(['4']);
    expect(l.setRules([])).toEqual([]);
    expect(l.isWaiting('4')).toBe(false);
  });

  it('counts running invocations found at takeover without asking, and lets a lowered limit drain', () => {
    const l = new ConcurrencyLimiter();
    l.setRules([rule('s', 1)]);
    l.hold('x', { scope: 's', key: undefined });
    l.hold('y', { scope: 's', key: undefined });
    expect(l.acquire('z', { scope: 's', key: undefined })).toBe(false);
    expect(l.release('x')).toEqual([]);
    expect(l.release('y')).toEqual(['z']);
  });
});

describe('rule book batches', () => {
  const now = new Date('2026-11-28T00:00:00Z');
  const up = (pattern: string, concurrency?: number, extra: object = {}) => ({
    pattern: parseRulePattern(pattern),
    concurrency,
    description: undefined,
    disabled: false,
    precondition: { type: 'none' as const },
    ...extra,
  });

  it('gives a new rule the book version, adds one on a runtime change, keeps it for a description', () => {
    let book = new Map<string, StoredRule>();
    ({ rules: book } = applyUpserts(book, [up('a/*', 1)], 7, now));
    expect(book.get('a/*')?.version).toBe(7);
    ({ rules: book } = applyUpserts(book, [up('a/*', 2)], 8, now));
    expect(book.get('a/*')?.version).toBe(8);
    const same = applyUpserts(book, [up('a/*', 2)], 9, now);
    expect(same.changed.size).toBe(0);
    const described = applyUpserts(book, [up('a/*', 2, { description: 'x' })], 9, now);
    expect(described.rules.get('a/*')).toMatchObject({ version: 8, description: 'x' });
    // Created and changed in one batch: created at the book's version, then one more (as restate does).
    const dup = applyUpserts(new Map(), [up('d/x', 1), up('d/x', 2)], 20, now);
    expect(dup.rules.get('d/x')).toMatchObject({ version: 21, concurrency: 2 });
  });

  it('refuses a whole batch on a failed precondition, in restate’s words', () => {
    const { rules } = applyUpserts(new Map(), [up('a/*', 1)], 2, now);
    expect(() =>
      applyUpserts(rules, [up('ok/b', 1), up('a/*', 2, { precondition: { type: 'does_not_exist' } })], 3, now),
    ).toThrow(new RulePreconditionFailedError('a/*', { type: 'does_not_exist' }, 2));
    expect(new RulePreconditionFailedError('x', { type: 'matches', version: 1 }, undefined).message).toBe(
      'rule precondition Matches(v1) for pattern x failed (actual version: None)',
    );
    expect(() => applyDeletes(rules, [{ pattern: parseRulePattern('a/*'), expectedVersion: 99 }])).toThrow(
      'rule precondition Matches(v99) for pattern a/* failed (actual version: Some(v2))',
    );
    expect(applyDeletes(rules, [{ pattern: parseRulePattern('absent'), expectedVersion: undefined }]).removed).toEqual(
      [],
    );
  });
});
