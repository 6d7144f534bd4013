import { badRequest } from './errors.ts';
import {
  deepEqual,
  isObject,
  scalarString,
  type JsonObject,
  type KubeObject,
  type PrinterColumn,
  type ResourceInfo,
} from './types.ts';

/**
 * Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`): NAME, then the resource's printer
 * columns evaluated with a JSONPath subset (fields, `[n]`, `[*]`, `[?(@.a.b=="x")]`), dates shown as ages.
 */

export type IncludeObject = 'None' | 'Metadata' | 'Object';

const NAME_COLUMN = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  priority: 0,
};

export function wantsTable(accept: string | undefined): boolean {
  return accept?.split(',').some((part) => /;\s*as=Table/.test(part) && /g=meta\.k8s\.io/.test(part)) === true;
}

export function toTable(
  info: ResourceInfo,
  version: string,
  objects: readonly KubeObject[],
  options: { includeObject: IncludeObject; resourceVersion: string; withColumns?: boolean },
): JsonObject {
  const columns = info.printerColumns(version);
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion: options.resourceVersion },
    columnDefinitions:
      options.withColumns === false
        ? []
        : [
            NAME_COLUMN,
            ...columns.map((c) => ({
              name: c.name,
              type: c.type,
              format: c.format ?? '',
              description: c.description ?? '',
              priority: c.priority ?? 0,
            })),
          ],
    rows: objects.map((object) => ({
      cells: [object.metadata.name ?? '', ...columns.map((c) => cell(c, object))],
      object: rowObject(object, options.includeObject),
    })),
  };
}

function rowObject(object: KubeObject, include: IncludeObject): JsonObject | null {
  switch (include) {
    case 'None':
      return null;
    case 'Object':
      return object;
    case 'Metadata':
      return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata };
  }
}

function cell(column: PrinterColumn, object: KubeObject): unknown {
  const values = evaluate(column.jsonPath, object);
  if (values.length === 0) return null;
  const value = values[0];
  if (column.type === 'date') return typeof value === 'string' ? humanAge(value) : null;
  if (column.type === 'string') return scalarString(value);
  return value;
}

/** `duration.HumanDuration` from apimachinery, since `value`. */
export function humanAge(timestamp: string, nowMs = Date.now()): string {
  const seconds = Math.floor((nowMs - Date.parse(timestamp)) / 1000);
  if (Number.isNaN(seconds)) return '<invalid>';
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8)
    return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const years = Math.floor(hours / 24 / 365);
  const days = Math.floor(hours / 24) % 365;
  if (hours < 24 * 365 * 8) return days === 0 ? `${years}y` : `${years}y${days}d`;
  return `${years}y`;
}

type Segment =
  | { readonly kind: 'field'; readonly name: string }
  | { readonly kind: 'index'; readonly index: number }
  | { readonly kind: 'all' }
  | { readonly kind: 'filter'; readonly path: readonly string[]; readonly op: '==' | '!='; readonly value: unknown };

/** Parses the JSONPath subset printer columns use. */
export function parseJsonPath(expression: string): Segment[] {
  let rest = expression.trim();
  if (rest.startsWith('{') && rest.endsWith('}')) rest = rest.slice(1, -1);
  if (rest.startsWith('$')) rest = rest.slice(1);
  const segments: Segment[] = [];
  while (rest !== '') {
    let match: RegExpExecArray | null;
    if ((match = /^\.((?:\\.|[^.[\\])+)/.exec(rest)) !== null) {
      segments.push({ kind: 'field', name: (match[1] ?? '').replace(/\\(.)/g, '$1') });
    } else if ((match = /^\[\s*(\d+)\s*\]/.exec(rest)) !== null) {
      segments.push({ kind: 'index', index: Number(match[1]) });
    } else if ((match = /^\[\s*\*\s*\]/.exec(rest)) !== null) {
      segments.push({ kind: 'all' });
    } else if ((match = /^\[\s*'([^']*)'\s*\]/.exec(rest)) !== null) {
      segments.push({ kind: 'field', name: match[1] ?? '' });
    } else if (
      (match = /^\[\?\(\s*@((?:\.[\w-]+)+)\s*(==|!=)\s*("[^"]*"|'[^']*'|[\w.-]+)\s*\)\]/.exec(rest)) !== null
    ) {
      const literal = match[3] ?? '';
      const value: unknown = /^['"]/.test(literal) ? literal.slice(1, -1) : JSON.parse(literal);
      segments.push({
        kind: 'filter',
        path: (match[1] ?? '').split('.').slice(1),
        op: match[2] === '!=' ? '!=' : '==',
        value,
      });
    } else {
      throw badRequest(`unsupported JSONPath in fake-kube: ${expression}`);
    }
    rest = rest.slice(match[0].length);
  }
  return segments;
}

export function evaluate(expression: string, object: unknown): unknown[] {
  let values: unknown[] = [object];
  for (const segment of parseJsonPath(expression)) {
    values = values.flatMap((value): unknown[] => {
      switch (segment.kind) {
        case 'field':
          return isObject(value) && value[segment.name] !== undefined ? [value[segment.name]] : [];
        case 'index':
          return Array.isArray(value) && segment.index < value.length ? [value[segment.index]] : [];
        case 'all':
          return Array.isArray(value) ? value : isObject(value) ? Object.values(value) : [];
        case 'filter':
          return (Array.isArray(value) ? value : []).filter((item) => {
            let current: unknown = item;
            for (const p of segment.path) current = isObject(current) ? current[p] : undefined;
            const equal =
              deepEqual(current, segment.value) ||
              (current !== undefined && scalarString(current) === scalarString(segment.value));
            return segment.op === '==' ? equal : !equal;
          });
      }
    });
  }
  return values;
}
