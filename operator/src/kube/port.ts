import type { KubeObject, ObjectRef } from './types.ts';

/*
 * What reconcilers may do to the Kubernetes API, and where informers list and watch. Production: `client-node.ts`
 * over the real @kubernetes/client-node; tests: an in-memory implementation with the same semantics (generation,
 * resourceVersion, finalizers, status subresource, owner-reference garbage collection).
 */

export class KubeApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }

  static isNotFound(err: unknown): boolean {
    return err instanceof KubeApiError && err.code === 404;
  }

  static isConflict(err: unknown): boolean {
    return err instanceof KubeApiError && err.code === 409;
  }
}

export interface ApplyOptions {
  /** The field manager owning what this call sends. */
  readonly fieldManager: string;
  /** Take ownership of fields another manager holds (controller-owned fields). Default true. */
  readonly force?: boolean;
}

export interface ListOptions {
  readonly namespace?: string;
  readonly labelSelector?: string;
}

export interface Kube {
  /** The object, or undefined when it does not exist. */
  get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined>;
  list<T extends KubeObject = KubeObject>(apiVersion: string, kind: string, options?: ListOptions): Promise<T[]>;
  /** Server-side apply of `obj` (only the fields the caller owns); creates it when missing. */
  apply<T extends KubeObject = KubeObject>(obj: KubeObject, options: ApplyOptions): Promise<T>;
  /** Server-side apply to the status subresource: `obj` carries apiVersion, kind, metadata.name/namespace, status. */
  applyStatus<T extends KubeObject = KubeObject>(obj: KubeObject, options: ApplyOptions): Promise<T>;
  /**
   * Replaces `metadata.finalizers`, guarded by `resourceVersion` (KubeApiError 409 when the object changed since).
   * Returns the updated object, or undefined when it no longer exists (an object whose last finalizer goes is
   * deleted by the API server).
   */
  setFinalizers<T extends KubeObject = KubeObject>(
    ref: ObjectRef,
    finalizers: string[],
    resourceVersion: string,
  ): Promise<T | undefined>;
  /** Deletes the object; false when it did not exist. */
  delete(ref: ObjectRef, options?: { propagationPolicy?: 'Background' | 'Foreground' | 'Orphan' }): Promise<boolean>;
}

export type EventType = 'Normal' | 'Warning';

/** `events.k8s.io/v1` events about one object, emitted on transitions (not on every reconcile). */
export interface EventRecorder {
  record(regarding: KubeObject, type: EventType, reason: string, note: string, action?: string): Promise<void>;
}

/** The result of listing a collection: the items (plain wire JSON) and the collection's resourceVersion. */
export interface ListResult {
  readonly items: KubeObject[];
  readonly resourceVersion: string;
}

export interface WatchHandle {
  abort(): void;
}

/** Where an informer (`reconcile/informer.ts`) lists and watches one kind; `client-node.ts` provides the production one. */
export interface ListWatchSource {
  /** For logs, e.g. `ratchet.dev/v1alpha1 Cluster in ns-a`. */
  readonly description: string;
  list(): Promise<ListResult>;
  /**
   * Watches from `resourceVersion`; resolves once connected (or once the attempt failed). `done` is called at most once
   * when the stream ends: `null` for a normal close, else the error (with `statusCode` or `code` 410 when the version
   * expired).
   */
  watch(
    resourceVersion: string,
    onEvent: (type: string, object: Record<string, unknown>) => void,
    done: (err: unknown) => void,
  ): Promise<WatchHandle>;
}
