import { KubeError, badRequest } from './errors.ts';
import { asArray, clone, deepEqual, isObject, type JsonObject, type ListType } from './types.ts';

/** The three non-apply PATCH formats: JSON merge patch, strategic merge patch (approximated), JSON patch. */

export type ListTypeOf = (fieldPath: readonly string[]) => ListType;

/** RFC 7386. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const result: JsonObject = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

export function keysMatch(a: unknown, b: unknown, keys: readonly string[]): boolean {
  return isObject(a) && isObject(b) && keys.every((k) => deepEqual(a[k], b[k]));
}

/**
 * Strategic merge patch as a merge patch whose keyed lists merge item by item, honouring `$patch: delete|replace`
 * and `$deleteFromPrimitiveList/`; `$setElementOrder/` and `$retainKeys` are accepted and ignored.
 */
export function strategicMergePatch(
  target: unknown,
  patch: unknown,
  listType: ListTypeOf,
  fieldPath: string[] = [],
): unknown {
  if (!isObject(patch)) return clone(patch);
  if (patch['$patch'] === 'replace') return withoutDirectives(patch);
  const result: JsonObject = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch' || key === '$retainKeys' || key.startsWith('$setElementOrder/')) continue;
    if (key.startsWith('$deleteFromPrimitiveList/')) {
      const field = key.slice('$deleteFromPrimitiveList/'.length);
      const current = result[field];
      const remove = Array.isArray(value) ? value : [];
      if (Array.isArray(current)) result[field] = current.filter((item) => !remove.some((r) => deepEqual(r, item)));
      continue;
    }
    const childPath = [...fieldPath, key];
    if (value === null || (isObject(value) && value['$patch'] === 'delete')) {
      delete result[key];
    } else if (Array.isArray(value)) {
      result[key] = mergeList(result[key], value, listType, childPath);
    } else {
      result[key] = strategicMergePatch(result[key], value, listType, childPath);
    }
  }
  return result;
}

function mergeList(live: unknown, patch: unknown[], listType: ListTypeOf, fieldPath: string[]): unknown[] {
  const type = listType(fieldPath);
  if (type.kind === 'set') {
    const out = [...asArray(live)];
    for (const item of patch) if (!out.some((o) => deepEqual(o, item))) out.push(clone(item));
    return out;
  }
  if (type.kind === 'atomic' || patch.some((item) => isObject(item) && item['$patch'] === 'replace')) {
    return patch.filter((item) => !(isObject(item) && item['$patch'] === 'replace')).map(withoutDirectives);
  }
  const out = [...asArray(live)];
  for (const item of patch) {
    if (!isObject(item)) continue;
    const index = out.findIndex((o) => keysMatch(o, item, type.keys));
    if (item['$patch'] === 'delete') {
      if (index >= 0) out.splice(index, 1);
    } else if (index >= 0) {
      out[index] = strategicMergePatch(out[index], item, listType, fieldPath);
    } else {
      out.push(strategicMergePatch(undefined, item, listType, fieldPath));
    }
  }
  return out;
}

function withoutDirectives(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutDirectives);
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) if (!k.startsWith('$')) out[k] = withoutDirectives(v);
  return out;
}

/** RFC 6902; failures answer 422 as the real server does. */
export function jsonPatch(document: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw badRequest('json patch must be an array of operations');
  let doc = clone(document);
  for (const raw of operations) {
    if (!isObject(raw) || typeof raw['op'] !== 'string' || typeof raw['path'] !== 'string') {
      throw badRequest('invalid json patch operation');
    }
    const path = pointer(raw['path']);
    const from = typeof raw['from'] === 'string' ? pointer(raw['from']) : undefined;
    switch (raw['op']) {
      case 'add':
        doc = add(doc, path, clone(raw['value']));
        break;
      case 'remove':
        doc = remove(doc, path);
        break;
      case 'replace':
        doc = add(remove(doc, path), path, clone(raw['value']));
        break;
      case 'move': {
        if (from === undefined) throw badRequest('json patch move needs "from"');
        const value = read(doc, from);
        doc = add(remove(doc, from), path, value);
        break;
      }
      case 'copy':
        if (from === undefined) throw badRequest('json patch copy needs "from"');
        doc = add(doc, path, clone(read(doc, from)));
        break;
      case 'test':
        if (!deepEqual(read(doc, path), raw['value'])) {
          throw new KubeError(
            'Invalid',
            `the server rejected our request due to an error in our request: testing value ${raw['path']} failed`,
          );
        }
        break;
      default:
        throw badRequest(`Unexpected kind: ${raw['op']}`);
    }
  }
  return doc;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw badRequest(`invalid json pointer: ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function missing(path: readonly string[]): KubeError {
  return new KubeError(
    'Invalid',
    `the server rejected our request due to an error in our request: doc is missing path: "/${path.join('/')}"`,
  );
}

function read(doc: unknown, path: readonly string[]): unknown {
  let current = doc;
  for (const token of path) {
    if (Array.isArray(current) && /^\d+$/.test(token) && Number(token) < current.length)
      current = current[Number(token)];
    else if (isObject(current) && token in current) current = current[token];
    else throw missing(path);
  }
  return current;
}

function add(doc: unknown, path: readonly string[], value: unknown): unknown {
  const last = path.at(-1);
  if (last === undefined) return value;
  const parent = read(doc, path.slice(0, -1));
  if (Array.isArray(parent)) {
    const index = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) throw missing(path);
    parent.splice(index, 0, value);
  } else if (isObject(parent)) {
    parent[last] = value;
  } else {
    throw missing(path);
  }
  return doc;
}

function remove(doc: unknown, path: readonly string[]): unknown {
  const last = path.at(-1);
  if (last === undefined) return undefined;
  const parent = read(doc, path.slice(0, -1));
  read(doc, path);
  if (Array.isArray(parent)) parent.splice(Number(last), 1);
  else if (isObject(parent)) delete parent[last];
  return doc;
}
