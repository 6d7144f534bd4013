import { createHash } from 'node:crypto';
import type { Registry } from './registry.ts';
import type { JsonObject } from './types.ts';

/** Legacy (unaggregated) discovery documents; clients that ask for aggregated discovery fall back to these. */

export const FAKE_VERSION = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-fake-kube',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2025-01-01T00:00:00Z',
  goVersion: 'go1.23.0',
  compiler: 'gc',
  platform: 'linux/amd64',
};

export function coreVersions(serverAddress: string): JsonObject {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

function groupDocument(name: string, versions: readonly string[]): JsonObject {
  const entries = versions.map((version) => ({ groupVersion: `${name}/${version}`, version }));
  return { name, versions: entries, preferredVersion: entries[0] };
}

export function groupList(registry: Registry): JsonObject {
  const groups = [...registry.groups()]
    .filter(([name]) => name !== '')
    .map(([name, versions]) => groupDocument(name, versions));
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

export function group(registry: Registry, name: string): JsonObject | undefined {
  const versions = registry.groups().get(name);
  if (name === '' || versions === undefined) return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupDocument(name, versions) };
}

export function resourceList(registry: Registry, group: string, version: string): JsonObject | undefined {
  if (!registry.servesGroupVersion(group, version)) return undefined;
  const resources = registry
    .all()
    .filter((r) => r.group === group && r.versions.includes(version))
    .sort((a, b) => a.plural.localeCompare(b.plural))
    .flatMap((r) => {
      const main: JsonObject = {
        name: r.plural,
        singularName: r.singular,
        namespaced: r.namespaced,
        kind: r.kind,
        verbs: r.verbs,
        ...(r.shortNames.length > 0 ? { shortNames: r.shortNames } : {}),
        ...(r.categories.length > 0 ? { categories: r.categories } : {}),
      };
      const subresources: JsonObject[] = [];
      const sub = { singularName: '', namespaced: r.namespaced, verbs: ['get', 'patch', 'update'] };
      if (r.status) subresources.push({ name: `${r.plural}/status`, kind: r.kind, ...sub });
      if (r.scale !== undefined) {
        subresources.push({ name: `${r.plural}/scale`, group: 'autoscaling', version: 'v1', kind: 'Scale', ...sub });
      }
      return [main, ...subresources];
    });
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group === '' ? version : `${group}/${version}`,
    resources,
  };
}

/**
 * A minimal OpenAPI v3 surface: per group-version, one PATCH operation per kind that declares the `fieldValidation`
 * query parameter. kubectl reads it to learn that the server validates fields itself; without it kubectl falls back
 * to client-side validation, which needs the full OpenAPI v2 document the fake does not have. CRD schemas are
 * included, so `kubectl explain <custom kind>` works; built-in kinds have no schema here.
 */
export function openApiIndex(registry: Registry): JsonObject {
  const paths: JsonObject = {};
  for (const [group, versions] of registry.groups()) {
    for (const version of versions) {
      const path = group === '' ? `api/${version}` : `apis/${group}/${version}`;
      const hash = createHash('sha256')
        .update(JSON.stringify(openApiDocument(registry, group, version)))
        .digest('hex');
      paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=${hash.slice(0, 32).toUpperCase()}` };
    }
  }
  return { paths };
}

export function openApiDocument(registry: Registry, group: string, version: string): JsonObject | undefined {
  if (!registry.servesGroupVersion(group, version)) return undefined;
  const prefix = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
  const paths: JsonObject = {};
  const schemas: JsonObject = {};
  for (const r of registry.all().filter((info) => info.group === group && info.versions.includes(version))) {
    const schema = r.schema(version);
    if (schema !== undefined) {
      const id = `${group.split('.').reverse().join('.')}.${version}.${r.kind}`;
      schemas[id] = { ...schema, 'x-kubernetes-group-version-kind': [{ group, version, kind: r.kind }] };
    }
    const scope = r.namespaced ? `${prefix}/namespaces/{namespace}` : prefix;
    paths[`${scope}/${r.plural}/{name}`] = {
      patch: {
        operationId: `patch${r.kind}`,
        'x-kubernetes-group-version-kind': { group, version, kind: r.kind },
        parameters: [{ name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } }],
        responses: { '200': { description: 'OK' } },
      },
    };
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: FAKE_VERSION.gitVersion },
    paths,
    components: { schemas },
  };
}
