import { randomBytes, randomUUID } from 'node:crypto';
import { recordUpdate, renderManagedFields, serverSideApply, type ManagedEntry } from './apply.ts';
import {
  KubeError,
  alreadyExists,
  badRequest,
  conflict,
  forbidden,
  invalid,
  methodNotAllowed,
  notFound,
  staleConflict,
} from './errors.ts';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.ts';
import { resourceKey, type Registry } from './registry.ts';
import {
  comparable,
  crdStatus,
  MICRO_TIME,
  MICRO_TIME_FIELDS,
  mergeStringData,
  NAME_ALPHABET,
  nameProblem,
  now,
  pendingFinalizers,
  scopeOf,
  specPart,
  type WriteTarget,
} from './object-rules.ts';
import { selectorString } from './selectors.ts';
import {
  apiVersionOf,
  clone,
  deepEqual,
  getField,
  isObject,
  setField,
  type ChangeEvent,
  type JsonObject,
  type KubeObject,
  type ResourceInfo,
} from './types.ts';

/**
 * The object store and the write semantics of the real API server: resourceVersion, generation, uid, status
 * subresource, optimistic concurrency, finalizers and deletionTimestamp, managed fields, and a bounded history of
 * changes for watches. Controllers (GC, namespace and CRD cleanup) live in controllers.ts and act through this API.
 */

export const CRD_CLEANUP_FINALIZER = 'customresourcecleanup.apiextensions.k8s.io';
/** The manager recorded for writes made through the test-side store API. */
export const STORE_MANAGER = 'fake-kube';

export { now, pendingFinalizers, type WriteTarget } from './object-rules.ts';

export type PatchType = 'merge' | 'strategic' | 'json' | 'apply';

export interface WriteOptions {
  readonly manager: string;
  readonly target?: WriteTarget;
  readonly dryRun?: boolean;
}

export interface DeleteOptions {
  readonly propagationPolicy?: 'Orphan' | 'Background' | 'Foreground';
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string };
  readonly dryRun?: boolean;
}

interface Entry {
  object: KubeObject;
  managed: ManagedEntry[];
}

export class Store {
  private rv = 0;
  private readonly data = new Map<string, Map<string, Entry>>();
  private readonly subscribers = new Set<(event: ChangeEvent) => void>();
  /** Bounded change history; watches replay from it. */
  private history: ChangeEvent[] = [];
  /** resourceVersion of the newest change no longer in `history`. */
  private compactedRv = 0;

  constructor(
    readonly registry: Registry,
    private readonly historySize: number,
  ) {}

  get resourceVersion(): number {
    return this.rv;
  }

  subscribe(listener: (event: ChangeEvent) => void): () => void {
    this.subscribers.add(listener);
    return () => this.subscribers.delete(listener);
  }

  /** Changes after `resourceVersion`, or undefined when some of them are no longer kept (the watch gets 410). */
  changesSince(resourceVersion: number): ChangeEvent[] | undefined {
    if (resourceVersion < this.compactedRv) return undefined;
    return this.history.filter((e) => e.resourceVersion > resourceVersion);
  }

  /** Forgets the change history, so any watch resuming from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
  }

  get(info: ResourceInfo, namespace: string | undefined, name: string): KubeObject | undefined {
    const entry = this.entry(info, namespace, name);
    return entry === undefined ? undefined : clone(entry.object);
  }

  list(info: ResourceInfo, namespace?: string): KubeObject[] {
    const objects = [...(this.data.get(resourceKey(info))?.values() ?? [])]
      .map((e) => e.object)
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace);
    return objects.map((o) => clone(o));
  }

  /** Every stored object, of every resource. */
  *all(): Generator<{ info: ResourceInfo; object: KubeObject }> {
    for (const [key, objects] of this.data) {
      const info = this.registry.byKey(key);
      if (info === undefined) continue;
      for (const entry of objects.values()) yield { info, object: entry.object };
    }
  }

  namespaceState(name: string): 'missing' | 'active' | 'terminating' {
    const ns = this.get(this.namespaces(), undefined, name);
    if (ns === undefined) return 'missing';
    return ns.metadata.deletionTimestamp !== undefined ? 'terminating' : 'active';
  }

  create(
    info: ResourceInfo,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions,
    managed?: ManagedEntry[],
  ): KubeObject {
    if (!isObject(body)) throw badRequest('the request body must be an object');
    const target = options.target ?? 'main';
    const object = this.normalize(info, clone(body), target);
    const metadata = object.metadata;
    if (info.namespaced) {
      const ns = namespace ?? metadata.namespace ?? 'default';
      if (metadata.namespace !== undefined && metadata.namespace !== ns) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      metadata.namespace = ns;
      const state = this.namespaceState(ns);
      if (state === 'missing') throw notFound(this.namespaces(), ns);
      if (state === 'terminating') {
        throw forbidden(
          info,
          metadata.name,
          `unable to create new content in namespace ${ns} because it is being terminated`,
        );
      }
    } else {
      delete metadata.namespace;
    }
    this.refuseWhileCrdTerminates(info, 'create');
    if ((metadata.name ?? '') === '') {
      if (typeof metadata.generateName !== 'string' || metadata.generateName === '') {
        throw invalid(info, '', [
          {
            type: 'FieldValueRequired',
            field: 'metadata.name',
            message: 'Required value: name or generateName is required',
          },
        ]);
      }
      do {
        const suffix = [...randomBytes(5)].map((b) => NAME_ALPHABET[b % NAME_ALPHABET.length]).join('');
        metadata.name = `${metadata.generateName}${suffix}`;
      } while (this.entry(info, metadata.namespace, metadata.name) !== undefined);
    }
    const name = metadata.name ?? '';
    const problem = nameProblem(info, name);
    if (problem !== undefined) {
      throw invalid(info, name, [{ field: 'metadata.name', message: `Invalid value: "${name}": ${problem}` }]);
    }
    if (this.entry(info, metadata.namespace, name) !== undefined) throw alreadyExists(info, name);

    for (const field of ['deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields', 'resourceVersion'])
      delete metadata[field];
    metadata.uid = randomUUID();
    metadata.creationTimestamp = now();
    metadata.generation = 1;
    if (info.status && target !== 'raw') delete object['status'];
    this.applyDefaults(info, object);
    if (info.group === 'apiextensions.k8s.io') this.registry.validateCrd(object);
    const entries =
      managed ??
      recordUpdate({
        before: undefined,
        after: object,
        entries: [],
        manager: options.manager,
        subresource: '',
        apiVersion: object.apiVersion,
        listType: (fp) => info.listType(info.versions[0] ?? '', fp),
        scope: scopeOf(info, target),
        now: now(),
      });
    if (options.dryRun === true) return object;
    return this.commit(info, undefined, object, entries);
  }

  /** PUT semantics: optimistic concurrency on metadata.resourceVersion; status split by the subresource. */
  update(
    info: ResourceInfo,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions,
    managed?: ManagedEntry[],
  ): KubeObject {
    if (!isObject(body)) throw badRequest('the request body must be an object');
    const entry = this.entry(info, namespace, name);
    if (entry === undefined) throw notFound(info, name);
    const target = options.target ?? 'main';
    const incoming = this.normalize(info, clone(body), target);
    const old = entry.object;
    if (incoming.metadata.name !== undefined && incoming.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${incoming.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    if (
      info.namespaced &&
      incoming.metadata.namespace !== undefined &&
      incoming.metadata.namespace !== old.metadata.namespace
    ) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    const rv = incoming.metadata.resourceVersion;
    if (rv !== undefined && rv !== '' && rv !== old.metadata.resourceVersion) throw staleConflict(info, name);
    if ((rv === undefined || rv === '') && info.custom && target !== 'raw') {
      throw invalid(info, name, [
        { field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' },
      ]);
    }

    let next: KubeObject;
    if (target === 'status') {
      next = clone(old);
      if (incoming['status'] === undefined) delete next['status'];
      else next['status'] = incoming['status'];
    } else {
      next = incoming;
      if (target === 'main' && info.status) {
        if (old['status'] === undefined) delete next['status'];
        else next['status'] = clone(old['status']);
      }
    }
    for (const field of [
      'uid',
      'creationTimestamp',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
      'generation',
      'resourceVersion',
    ]) {
      const kept: unknown = old.metadata[field];
      if (kept === undefined) delete next.metadata[field];
      else next.metadata[field] = kept;
    }
    next.metadata.name = name;
    if (old.metadata.namespace !== undefined) next.metadata.namespace = old.metadata.namespace;
    if (old.metadata.deletionTimestamp !== undefined) {
      const added = (next.metadata.finalizers ?? []).filter((f) => !(old.metadata.finalizers ?? []).includes(f));
      if (added.length > 0) {
        throw invalid(info, name, [
          {
            type: 'FieldValueForbidden',
            field: 'metadata.finalizers',
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
          },
        ]);
      }
    }
    if (!deepEqual(specPart(old), specPart(next))) next.metadata.generation = (old.metadata.generation ?? 0) + 1;
    if (info.group === 'apiextensions.k8s.io') this.registry.validateCrd(next);

    const subresource = target === 'status' ? 'status' : '';
    const entries =
      managed ??
      recordUpdate({
        before: old,
        after: next,
        entries: entry.managed,
        manager: options.manager,
        subresource,
        apiVersion: next.apiVersion,
        listType: (fp) => info.listType(info.versions[0] ?? '', fp),
        scope: scopeOf(info, target),
        now: now(),
      });
    const sameOwnership = deepEqual(
      entry.managed.map((e) => [e.manager, e.operation, e.subresource, [...e.fields].sort()]),
      entries.map((e) => [e.manager, e.operation, e.subresource, [...e.fields].sort()]),
    );
    if (deepEqual(comparable(old), comparable(next)) && sameOwnership) return clone(old);
    if (options.dryRun === true) return next;
    return this.commit(info, entry, next, entries);
  }

  patch(
    info: ResourceInfo,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    body: unknown,
    options: WriteOptions & { force?: boolean },
  ): KubeObject {
    if (type === 'apply') return this.apply(info, namespace, name, body, options);
    const entry = this.entry(info, namespace, name);
    if (entry === undefined) throw notFound(info, name);
    if (type === 'strategic' && info.custom) {
      throw new KubeError(
        'UnsupportedMediaType',
        'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
      );
    }
    const current = clone(entry.object);
    const listType = (fp: readonly string[]): ReturnType<ResourceInfo['listType']> =>
      info.listType(info.versions[0] ?? '', fp);
    const patched =
      type === 'merge'
        ? mergePatch(current, body)
        : type === 'strategic'
          ? strategicMergePatch(current, body, listType)
          : jsonPatch(current, body);
    return this.update(info, namespace, name, patched, options);
  }

  /** Server-side apply (`application/apply-patch+yaml`): creates when missing. */
  apply(
    info: ResourceInfo,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions & { force?: boolean },
  ): KubeObject {
    if (options.manager === '') throw badRequest('fieldManager is required for apply requests');
    if (!isObject(body) || typeof body['apiVersion'] !== 'string' || typeof body['kind'] !== 'string') {
      throw badRequest('apply patches must contain apiVersion and kind');
    }
    if (body['kind'] !== info.kind)
      throw badRequest(`the kind in the applied object (${String(body['kind'])}) does not match ${info.kind}`);
    const target = options.target ?? 'main';
    const metadata = isObject(body['metadata']) ? body['metadata'] : {};
    if (metadata['name'] !== undefined && metadata['name'] !== name) {
      throw badRequest(
        `the name of the object (${JSON.stringify(metadata['name'])}) does not match the name on the URL (${name})`,
      );
    }
    const entry = this.entry(info, namespace, name);
    const rv = metadata['resourceVersion'];
    if (typeof rv === 'string' && rv !== '' && rv !== entry?.object.metadata.resourceVersion)
      throw staleConflict(info, name);

    const keptMetadata: JsonObject = { name };
    for (const k of ['namespace', 'labels', 'annotations', 'finalizers', 'ownerReferences'])
      if (metadata[k] !== undefined) keptMetadata[k] = metadata[k];
    const config: JsonObject = { ...clone(body), metadata: keptMetadata };
    if (target === 'main' && info.status) delete config['status'];
    if (target === 'status')
      for (const k of Object.keys(config))
        if (!['apiVersion', 'kind', 'metadata', 'status'].includes(k)) delete config[k];
    if (target === 'status') keptMetadata['namespace'] = namespace;

    const request = {
      config,
      manager: options.manager,
      subresource: target === 'status' ? 'status' : '',
      apiVersion: String(body['apiVersion']),
      force: options.force === true,
      listType: (fp: readonly string[]): ReturnType<ResourceInfo['listType']> =>
        info.listType(info.versions[0] ?? '', fp),
      scope: scopeOf(info, target),
      now: now(),
    };
    if (entry === undefined) {
      if (target === 'status') throw notFound(info, name);
      const applied = serverSideApply({ ...request, live: undefined, entries: [] });
      return this.create(info, namespace, applied.object, options, applied.entries);
    }
    const applied = serverSideApply({ ...request, live: entry.object, entries: entry.managed });
    return this.update(info, namespace, name, applied.object, options, applied.entries);
  }

  delete(info: ResourceInfo, namespace: string | undefined, name: string, options: DeleteOptions = {}): KubeObject {
    const entry = this.entry(info, namespace, name);
    if (entry === undefined) throw notFound(info, name);
    const object = entry.object;
    const { uid, resourceVersion } = options.preconditions ?? {};
    if (uid !== undefined && uid !== object.metadata.uid) {
      throw conflict(
        info,
        name,
        `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${object.metadata.uid ?? ''}`,
      );
    }
    if (resourceVersion !== undefined && resourceVersion !== object.metadata.resourceVersion) {
      throw conflict(
        info,
        name,
        `Precondition failed: ResourceVersion in precondition: ${resourceVersion}, ResourceVersion in object meta: ${object.metadata.resourceVersion ?? ''}`,
      );
    }
    if (options.dryRun === true) return clone(object);
    if (options.propagationPolicy === 'Orphan') this.orphanDependents(object.metadata.uid ?? '');
    if (pendingFinalizers(object).length === 0) return this.remove(info, entry);
    if (object.metadata.deletionTimestamp !== undefined) return clone(object);
    const next = clone(object);
    next.metadata.deletionTimestamp = now();
    next.metadata.deletionGracePeriodSeconds = 0;
    if (info.plural === 'namespaces' && info.group === '') setField(next, 'status.phase', 'Terminating');
    return this.commit(info, entry, next, entry.managed);
  }

  /** Removes ownerReferences to `uid` from every object (propagationPolicy Orphan). */
  orphanDependents(uid: string): void {
    for (const { info, object } of [...this.all()]) {
      const refs = object.metadata.ownerReferences ?? [];
      if (!refs.some((r) => r.uid === uid)) continue;
      const next = clone(object);
      const remaining = refs.filter((r) => r.uid !== uid);
      if (remaining.length > 0) next.metadata.ownerReferences = remaining;
      else delete next.metadata.ownerReferences;
      this.update(info, object.metadata.namespace, object.metadata.name ?? '', next, {
        manager: 'garbage-collector',
        target: 'raw',
      });
    }
  }

  /** The `/scale` view of a workload (autoscaling/v1 Scale). */
  scaleOf(info: ResourceInfo, object: KubeObject): KubeObject {
    const scale = info.scale;
    if (scale === undefined) throw notFound(info, object.metadata.name ?? '');
    const selector = scale.labelSelectorPath === undefined ? undefined : getField(object, scale.labelSelectorPath);
    return {
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: {
        name: object.metadata.name ?? '',
        ...(object.metadata.namespace !== undefined ? { namespace: object.metadata.namespace } : {}),
        uid: object.metadata.uid ?? '',
        resourceVersion: object.metadata.resourceVersion ?? '',
        creationTimestamp: object.metadata.creationTimestamp ?? '',
      },
      spec: { replicas: Number(getField(object, scale.specReplicasPath) ?? 0) },
      status: {
        replicas: Number(getField(object, scale.statusReplicasPath) ?? 0),
        ...(selector !== undefined ? { selector: selectorString(selector) } : {}),
      },
    };
  }

  /** Writes a changed Scale back to the workload's replicas. */
  writeScale(
    info: ResourceInfo,
    namespace: string | undefined,
    name: string,
    scale: unknown,
    options: WriteOptions,
  ): KubeObject {
    const object = this.get(info, namespace, name);
    if (object === undefined || info.scale === undefined) throw notFound(info, name);
    const replicas = isObject(scale) && isObject(scale['spec']) ? scale['spec']['replicas'] : undefined;
    if (typeof replicas !== 'number') throw badRequest('Scale.spec.replicas must be a number');
    const rv = isObject(scale) && isObject(scale['metadata']) ? scale['metadata']['resourceVersion'] : undefined;
    if (typeof rv === 'string' && rv !== '' && rv !== object.metadata.resourceVersion) throw staleConflict(info, name);
    setField(object, info.scale.specReplicasPath, replicas);
    return this.scaleOf(info, this.update(info, namespace, name, object, { ...options, target: 'main' }));
  }

  private entry(info: ResourceInfo, namespace: string | undefined, name: string): Entry | undefined {
    return this.data.get(resourceKey(info))?.get(`${info.namespaced ? (namespace ?? '') : ''}/${name}`);
  }

  private namespaces(): ResourceInfo {
    const info = this.registry.find('', 'v1', 'namespaces');
    if (info === undefined) throw new Error('namespaces are always served');
    return info;
  }

  /** Sets apiVersion and kind; checks what the real server would fail to decode from a client (not store writes). */
  private normalize(info: ResourceInfo, body: JsonObject, target: WriteTarget): KubeObject {
    const metadata = isObject(body['metadata']) ? body['metadata'] : {};
    const apiVersion = apiVersionOf(info.group, info.versions[0] ?? 'v1');
    const microTimes = target === 'raw' ? [] : (MICRO_TIME_FIELDS[resourceKey(info)] ?? []);
    for (const path of microTimes) {
      const value = getField(body, path);
      if (typeof value === 'string' && !MICRO_TIME.test(value)) {
        const fraction = /:\d{2}(\..*)$/.exec(value)?.[1] ?? value;
        throw badRequest(
          `${info.kind} in version "${info.versions[0] ?? ''}" cannot be handled as a ${info.kind}: parsing time "${value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "${fraction}" as ".000000"`,
        );
      }
    }
    const object: KubeObject = { ...body, apiVersion, kind: info.kind, metadata };
    if (resourceKey(info) === '/secrets') mergeStringData(object);
    return object;
  }

  private refuseWhileCrdTerminates(info: ResourceInfo, verb: string): void {
    if (!info.custom) return;
    const crds = this.registry.find('apiextensions.k8s.io', 'v1', 'customresourcedefinitions');
    const crd = crds === undefined ? undefined : this.entry(crds, undefined, `${info.plural}.${info.group}`);
    if (crd?.object.metadata.deletionTimestamp !== undefined) {
      throw methodNotAllowed(`${verb} not allowed while custom resource definition is terminating`);
    }
  }

  private applyDefaults(info: ResourceInfo, object: KubeObject): void {
    if (info.group === '' && info.plural === 'namespaces') {
      setField(object, 'spec.finalizers', ['kubernetes']);
      setField(object, 'status.phase', 'Active');
      object.metadata.labels = { ...object.metadata.labels, 'kubernetes.io/metadata.name': object.metadata.name ?? '' };
    }
    if (info.group === 'apiextensions.k8s.io' && info.plural === 'customresourcedefinitions') {
      const finalizers = object.metadata.finalizers ?? [];
      if (!finalizers.includes(CRD_CLEANUP_FINALIZER))
        object.metadata.finalizers = [...finalizers, CRD_CLEANUP_FINALIZER];
    }
  }

  /** Records `next` (a new object when `entry` is undefined), emits the change, and finishes deletions. */
  private commit(info: ResourceInfo, entry: Entry | undefined, next: KubeObject, managed: ManagedEntry[]): KubeObject {
    if (next.metadata.deletionTimestamp !== undefined && pendingFinalizers(next).length === 0 && entry !== undefined) {
      entry.object = next;
      entry.managed = managed;
      return this.remove(info, entry);
    }
    const isCrd = info.group === 'apiextensions.k8s.io' && info.plural === 'customresourcedefinitions';
    if (isCrd) next['status'] = crdStatus(next, entry?.object);
    this.rv++;
    next.metadata.resourceVersion = String(this.rv);
    if (managed.length > 0) next.metadata.managedFields = renderManagedFields(managed);
    else delete next.metadata.managedFields;
    const key = `${next.metadata.namespace ?? ''}/${next.metadata.name ?? ''}`;
    const objects = this.data.get(resourceKey(info)) ?? new Map<string, Entry>();
    this.data.set(resourceKey(info), objects);
    const old = entry?.object;
    objects.set(key, { object: next, managed });
    if (isCrd) this.registry.registerCrd(next);
    this.emit(
      old === undefined
        ? { type: 'ADDED', resource: info, object: clone(next), resourceVersion: this.rv }
        : { type: 'MODIFIED', resource: info, object: clone(next), oldObject: clone(old), resourceVersion: this.rv },
    );
    return clone(next);
  }

  private remove(info: ResourceInfo, entry: Entry): KubeObject {
    const object = entry.object;
    const old = clone(object);
    this.data.get(resourceKey(info))?.delete(`${object.metadata.namespace ?? ''}/${object.metadata.name ?? ''}`);
    this.rv++;
    const gone = clone(object);
    gone.metadata.resourceVersion = String(this.rv);
    if (info.group === 'apiextensions.k8s.io' && info.plural === 'customresourcedefinitions') {
      const removed = this.registry.unregisterCrd(object.metadata.name ?? '');
      if (removed !== undefined) this.data.delete(resourceKey(removed));
    }
    this.emit({ type: 'DELETED', resource: info, object: gone, oldObject: old, resourceVersion: this.rv });
    return clone(gone);
  }

  private emit(event: ChangeEvent): void {
    this.history.push(event);
    if (this.history.length > this.historySize) {
      const dropped = this.history.splice(0, this.history.length - this.historySize);
      this.compactedRv = dropped.at(-1)?.resourceVersion ?? this.compactedRv;
    }
    for (const subscriber of [...this.subscribers]) subscriber(event);
  }
}
