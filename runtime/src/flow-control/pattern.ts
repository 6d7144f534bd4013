import { restrictedValueProblem, type LimitKey } from './names.ts';

/**
 * Rule patterns of the limiter's rule book: `scope`, `scope/l1` or `scope/l1/l2`, each component an exact
 * restricted value or the wildcard `*`. The number of components is the level a rule limits: the scope as a whole,
 * one first-level limit key under it, or one second-level key. Where several rules of a level match, the most
 * specific wins: exact components outrank wildcards, the scope weighing most, then level 1, then level 2.
 */

export type Level = 'scope' | 'l1' | 'l2';

/** An exact value, or undefined for the wildcard. */
type Component = string | undefined;

export interface RulePattern {
  readonly level: Level;
  readonly scope: Component;
  readonly l1?: Component;
  readonly l2?: Component;
  /** The canonical text (`scope1/*`): components trimmed, no trailing slash. */
  readonly text: string;
}

export class PatternError extends Error {}

/** Rust's `str::trim`: Unicode White_Space at both ends (unlike JavaScript's `trim`, not U+FEFF). */
const RUST_WHITESPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const TRIM = new RegExp(`^${RUST_WHITESPACE}+|${RUST_WHITESPACE}+$`, 'g');
function rustTrim(text: string): string {
  return text.replace(TRIM, '');
}

export function parseRulePattern(input: string): RulePattern {
  const text = rustTrim(input);
  if (text === '') throw new PatternError('pattern cannot be empty');
  const parts = text.split('/');
  // One trailing slash is not a component (`scope1/*/` is `scope1/*`).
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length > 3) throw new PatternError('too many path components (max 3)');
  const components = parts.map((part) => {
    const value = rustTrim(part);
    if (value === '*') return undefined;
    const problem = restrictedValueProblem(value);
    if (problem !== undefined) throw new PatternError(`invalid component: ${problem}`);
    return value;
  });
  const canonical = components.map((c) => c ?? '*').join('/');
  if (components.length === 1) return { level: 'scope', scope: components[0], text: canonical };
  if (components.length === 2) return { level: 'l1', scope: components[0], l1: components[1], text: canonical };
  return { level: 'l2', scope: components[0], l1: components[1], l2: components[2], text: canonical };
}

function componentRank(pattern: Component, value: string | undefined, weight: number): number | undefined {
  if (value === undefined) return undefined;
  if (pattern === undefined) return 0;
  return pattern === value ? weight : undefined;
}

/**
 * How specifically `pattern` matches an invocation's scope and limit key at the pattern's own level (higher is more
 * specific), or undefined when it does not match. A level-1 pattern needs a limit key, a level-2 pattern a two-level
 * one.
 */
export function rank(pattern: RulePattern, scope: string, key: LimitKey | undefined): number | undefined {
  const s = componentRank(pattern.scope, scope, 4);
  if (s === undefined || pattern.level === 'scope') return s;
  const l1 = componentRank(pattern.l1, key?.l1, 2);
  if (l1 === undefined) return undefined;
  if (pattern.level === 'l1') return s + l1;
  const l2 = componentRank(pattern.l2, key?.l2, 1);
  return l2 === undefined ? undefined : s + l1 + l2;
}
