/*
 * `GET /loki/api/v1/tail` over WebSocket, as logcli (`--tail`) and Grafana's live view use it: the lines of a log query
 * from `start` on, then new ones as they are stored, each batch one text message
 * `{"streams":[{"stream":{…},"values":[["<ns>","<line>"]]}],"dropped_entries":[…]}`.
 *
 * Loki's ingesters push new lines to a tail; Ratchet's lines reach PostgreSQL from every node's writer in batches
 * (every half second), so a tail polls the store and trails the present by `TAIL_LAG_NS` (plus the client's
 * `delay_for`): a window of time is read once, after every node has had the time to store its lines, so that no line is
 * sent twice and none that arrives late within the lag is missed.
 */
import { ObservabilityQueryError, type ApiParams } from '../errors.ts';
import type { LogSource } from '../model.ts';
import type { LogQuery } from '../logql/ast.ts';
import { evalLogQuery, type LogStream } from '../logql/logs.ts';
import { parseLogQL } from '../logql/parse.ts';
import { HOUR_NS, SECOND_NS, param, parseLimit, parseTimestamp } from './params.ts';

/** How far behind the present a tail reads: the writers' flush interval with room to spare. */
export const TAIL_LAG_NS = 2n * SECOND_NS;
/** Loki's maximum `delay_for`. */
const MAX_DELAY_S = 5;
/** At most this many lines per message while catching up (more are sent in the next poll, from where this one ended). */
const MAX_BATCH = 5000;

export interface TailRequest {
  readonly query: LogQuery;
  readonly detectedLevel: boolean;
  readonly limit: number;
  readonly startNs: bigint;
  readonly delayNs: bigint;
}

/** Reads a tail's parameters (`query`, `limit`, `start`, `delay_for`); a bad one is a 400 before the upgrade. */
export function parseTailRequest(p: ApiParams, nowNs: bigint): TailRequest {
  const text = param(p, 'query') ?? '';
  const query = parseLogQL(text);
  if (query.kind !== 'log') {
    throw new ObservabilityQueryError(
      'tail requires a log query (a stream selector and a pipeline), not a metric query',
    );
  }
  const limit = parseLimit(p, 100);
  if (limit > MAX_BATCH) {
    throw new ObservabilityQueryError(
      `max entries limit per query exceeded, limit > max_entries_limit_per_query (${limit} > ${MAX_BATCH})`,
    );
  }
  const delayText = param(p, 'delay_for') ?? '0';
  const delay = Number(delayText);
  if (!/^\d+$/.test(delayText) || delay > MAX_DELAY_S) {
    throw new ObservabilityQueryError(`delay_for must be a whole number of seconds from 0 to ${MAX_DELAY_S}`);
  }
  const startNs = parseTimestamp(param(p, 'start'), nowNs - HOUR_NS, 'start');
  return { query, detectedLevel: text.includes('detected_level'), limit, startNs, delayNs: BigInt(delay) * SECOND_NS };
}

export interface TailMessage {
  readonly streams: LogStream[];
  readonly dropped_entries: { labels: Record<string, string>; timestamp: string }[];
}

export interface TailSession {
  stop(): void;
}

export interface TailOptions {
  readonly pollMs: number;
}

/**
 * Runs a tail until `stop()`: first the last `limit` lines between `start` and the present (oldest first), then every
 * `pollMs` the lines stored since. `send` gets each non-empty batch; `fail` gets a store error (the tail stops).
 */
export function startTail(
  source: LogSource,
  req: TailRequest,
  now: () => bigint,
  send: (message: TailMessage) => void,
  fail: (err: unknown) => void,
  options: TailOptions = { pollMs: 1000 },
): TailSession {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let cursor = req.startNs;
  const horizon = (): bigint => now() - TAIL_LAG_NS - req.delayNs;

  const read = async (first: boolean): Promise<void> => {
    const until = horizon();
    if (until <= cursor) return;
    const r = await evalLogQuery(
      source,
      req.query,
      // The backlog: the newest `limit` lines, as Loki sends them; after it, everything in order.
      first
        ? { startNs: cursor, endNs: until, direction: 'backward', limit: req.limit }
        : { startNs: cursor, endNs: until, direction: 'forward', limit: MAX_BATCH },
      undefined,
      { detectedLevel: req.detectedLevel },
    );
    let count = 0;
    let last = cursor;
    for (const s of r.streams) {
      if (first) s.values.reverse();
      for (const [ts] of s.values) {
        count++;
        const t = BigInt(ts);
        if (t > last) last = t;
      }
    }
    // A full batch while catching up: go on from its last line rather than skip what did not fit.
    cursor = !first && count >= MAX_BATCH ? last + 1n : until;
    if (count > 0 && !stopped) send({ streams: r.streams, dropped_entries: [] });
  };

  const loop = (first: boolean): void => {
    read(first).then(
      () => {
        if (!stopped) timer = setTimeout(() => loop(false), options.pollMs);
      },
      (err: unknown) => {
        if (stopped) return;
        stopped = true;
        fail(err);
      },
    );
  };
  loop(true);

  return {
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
