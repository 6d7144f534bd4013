/*
 * Tempo's HTTP API over a SpanSource, one function per route. Each takes the source, the query parameters, a clock
 * (Unix nanoseconds) and what the route adds (trace id, tag name, `Accept` header), and answers an ApiResponse; a bad
 * request throws ObservabilityQueryError (400 with Tempo's wording, 404 `trace not found`).
 */
import { type ApiParams, type ApiResponse, ObservabilityQueryError } from '../errors.ts';
import type { SpanRecord, SpanSource } from '../model.ts';
import type { Field } from '../traceql/ast.ts';
import type { Spanset } from '../traceql/evaluate.ts';
import { TraceContext } from '../traceql/fields.ts';
import { traceQLMatcher } from '../traceql/matcher.ts';
import { parseTraceQL } from '../traceql/parse.ts';
import { DEFAULT_MAX_SCANNED_SPANS, type TraceMatcher, searchTraces } from '../traceql/search.ts';
import { traceByIdJson, traceByIdProto, traceJsonV1, traceProto } from './otlp.ts';
import {
  MAX_SEARCH_LIMIT,
  MAX_SPANS_PER_SPANSET,
  MAX_TAG_LIMIT,
  type TimeRange,
  goDuration,
  param,
  parseTraceId,
  positiveInt,
  timeRange,
} from './params.ts';
import { searchResponse } from './search-response.ts';
import { parseScopes, tagNames, tagValuesV1, tagValuesV2 } from './tag-catalog.ts';
import { parseLogfmt, tagsMatcher } from './tags-search.ts';

export type Clock = () => bigint;

const PROTOBUF = 'application/protobuf';

function wantsProtobuf(accept: string | undefined): boolean {
  return accept?.includes(PROTOBUF) === true;
}

function bytes(u8: Uint8Array): Buffer {
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

async function fetchTrace(source: SpanSource, params: ApiParams, now: Clock, rawId: string): Promise<SpanRecord[]> {
  const traceId = parseTraceId(rawId);
  const start = param(params, 'start');
  const end = param(params, 'end');
  let spans: SpanRecord[];
  if (start !== undefined || end !== undefined) {
    // No range cap here: Grafana asks with the panel's range widened by 30 minutes, whatever its length.
    const range = timeRange(params, now(), false);
    spans = await source.trace(traceId, start === undefined ? undefined : range.startNs, range.endNs);
  } else {
    spans = await source.trace(traceId);
  }
  if (spans.length === 0) throw new ObservabilityQueryError('trace not found', 404);
  return spans;
}

type TraceVersion = 'v1' | 'v2';

const TRACE_ENCODERS: Record<
  TraceVersion,
  { proto: (s: readonly SpanRecord[]) => Uint8Array; json: (s: readonly SpanRecord[]) => unknown }
> = {
  v1: { proto: traceProto, json: traceJsonV1 },
  v2: { proto: traceByIdProto, json: traceByIdJson },
};

async function getTrace(
  version: TraceVersion,
  source: SpanSource,
  params: ApiParams,
  now: Clock,
  traceId: string,
  accept?: string,
): Promise<ApiResponse> {
  const spans = await fetchTrace(source, params, now, traceId);
  const encode = TRACE_ENCODERS[version];
  if (wantsProtobuf(accept)) return { status: 200, body: bytes(encode.proto(spans)), contentType: PROTOBUF };
  return { status: 200, body: encode.json(spans), contentType: 'application/json' };
}

/** `GET /api/traces/<id>`: `{"batches":[…]}`, or `tempopb.Trace` bytes for `Accept: application/protobuf`. */
export const getTraceV1 = (
  source: SpanSource,
  params: ApiParams,
  now: Clock,
  traceId: string,
  accept?: string,
): Promise<ApiResponse> => getTrace('v1', source, params, now, traceId, accept);

/** `GET /api/v2/traces/<id>`: `{"trace":{"resourceSpans":[…]}}`, or `tempopb.TraceByIDResponse` bytes. */
export const getTraceV2 = (
  source: SpanSource,
  params: ApiParams,
  now: Clock,
  traceId: string,
  accept?: string,
): Promise<ApiResponse> => getTrace('v2', source, params, now, traceId, accept);

const SEARCH_PARAMS = new Set(['q', 'tags', 'minDuration', 'maxDuration', 'limit', 'start', 'end', 'spss']);

/** Legacy tags: `tags=…`, or (Tempo's oldest form) the unknown parameters themselves as `key=value` tags. */
function legacyTags(params: ApiParams): Map<string, string> {
  const tags = param(params, 'tags');
  if (tags !== undefined) return parseLogfmt(tags);
  const out = new Map<string, string>();
  for (const [k, v] of Object.entries(params)) {
    const s = typeof v === 'string' ? v : v?.[0];
    if (!SEARCH_PARAMS.has(k) && s !== undefined && s !== '') out.set(k, s);
  }
  return out;
}

/** `GET /api/search`: TraceQL (`q`) or legacy tags search. */
export async function search(source: SpanSource, params: ApiParams, now: Clock): Promise<ApiResponse> {
  const q = param(params, 'q');
  if (q !== undefined && param(params, 'tags') !== undefined) {
    throw new ObservabilityQueryError("invalid request: can't specify tags and q in the same query");
  }
  const limit = positiveInt(params, 'limit', 20, MAX_SEARCH_LIMIT, false);
  const spss = positiveInt(params, 'spss', 3, MAX_SPANS_PER_SPANSET, false, true);
  const minDurationNs = goDuration(params, 'minDuration');
  const maxDurationNs = goDuration(params, 'maxDuration');
  if (minDurationNs !== undefined && maxDurationNs !== undefined && maxDurationNs < minDurationNs) {
    throw new ObservabilityQueryError('invalid maxDuration: must be greater than minDuration');
  }
  const range = timeRange(params, now());
  let matcher: TraceMatcher;
  let fields: readonly Field[] = [];
  if (q !== undefined && q.trim() !== '') {
    const m = traceQLMatcher(parseTraceQL(q));
    matcher = m;
    fields = m.plan.outputFields;
  } else {
    matcher = tagsMatcher(legacyTags(params));
  }
  const outcome = await searchTraces(source, matcher, { ...range, limit, minDurationNs, maxDurationNs });
  return { status: 200, body: searchResponse(outcome, { fields, spss }), contentType: 'application/json' };
}

/** The spans of the window a tag lookup reads: all of them, or those of the spansets `q` yields (if it parses). */
async function spansForTags(source: SpanSource, range: TimeRange, q: string | undefined): Promise<SpanRecord[]> {
  let matcher: TraceMatcher | undefined;
  try {
    // Grafana sends the editor's current, often unfinished, query: one that does not parse filters nothing.
    if (q !== undefined && q.trim() !== '') matcher = traceQLMatcher(parseTraceQL(q));
  } catch (err) {
    if (!(err instanceof ObservabilityQueryError)) throw err;
  }
  const scanned = await source.scan({
    ...range,
    hints: matcher?.wholeTrace === false ? matcher.scanHints : [],
    maxSpans: DEFAULT_MAX_SCANNED_SPANS,
  });
  if (matcher === undefined) return scanned;
  const byTrace = new Map<string, SpanRecord[]>();
  for (const s of scanned) {
    const group = byTrace.get(s.traceId);
    if (group === undefined) byTrace.set(s.traceId, [s]);
    else group.push(s);
  }
  const out: SpanRecord[] = [];
  for (const [traceId, spans] of byTrace) {
    const sets: Spanset[] = matcher.match(new TraceContext(traceId, spans)) ?? [];
    for (const ss of sets) out.push(...ss.spans);
  }
  return out;
}

const json = (body: unknown): ApiResponse => ({ status: 200, body, contentType: 'application/json' });

/** `GET /api/search/tags`: `{"tagNames":[…]}`; span and resource attributes unless `scope` names one. */
export async function searchTags(source: SpanSource, params: ApiParams, now: Clock): Promise<ApiResponse> {
  const scopeParam = param(params, 'scope');
  const scopes = scopeParam === undefined ? (['span', 'resource'] as const) : parseScopes(scopeParam);
  const limit = positiveInt(params, 'limit', MAX_TAG_LIMIT, MAX_TAG_LIMIT, true);
  const spans = await spansForTags(source, timeRange(params, now()), undefined);
  const names = [...new Set(tagNames(spans, scopes, limit).flatMap((s) => s.tags))].sort().slice(0, limit);
  return json({ tagNames: names, metrics: {} });
}

/** `GET /api/v2/search/tags`: `{"scopes":[{"name":"span","tags":[…]},…,{"name":"intrinsic",…}]}`. */
export async function searchTagsV2(source: SpanSource, params: ApiParams, now: Clock): Promise<ApiResponse> {
  const scopes = parseScopes(param(params, 'scope'));
  const limit = positiveInt(params, 'limit', MAX_TAG_LIMIT, MAX_TAG_LIMIT, true);
  const spans = await spansForTags(source, timeRange(params, now()), param(params, 'q'));
  return json({ scopes: tagNames(spans, scopes, limit), metrics: {} });
}

/** `GET /api/search/tag/<tag>/values`: `{"tagValues":["v",…]}` of an unscoped attribute. */
export async function searchTagValues(
  source: SpanSource,
  params: ApiParams,
  now: Clock,
  tag: string,
): Promise<ApiResponse> {
  const limit = positiveInt(params, 'limit', MAX_TAG_LIMIT, MAX_TAG_LIMIT, true);
  const spans = await spansForTags(source, timeRange(params, now()), undefined);
  return json({ tagValues: tagValuesV1(spans, tag, limit), metrics: {} });
}

/** A v2 tag: a TraceQL field (`.service.name`, `span.rpc.service`, `resource.x`, `status`, `span:kind`). */
function parseTagField(tag: string): Field {
  let root;
  try {
    root = parseTraceQL(`{ ${tag} }`).root;
  } catch {
    root = undefined;
  }
  const e = root?.kind === 'filter' ? root.expr : null;
  if (e === null || (e.kind !== 'attribute' && e.kind !== 'intrinsic')) {
    throw new ObservabilityQueryError(`tag name is not valid intrinsic or scoped attribute: ${tag}`);
  }
  return e;
}

/** `GET /api/v2/search/tag/<scoped tag>/values`: `{"tagValues":[{"type":"string","value":"v"},…]}`. */
export async function searchTagValuesV2(
  source: SpanSource,
  params: ApiParams,
  now: Clock,
  tag: string,
): Promise<ApiResponse> {
  const field = parseTagField(tag);
  const limit = positiveInt(params, 'limit', MAX_TAG_LIMIT, MAX_TAG_LIMIT, true);
  const spans = await spansForTags(source, timeRange(params, now()), param(params, 'q'));
  return json({ tagValues: tagValuesV2(spans, field, limit), metrics: {} });
}

/** `GET /api/echo`: Grafana's health check. */
export function echo(_source: SpanSource, _params: ApiParams, _now: Clock): Promise<ApiResponse> {
  return Promise.resolve({ status: 200, body: 'echo', contentType: 'text/plain; charset=utf-8' });
}

/** Tempo version this API answers as (v2 tags, typed tag values, TraceQL spansets). */
export const TEMPO_VERSION = '2.9.0';

/** `GET /api/status/buildinfo`, shaped like Tempo's (Prometheus' build info). */
export function buildInfo(_source: SpanSource, _params: ApiParams, _now: Clock): Promise<ApiResponse> {
  return Promise.resolve(
    json({
      version: TEMPO_VERSION,
      revision: 'ratchet',
      branch: 'HEAD',
      buildUser: 'ratchet',
      buildDate: '',
      goVersion: 'n/a (Ratchet, Node.js)',
    }),
  );
}
