import { restrictedValueProblem } from '../flow-control/names.ts';
import { IngressErrors } from './errors.ts';

/** Validates a scope key (path segment or target body) with restate's reasons. */
export function checkScope(scope: string): string {
  const problem = restrictedValueProblem(scope);
  if (problem !== undefined) throw IngressErrors.badScopeValue(problem);
  return scope;
}
