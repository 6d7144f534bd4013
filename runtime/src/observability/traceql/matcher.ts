/* A parsed TraceQL query as a TraceMatcher for searchTraces. */
import type { TraceQLQuery } from './ast.ts';
import { evaluate } from './evaluate.ts';
import { type QueryPlan, planQuery } from './plan.ts';
import type { TraceMatcher } from './search.ts';

export interface TraceQLMatcher extends TraceMatcher {
  readonly plan: QueryPlan;
}

export function traceQLMatcher(query: TraceQLQuery): TraceQLMatcher {
  const plan = planQuery(query.root);
  return {
    plan,
    scanHints: plan.scanHints,
    wholeTrace: plan.wholeTrace,
    match: (trace) => {
      const spansets = evaluate(query.root, trace);
      return spansets.length > 0 ? spansets : null;
    },
  };
}
