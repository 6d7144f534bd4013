import { KubeError } from './errors.ts';
import { keysMatch, type ListTypeOf } from './patch.ts';
import { asArray, clone, deepEqual, isObject, type JsonObject } from './types.ts';

/**
 * Server-side apply and the field ownership behind `metadata.managedFields`.
 *
 * A field set is a set of paths; each path is a JSON-encoded array of `f:<field>`, `k:<json key>` (an item of a
 * keyed list) and `v:<json value>` (a member of a set list) elements, mirroring FieldsV1. Apply removes the fields
 * the manager applied last time and no longer applies (unless another manager owns them), merges the configuration
 * (maps recursively, keyed lists by key, set lists as unions, other lists replaced), and reports conflicts with other
 * managers over differing values unless forced. Updates transfer ownership of the fields they change.
 */

export interface ManagedEntry {
  readonly manager: string;
  readonly operation: 'Apply' | 'Update';
  /** '' for the main resource, 'status' or 'scale' for a subresource. */
  readonly subresource: string;
  apiVersion: string;
  time: string;
  fields: Set<string>;
}

/** Which top-level fields a write may touch (status-subresource kinds split spec writes from status writes). */
export type FieldScope = (topLevelField: string) => boolean;

const TRACKED_METADATA = ['labels', 'annotations', 'finalizers', 'ownerReferences'];

function encode(path: readonly string[]): string {
  return JSON.stringify(path);
}

function decode(path: string): string[] {
  return JSON.parse(path) as string[];
}

function pick(item: JsonObject, keys: readonly string[]): JsonObject {
  const out: JsonObject = {};
  for (const k of keys) if (item[k] !== undefined) out[k] = item[k];
  return out;
}

export function fieldSet(object: JsonObject, listType: ListTypeOf, scope: FieldScope): Set<string> {
  const out = new Set<string>();
  for (const [key, value] of Object.entries(object)) {
    if (key === 'apiVersion' || key === 'kind' || !scope(key)) continue;
    if (key === 'metadata') {
      if (!isObject(value)) continue;
      for (const m of TRACKED_METADATA) {
        if (value[m] !== undefined) walk(value[m], ['f:metadata', `f:${m}`], ['metadata', m], listType, out);
      }
    } else {
      walk(value, [`f:${key}`], [key], listType, out);
    }
  }
  return out;
}

function walk(value: unknown, path: string[], fieldPath: string[], listType: ListTypeOf, out: Set<string>): void {
  if (isObject(value) && Object.keys(value).length > 0) {
    for (const [k, v] of Object.entries(value)) walk(v, [...path, `f:${k}`], [...fieldPath, k], listType, out);
    return;
  }
  if (Array.isArray(value) && value.length > 0) {
    const type = listType(fieldPath);
    if (type.kind === 'map') {
      for (const item of value.filter(isObject)) {
        const itemPath = [...path, `k:${JSON.stringify(pick(item, type.keys))}`];
        out.add(encode(itemPath));
        for (const [k, v] of Object.entries(item)) walk(v, [...itemPath, `f:${k}`], [...fieldPath, k], listType, out);
      }
      return;
    }
    if (type.kind === 'set') {
      for (const item of value) out.add(encode([...path, `v:${JSON.stringify(item)}`]));
      return;
    }
  }
  out.add(encode(path));
}

function child(container: unknown, element: string): unknown {
  const payload = element.slice(2);
  if (element.startsWith('f:')) return isObject(container) ? container[payload] : undefined;
  if (!Array.isArray(container)) return undefined;
  const wanted: unknown = JSON.parse(payload);
  if (element.startsWith('v:')) return container.find((item) => deepEqual(item, wanted));
  return isObject(wanted) ? container.find((item) => keysMatch(item, wanted, Object.keys(wanted))) : undefined;
}

function valueAt(object: unknown, path: readonly string[]): unknown {
  let current = object;
  for (const element of path) {
    current = child(current, element);
    if (current === undefined) return undefined;
  }
  return current;
}

/** Removes the element at `path`; maps left empty below the top level go too. */
function removeAt(container: unknown, path: readonly string[], depth = 0): void {
  const [head, ...rest] = path;
  if (head === undefined) return;
  if (rest.length > 0) {
    const next = child(container, head);
    if (next === undefined) return;
    removeAt(next, rest, depth + 1);
    if (depth === 0 || !head.startsWith('f:') || !isObject(next) || Object.keys(next).length > 0) return;
  }
  if (head.startsWith('f:') && isObject(container)) {
    delete container[head.slice(2)];
  } else if (Array.isArray(container)) {
    const item = child(container, head);
    const index = container.indexOf(item);
    if (index >= 0) container.splice(index, 1);
  }
}

function isMarker(path: string): boolean {
  const last = decode(path).at(-1) ?? '';
  return last.startsWith('k:') || last.startsWith('v:');
}

function describePath(path: string): string {
  return decode(path)
    .map((e) => (e.startsWith('f:') ? `.${e.slice(2)}` : `[${e.slice(2)}]`))
    .join('');
}

/** Merges an applied configuration into the live object. */
function merge(live: unknown, config: unknown, fieldPath: string[], listType: ListTypeOf): unknown {
  if (isObject(config)) {
    const out: JsonObject = isObject(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(config)) {
      if (v === null) delete out[k];
      else out[k] = merge(out[k], v, [...fieldPath, k], listType);
    }
    return out;
  }
  if (Array.isArray(config)) {
    const type = listType(fieldPath);
    if (type.kind === 'atomic') return clone(config);
    const out = [...asArray(live)];
    for (const item of config) {
      const index =
        type.kind === 'map'
          ? out.findIndex((o) => keysMatch(o, item, type.keys))
          : out.findIndex((o) => deepEqual(o, item));
      if (index < 0) out.push(clone(item));
      else if (type.kind === 'map') out[index] = merge(out[index], item, fieldPath, listType);
    }
    return out;
  }
  return clone(config);
}

export interface ApplyRequest {
  readonly live: JsonObject | undefined;
  /** The configuration, already limited to the fields this endpoint may write. */
  readonly config: JsonObject;
  readonly entries: readonly ManagedEntry[];
  readonly manager: string;
  readonly subresource: string;
  readonly apiVersion: string;
  readonly force: boolean;
  readonly listType: ListTypeOf;
  readonly scope: FieldScope;
  readonly now: string;
}

export function serverSideApply(request: ApplyRequest): { object: JsonObject; entries: ManagedEntry[] } {
  const { config, listType, scope, manager, subresource } = request;
  const live = clone(request.live ?? {});
  const entries = request.entries.map((e) => ({ ...e, fields: new Set(e.fields) }));
  const isMine = (e: ManagedEntry): boolean =>
    e.manager === manager && e.operation === 'Apply' && e.subresource === subresource;
  const others = entries.filter((e) => !isMine(e));
  const applied = fieldSet(config, listType, scope);

  const conflicts: { path: string; owners: ManagedEntry[] }[] = [];
  for (const path of applied) {
    if (isMarker(path)) continue;
    const current = valueAt(live, decode(path));
    if (current === undefined || deepEqual(current, valueAt(config, decode(path)))) continue;
    const owners = others.filter((e) => e.manager !== manager && e.fields.has(path));
    if (owners.length > 0) conflicts.push({ path, owners });
  }
  if (conflicts.length > 0 && !request.force) throw applyConflict(conflicts);
  for (const { path, owners } of conflicts) for (const owner of owners) owner.fields.delete(path);

  const previous = entries.find(isMine)?.fields ?? new Set<string>();
  const ownedElsewhere = (path: string): boolean => {
    const prefix = `${path.slice(0, -1)},`;
    return others.some(
      (e) => e.fields.has(path) || (isMarker(path) && [...e.fields].some((f) => f.startsWith(prefix))),
    );
  };
  const dropped = [...previous].filter((p) => !applied.has(p) && !ownedElsewhere(p));
  dropped.sort((a, b) => b.length - a.length);
  for (const path of dropped) removeAt(live, decode(path));

  const object = merge(live, config, [], listType) as JsonObject;
  const next = others.filter((e) => e.fields.size > 0);
  if (applied.size > 0) {
    next.push({
      manager,
      operation: 'Apply',
      subresource,
      apiVersion: request.apiVersion,
      time: request.now,
      fields: applied,
    });
  }
  return { object, entries: next };
}

function applyConflict(conflicts: { path: string; owners: ManagedEntry[] }[]): KubeError {
  const lines = conflicts.flatMap(({ path, owners }) =>
    owners.map((o) => ({ manager: o.manager, apiVersion: o.apiVersion, field: describePath(path) })),
  );
  const message =
    lines.length === 1
      ? `Apply failed with 1 conflict: conflict with "${lines[0]?.manager}" using ${lines[0]?.apiVersion}: ${lines[0]?.field}`
      : `Apply failed with ${lines.length} conflicts: ${lines.map((l) => `conflict with "${l.manager}" using ${l.apiVersion}: ${l.field}`).join('\n')}`;
  return new KubeError('Conflict', message, {
    causes: lines.map((l) => ({
      reason: 'FieldManagerConflict',
      message: `conflict with "${l.manager}" using ${l.apiVersion}`,
      field: l.field,
    })),
  });
}

export interface UpdateRecord {
  readonly before: JsonObject | undefined;
  readonly after: JsonObject;
  readonly entries: readonly ManagedEntry[];
  readonly manager: string;
  readonly subresource: string;
  readonly apiVersion: string;
  readonly listType: ListTypeOf;
  readonly scope: FieldScope;
  readonly now: string;
}

/** A non-apply write: the writer takes the fields it changed; fields it removed leave every manager. */
export function recordUpdate(record: UpdateRecord): ManagedEntry[] {
  const { listType, scope } = record;
  const before = record.before === undefined ? new Set<string>() : fieldSet(record.before, listType, scope);
  const after = fieldSet(record.after, listType, scope);
  const changed = [...after].filter(
    (p) =>
      !before.has(p) ||
      (!isMarker(p) && !deepEqual(valueAt(record.before, decode(p)), valueAt(record.after, decode(p)))),
  );
  const removed = [...before].filter((p) => !after.has(p));
  const isMine = (e: ManagedEntry): boolean =>
    e.manager === record.manager && e.operation === 'Update' && e.subresource === record.subresource;
  const entries = record.entries.map((e) => ({ ...e, fields: new Set(e.fields) }));
  for (const entry of entries) {
    for (const p of removed) entry.fields.delete(p);
    if (!isMine(entry)) for (const p of changed) entry.fields.delete(p);
  }
  let mine = entries.find(isMine);
  if (mine === undefined && changed.length > 0) {
    mine = {
      manager: record.manager,
      operation: 'Update',
      subresource: record.subresource,
      apiVersion: record.apiVersion,
      time: record.now,
      fields: new Set(),
    };
    entries.push(mine);
  }
  if (mine !== undefined && changed.length > 0) {
    for (const p of changed) mine.fields.add(p);
    mine.time = record.now;
    mine.apiVersion = record.apiVersion;
  }
  return entries.filter((e) => e.fields.size > 0);
}

/** The `metadata.managedFields` rendering of the entries. */
export function renderManagedFields(entries: readonly ManagedEntry[]): JsonObject[] {
  return entries.map((e) => {
    const fieldsV1: JsonObject = {};
    for (const path of e.fields) {
      let node = fieldsV1;
      for (const element of decode(path)) {
        const next = node[element];
        node = isObject(next) ? next : (node[element] = {});
      }
      if (isMarker(path) && decode(path).at(-1)?.startsWith('k:') === true) node['.'] = {};
    }
    return {
      manager: e.manager,
      operation: e.operation,
      apiVersion: e.apiVersion,
      time: e.time,
      fieldsType: 'FieldsV1',
      fieldsV1,
      ...(e.subresource !== '' ? { subresource: e.subresource } : {}),
    };
  });
}
