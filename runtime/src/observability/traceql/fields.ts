/*
 * What a TraceQL field is on one span: attributes by scope (with the invocation-id aliases), intrinsics, and the
 * trace-level intrinsics that need the span's whole trace (root span, trace duration, parent). A field may have several
 * values (event and link attributes): comparisons then hold if any value matches, as Tempo does for arrays.
 */
import { type AttributeValue, SpanKind, type SpanRecord, StatusCode } from '../model.ts';
import type { Field, KindName, StatusName, Value } from './ast.ts';

/** The store's name for the invocation id, and the names queries may use for it (spec 2.4). */
export const INVOCATION_ID = 'restate.invocation.id';
export const INVOCATION_ID_ALIASES: readonly string[] = ['service.invocation.id', 'restate.invocation.sid'];

/** The attribute name a query name stands for: an alias of the invocation id is the invocation id. */
export function canonicalAttribute(name: string): string {
  return INVOCATION_ID_ALIASES.includes(name) ? INVOCATION_ID : name;
}

/** Keys to look up for a query name, the canonical first (a store written before the rename may have the alias). */
function keysFor(name: string): readonly string[] {
  const canonical = canonicalAttribute(name);
  return canonical === INVOCATION_ID ? [INVOCATION_ID, ...INVOCATION_ID_ALIASES] : [name];
}

const STATUS_NAMES: Readonly<Record<number, StatusName>> = {
  [StatusCode.unset]: 'unset',
  [StatusCode.ok]: 'ok',
  [StatusCode.error]: 'error',
};
const KIND_NAMES: Readonly<Record<number, KindName>> = Object.fromEntries(
  Object.entries(SpanKind).map(([k, v]) => [v, k as KindName]),
);

export function statusName(code: number): StatusName {
  return STATUS_NAMES[code] ?? 'unset';
}

export function kindName(kind: number): KindName {
  return KIND_NAMES[kind] ?? 'unspecified';
}

export const NIL: Value = { type: 'nil' };

export function fromAttribute(v: AttributeValue | undefined): Value {
  if (v === undefined) return NIL;
  if (typeof v === 'string') return { type: 'string', value: v };
  if (typeof v === 'boolean') return { type: 'bool', value: v };
  return { type: Number.isInteger(v) ? 'int' : 'float', value: v };
}

const str = (value: string): Value => ({ type: 'string', value });

/** The spans of one trace (all of them, or those a scan saw), indexed for parent/child and root lookups. */
export class TraceContext {
  readonly byId = new Map<string, SpanRecord>();
  private childrenOf: Map<string, SpanRecord[]> | undefined;
  private rootSpan: SpanRecord | null | undefined;
  readonly startNs: bigint;
  readonly endNs: bigint;

  constructor(
    readonly traceId: string,
    readonly spans: readonly SpanRecord[],
  ) {
    let start: bigint | undefined;
    let end: bigint | undefined;
    for (const s of spans) {
      this.byId.set(s.spanId, s);
      if (start === undefined || s.startNs < start) start = s.startNs;
      if (end === undefined || s.endNs > end) end = s.endNs;
    }
    this.startNs = start ?? 0n;
    this.endNs = end ?? 0n;
  }

  get durationNs(): bigint {
    return this.endNs - this.startNs;
  }

  parentOf(s: SpanRecord): SpanRecord | undefined {
    return s.parentSpanId === '' ? undefined : this.byId.get(s.parentSpanId);
  }

  children(s: SpanRecord): readonly SpanRecord[] {
    if (this.childrenOf === undefined) {
      this.childrenOf = new Map();
      for (const c of this.spans) {
        if (c.parentSpanId === '') continue;
        const list = this.childrenOf.get(c.parentSpanId);
        if (list === undefined) this.childrenOf.set(c.parentSpanId, [c]);
        else list.push(c);
      }
    }
    return this.childrenOf.get(s.spanId) ?? [];
  }

  /**
   * The root span: the earliest span without a parent; failing that (Restate's ingress span is parented to the
   * caller's `traceparent`, outside the store) the earliest span whose parent is not in the trace.
   */
  root(): SpanRecord | undefined {
    if (this.rootSpan === undefined) {
      const earliest = (pred: (s: SpanRecord) => boolean): SpanRecord | undefined => {
        let best: SpanRecord | undefined;
        for (const s of this.spans) if (pred(s) && (best === undefined || s.startNs < best.startNs)) best = s;
        return best;
      };
      this.rootSpan = earliest((s) => s.parentSpanId === '') ?? earliest((s) => !this.byId.has(s.parentSpanId)) ?? null;
    }
    return this.rootSpan ?? undefined;
  }

  rootServiceName(): string {
    const v = this.root()?.resource['service.name'];
    return v === undefined ? '' : String(v);
  }

  rootName(): string {
    return this.root()?.name ?? '';
  }
}

function attributeOf(attrs: Readonly<Record<string, AttributeValue>>, name: string): AttributeValue | undefined {
  for (const k of keysFor(name)) {
    const v = attrs[k];
    if (v !== undefined) return v;
  }
  return undefined;
}

/** The values of a field on a span: one value, `NIL` when absent, or a list for event/link scopes. */
export function fieldValue(f: Field, span: SpanRecord, trace: TraceContext): Value | readonly Value[] {
  if (f.kind === 'attribute') {
    const s = f.parent ? trace.parentOf(span) : span;
    if (s === undefined) return NIL;
    switch (f.scope) {
      case 'span':
        return fromAttribute(attributeOf(s.attributes, f.name));
      case 'resource':
        return fromAttribute(attributeOf(s.resource, f.name));
      case 'unscoped':
        return fromAttribute(attributeOf(s.attributes, f.name) ?? attributeOf(s.resource, f.name));
      case 'event':
        return s.events.map((e) => fromAttribute(attributeOf(e.attributes, f.name))).filter((v) => v.type !== 'nil');
      case 'link':
        return s.links.map((l) => fromAttribute(attributeOf(l.attributes, f.name))).filter((v) => v.type !== 'nil');
      case 'instrumentation':
        return NIL;
    }
  }
  switch (f.name) {
    case 'name':
      return str(span.name);
    case 'status':
      return { type: 'status', value: statusName(span.statusCode) };
    case 'statusMessage':
      return str(span.statusMessage);
    case 'duration':
      return { type: 'duration', value: span.endNs - span.startNs };
    case 'kind':
      return { type: 'kind', value: kindName(span.kind) };
    case 'rootName':
      return trace.root() === undefined ? NIL : str(trace.rootName());
    case 'rootServiceName':
      return trace.root() === undefined ? NIL : str(trace.rootServiceName());
    case 'traceDuration':
      return { type: 'duration', value: trace.durationNs };
    case 'trace:id':
      return str(span.traceId);
    case 'span:id':
      return str(span.spanId);
    case 'span:parentID':
      return span.parentSpanId === '' ? NIL : str(span.parentSpanId);
    case 'event:name':
      return span.events.map((e) => str(e.name));
    case 'event:timeSinceStart':
      return span.events.map((e) => ({ type: 'duration', value: e.timeNs - span.startNs }));
    case 'link:traceID':
      return span.links.map((l) => str(l.traceId));
    case 'link:spanID':
      return span.links.map((l) => str(l.spanId));
    case 'instrumentation:name':
      return span.scope === '' ? NIL : str(span.scope);
    case 'instrumentation:version':
      return NIL;
  }
}

/** Whether evaluating the field needs the span's whole trace rather than the spans a scan returned. */
export function needsWholeTrace(f: Field): boolean {
  if (f.kind === 'attribute') return f.parent;
  return f.name === 'rootName' || f.name === 'rootServiceName' || f.name === 'traceDuration';
}
