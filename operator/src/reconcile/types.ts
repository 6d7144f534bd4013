import type { Logger } from 'pino';
import type { AdminClientFactory } from '../admin-client/types.ts';
import type { EventRecorder, Kube } from '../kube/port.ts';
import type { KubeObject } from '../kube/types.ts';

/** Namespace/name of one object; the work-queue key is `${namespace}/${name}`. */
export interface ObjectKey {
  readonly namespace: string;
  readonly name: string;
}

export function keyString(key: ObjectKey): string {
  return `${key.namespace}/${key.name}`;
}

/** How one reconcile ended. Errors are thrown instead (the queue backs off exponentially). */
export interface ReconcileResult {
  /** Reconcile again after this long even if nothing changes (external state: drain checks, readiness). */
  readonly requeueAfterMs?: number;
}

/** Resolves the in-cluster URL of a Service port; tests map it to loopback. */
export type ServiceUrlResolver = (
  namespace: string,
  service: string,
  port: number,
  scheme?: 'http' | 'https',
) => string;

export interface ReconcileContext {
  readonly kube: Kube;
  readonly events: EventRecorder;
  readonly admin: AdminClientFactory;
  readonly now: () => Date;
  readonly log: Logger;
  readonly serviceUrl: ServiceUrlResolver;
  /** Namespace the operator runs in (NetworkPolicies let it reach admin APIs). */
  readonly operatorNamespace: string;
}

/** The cached objects of a kind the manager has an informer for (any controller's primary or watched kind). */
export type CacheLookup = (apiVersion: string, kind: string) => readonly KubeObject[];

/** A kind whose changes should reconcile primary objects: owned children, referenced Clusters or Secrets. */
export interface Watch {
  readonly apiVersion: string;
  readonly kind: string;
  /**
   * Keys of the primary objects affected by a change of `obj`; `primaries` lists the cached primary objects, `cached`
   * those of another watched kind (a reference that goes through a third object: Deployment → Cluster → its Secret).
   */
  map(obj: KubeObject, primaries: () => readonly KubeObject[], cached?: CacheLookup): ObjectKey[];
}

/** One controller: a primary kind, what else it watches, and its level-triggered reconcile. */
export interface Controller {
  readonly name: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly watches: readonly Watch[];
  reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult>;
}

/** Maps a child to its controlling owner of `kind` (for watches on owned objects). */
export function ownerOf(apiVersion: string, kind: string): Watch['map'] {
  return (obj) => {
    const owner = obj.metadata.ownerReferences?.find(
      (r) => r.controller === true && r.kind === kind && r.apiVersion === apiVersion,
    );
    const namespace = obj.metadata.namespace;
    return owner === undefined || namespace === undefined ? [] : [{ namespace, name: owner.name }];
  };
}
