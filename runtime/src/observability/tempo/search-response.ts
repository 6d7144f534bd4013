/*
 * The JSON of Tempo's /api/search: `tempopb.SearchResponse` as gogo jsonpb writes it (64-bit numbers as strings,
 * zero values left out), with `spanSets` and the deprecated `spanSet` (the first spanset) on every trace.
 */
import type { SpanRecord } from '../model.ts';
import type { Field, Value } from '../traceql/ast.ts';
import type { Spanset, SpansetAttribute } from '../traceql/evaluate.ts';
import { type TraceContext, fieldValue } from '../traceql/fields.ts';
import { formatGoDuration } from '../go/durations.ts';
import type { SearchOutcome } from '../traceql/search.ts';

/** Tempo's text when a trace's root span is not (yet) in the store. */
export const ROOT_SPAN_NOT_YET_RECEIVED = '<root span not yet received>';

type Json = Record<string, unknown>;

/** A TraceQL value as an OTLP AnyValue in JSON. */
export function anyValueJson(v: Value): Json | undefined {
  switch (v.type) {
    case 'string':
      return { stringValue: v.value };
    case 'int':
      return { intValue: String(v.value) };
    case 'float':
      return { doubleValue: v.value };
    case 'bool':
      return { boolValue: v.value };
    case 'duration':
      return { stringValue: formatGoDuration(v.value) };
    case 'status':
    case 'kind':
      return { stringValue: v.value };
    case 'nil':
      return undefined;
  }
}

function attributeJson(key: string, v: Value): Json[] {
  const value = anyValueJson(v);
  return value === undefined ? [] : [{ key, value }];
}

/** Tempo keys returned attributes by their name without scope; intrinsics by their name. */
function outputKey(f: Field): string {
  return f.kind === 'attribute' ? f.name : f.text;
}

const SERVICE_NAME: Field = {
  kind: 'attribute',
  scope: 'resource',
  name: 'service.name',
  parent: false,
  text: 'resource.service.name',
};

function spanJson(s: SpanRecord, fields: readonly Field[], trace: TraceContext): Json {
  const attributes: Json[] = [];
  const seen = new Set<string>();
  for (const f of [...fields, SERVICE_NAME]) {
    const key = outputKey(f);
    if (seen.has(key)) continue;
    seen.add(key);
    const v = fieldValue(f, s, trace);
    for (const one of Array.isArray(v) ? v.slice(0, 1) : [v]) attributes.push(...attributeJson(key, one as Value));
  }
  return {
    spanID: s.spanId,
    name: s.name,
    startTimeUnixNano: s.startNs.toString(),
    durationNanos: (s.endNs - s.startNs).toString(),
    ...(attributes.length > 0 ? { attributes } : {}),
  };
}

function spansetJson(ss: Spanset, fields: readonly Field[], spss: number, trace: TraceContext): Json {
  const spans = [...ss.spans].sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
  const shown = spss === 0 ? spans : spans.slice(0, spss);
  const all = [...fields, ...ss.selected];
  const attrs = ss.attributes.flatMap((a: SpansetAttribute) => attributeJson(a.key, a.value));
  return {
    spans: shown.map((s) => spanJson(s, all, trace)),
    matched: ss.spans.length,
    ...(attrs.length > 0 ? { attributes: attrs } : {}),
  };
}

export interface SearchResponseOptions {
  /** Fields whose values accompany each span (the fields the query's filters used). */
  readonly fields: readonly Field[];
  /** Spans per spanset (0: all). */
  readonly spss: number;
}

export function searchResponse(outcome: SearchOutcome, opts: SearchResponseOptions): Json {
  const traces = outcome.hits.map(({ trace, spansets }) => {
    const root = trace.root();
    const durationMs = Number(trace.durationNs / 1_000_000n);
    const sets = spansets.map((ss) => spansetJson(ss, opts.fields, opts.spss, trace));
    return {
      traceID: trace.traceId,
      rootServiceName: root === undefined ? ROOT_SPAN_NOT_YET_RECEIVED : trace.rootServiceName(),
      ...(root === undefined ? {} : { rootTraceName: trace.rootName() }),
      startTimeUnixNano: trace.startNs.toString(),
      ...(durationMs > 0 ? { durationMs } : {}),
      ...(sets.length > 0 ? { spanSet: sets[0], spanSets: sets } : {}),
    };
  });
  return {
    traces,
    metrics: {
      ...(outcome.inspectedTraces > 0 ? { inspectedTraces: outcome.inspectedTraces } : {}),
      ...(outcome.inspectedSpans > 0 ? { inspectedSpans: String(outcome.inspectedSpans) } : {}),
      completedJobs: 1,
      totalJobs: 1,
    },
    ...(outcome.truncated
      ? {
          warnings: [
            `the search stopped after scanning ${outcome.maxSpans} spans: older traces in the range were not searched; narrow the time range or the query`,
          ],
        }
      : {}),
  };
}
