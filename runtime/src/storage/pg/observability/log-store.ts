import type pg from 'pg';
import { inTransaction } from '../pool.ts';
import type { LabelMatcher, LogLineInsert, LogRecord, LogSelection, LogSource } from '../../../observability/model.ts';
import { streamKey } from '../../../observability/labels.ts';
import { matchesAll } from '../../../observability/matchers.ts';
import type { Partitions } from './partitions.ts';

interface StreamRow {
  id: string;
  labels: Record<string, string>;
  first_ns: string;
  last_ns: string;
}

/**
 * Log lines in PostgreSQL (`ratchet.log_stream`, `ratchet.log_line`), written by every node and read by any. Stream
 * matchers are evaluated here over the streams of the range (a small table: one row per label set), with the same
 * regex semantics as the LogQL engine; lines are read by stream and time, newest or oldest first.
 */
export class PgLogStore implements LogSource {
  constructor(
    private readonly pool: pg.Pool,
    private readonly partitions: Partitions,
  ) {}

  /** Inserts a batch of lines (one transaction: the streams they belong to, then the lines). */
  async insert(lines: readonly LogLineInsert[]): Promise<void> {
    if (lines.length === 0) return;
    await this.partitions.ensure(
      'log_line',
      lines.map((l) => l.tsNs),
    );
    const streams = new Map<string, { labels: Readonly<Record<string, string>>; first: bigint; last: bigint }>();
    for (const l of lines) {
      const s = streams.get(l.labelsKey);
      if (s === undefined) streams.set(l.labelsKey, { labels: l.labels, first: l.tsNs, last: l.tsNs });
      else {
        if (l.tsNs < s.first) s.first = l.tsNs;
        if (l.tsNs > s.last) s.last = l.tsNs;
      }
    }
    const keys = [...streams.keys()];
    await inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ id: string; labels: Record<string, string> }>(
        `INSERT INTO ratchet.log_stream AS s (labels, first_ns, last_ns)
       SELECT l, f, t FROM unnest($1::jsonb[], $2::bigint[], $3::bigint[]) AS u(l, f, t)
       ON CONFLICT (labels) DO UPDATE
         SET first_ns = LEAST(s.first_ns, EXCLUDED.first_ns), last_ns = GREATEST(s.last_ns, EXCLUDED.last_ns)
       RETURNING id, labels`,
        [
          keys.map((k) => JSON.stringify(streams.get(k)!.labels)),
          keys.map((k) => streams.get(k)!.first.toString()),
          keys.map((k) => streams.get(k)!.last.toString()),
        ],
      );
      const ids = new Map<string, string>();
      for (const r of rows) ids.set(streamKey(r.labels), r.id);
      await client.query(
        `INSERT INTO ratchet.log_line (ts_ns, seq, stream_id, invocation_id, line)
       SELECT t, nextval('ratchet.log_line_seq'), s, i, l
       FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) WITH ORDINALITY AS u(t, s, i, l, o)
       ORDER BY o`,
        [
          lines.map((l) => l.tsNs.toString()),
          lines.map((l) => ids.get(l.labelsKey)!),
          lines.map((l) => l.invocationId ?? null),
          lines.map((l) => l.line),
        ],
      );
    });
  }

  /** Forgets streams without a line since `olderThanNs` (their lines are gone with their partitions). */
  async dropStreamsBefore(olderThanNs: bigint): Promise<number> {
    const r = await this.pool.query(`DELETE FROM ratchet.log_stream WHERE last_ns < $1`, [olderThanNs.toString()]);
    return r.rowCount ?? 0;
  }

  private async streamsOf(
    startNs: bigint,
    endNs: bigint,
    matchers: readonly LabelMatcher[],
  ): Promise<{ id: string; labels: Record<string, string> }[]> {
    const { rows } = await this.pool.query<StreamRow>(
      `SELECT id, labels, first_ns, last_ns FROM ratchet.log_stream WHERE last_ns >= $1 AND first_ns < $2`,
      [startNs.toString(), endNs.toString()],
    );
    return rows.filter((r) => matchesAll(r.labels, matchers));
  }

  async select(q: LogSelection): Promise<LogRecord[]> {
    const streams = await this.streamsOf(q.startNs, q.endNs, q.matchers);
    if (streams.length === 0 || q.limit <= 0) return [];
    const labelsOf = new Map(streams.map((s) => [s.id, s.labels]));
    const values: unknown[] = [streams.map((s) => s.id), q.startNs.toString(), q.endNs.toString(), q.limit];
    const filters: string[] = [];
    for (const f of q.lineFilters) {
      // Substring filters run in PostgreSQL; regex filters only in the engine (RE2 and PostgreSQL's regexes differ).
      if (f.op === '|=') filters.push(`strpos(line, $${values.push(f.value)}) > 0`);
      else if (f.op === '!=') filters.push(`strpos(line, $${values.push(f.value)}) = 0`);
    }
    const order = q.direction === 'forward' ? 'ASC' : 'DESC';
    const { rows } = await this.pool.query<{ ts_ns: string; stream_id: string; line: string }>(
      `SELECT ts_ns, stream_id, line FROM ratchet.log_line
       WHERE stream_id = ANY($1::bigint[]) AND ts_ns >= $2 AND ts_ns < $3${filters.map((f) => ` AND ${f}`).join('')}
       ORDER BY ts_ns ${order}, seq ${order} LIMIT $4`,
      values,
    );
    return rows.map((r) => ({ tsNs: BigInt(r.ts_ns), labels: labelsOf.get(r.stream_id)!, line: r.line }));
  }

  async labelNames(startNs: bigint, endNs: bigint, matchers: readonly LabelMatcher[]): Promise<string[]> {
    const names = new Set<string>();
    for (const s of await this.streamsOf(startNs, endNs, matchers)) for (const k of Object.keys(s.labels)) names.add(k);
    return [...names].sort();
  }

  async labelValues(
    name: string,
    startNs: bigint,
    endNs: bigint,
    matchers: readonly LabelMatcher[],
  ): Promise<string[]> {
    const values = new Set<string>();
    for (const s of await this.streamsOf(startNs, endNs, matchers)) {
      const v = s.labels[name];
      if (v !== undefined) values.add(v);
    }
    return [...values].sort();
  }

  async series(
    selectors: readonly (readonly LabelMatcher[])[],
    startNs: bigint,
    endNs: bigint,
  ): Promise<Record<string, string>[]> {
    const all = await this.streamsOf(startNs, endNs, []);
    return all.filter((s) => selectors.some((m) => matchesAll(s.labels, m))).map((s) => s.labels);
  }
}
