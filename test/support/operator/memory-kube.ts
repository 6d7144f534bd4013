import { randomUUID } from 'node:crypto';
import {
  KubeApiError,
  type ApplyOptions,
  type EventRecorder,
  type EventType,
  type Kube,
  type ListOptions,
} from '../../../operator/src/kube/port.ts';
import type { KubeObject, ObjectRef } from '../../../operator/src/kube/types.ts';

/*
 * An in-memory Kubernetes API behind the operator's `Kube` port, for reconciler tests (operator.md §7 L1). It keeps
 * the semantics reconcilers depend on: uid/resourceVersion/generation, status kept apart from the rest, finalizers
 * gating deletion, background garbage collection through owner references, and optimistic concurrency on
 * setFinalizers. Server-side apply is approximated as "the applier owns every field it sends": the object's
 * non-metadata, non-status content is replaced, labels and annotations merged; a status field a manager applied before
 * and no longer sends is removed (top-level fields of status only).
 */

type Fault = { match: (verb: string, ref: ObjectRef) => boolean; error: Error; times: number };

export interface RecordedEvent {
  regarding: ObjectRef;
  type: EventType;
  reason: string;
  note: string;
  action?: string;
}

function keyOf(ref: { apiVersion: string; kind: string; namespace?: string | undefined; name: string }): string {
  return `${ref.apiVersion}|${ref.kind}|${ref.namespace ?? ''}|${ref.name}`;
}

function refOf(obj: KubeObject): ObjectRef {
  return {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    name: obj.metadata.name,
    ...(obj.metadata.namespace === undefined ? {} : { namespace: obj.metadata.namespace }),
  };
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/** Everything outside metadata and status: what `generation` tracks. */
function content(obj: KubeObject): string {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return JSON.stringify(rest);
}

function matchesSelector(labels: Record<string, string> | undefined, selector: string | undefined): boolean {
  if (selector === undefined || selector === '') return true;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    return k !== undefined && labels?.[k.trim()] === v?.trim();
  });
}

export class MemoryKube implements Kube {
  private readonly objects = new Map<string, KubeObject>();
  private resourceVersion = 0;
  private readonly faults: Fault[] = [];
  /** Object key → field manager → the top-level status fields it applied last. */
  private readonly statusOwners = new Map<string, Map<string, Set<string>>>();
  private readonly listeners = new Set<(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject) => void>();
  /** Every call made through the port, for assertions (verb and object key). */
  readonly calls: { verb: string; ref: ObjectRef }[] = [];

  constructor(private readonly now: () => Date = () => new Date()) {}

  // ------------------------------------------------------------------------------------------------------------------
  // test controls

  /** The next `times` calls for which `match` holds fail with `error`. */
  failNext(match: (verb: string, ref: ObjectRef) => boolean, error: Error, times = 1): void {
    this.faults.push({ match, error, times });
  }

  onChange(listener: (type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A user's create (kubectl create): assigns uid, resourceVersion, generation 1. */
  create<T extends KubeObject>(obj: T): T {
    const key = keyOf(refOf(obj));
    if (this.objects.has(key))
      throw new KubeApiError(409, 'AlreadyExists', `${obj.kind} "${obj.metadata.name}" already exists`);
    this.statusOwners.delete(key);
    const stored = clone(obj);
    stored.metadata = {
      ...stored.metadata,
      uid: randomUUID(),
      resourceVersion: this.nextVersion(),
      generation: 1,
      creationTimestamp: this.now().toISOString(),
    };
    this.objects.set(key, stored);
    this.emit('ADDED', stored);
    return clone(stored);
  }

  /** A user's update of spec/metadata (kubectl apply/edit): bumps generation when content changes. */
  update<T extends KubeObject>(obj: T): T {
    const existing = this.objects.get(keyOf(refOf(obj)));
    if (existing === undefined) throw new KubeApiError(404, 'NotFound', `${obj.kind} "${obj.metadata.name}" not found`);
    const next: KubeObject = clone(obj);
    next.metadata = {
      ...existing.metadata,
      ...next.metadata,
      uid: existing.metadata.uid!,
      creationTimestamp: existing.metadata.creationTimestamp!,
      resourceVersion: this.nextVersion(),
      generation: (existing.metadata.generation ?? 1) + (content(existing) === content(next) ? 0 : 1),
    };
    if (existing.metadata.deletionTimestamp !== undefined)
      next.metadata.deletionTimestamp = existing.metadata.deletionTimestamp;
    if ('status' in existing) next['status'] = clone(existing['status']);
    else delete next['status'];
    this.store(next);
    return clone(next) as T;
  }

  /** What a kubelet or another controller would write to status (no port call recorded). */
  setStatus(ref: ObjectRef, status: unknown): void {
    const existing = this.mustGet(ref);
    this.statusOwners.delete(keyOf(ref));
    existing['status'] = clone(status);
    existing.metadata.resourceVersion = this.nextVersion();
    this.emit('MODIFIED', existing);
  }

  /** Raw stored object (no clone): for assertions only. */
  peek<T extends KubeObject = KubeObject>(ref: ObjectRef): T | undefined {
    return this.objects.get(keyOf(ref)) as T | undefined;
  }

  all(kind?: string): KubeObject[] {
    return [...this.objects.values()].filter((o) => kind === undefined || o.kind === kind).map((o) => clone(o));
  }

  // ------------------------------------------------------------------------------------------------------------------
  // the port

  get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    return this.call('get', ref, () => {
      const obj = this.objects.get(keyOf(ref));
      return obj === undefined ? undefined : (clone(obj) as T);
    });
  }

  list<T extends KubeObject = KubeObject>(apiVersion: string, kind: string, options: ListOptions = {}): Promise<T[]> {
    return this.call(
      'list',
      { apiVersion, kind, name: '', ...(options.namespace === undefined ? {} : { namespace: options.namespace }) },
      () =>
        [...this.objects.values()]
          .filter(
            (o) =>
              o.apiVersion === apiVersion &&
              o.kind === kind &&
              (options.namespace === undefined || o.metadata.namespace === options.namespace) &&
              matchesSelector(o.metadata.labels, options.labelSelector),
          )
          .map((o) => clone(o) as T),
    );
  }

  apply<T extends KubeObject = KubeObject>(obj: KubeObject, options: ApplyOptions): Promise<T> {
    return this.call('apply', refOf(obj), () => {
      if (options.fieldManager === '') throw new KubeApiError(422, 'Invalid', 'fieldManager is required for apply');
      const existing = this.objects.get(keyOf(refOf(obj)));
      const applied = clone(obj);
      delete applied['status'];
      if (existing === undefined) {
        if (obj.metadata.namespace !== undefined) this.requireNamespace(obj.metadata.namespace);
        applied.metadata = {
          ...applied.metadata,
          uid: randomUUID(),
          resourceVersion: this.nextVersion(),
          generation: 1,
          creationTimestamp: this.now().toISOString(),
        };
        this.objects.set(keyOf(refOf(applied)), applied);
        this.emit('ADDED', applied);
        return clone(applied) as T;
      }
      const next: KubeObject = { ...applied, metadata: { ...existing.metadata } };
      if ('status' in existing) next['status'] = existing['status'];
      const m = applied.metadata;
      if (m.labels !== undefined) next.metadata.labels = { ...existing.metadata.labels, ...m.labels };
      if (m.annotations !== undefined)
        next.metadata.annotations = { ...existing.metadata.annotations, ...m.annotations };
      if (m.ownerReferences !== undefined) next.metadata.ownerReferences = m.ownerReferences;
      if (m.finalizers !== undefined) {
        next.metadata.finalizers = [...new Set([...(existing.metadata.finalizers ?? []), ...m.finalizers])];
      }
      const changed =
        content(existing) !== content(next) || JSON.stringify(existing.metadata) !== JSON.stringify(next.metadata);
      if (!changed) return clone(existing) as T;
      if (content(existing) !== content(next)) next.metadata.generation = (existing.metadata.generation ?? 1) + 1;
      next.metadata.resourceVersion = this.nextVersion();
      this.store(next);
      return clone(next) as T;
    });
  }

  applyStatus<T extends KubeObject = KubeObject>(obj: KubeObject, options: ApplyOptions): Promise<T> {
    return this.call('applyStatus', refOf(obj), () => {
      if (options.fieldManager === '') throw new KubeApiError(422, 'Invalid', 'fieldManager is required for apply');
      const existing = this.mustGet(refOf(obj));
      const sent = (obj['status'] as Record<string, unknown> | undefined) ?? {};
      const owners = this.statusOwners.get(keyOf(refOf(obj))) ?? new Map<string, Set<string>>();
      this.statusOwners.set(keyOf(refOf(obj)), owners);
      const status: Record<string, unknown> = {
        ...((existing['status'] as Record<string, unknown> | undefined) ?? {}),
        ...sent,
      };
      for (const field of owners.get(options.fieldManager) ?? []) {
        const ownedElsewhere = [...owners].some(([m, fields]) => m !== options.fieldManager && fields.has(field));
        if (!(field in sent) && !ownedElsewhere) delete status[field];
      }
      owners.set(options.fieldManager, new Set(Object.keys(sent)));
      if (JSON.stringify(status) === JSON.stringify(existing['status'])) return clone(existing) as T;
      existing['status'] = clone(status);
      existing.metadata.resourceVersion = this.nextVersion();
      this.emit('MODIFIED', existing);
      return clone(existing) as T;
    });
  }

  setFinalizers<T extends KubeObject = KubeObject>(
    ref: ObjectRef,
    finalizers: string[],
    resourceVersion: string,
  ): Promise<T | undefined> {
    return this.call('setFinalizers', ref, () => {
      const existing = this.mustGet(ref);
      if (existing.metadata.resourceVersion !== resourceVersion) {
        throw new KubeApiError(
          409,
          'Conflict',
          `the object has been modified; please apply your changes to the latest version`,
        );
      }
      if (
        existing.metadata.deletionTimestamp !== undefined &&
        finalizers.some((f) => !(existing.metadata.finalizers ?? []).includes(f))
      ) {
        throw new KubeApiError(422, 'Invalid', 'no new finalizers can be added if the object is being deleted');
      }
      existing.metadata.finalizers = [...finalizers];
      existing.metadata.resourceVersion = this.nextVersion();
      if (existing.metadata.deletionTimestamp !== undefined && finalizers.length === 0) {
        this.remove(existing);
        return undefined;
      }
      this.emit('MODIFIED', existing);
      return clone(existing) as T;
    });
  }

  delete(
    ref: ObjectRef,
    options: { propagationPolicy?: 'Background' | 'Foreground' | 'Orphan' } = {},
  ): Promise<boolean> {
    return this.call('delete', ref, () => this.deleteNow(ref, options.propagationPolicy ?? 'Background'));
  }

  // ------------------------------------------------------------------------------------------------------------------

  /** A user's delete (kubectl delete), outside the port. */
  deleteAsUser(ref: ObjectRef): boolean {
    return this.deleteNow(ref, 'Background');
  }

  private deleteNow(ref: ObjectRef, policy: 'Background' | 'Foreground' | 'Orphan'): boolean {
    const existing = this.objects.get(keyOf(ref));
    if (existing === undefined) return false;
    if ((existing.metadata.finalizers ?? []).length > 0) {
      if (existing.metadata.deletionTimestamp === undefined) {
        existing.metadata.deletionTimestamp = this.now().toISOString();
        existing.metadata.resourceVersion = this.nextVersion();
        this.emit('MODIFIED', existing);
      }
      return true;
    }
    this.remove(existing, policy === 'Orphan');
    return true;
  }

  private remove(obj: KubeObject, orphan = false): void {
    this.objects.delete(keyOf(refOf(obj)));
    this.emit('DELETED', obj);
    const uid = obj.metadata.uid;
    for (const child of [...this.objects.values()]) {
      const refs = child.metadata.ownerReferences ?? [];
      if (!refs.some((r) => r.uid === uid)) continue;
      if (orphan) {
        child.metadata.ownerReferences = refs.filter((r) => r.uid !== uid);
        child.metadata.resourceVersion = this.nextVersion();
        this.emit('MODIFIED', child);
      } else {
        this.deleteNow(refOf(child), 'Background');
      }
    }
    if (obj.kind === 'Namespace') {
      for (const o of [...this.objects.values()])
        if (o.metadata.namespace === obj.metadata.name) this.deleteNow(refOf(o), 'Background');
    }
  }

  private requireNamespace(namespace: string): void {
    if (namespace === 'default') return;
    if (!this.objects.has(keyOf({ apiVersion: 'v1', kind: 'Namespace', name: namespace }))) {
      throw new KubeApiError(404, 'NotFound', `namespaces "${namespace}" not found`);
    }
  }

  private mustGet(ref: ObjectRef): KubeObject {
    const existing = this.objects.get(keyOf(ref));
    if (existing === undefined) throw new KubeApiError(404, 'NotFound', `${ref.kind} "${ref.name}" not found`);
    return existing;
  }

  private store(obj: KubeObject): void {
    this.objects.set(keyOf(refOf(obj)), obj);
    this.emit('MODIFIED', obj);
  }

  private nextVersion(): string {
    return String(++this.resourceVersion);
  }

  private emit(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject): void {
    for (const l of this.listeners) l(type, clone(obj));
  }

  private async call<T>(verb: string, ref: ObjectRef, body: () => T): Promise<T> {
    this.calls.push({ verb, ref });
    await Promise.resolve();
    const fault = this.faults.find((f) => f.times > 0 && f.match(verb, ref));
    if (fault !== undefined) {
      fault.times--;
      throw fault.error;
    }
    return body();
  }
}

/** Collects events instead of writing them. */
export class MemoryEvents implements EventRecorder {
  readonly events: RecordedEvent[] = [];

  record(regarding: KubeObject, type: EventType, reason: string, note: string, action?: string): Promise<void> {
    this.events.push({ regarding: refOf(regarding), type, reason, note, ...(action === undefined ? {} : { action }) });
    return Promise.resolve();
  }

  reasons(): string[] {
    return this.events.map((e) => e.reason);
  }
}
