import { KubeApiError } from '../../kube/port.ts';
import type { KubeObject, ObjectRef } from '../../kube/types.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';

export function refOf(obj: KubeObject): ObjectRef {
  return {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    name: obj.metadata.name,
    ...(obj.metadata.namespace === undefined ? {} : { namespace: obj.metadata.namespace }),
  };
}

/**
 * Adds `finalizer` guarded by the object's resourceVersion. `undefined` on a conflict: the object changed since it
 * was read, a watch event for the change is on its way, and the next reconcile tries again with the new version.
 */
export async function addFinalizer<T extends KubeObject>(
  ctx: ReconcileContext,
  obj: T,
  finalizer: string,
): Promise<T | undefined> {
  const current = obj.metadata.finalizers ?? [];
  if (current.includes(finalizer)) return obj;
  try {
    return await ctx.kube.setFinalizers<T>(refOf(obj), [...current, finalizer], obj.metadata.resourceVersion ?? '');
  } catch (err) {
    if (KubeApiError.isConflict(err)) return undefined;
    throw err;
  }
}

/**
 * Removes `finalizer`; idempotent (absent finalizer or object counts as done). False on a conflict (retry later).
 */
export async function removeFinalizer(ctx: ReconcileContext, obj: KubeObject, finalizer: string): Promise<boolean> {
  const current = obj.metadata.finalizers ?? [];
  if (!current.includes(finalizer)) return true;
  try {
    await ctx.kube.setFinalizers(
      refOf(obj),
      current.filter((f) => f !== finalizer),
      obj.metadata.resourceVersion ?? '',
    );
    return true;
  } catch (err) {
    if (KubeApiError.isNotFound(err)) return true;
    if (KubeApiError.isConflict(err)) return false;
    throw err;
  }
}
