import type { ListType, PrinterColumn, ResourceInfo, ScaleSubresource } from './types.ts';

/** The built-in kinds the fake serves, and the list semantics of their well-known fields. */

export const ALL_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'] as const;

export const AGE_COLUMN: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations.',
};

const atomic: ListType = { kind: 'atomic' };
const byName: ListType = { kind: 'map', keys: ['name'] };

/**
 * Approximates the upstream `patchMergeKey` / `listType` markers by field name, which holds for the kinds served here.
 * Anything not listed is atomic, as upstream.
 */
export function builtinListType(fieldPath: readonly string[]): ListType {
  const field = fieldPath.at(-1);
  const parent = fieldPath.at(-2);
  switch (field) {
    case 'finalizers':
      return parent === 'metadata' ? { kind: 'set' } : atomic;
    case 'ownerReferences':
      return { kind: 'map', keys: ['uid'] };
    case 'conditions':
      return { kind: 'map', keys: ['type'] };
    case 'containers':
    case 'initContainers':
    case 'ephemeralContainers':
    case 'env':
    case 'volumes':
    case 'volumeMounts':
    case 'imagePullSecrets':
    case 'containerStatuses':
    case 'initContainerStatuses':
      return byName;
    case 'volumeDevices':
      return { kind: 'map', keys: ['devicePath'] };
    case 'ports':
      return parent === 'spec'
        ? { kind: 'map', keys: ['port', 'protocol'] }
        : { kind: 'map', keys: ['containerPort', 'protocol'] };
    case 'topologySpreadConstraints':
      return { kind: 'map', keys: ['topologyKey', 'whenUnsatisfiable'] };
    case undefined:
    default:
      return atomic;
  }
}

/** `status.replicas`-style paths of the workload kinds' `/scale`. */
const workloadScale: ScaleSubresource = {
  specReplicasPath: '.spec.replicas',
  statusReplicasPath: '.status.replicas',
  labelSelectorPath: '.spec.selector',
};

interface BuiltinSpec {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
  readonly namespaced?: boolean;
  readonly shortNames?: readonly string[];
  readonly categories?: readonly string[];
  readonly status?: boolean;
  readonly scale?: ScaleSubresource;
}

const specs: readonly BuiltinSpec[] = [
  {
    group: '',
    version: 'v1',
    plural: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    shortNames: ['ns'],
    status: true,
  },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', shortNames: ['cm'] },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' },
  {
    group: '',
    version: 'v1',
    plural: 'services',
    kind: 'Service',
    shortNames: ['svc'],
    categories: ['all'],
    status: true,
  },
  { group: '', version: 'v1', plural: 'serviceaccounts', kind: 'ServiceAccount', shortNames: ['sa'] },
  { group: '', version: 'v1', plural: 'pods', kind: 'Pod', shortNames: ['po'], categories: ['all'], status: true },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', shortNames: ['ev'] },
  { group: '', version: 'v1', plural: 'endpoints', kind: 'Endpoints', shortNames: ['ep'] },
  {
    group: 'apps',
    version: 'v1',
    plural: 'deployments',
    kind: 'Deployment',
    shortNames: ['deploy'],
    categories: ['all'],
    status: true,
    scale: workloadScale,
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'statefulsets',
    kind: 'StatefulSet',
    shortNames: ['sts'],
    categories: ['all'],
    status: true,
    scale: workloadScale,
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'replicasets',
    kind: 'ReplicaSet',
    shortNames: ['rs'],
    categories: ['all'],
    status: true,
    scale: workloadScale,
  },
  {
    group: 'policy',
    version: 'v1',
    plural: 'poddisruptionbudgets',
    kind: 'PodDisruptionBudget',
    shortNames: ['pdb'],
    status: true,
  },
  {
    group: 'networking.k8s.io',
    version: 'v1',
    plural: 'networkpolicies',
    kind: 'NetworkPolicy',
    shortNames: ['netpol'],
  },
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease' },
  { group: 'events.k8s.io', version: 'v1', plural: 'events', kind: 'Event', shortNames: ['ev'] },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', kind: 'Role' },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'rolebindings', kind: 'RoleBinding' },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles', kind: 'ClusterRole', namespaced: false },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    namespaced: false,
  },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    plural: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    status: true,
  },
];

export function builtinResources(): ResourceInfo[] {
  return specs.map((spec) => ({
    group: spec.group,
    versions: [spec.version],
    plural: spec.plural,
    singular: spec.kind.toLowerCase(),
    kind: spec.kind,
    namespaced: spec.namespaced ?? true,
    shortNames: spec.shortNames ?? [],
    categories: spec.categories ?? [],
    verbs: ALL_VERBS,
    status: spec.status ?? false,
    ...(spec.scale !== undefined ? { scale: spec.scale } : {}),
    printerColumns: () => [AGE_COLUMN],
    listType: (_version, fieldPath) => builtinListType(fieldPath),
    schema: () => undefined,
    custom: false,
  }));
}
