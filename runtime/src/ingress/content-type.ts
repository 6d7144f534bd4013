import type { InputRules } from '../schema/types.ts';
import { IngressError } from './errors.ts';

/**
 * Validates the request body against the handler's input rules as restate does: a non-empty body needs a
 * content-type matching the (possibly wildcarded) expected one; an empty body is fine unless input is required.
 */
export function validateInput(rules: InputRules, contentType: string | undefined, bodyLength: number): void {
  if (bodyLength === 0) {
    if (rules.required && rules.contentType !== undefined) {
      throw new IngressError(400, 'input validation error: Handler requires a non-empty body');
    }
    return;
  }
  if (rules.contentType === undefined) {
    throw new IngressError(
      400,
      'input validation error: Handler does not accept any input, but the request has a body',
    );
  }
  if (contentType === undefined || contentType.trim() === '') {
    throw new IngressError(400, 'input validation error: Empty content-type');
  }
  const actual = contentType.split(';')[0]!.trim().toLowerCase();
  const expected = rules.contentType.split(';')[0]!.trim().toLowerCase();
  if (!mediaTypeMatches(expected, actual)) {
    throw new IngressError(
      400,
      `input validation error: Content-type '${contentType}' does not match '${rules.contentType}'`,
    );
  }
}

function mediaTypeMatches(pattern: string, actual: string): boolean {
  if (pattern === '*/*' || pattern === '*') return true;
  const [pt, ps] = pattern.split('/');
  const [at, as] = actual.split('/');
  return (pt === '*' || pt === at) && (ps === '*' || ps === as);
}
