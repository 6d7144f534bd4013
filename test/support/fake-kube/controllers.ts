import { CRD_CLEANUP_FINALIZER, type Store } from './store.ts';
import { isObject, type ChangeEvent, type KubeObject, type ResourceInfo } from './types.ts';

/**
 * The few control loops the API server's own controllers would run: garbage collection through ownerReferences,
 * namespace termination, and CRD instance cleanup. They react to committed changes asynchronously (after the request
 * that caused them has been answered), as the real ones do.
 */
export class Controllers {
  private readonly queue: (() => void)[] = [];
  private scheduled = false;
  private stopped = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly store: Store) {
    this.unsubscribe = store.subscribe((event) => this.observe(event));
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe();
  }

  private observe(event: ChangeEvent): void {
    const { object, resource } = event;
    const uid = object.metadata.uid ?? '';
    const namespace = object.metadata.namespace;
    if (event.type === 'DELETED') {
      this.enqueue(() => this.collectDependentsOf(uid));
      if (namespace !== undefined && this.store.namespaceState(namespace) === 'terminating') {
        this.enqueue(() => this.drainNamespace(namespace));
      }
      if (resource.custom) this.enqueue(() => this.drainCrd(`${resource.plural}.${resource.group}`));
    }
    if (event.type === 'ADDED' && (object.metadata.ownerReferences ?? []).length > 0) {
      this.enqueue(() => this.collectIfOrphaned(resource, object));
    }
    if (object.metadata.deletionTimestamp !== undefined && event.type === 'MODIFIED') {
      if (resource.group === '' && resource.plural === 'namespaces')
        this.enqueue(() => this.drainNamespace(object.metadata.name ?? ''));
      if (resource.group === 'apiextensions.k8s.io' && resource.plural === 'customresourcedefinitions') {
        this.enqueue(() => this.drainCrd(object.metadata.name ?? ''));
      }
    }
  }

  private enqueue(task: () => void): void {
    this.queue.push(task);
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (!this.stopped && this.queue.length > 0) {
        const next = this.queue.shift();
        try {
          next?.();
        } catch {
          // The object changed or vanished under the controller (NotFound, a racing finalizer); the change that
          // caused it enqueues another pass.
        }
      }
    });
  }

  private ownerExists(dependent: KubeObject, uid: string): boolean {
    for (const { info, object } of this.store.all()) {
      if (object.metadata.uid !== uid) continue;
      return !info.namespaced || object.metadata.namespace === dependent.metadata.namespace;
    }
    return false;
  }

  /** Background propagation: dependents with no remaining owner are deleted, the others lose the dangling reference. */
  private collectDependentsOf(uid: string): void {
    for (const { info, object } of [...this.store.all()]) {
      if ((object.metadata.ownerReferences ?? []).some((r) => r.uid === uid)) this.collectIfOrphaned(info, object);
    }
  }

  private collectIfOrphaned(info: ResourceInfo, object: KubeObject): void {
    const current = this.store.get(info, object.metadata.namespace, object.metadata.name ?? '');
    if (current === undefined || current.metadata.uid !== object.metadata.uid) return;
    const refs = current.metadata.ownerReferences ?? [];
    const alive = refs.filter((r) => this.ownerExists(current, r.uid));
    if (alive.length === refs.length) return;
    if (alive.length === 0) {
      if (current.metadata.deletionTimestamp === undefined) {
        this.store.delete(info, current.metadata.namespace, current.metadata.name ?? '', {
          propagationPolicy: 'Background',
        });
      }
      return;
    }
    current.metadata.ownerReferences = alive;
    this.store.update(info, current.metadata.namespace, current.metadata.name ?? '', current, {
      manager: 'garbage-collector',
      target: 'raw',
    });
  }

  private drainNamespace(name: string): void {
    const namespaces = this.store.registry.find('', 'v1', 'namespaces');
    const ns = namespaces === undefined ? undefined : this.store.get(namespaces, undefined, name);
    if (namespaces === undefined || ns?.metadata.deletionTimestamp === undefined) return;
    const contained = (): { info: ResourceInfo; object: KubeObject }[] =>
      [...this.store.all()].filter(({ info, object }) => info.namespaced && object.metadata.namespace === name);
    for (const { info, object } of contained()) {
      if (object.metadata.deletionTimestamp === undefined) this.store.delete(info, name, object.metadata.name ?? '');
    }
    if (contained().length > 0) return;
    const spec = isObject(ns['spec']) ? ns['spec'] : {};
    this.store.update(
      namespaces,
      undefined,
      name,
      { ...ns, spec: { ...spec, finalizers: [] } },
      { manager: 'namespace-controller', target: 'raw' },
    );
  }

  private drainCrd(name: string): void {
    const crds = this.store.registry.find('apiextensions.k8s.io', 'v1', 'customresourcedefinitions');
    const crd = crds === undefined ? undefined : this.store.get(crds, undefined, name);
    if (crds === undefined || crd?.metadata.deletionTimestamp === undefined) return;
    const info = this.store.registry.crdResource(name);
    const instances = (): KubeObject[] => (info === undefined ? [] : this.store.list(info));
    for (const object of instances()) {
      if (info !== undefined && object.metadata.deletionTimestamp === undefined) {
        this.store.delete(info, object.metadata.namespace, object.metadata.name ?? '');
      }
    }
    if (instances().length > 0) return;
    crd.metadata.finalizers = (crd.metadata.finalizers ?? []).filter((f) => f !== CRD_CLEANUP_FINALIZER);
    this.store.update(crds, undefined, name, crd, { manager: 'apiextensions-controller', target: 'raw' });
  }
}
