import { forbidden, type KubeError } from './errors.ts';
import { labelSelector, selectorString } from './selectors.ts';
import type { Store } from './store.ts';
import { isObject, type JsonObject, type KubeObject, type ResourceInfo } from './types.ts';

/**
 * RBAC authorization against the stored Roles, ClusterRoles (aggregation included) and their bindings, with the real
 * server's 403 message. Gaps: no escalation or bind checks on writes of RBAC objects, no `impersonate`.
 */

export interface UserInfo {
  readonly name: string;
  readonly groups: readonly string[];
}

export interface RequestAttributes {
  readonly user: UserInfo;
  readonly verb: string;
  readonly group: string;
  readonly resource: string;
  readonly subresource: string;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

/** Members of this group bypass authorization, as on a real cluster. */
export const SUPERUSER_GROUP = 'system:masters';

/** Paths every authenticated user may read (the `system:discovery` and `system:public-info-viewer` roles). */
export function isPublicPath(path: string): boolean {
  return /^\/(api|apis|version|openapi|healthz|livez|readyz)(\/|$)/.test(path);
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

export class Authorizer {
  constructor(private readonly store: Store) {}

  /** Throws the real 403 when no bound rule allows the request. */
  check(attributes: RequestAttributes): void {
    if (this.allows(attributes)) return;
    throw forbiddenFor(attributes);
  }

  allows(attributes: RequestAttributes): boolean {
    if (attributes.user.groups.includes(SUPERUSER_GROUP)) return true;
    return this.rulesFor(attributes.user, attributes.namespace).some((rule) => ruleAllows(rule, attributes));
  }

  private rulesFor(user: UserInfo, namespace: string | undefined): JsonObject[] {
    const bindings: KubeObject[] = [...this.objects('clusterrolebindings')];
    if (namespace !== undefined) bindings.push(...this.objects('rolebindings', namespace));
    const rules: JsonObject[] = [];
    for (const binding of bindings) {
      const subjects = Array.isArray(binding['subjects']) ? binding['subjects'].filter(isObject) : [];
      if (!subjects.some((s) => subjectMatches(s, user, binding.metadata.namespace))) continue;
      const roleRef = isObject(binding['roleRef']) ? binding['roleRef'] : {};
      const roleName = typeof roleRef['name'] === 'string' ? roleRef['name'] : '';
      if (roleRef['kind'] === 'ClusterRole') rules.push(...this.clusterRoleRules(roleName));
      else if (roleRef['kind'] === 'Role' && binding.metadata.namespace !== undefined) {
        const role = this.objects('roles', binding.metadata.namespace).find((r) => r.metadata.name === roleName);
        rules.push(...rulesOf(role));
      }
    }
    return rules;
  }

  private clusterRoleRules(name: string): JsonObject[] {
    const roles = this.objects('clusterroles');
    const role = roles.find((r) => r.metadata.name === name);
    const aggregation = isObject(role?.['aggregationRule']) ? role['aggregationRule'] : undefined;
    if (aggregation === undefined) return rulesOf(role);
    const selectors = (
      Array.isArray(aggregation['clusterRoleSelectors']) ? aggregation['clusterRoleSelectors'] : []
    ).map((s) => labelSelector(selectorString(s)));
    return roles.filter((r) => r !== role && selectors.some((matches) => matches(r))).flatMap(rulesOf);
  }

  private objects(plural: string, namespace?: string): KubeObject[] {
    const info: ResourceInfo | undefined = this.store.registry.find('rbac.authorization.k8s.io', 'v1', plural);
    return info === undefined ? [] : this.store.list(info, namespace);
  }
}

function rulesOf(role: KubeObject | undefined): JsonObject[] {
  return Array.isArray(role?.['rules']) ? role['rules'].filter(isObject) : [];
}

function subjectMatches(subject: JsonObject, user: UserInfo, bindingNamespace: string | undefined): boolean {
  const name = subject['name'];
  switch (subject['kind']) {
    case 'User':
      return name === user.name;
    case 'Group':
      return typeof name === 'string' && user.groups.includes(name);
    case 'ServiceAccount': {
      const namespace = typeof subject['namespace'] === 'string' ? subject['namespace'] : bindingNamespace;
      return `system:serviceaccount:${namespace ?? ''}:${String(name)}` === user.name;
    }
    default:
      return false;
  }
}

function ruleAllows(rule: JsonObject, a: RequestAttributes): boolean {
  const verbs = strings(rule['verbs']);
  if (!verbs.includes('*') && !verbs.includes(a.verb)) return false;
  const groups = strings(rule['apiGroups']);
  if (!groups.includes('*') && !groups.includes(a.group)) return false;
  const resources = strings(rule['resources']);
  const combined = a.subresource === '' ? a.resource : `${a.resource}/${a.subresource}`;
  const resourceOk =
    resources.includes('*') ||
    resources.includes(combined) ||
    (a.subresource !== '' && resources.includes(`*/${a.subresource}`));
  if (!resourceOk) return false;
  const names = strings(rule['resourceNames']);
  return names.length === 0 || (a.name !== undefined && a.name !== '' && names.includes(a.name));
}

export function forbiddenFor(a: RequestAttributes): KubeError {
  const resource = a.subresource === '' ? a.resource : `${a.resource}/${a.subresource}`;
  const scope = a.namespace !== undefined ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  const why = `User "${a.user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${scope}`;
  return forbidden({ group: a.group, plural: a.resource }, a.name, why);
}
