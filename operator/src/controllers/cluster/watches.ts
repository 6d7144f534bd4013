import { API_VERSION, type Cluster } from '../../api/v1alpha1/index.ts';
import type { KubeObject } from '../../kube/types.ts';
import { keyString, ownerOf, type ObjectKey, type Watch } from '../../reconcile/types.ts';
import { CHILD_KINDS } from '../../specs/children.ts';
import { referencedSecrets } from '../../specs/settings.ts';

const owned = ownerOf(API_VERSION, 'Cluster');

/** Clusters of the Secret's namespace that read it (DSN, CNPG app Secret, TLS, Kafka credentials, own key/token). */
export function clustersReferencing(secret: KubeObject, primaries: readonly KubeObject[]): ObjectKey[] {
  const namespace = secret.metadata.namespace;
  if (namespace === undefined) return [];
  const keys: ObjectKey[] = [];
  for (const primary of primaries) {
    if (primary.metadata.namespace !== namespace) continue;
    let names: string[];
    try {
      names = referencedSecrets(primary as unknown as Cluster);
    } catch {
      // A Cluster whose spec does not parse references nothing; its own reconcile reports why.
      continue;
    }
    if (names.includes(secret.metadata.name)) keys.push({ namespace, name: primary.metadata.name });
  }
  return keys;
}

function dedupe(keys: ObjectKey[]): ObjectKey[] {
  const seen = new Map<string, ObjectKey>();
  for (const k of keys) seen.set(keyString(k), k);
  return [...seen.values()];
}

/** Every owned kind maps back through its controlling owner reference; Secrets also to the Clusters reading them. */
export const clusterWatches: readonly Watch[] = [
  ...[
    CHILD_KINDS.configMap,
    CHILD_KINDS.serviceAccount,
    CHILD_KINDS.service,
    CHILD_KINDS.deployment,
    CHILD_KINDS.statefulSet,
    CHILD_KINDS.podDisruptionBudget,
    CHILD_KINDS.networkPolicy,
  ].map((kind): Watch => ({ ...kind, map: owned })),
  {
    ...CHILD_KINDS.secret,
    map: (obj, primaries) => dedupe([...owned(obj, primaries), ...clustersReferencing(obj, primaries())]),
  },
];
