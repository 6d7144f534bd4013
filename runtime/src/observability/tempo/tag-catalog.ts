/*
 * Tag names and values for Tempo's autocomplete endpoints, gathered from the spans of a window: attribute names per
 * scope (span, resource, event, link), the intrinsics this engine evaluates, and typed values (v2) of any TraceQL field.
 */
import { ObservabilityQueryError } from '../errors.ts';
import type { AttributeValue, SpanRecord } from '../model.ts';
import type { Field, Value } from '../traceql/ast.ts';
import { TraceContext, canonicalAttribute, fieldValue } from '../traceql/fields.ts';

export type TagScope = 'span' | 'resource' | 'event' | 'link' | 'instrumentation' | 'intrinsic';
const ALL_SCOPES: readonly TagScope[] = ['span', 'resource', 'event', 'link', 'instrumentation', 'intrinsic'];

/** The intrinsics Tempo lists (those this engine evaluates). */
export const INTRINSIC_TAGS: readonly string[] = [
  'duration',
  'event:name',
  'event:timeSinceStart',
  'instrumentation:name',
  'instrumentation:version',
  'kind',
  'link:spanID',
  'link:traceID',
  'name',
  'rootName',
  'rootServiceName',
  'span:duration',
  'span:id',
  'span:kind',
  'span:name',
  'span:parentID',
  'span:status',
  'span:statusMessage',
  'status',
  'statusMessage',
  'trace:duration',
  'trace:id',
  'trace:rootName',
  'trace:rootService',
  'traceDuration',
];

/** `scope` parameter: empty, `none` or `all` mean every scope; anything unknown is Tempo's `invalid scope`. */
export function parseScopes(scope: string | undefined): readonly TagScope[] {
  if (scope === undefined || scope === '' || scope === 'none' || scope === 'all') return ALL_SCOPES;
  if ((ALL_SCOPES as readonly string[]).includes(scope)) return [scope as TagScope];
  throw new ObservabilityQueryError(`invalid scope: ${scope}`);
}

function addKeys(into: Set<string>, attrs: Readonly<Record<string, AttributeValue>>): void {
  for (const k of Object.keys(attrs)) into.add(k);
}

/** Attribute names per scope (sorted, at most `limit` each); the intrinsic scope is the fixed list. */
export function tagNames(
  spans: readonly SpanRecord[],
  scopes: readonly TagScope[],
  limit: number,
): { name: TagScope; tags: string[] }[] {
  const out: { name: TagScope; tags: string[] }[] = [];
  for (const scope of scopes) {
    const names = new Set<string>();
    if (scope === 'intrinsic') INTRINSIC_TAGS.forEach((t) => names.add(t));
    for (const s of scope === 'intrinsic' ? [] : spans) {
      if (scope === 'span') addKeys(names, s.attributes);
      else if (scope === 'resource') addKeys(names, s.resource);
      else if (scope === 'event') s.events.forEach((e) => addKeys(names, e.attributes));
      else if (scope === 'link') s.links.forEach((l) => addKeys(names, l.attributes));
    }
    if (names.size > 0) out.push({ name: scope, tags: [...names].sort().slice(0, limit) });
  }
  return out;
}

/** v1 values of an unscoped tag: the value on spans or resources, as text. */
export function tagValuesV1(spans: readonly SpanRecord[], tag: string, limit: number): string[] {
  const key = canonicalAttribute(tag);
  const values = new Set<string>();
  for (const s of spans) {
    for (const v of [s.attributes[key], s.resource[key]]) if (v !== undefined) values.add(String(v));
    if (values.size >= limit) break;
  }
  return [...values].sort();
}

export interface TypedTagValue {
  readonly type: string;
  readonly value: string;
}

const STATUS_VALUES = ['error', 'ok', 'unset'];
const KIND_VALUES = ['client', 'consumer', 'internal', 'producer', 'server', 'unspecified'];

function typed(v: Value): TypedTagValue | undefined {
  switch (v.type) {
    case 'string':
      return { type: 'string', value: v.value };
    case 'int':
    case 'float':
      return { type: v.type, value: String(v.value) };
    case 'bool':
      return { type: 'bool', value: String(v.value) };
    case 'duration':
      return { type: 'duration', value: v.value.toString() };
    case 'status':
    case 'kind':
      return { type: 'keyword', value: v.value };
    case 'nil':
      return undefined;
  }
}

/** v2 typed values of a field over the spans (grouped in traces for trace-level intrinsics). */
export function tagValuesV2(spans: readonly SpanRecord[], field: Field, limit: number): TypedTagValue[] {
  if (field.kind === 'intrinsic' && (field.name === 'status' || field.name === 'kind')) {
    const list = field.name === 'status' ? STATUS_VALUES : KIND_VALUES;
    return list.map((value) => ({ type: 'keyword', value }));
  }
  const byTrace = new Map<string, SpanRecord[]>();
  for (const s of spans) {
    const g = byTrace.get(s.traceId);
    if (g === undefined) byTrace.set(s.traceId, [s]);
    else g.push(s);
  }
  const out = new Map<string, TypedTagValue>();
  for (const [traceId, group] of byTrace) {
    const trace = new TraceContext(traceId, group);
    for (const s of group) {
      const v = fieldValue(field, s, trace);
      for (const one of Array.isArray(v) ? (v as readonly Value[]) : [v as Value]) {
        const t = typed(one);
        if (t !== undefined && out.size < limit) out.set(`${t.type}:${t.value}`, t);
      }
    }
    if (out.size >= limit) break;
  }
  return [...out.values()].sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
}
