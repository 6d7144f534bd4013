import type { FieldScope } from './apply.ts';
import { clone, isObject, scalarString, type JsonObject, type KubeObject, type ResourceInfo } from './types.ts';

/*
 * What the real API server checks, fills in or computes on an object, apart from storing it (store.ts): timestamps,
 * name rules, Secret stringData, pending finalizers, the fields a write may touch, generation and no-op comparisons,
 * CRD status.
 */

/** `main` is a write to the resource, `status` to its /status, `raw` a test-side write that may touch everything. */
export type WriteTarget = 'main' | 'status' | 'raw';

export function now(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * MicroTime fields must carry exactly six fractional digits: the real server parses them with a fixed layout, and
 * rejects what `Date.toJSON()` produces (client-node passes Dates in these fields through unchanged).
 */
export const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;
export const MICRO_TIME_FIELDS: Record<string, readonly string[]> = {
  'coordination.k8s.io/leases': ['spec.acquireTime', 'spec.renewTime'],
  'events.k8s.io/events': ['eventTime', 'series.lastObservedTime'],
  '/events': ['eventTime', 'series.lastObservedTime'],
};

export const NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function nameProblem(info: ResourceInfo, name: string): string | undefined {
  if (info.group === 'rbac.authorization.k8s.io') {
    return name === '.' || name === '..' || /[/%]/.test(name) ? `may not contain '/' or '%'` : undefined;
  }
  const label = info.plural === 'namespaces' || (info.group === '' && info.plural === 'services');
  if (label && (name.length > 63 || !DNS_LABEL.test(name))) {
    return `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`;
  }
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`;
  }
  return undefined;
}

/** Secret `stringData` is write-only: the server merges it into `data` (base64), where it wins, and drops it. */
export function mergeStringData(secret: KubeObject): void {
  const stringData = secret['stringData'];
  delete secret['stringData'];
  if (!isObject(stringData)) return;
  const data: JsonObject = isObject(secret['data']) ? { ...secret['data'] } : {};
  for (const [key, value] of Object.entries(stringData))
    data[key] = Buffer.from(scalarString(value)).toString('base64');
  secret['data'] = data;
}

/** Finalizers that still block removal; a Namespace also waits for its `spec.finalizers`. */
export function pendingFinalizers(object: KubeObject): string[] {
  const spec = object['spec'];
  const specFinalizers =
    object.kind === 'Namespace' && isObject(spec) && Array.isArray(spec['finalizers'])
      ? (spec['finalizers'] as string[])
      : [];
  return [...(object.metadata.finalizers ?? []), ...specFinalizers];
}

export function scopeOf(info: ResourceInfo, target: WriteTarget): FieldScope {
  if (target === 'status') return (k) => k === 'status';
  if (target === 'main' && info.status) return (k) => k !== 'status';
  return () => true;
}

/** Objects sans the fields that every write rewrites, for no-op and generation checks. */
export function comparable(object: KubeObject): JsonObject {
  const { managedFields: _m, resourceVersion: _r, ...metadata } = object.metadata;
  return { ...object, metadata };
}

export function specPart(object: KubeObject): JsonObject {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = object;
  return rest;
}

/** Established and NamesAccepted at once: the fake has no naming conflicts to wait for. */
export function crdStatus(crd: KubeObject, old: KubeObject | undefined): JsonObject {
  const spec = isObject(crd['spec']) ? crd['spec'] : {};
  const versions = (Array.isArray(spec['versions']) ? spec['versions'] : []).filter(isObject);
  const storage = versions.find((v) => v['storage'] === true)?.['name'];
  const oldStatus = isObject(old?.['status']) ? old['status'] : {};
  const stored = Array.isArray(oldStatus['storedVersions']) ? (oldStatus['storedVersions'] as string[]) : [];
  const oldConditions = Array.isArray(oldStatus['conditions']) ? oldStatus['conditions'].filter(isObject) : [];
  const terminating = crd.metadata.deletionTimestamp !== undefined;
  const condition = (type: string, status: string, reason: string, message: string): JsonObject => {
    const previous = oldConditions.find((c) => c['type'] === type);
    const lastTransitionTime = previous?.['status'] === status ? previous['lastTransitionTime'] : now();
    return { type, status, reason, message, lastTransitionTime };
  };
  return {
    acceptedNames: clone(spec['names'] ?? {}),
    storedVersions: typeof storage === 'string' && !stored.includes(storage) ? [...stored, storage] : stored,
    conditions: [
      condition('NamesAccepted', 'True', 'NoConflicts', 'no conflicts found'),
      condition('Established', 'True', 'InitialNamesAccepted', 'the initial names have been accepted'),
      ...(terminating
        ? [condition('Terminating', 'True', 'InstanceDeletionInProgress', 'CustomResource deletion is in progress')]
        : []),
    ],
  };
}
