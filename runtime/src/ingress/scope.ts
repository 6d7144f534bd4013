import { IngressErrors } from './errors.ts';

/** Scope keys, as restate's `RestrictedValue` allows them. */
const SCOPE_MAX_BYTES = 36;
const SCOPE_CHARS = /^[a-zA-Z0-9_.-]*$/;

/** Validates a scope key (path segment or target body) with restate's reasons. */
export function checkScope(scope: string): string {
  if (scope.length === 0) throw IngressErrors.badScopeValue('value cannot be empty');
  const bytes = Buffer.byteLength(scope, 'utf8');
  if (bytes > SCOPE_MAX_BYTES) {
    throw IngressErrors.badScopeValue(`value too long: ${bytes} bytes (max ${SCOPE_MAX_BYTES})`);
  }
  if (!SCOPE_CHARS.test(scope)) {
    throw IngressErrors.badScopeValue('value contains characters outside the allowed set [a-zA-Z0-9_.-]');
  }
  return scope;
}
