import { FIELD_MANAGER, type Cluster } from '../../api/v1alpha1/index.ts';
import type { KubeObject } from '../../kube/types.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { childKey, PRUNABLE_KINDS } from '../../specs/children.ts';
import { namespaceOf } from '../../specs/meta.ts';

/** Server-side applies each object in order; the stored objects, by childKey(). */
export async function applyAll(
  ctx: ReconcileContext,
  objects: readonly KubeObject[],
): Promise<Map<string, KubeObject>> {
  const applied = new Map<string, KubeObject>();
  for (const obj of objects) {
    // In order: the ConfigMap and Secrets exist before the pods that mount them are (re)created.
    const stored = await ctx.kube.apply(obj, { fieldManager: FIELD_MANAGER, force: true });
    applied.set(childKey(obj, obj.metadata.name), stored);
  }
  return applied;
}

/**
 * Deletes owned children the spec no longer wants (a disabled listener's Service, the NetworkPolicy turned off, the
 * bundled database switched away). Only objects with the Cluster's labels AND its controlling owner reference: a
 * user's object that happens to carry the labels is never touched.
 */
export async function pruneUnwanted(
  cluster: Cluster,
  ctx: ReconcileContext,
  wanted: ReadonlySet<string>,
): Promise<string[]> {
  const uid = cluster.metadata.uid;
  const namespace = namespaceOf(cluster);
  const selector = `app.kubernetes.io/instance=${cluster.metadata.name},app.kubernetes.io/managed-by=ratchet-operator`;
  const deleted: string[] = [];
  for (const kind of PRUNABLE_KINDS) {
    const objects = await ctx.kube.list(kind.apiVersion, kind.kind, { namespace, labelSelector: selector });
    for (const obj of objects) {
      const ours = (obj.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.uid === uid);
      const key = childKey(kind, obj.metadata.name);
      if (!ours || wanted.has(key)) continue;
      await ctx.kube.delete({ apiVersion: kind.apiVersion, kind: kind.kind, namespace, name: obj.metadata.name });
      deleted.push(key);
    }
  }
  return deleted;
}
