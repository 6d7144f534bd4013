/*
 * Trace search over a SpanSource: scan the window (narrowed by hints, capped), group the spans by trace, keep the
 * traces a matcher accepts, and fetch the whole traces of the hits (root span, duration) — or of every candidate
 * when the matcher needs whole traces. Serves TraceQL (`q`) and the legacy `tags` search alike.
 */
import type { SpanHint, SpanRecord, SpanSource } from '../model.ts';
import type { Spanset } from './evaluate.ts';
import { TraceContext } from './fields.ts';

/** At most this many spans are scanned per search; a search that hits it says so (`SearchOutcome.truncated`). */
export const DEFAULT_MAX_SCANNED_SPANS = 100_000;
/** Whole traces are fetched this many at a time while looking for matches. */
const TRACE_BATCH = 100;

export interface TraceMatcher {
  /** Conditions the scan may apply (see QueryPlan.scanHints). */
  readonly scanHints: readonly SpanHint[];
  /** Whether `match` must see whole traces; otherwise it sees the spans the scan returned. */
  readonly wholeTrace: boolean;
  /** The trace's matching spansets, or null when it does not match. */
  match(trace: TraceContext): Spanset[] | null;
}

export interface SearchOptions {
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly limit: number;
  /** Trace duration bounds (inclusive), from `minDuration` / `maxDuration`. */
  readonly minDurationNs?: bigint | undefined;
  readonly maxDurationNs?: bigint | undefined;
  readonly maxSpans?: number | undefined;
}

export interface TraceHit {
  /** The whole trace (as far as the store has it). */
  readonly trace: TraceContext;
  readonly spansets: readonly Spanset[];
}

export interface SearchOutcome {
  /** Newest trace first. */
  readonly hits: readonly TraceHit[];
  readonly inspectedTraces: number;
  readonly inspectedSpans: number;
  /** The scan stopped at the span cap: older matching traces in the window may be missing. */
  readonly truncated: boolean;
  readonly maxSpans: number;
}

function groupByTrace(spans: readonly SpanRecord[]): Map<string, SpanRecord[]> {
  const groups = new Map<string, SpanRecord[]>();
  for (const s of spans) {
    const g = groups.get(s.traceId);
    if (g === undefined) groups.set(s.traceId, [s]);
    else g.push(s);
  }
  return groups;
}

interface Candidate {
  readonly traceId: string;
  readonly scanned: readonly SpanRecord[];
  readonly spansets: Spanset[] | null;
}

export async function searchTraces(
  source: SpanSource,
  matcher: TraceMatcher,
  opts: SearchOptions,
): Promise<SearchOutcome> {
  const maxSpans = opts.maxSpans ?? DEFAULT_MAX_SCANNED_SPANS;
  const scanned = await source.scan({
    startNs: opts.startNs,
    endNs: opts.endNs,
    hints: matcher.scanHints,
    maxSpans,
  });
  let inspectedSpans = scanned.length;
  const groups = groupByTrace(scanned);
  const candidates: Candidate[] = [];
  for (const [traceId, spans] of groups) {
    if (matcher.wholeTrace) {
      candidates.push({ traceId, scanned: spans, spansets: null });
      continue;
    }
    const spansets = matcher.match(new TraceContext(traceId, spans));
    if (spansets !== null) candidates.push({ traceId, scanned: spans, spansets });
  }

  const hits: TraceHit[] = [];
  const durationFiltered = opts.minDurationNs !== undefined || opts.maxDurationNs !== undefined;
  for (let i = 0; i < candidates.length && hits.length < opts.limit;) {
    const size = matcher.wholeTrace || durationFiltered ? TRACE_BATCH : opts.limit - hits.length;
    const batch = candidates.slice(i, i + size);
    i += batch.length;
    const fetched = await source.traces(batch.map((c) => c.traceId));
    inspectedSpans += fetched.length;
    const whole = groupByTrace(fetched);
    for (const c of batch) {
      const trace = new TraceContext(c.traceId, whole.get(c.traceId) ?? c.scanned);
      if (opts.minDurationNs !== undefined && trace.durationNs < opts.minDurationNs) continue;
      if (opts.maxDurationNs !== undefined && trace.durationNs > opts.maxDurationNs) continue;
      const spansets = c.spansets ?? matcher.match(trace);
      if (spansets === null) continue;
      hits.push({ trace, spansets });
      if (hits.length >= opts.limit) break;
    }
  }
  hits.sort((a, b) => (a.trace.startNs > b.trace.startNs ? -1 : a.trace.startNs < b.trace.startNs ? 1 : 0));
  return {
    hits,
    inspectedTraces: groups.size,
    inspectedSpans,
    truncated: scanned.length >= maxSpans,
    maxSpans,
  };
}
