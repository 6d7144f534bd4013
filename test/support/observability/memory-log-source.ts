/*
 * An in-memory LogSource for the LogQL and Loki API tests, implementing the interface's contract: matchers with
 * anchored regexes (Prometheus semantics: a missing label is ''), the line filters, [start, end) with an exclusive end,
 * order by time in `direction` with ties in insertion order (reversed for backward, as ORDER BY ts DESC, id DESC),
 * and at most `limit` records. It counts its calls so tests can see the paging.
 */
import { goRegex } from '../../../runtime/src/observability/logql/literals.ts';
import { matchesAll } from '../../../runtime/src/observability/matchers.ts';
import type {
  LabelMatcher,
  LineFilter,
  LogRecord,
  LogSelection,
  LogSource,
} from '../../../runtime/src/observability/model.ts';

function lineMatches(line: string, f: LineFilter): boolean {
  switch (f.op) {
    case '|=':
      return line.includes(f.value);
    case '!=':
      return !line.includes(f.value);
    case '|~':
      return goRegex(f.value, false).test(line);
    case '!~':
      return !goRegex(f.value, false).test(line);
  }
}

export class MemoryLogSource implements LogSource {
  readonly records: LogRecord[] = [];
  readonly selections: LogSelection[] = [];
  /** Apply the line filters (a store may skip them; the engine applies them again). */
  applyLineFilters = true;

  constructor(records: Iterable<LogRecord> = []) {
    for (const r of records) this.records.push(r);
  }

  add(tsNs: bigint, labels: Record<string, string>, line: string): this {
    this.records.push({ tsNs, labels, line });
    return this;
  }

  private inRange(startNs: bigint, endNs: bigint, matchers: readonly LabelMatcher[]): LogRecord[] {
    return this.records.filter((r) => r.tsNs >= startNs && r.tsNs < endNs && matchesAll(r.labels, matchers));
  }

  select(q: LogSelection): Promise<LogRecord[]> {
    this.selections.push(q);
    const hits = this.inRange(q.startNs, q.endNs, q.matchers)
      .map((r, i) => ({ r, i }))
      .filter(({ r }) => !this.applyLineFilters || q.lineFilters.every((f) => lineMatches(r.line, f)))
      .sort((a, b) => (a.r.tsNs < b.r.tsNs ? -1 : a.r.tsNs > b.r.tsNs ? 1 : a.i - b.i))
      .map(({ r }) => r);
    if (q.direction === 'backward') hits.reverse();
    return Promise.resolve(hits.slice(0, q.limit));
  }

  labelNames(startNs: bigint, endNs: bigint, matchers: readonly LabelMatcher[]): Promise<string[]> {
    const names = new Set<string>();
    for (const r of this.inRange(startNs, endNs, matchers)) for (const k of Object.keys(r.labels)) names.add(k);
    return Promise.resolve([...names].sort());
  }

  labelValues(name: string, startNs: bigint, endNs: bigint, matchers: readonly LabelMatcher[]): Promise<string[]> {
    const values = new Set<string>();
    for (const r of this.inRange(startNs, endNs, matchers)) {
      const v = r.labels[name];
      if (v !== undefined) values.add(v);
    }
    return Promise.resolve([...values].sort());
  }

  series(
    selectors: readonly (readonly LabelMatcher[])[],
    startNs: bigint,
    endNs: bigint,
  ): Promise<Record<string, string>[]> {
    const sets = new Map<string, Record<string, string>>();
    for (const r of this.records) {
      if (r.tsNs < startNs || r.tsNs >= endNs) continue;
      if (!selectors.some((ms) => matchesAll(r.labels, ms))) continue;
      sets.set(JSON.stringify(Object.entries(r.labels).sort()), { ...r.labels });
    }
    return Promise.resolve([...sets.values()]);
  }
}
