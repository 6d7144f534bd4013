/** Shapes shared by the fake API server's modules. Objects are plain JSON; only the metadata is typed. */

export type JsonObject = Record<string, unknown>;

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** How a list field merges under apply and strategic merge patch. */
export type ListType =
  { readonly kind: 'atomic' } | { readonly kind: 'set' } | { readonly kind: 'map'; readonly keys: readonly string[] };

export interface PrinterColumn {
  readonly name: string;
  readonly type: string;
  readonly jsonPath: string;
  readonly description?: string;
  readonly format?: string;
  readonly priority?: number;
}

export interface ScaleSubresource {
  readonly specReplicasPath: string;
  readonly statusReplicasPath: string;
  readonly labelSelectorPath?: string;
}

/** One served resource (a built-in kind or one a CRD registered). */
export interface ResourceInfo {
  readonly group: string;
  /** Served versions; the first is the preferred (storage) one. */
  readonly versions: readonly string[];
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  readonly categories: readonly string[];
  readonly verbs: readonly string[];
  readonly status: boolean;
  readonly scale?: ScaleSubresource;
  /** Printer columns per version, after NAME (AGE included where the definition includes it). */
  readonly printerColumns: (version: string) => readonly PrinterColumn[];
  /** List semantics of the field at `fieldPath` (field names only, no indices). */
  readonly listType: (version: string, fieldPath: readonly string[]) => ListType;
  /** The CRD's openAPIV3Schema for a version (built-in kinds have none here). */
  readonly schema: (version: string) => JsonObject | undefined;
  /** True for kinds defined by a CustomResourceDefinition. */
  readonly custom: boolean;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** A change committed to the store, as watches and hooks see it. */
export interface ChangeEvent {
  readonly type: WatchEventType;
  readonly resource: ResourceInfo;
  readonly object: KubeObject;
  /** The previous state, for MODIFIED and DELETED. */
  readonly oldObject?: KubeObject;
  readonly resourceVersion: number;
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? (value as unknown[]) : [];
}

/** How a selector or printer column shows a value: scalars as themselves, anything else as JSON. */
export function scalarString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return value === undefined || value === null ? '' : JSON.stringify(value);
}

export function clone<T>(value: T): T {
  return structuredClone(value);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a).filter((k) => a[k] !== undefined);
    const otherKeys = Object.keys(b).filter((k) => b[k] !== undefined);
    return keys.length === otherKeys.length && keys.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

export function apiVersionOf(group: string, version: string): string {
  return group === '' ? version : `${group}/${version}`;
}

export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

/** `pods`, `deployments.apps`: how the real server names a resource in messages. */
export function qualifiedName(resource: { readonly group: string; readonly plural: string }): string {
  return resource.group === '' ? resource.plural : `${resource.plural}.${resource.group}`;
}

/** Reads `a.b.c` (dots only) from an object; undefined when any step is missing. */
export function getField(object: unknown, dottedPath: string): unknown {
  let current: unknown = object;
  for (const part of dottedPath.split('.').filter((p) => p !== '')) {
    if (!isObject(current)) return undefined;
    current = current[part];
  }
  return current;
}

/** Writes `a.b.c`, creating intermediate objects. */
export function setField(object: JsonObject, dottedPath: string, value: unknown): void {
  const parts = dottedPath.split('.').filter((p) => p !== '');
  let current = object;
  for (const part of parts.slice(0, -1)) {
    const next = current[part];
    if (isObject(next)) {
      current = next;
    } else {
      const created: JsonObject = {};
      current[part] = created;
      current = created;
    }
  }
  const last = parts.at(-1);
  if (last !== undefined) current[last] = value;
}
