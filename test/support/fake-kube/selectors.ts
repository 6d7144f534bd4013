import { badRequest } from './errors.ts';
import { getField, scalarString, type KubeObject } from './types.ts';

/** Label and field selectors, parsed once per request. */

export type Selector = (object: KubeObject) => boolean;

type Requirement =
  | { readonly op: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] }
  | { readonly op: 'exists' | '!'; readonly key: string };

const everything: Selector = () => true;

/** Splits at commas that are not inside parentheses. */
function terms(expression: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of expression) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(current.trim());
      current = '';
    } else {
      current += ch;
    }
  }
  if (current.trim() !== '') out.push(current.trim());
  return out.filter((t) => t !== '');
}

function parseRequirement(term: string): Requirement {
  const setMatch = /^([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (setMatch !== null) {
    const values = (setMatch[3] ?? '').split(',').map((v) => v.trim());
    return { op: setMatch[2] === 'in' ? 'in' : 'notin', key: setMatch[1] ?? '', values };
  }
  const eqMatch = /^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$/.exec(term);
  if (eqMatch !== null) {
    const values = [eqMatch[3] ?? ''];
    return { op: eqMatch[2] === '!=' ? 'notin' : 'in', key: eqMatch[1] ?? '', values };
  }
  const notMatch = /^!\s*([^\s!=(),]+)$/.exec(term);
  if (notMatch !== null) return { op: '!', key: notMatch[1] ?? '' };
  if (/^[^\s!=(),]+$/.test(term)) return { op: 'exists', key: term };
  throw badRequest(`unable to parse requirement: ${term}`);
}

function matches(requirement: Requirement, value: string | undefined): boolean {
  switch (requirement.op) {
    case 'in':
      return value !== undefined && requirement.values.includes(value);
    case 'notin':
      return value === undefined || !requirement.values.includes(value);
    case 'exists':
      return value !== undefined;
    case '!':
      return value === undefined;
  }
}

export function labelSelector(expression: string | null | undefined): Selector {
  if (expression === null || expression === undefined || expression.trim() === '') return everything;
  const requirements = terms(expression).map(parseRequirement);
  return (object) => requirements.every((r) => matches(r, object.metadata.labels?.[r.key]));
}

/** `metadata.name=x,metadata.namespace!=y`; any dotted field path is accepted (the real server limits them per kind). */
export function fieldSelector(expression: string | null | undefined): Selector {
  if (expression === null || expression === undefined || expression.trim() === '') return everything;
  const requirements = terms(expression).map((term) => {
    const requirement = parseRequirement(term);
    if (requirement.op !== 'in' && requirement.op !== 'notin') {
      throw badRequest(`invalid selector: '${expression}'; can't understand '${term}'`);
    }
    return requirement;
  });
  return (object) =>
    requirements.every((r) => {
      const raw = getField(object, r.key);
      const value = scalarString(raw);
      return matches(r, value);
    });
}

/** A selector in the `matchLabels` / `matchExpressions` object form (Deployment.spec.selector and friends). */
export function selectorString(selector: unknown): string {
  if (typeof selector === 'string') return selector;
  if (typeof selector !== 'object' || selector === null) return '';
  const { matchLabels, matchExpressions } = selector as {
    matchLabels?: Record<string, string>;
    matchExpressions?: { key: string; operator: string; values?: string[] }[];
  };
  const parts = Object.entries(matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of matchExpressions ?? []) {
    const op = e.operator.toLowerCase();
    if (op === 'exists') parts.push(e.key);
    else if (op === 'doesnotexist') parts.push(`!${e.key}`);
    else parts.push(`${e.key} ${op} (${(e.values ?? []).join(',')})`);
  }
  return parts.join(',');
}
