/**
 * Scopes and limit keys (specification section 2): a scope is one restricted value; a limit key is one or two of
 * them separated by a slash, and is only used together with a scope. A restricted value is 1 to 36 bytes of
 * `[a-zA-Z0-9_.-]`. The reasons are worded as restate's `RestrictedValue` words them.
 */

export const RESTRICTED_VALUE_MAX_BYTES = 36;
const RESTRICTED_CHARS = /^[a-zA-Z0-9_.-]*$/;

/** Why `value` is not a restricted value, or undefined when it is one. */
export function restrictedValueProblem(value: string): string | undefined {
  if (value.length === 0) return 'value cannot be empty';
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > RESTRICTED_VALUE_MAX_BYTES) {
    return `value too long: ${bytes} bytes (max ${RESTRICTED_VALUE_MAX_BYTES})`;
  }
  if (!RESTRICTED_CHARS.test(value)) return 'value contains characters outside the allowed set [a-zA-Z0-9_.-]';
  return undefined;
}

/** A parsed limit key: its first level and, for a two-level key, its second. */
export interface LimitKey {
  readonly l1: string;
  readonly l2?: string | undefined;
}

export class LimitKeyError extends Error {}

/**
 * Parses `l1` or `l1/l2`; each level a restricted value, at most two levels; one trailing slash is ignored. The
 * messages are restate's (`invalid limit-key: …` is added by the caller).
 */
export function parseLimitKey(text: string): LimitKey {
  const levels = text.split('/');
  if (levels.length > 1 && levels[levels.length - 1] === '') levels.pop();
  // Left to right, as restate reads them: `a//b` is an empty component, `a/b/c` one too many.
  for (const [i, level] of levels.entries()) {
    if (i >= 2) throw new LimitKeyError('too many path components in the given limit-key (max 2)');
    const problem = restrictedValueProblem(level);
    if (problem !== undefined) throw new LimitKeyError(`invalid limit-key component: ${problem}`);
  }
  return levels.length === 1 ? { l1: levels[0]! } : { l1: levels[0]!, l2: levels[1]! };
}

export function formatLimitKey(key: LimitKey | undefined): string | undefined {
  if (key === undefined) return undefined;
  return key.l2 === undefined ? key.l1 : `${key.l1}/${key.l2}`;
}
