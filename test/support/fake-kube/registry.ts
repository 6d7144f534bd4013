import { AGE_COLUMN, ALL_VERBS, builtinListType, builtinResources } from './builtins.ts';
import { invalid, type StatusCause } from './errors.ts';
import {
  isObject,
  type JsonObject,
  type KubeObject,
  type ListType,
  type PrinterColumn,
  type ResourceInfo,
  type ScaleSubresource,
} from './types.ts';

/** The resources currently served: the built-ins plus whatever established CRDs define. */
export class Registry {
  private readonly resources = new Map<string, ResourceInfo>();
  /** CRD name → key of the resource it registered. */
  private readonly crdResources = new Map<string, string>();

  constructor() {
    for (const info of builtinResources()) this.resources.set(resourceKey(info), info);
  }

  all(): ResourceInfo[] {
    return [...this.resources.values()];
  }

  byKey(key: string): ResourceInfo | undefined {
    return this.resources.get(key);
  }

  /** The resource `plural` in `group/version`, if served there. */
  find(group: string, version: string, plural: string): ResourceInfo | undefined {
    const info = this.resources.get(`${group}/${plural}`);
    return info?.versions.includes(version) === true ? info : undefined;
  }

  byKind(group: string, version: string, kind: string): ResourceInfo | undefined {
    return this.all().find((r) => r.group === group && r.kind === kind && r.versions.includes(version));
  }

  servesGroupVersion(group: string, version: string): boolean {
    return this.all().some((r) => r.group === group && r.versions.includes(version));
  }

  /** group → its served versions, preferred first. */
  groups(): Map<string, string[]> {
    const groups = new Map<string, Set<string>>();
    for (const info of this.resources.values()) {
      const versions = groups.get(info.group) ?? new Set<string>();
      for (const v of info.versions) versions.add(v);
      groups.set(info.group, versions);
    }
    return new Map([...groups].map(([group, versions]) => [group, [...versions].sort(compareKubeVersions)]));
  }

  /** Registers (or re-registers) the resource a CRD defines. Throws `Invalid` for a malformed definition. */
  registerCrd(crd: KubeObject): ResourceInfo {
    const info = this.validateCrd(crd);
    const name = crd.metadata.name ?? '';
    const key = resourceKey(info);
    const previous = this.crdResources.get(name);
    if (previous !== undefined && previous !== key) this.resources.delete(previous);
    this.resources.set(key, info);
    this.crdResources.set(name, key);
    return info;
  }

  /** The resource a CRD would define; throws `Invalid` for a malformed definition. */
  validateCrd(crd: KubeObject): ResourceInfo {
    const info = resourceFromCrd(crd);
    const clash = this.resources.get(resourceKey(info));
    if (clash !== undefined && !clash.custom) {
      throw invalidCrd(crd.metadata.name ?? '', [
        { field: 'spec.names.plural', message: 'Invalid value: conflicts with a built-in resource' },
      ]);
    }
    return info;
  }

  unregisterCrd(crdName: string): ResourceInfo | undefined {
    const key = this.crdResources.get(crdName);
    if (key === undefined) return undefined;
    this.crdResources.delete(crdName);
    const info = this.resources.get(key);
    this.resources.delete(key);
    return info;
  }

  crdResource(crdName: string): ResourceInfo | undefined {
    const key = this.crdResources.get(crdName);
    return key === undefined ? undefined : this.resources.get(key);
  }
}

export function resourceKey(info: { readonly group: string; readonly plural: string }): string {
  return `${info.group}/${info.plural}`;
}

/** Kubernetes version priority: v1 > v1beta2 > v1beta1 > v1alpha1 > anything else (alphabetical). */
export function compareKubeVersions(a: string, b: string): number {
  const rank = (v: string): [number, number, number] => {
    const match = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (match === null) return [0, 0, 0];
    const stability = match[2] === undefined ? 3 : match[2] === 'beta' ? 2 : 1;
    return [stability, Number(match[1]), Number(match[3] ?? 0)];
  };
  const [ra, rb] = [rank(a), rank(b)];
  for (let i = 0; i < 3; i++) {
    const diff = (rb[i] ?? 0) - (ra[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return a.localeCompare(b);
}

function invalidCrd(name: string, causes: StatusCause[]): Error {
  return invalid(
    { group: 'apiextensions.k8s.io', plural: 'customresourcedefinitions', kind: 'CustomResourceDefinition' },
    name,
    causes,
  );
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function resourceFromCrd(crd: KubeObject): ResourceInfo {
  const name = crd.metadata.name ?? '';
  const spec = isObject(crd['spec']) ? crd['spec'] : {};
  const names = isObject(spec['names']) ? spec['names'] : {};
  const group = str(spec['group']);
  const plural = str(names['plural']);
  const kind = str(names['kind']);
  const causes: StatusCause[] = [];
  if (group === undefined) causes.push({ field: 'spec.group', message: 'Required value' });
  if (plural === undefined) causes.push({ field: 'spec.names.plural', message: 'Required value' });
  if (kind === undefined) causes.push({ field: 'spec.names.kind', message: 'Required value' });
  if (group !== undefined && plural !== undefined && name !== `${plural}.${group}`) {
    causes.push({
      field: 'metadata.name',
      message: `Invalid value: "${name}": must be spec.names.plural+"."+spec.group`,
    });
  }
  const versions = (Array.isArray(spec['versions']) ? spec['versions'] : []).filter(isObject);
  if (versions.filter((v) => v['storage'] === true).length !== 1) {
    causes.push({
      field: 'spec.versions',
      message: 'Invalid value: must have exactly one version marked as storage version',
    });
  }
  const scope = spec['scope'];
  if (scope !== 'Namespaced' && scope !== 'Cluster') {
    causes.push({ field: 'spec.scope', message: 'Unsupported value: supported values: "Cluster", "Namespaced"' });
  }
  if (causes.length > 0 || group === undefined || plural === undefined || kind === undefined) {
    throw invalidCrd(name, causes);
  }

  const served = versions.filter((v) => v['served'] !== false && typeof v['name'] === 'string');
  const byVersion = new Map(served.map((v) => [v['name'] as string, v]));
  const storage = versions.find((v) => v['storage'] === true) ?? {};
  const subresources = isObject(storage['subresources']) ? storage['subresources'] : {};
  const scale = isObject(subresources['scale']) ? scaleFrom(subresources['scale']) : undefined;
  return {
    group,
    versions: [...byVersion.keys()].sort(compareKubeVersions),
    plural,
    singular: str(names['singular']) ?? kind.toLowerCase(),
    kind,
    namespaced: scope === 'Namespaced',
    shortNames: strings(names['shortNames']),
    categories: strings(names['categories']),
    verbs: ALL_VERBS,
    status: isObject(subresources['status']),
    ...(scale !== undefined ? { scale } : {}),
    printerColumns: (version) => printerColumns(byVersion.get(version)),
    listType: (version, fieldPath) => schemaListType(byVersion.get(version), fieldPath),
    schema: (version) => {
      const holder = byVersion.get(version)?.['schema'];
      return isObject(holder) && isObject(holder['openAPIV3Schema']) ? holder['openAPIV3Schema'] : undefined;
    },
    custom: true,
  };
}

function scaleFrom(scale: JsonObject): ScaleSubresource {
  const labelSelectorPath = str(scale['labelSelectorPath']);
  return {
    specReplicasPath: str(scale['specReplicasPath']) ?? '.spec.replicas',
    statusReplicasPath: str(scale['statusReplicasPath']) ?? '.status.replicas',
    ...(labelSelectorPath !== undefined ? { labelSelectorPath } : {}),
  };
}

function printerColumns(version: JsonObject | undefined): PrinterColumn[] {
  const declared = (Array.isArray(version?.['additionalPrinterColumns']) ? version['additionalPrinterColumns'] : [])
    .filter(isObject)
    .map((c) => {
      const description = str(c['description']);
      const format = str(c['format']);
      return {
        name: str(c['name']) ?? '',
        type: str(c['type']) ?? 'string',
        jsonPath: str(c['jsonPath']) ?? '',
        ...(description !== undefined ? { description } : {}),
        ...(format !== undefined ? { format } : {}),
        priority: typeof c['priority'] === 'number' ? c['priority'] : 0,
      };
    });
  return declared.length > 0 ? declared : [AGE_COLUMN];
}

/** Walks the version's openAPIV3Schema to the array at `fieldPath` and reads its `x-kubernetes-list-*` markers. */
function schemaListType(version: JsonObject | undefined, fieldPath: readonly string[]): ListType {
  if (fieldPath[0] === 'metadata') return builtinListType(fieldPath);
  const schemaHolder = version?.['schema'];
  let node: unknown = isObject(schemaHolder) ? schemaHolder['openAPIV3Schema'] : undefined;
  for (const field of fieldPath) {
    if (!isObject(node)) return { kind: 'atomic' };
    if (node['type'] === 'array') node = node['items'];
    if (!isObject(node)) return { kind: 'atomic' };
    const properties = node['properties'];
    node = isObject(properties) && field in properties ? properties[field] : node['additionalProperties'];
  }
  if (!isObject(node)) return { kind: 'atomic' };
  switch (node['x-kubernetes-list-type']) {
    case 'map':
      return { kind: 'map', keys: strings(node['x-kubernetes-list-map-keys']) };
    case 'set':
      return { kind: 'set' };
    default:
      return { kind: 'atomic' };
  }
}
