import type pg from 'pg';
import { inTransaction } from '../pool.ts';
import type { LineChunk } from '../../../observability/chunks.ts';
import type { LabelMatcher, LogRecord, LogSelection, LogSource } from '../../../observability/model.ts';
import { streamKey } from '../../../observability/labels.ts';
import { chunkMustContain } from '../../../observability/store-format.ts';
import { matchesAll } from '../../../observability/matchers.ts';
import { type Partitions, windowStart } from './partitions.ts';
import { readInSlices } from './slices.ts';

/**
 * The lines of the chunks a query selects, one row each: `u.ts_ns`, `u.line`, and `u.o` its place in the chunk
 * (compact records rendered into their lines: migration 0012).
 */
const LINES = `ratchet.log_chunk c CROSS JOIN LATERAL ratchet.chunk_lines(c.format, c.ts_ns, c.lines, c.dict) u`;

interface StreamRow {
  id: string;
  labels: Record<string, string>;
  first_ns: string;
  last_ns: string;
}

/**
 * Log lines in PostgreSQL (`ratchet.log_stream`, `ratchet.log_chunk`), written by every node and read by any. A batch
 * of lines is stored as one chunk per stream and partition window (the lines in time order, in two arrays), so that a
 * line costs PostgreSQL a few bytes of an array rather than a row and its index entries. Stream matchers are evaluated
 * here over the streams of the range (a small table: one row per label set), with the same regex semantics as the LogQL
 * engine; lines are read by stream and time from the chunks that overlap the range, newest or oldest first.
 */
export class PgLogStore implements LogSource {
  constructor(
    private readonly pool: pg.Pool,
    private readonly partitions: Partitions,
  ) {}

  /** Inserts chunks of lines (one transaction: the streams they belong to, then the chunks). */
  async insert(chunks: readonly LineChunk[]): Promise<void> {
    if (chunks.length === 0) return;
    const streams = new Map<string, { labels: Readonly<Record<string, string>>; first: bigint; last: bigint }>();
    for (const c of chunks) {
      const s = streams.get(c.labelsKey);
      if (s === undefined) streams.set(c.labelsKey, { labels: c.labels, first: c.startNs, last: c.endNs });
      else {
        if (c.startNs < s.first) s.first = c.startNs;
        if (c.endNs > s.last) s.last = c.endNs;
      }
    }
    await this.partitions.ensure(
      'log_chunk',
      chunks.map((c) => c.startNs),
    );
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
      // A chunk's times and lines are JSON arrays in text columns, made by the writer (chunks.ts) and not parsed by
      // PostgreSQL until a query reads them.
      for (const c of chunks) {
        await client.query(
          `INSERT INTO ratchet.log_chunk (start_ns, end_ns, seq, stream_id, ts_ns, lines, format, dict)
           VALUES ($1, $2, nextval('ratchet.log_chunk_seq'), $3, $4, $5, 1, $6)`,
          [c.startNs.toString(), c.endNs.toString(), ids.get(c.labelsKey)!, c.times, c.lines, c.dict],
        );
      }
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

  /** Lines of the selection, read in slices from the end the query starts at (slices.ts). */
  async select(q: LogSelection): Promise<LogRecord[]> {
    const streams = await this.streamsOf(q.startNs, q.endNs, q.matchers);
    if (streams.length === 0 || q.limit <= 0) return [];
    const labelsOf = new Map(streams.map((s) => [s.id, s.labels]));
    const rows = await readInSlices(q.startNs, q.endNs, q.direction, q.limit, (from, to, limit) =>
      this.selectSlice(q, streams, from, to, limit),
    );
    return rows.map((r) => ({ tsNs: BigInt(r.ts_ns), labels: labelsOf.get(r.stream_id)!, line: r.line }));
  }

  private async selectSlice(
    q: LogSelection,
    streams: readonly { id: string }[],
    startNs: bigint,
    endNs: bigint,
    limit: number,
  ): Promise<{ ts_ns: string; stream_id: string; line: string }[]> {
    const values: unknown[] = [
      streams.map((s) => s.id),
      startNs.toString(),
      endNs.toString(),
      limit,
      // A chunk lies in one window: one that overlaps the range starts no earlier than the window of its start.
      windowStart(startNs).toString(),
    ];
    const filters: string[] = [];
    for (const f of q.lineFilters) {
      // Substring filters run in PostgreSQL; regex filters only in the engine (RE2 and PostgreSQL's regexes differ).
      if (f.op === '|=') {
        const v = `$${values.push(f.value)}`;
        filters.push(`strpos(u.line, ${v}) > 0`);
        if (chunkMustContain(f.value)) filters.push(`(strpos(c.lines, ${v}) > 0 OR strpos(c.dict, ${v}) > 0)`);
      } else if (f.op === '!=') filters.push(`strpos(u.line, $${values.push(f.value)}) = 0`);
    }
    const order = q.direction === 'forward' ? 'ASC' : 'DESC';
    const { rows } = await this.pool.query<{ ts_ns: string; stream_id: string; line: string }>(
      `SELECT u.ts_ns, c.stream_id, u.line
       FROM ${LINES}
       WHERE c.stream_id = ANY($1::bigint[]) AND c.start_ns >= $5 AND c.start_ns < $3 AND c.end_ns >= $2
         AND u.ts_ns >= $2 AND u.ts_ns < $3${filters.map((f) => ` AND ${f}`).join('')}
       ORDER BY u.ts_ns ${order}, c.seq ${order}, u.o ${order} LIMIT $4`,
      values,
    );
    return rows;
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
