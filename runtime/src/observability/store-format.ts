/*
 * The store's chunk format 1 (migration 0012 describes it, and PostgreSQL renders it): records separated by U+001E,
 * compact records of routine invocation lines and spans whose repeated texts sit once in the chunk's dictionary.
 */

/** Record separator, compact record mark, escaped record mark, field separator (migration 0012). */
export const RS = '\u001e';
export const COMPACT = '\u0010';
export const ESCAPED = '\u0011';
export const FS = '\u001f';

/** An invocation's header in a chunk's dictionary, with what it was made of (to tell a changed one). */
interface Header {
  readonly ref: number;
  readonly target: string;
  readonly service: string;
  readonly handler: string;
  readonly trace: string | null;
}

/**
 * A chunk's dictionary: texts its compact records refer to by position. Invocation headers are found by the
 * invocation's id (the same string object on every record of an invocation, so its hash is computed once) rather than
 * by their text, which would be built and hashed on every record.
 */
export class ChunkDict {
  private readonly entries: string[] = [];
  private readonly values = new Map<string, number>();
  private readonly lineHeaders = new Map<string, Header>();
  private readonly spanHeaders = new Map<string, Header>();

  private push(text: string): number {
    this.entries.push(text);
    return this.entries.length - 1;
  }

  /** The position of a string value (stored as its JSON text). */
  value(v: string): number {
    let i = this.values.get(v);
    if (i === undefined) this.values.set(v, (i = this.push(JSON.stringify(v))));
    return i;
  }

  /** A log line's header: id, target, service, handler, trace id (JSON texts; no trace: ''). */
  lineHeader(id: string, target: string, service: string, handler: string, trace: string | null): number {
    return this.header(
      this.lineHeaders,
      id,
      target,
      service,
      handler,
      trace,
      () =>
        [id, target, service, handler].map((x) => JSON.stringify(x)).join(FS) +
        FS +
        (trace === null ? '' : JSON.stringify(trace)),
    );
  }

  /** A span's header: trace id (bare hex), then id, target, service, handler (JSON texts). */
  spanHeader(id: string, target: string, service: string, handler: string, trace: string): number {
    return this.header(this.spanHeaders, id, target, service, handler, trace, () =>
      [trace, ...[id, target, service, handler].map((x) => JSON.stringify(x))].join(FS),
    );
  }

  private header(
    map: Map<string, Header>,
    id: string,
    target: string,
    service: string,
    handler: string,
    trace: string | null,
    text: () => string,
  ): number {
    const h = map.get(id);
    if (h !== undefined && h.target === target && h.service === service && h.handler === handler && h.trace === trace) {
      return h.ref;
    }
    const ref = this.push(text());
    map.set(id, { ref, target, service, handler, trace });
    return ref;
  }

  json(): string | null {
    return this.entries.length === 0 ? null : JSON.stringify(this.entries);
  }
}

/** A text as a record of its own: as it is, unless it holds a separator or starts like a marked record. */
export function literalRecord(text: string, isJson: boolean): string {
  if (isJson) return text; // JSON.stringify writes no control character unescaped, and starts with `{`
  const c = text.charCodeAt(0);
  return c === 0x10 || c === 0x11 || text.includes(RS) ? ESCAPED + JSON.stringify(text) : text;
}

/**
 * The texts `ratchet.render_line` puts around the parts of a compact line it takes from the chunk (JSON texts of ids,
 * names, numbers and times): keys, punctuation and the fixed parts of messages.
 */
const LINE_TEMPLATE = [
  '{"timestamp":"',
  '","level":"DEBUG","fields":{"restate.invocation.id":',
  ',"message":"invocation accepted"',
  ',"message":"invocation scheduled for ',
  ',"message":"invocation inboxed: its key is busy"',
  ',"message":"invocation attempt ',
  ' started"',
  ',"message":"journal replayed: ',
  ' entries"',
  ',"message":"invocation suspended"',
  ',"message":"invocation resumed by the admin API"',
  ',"message":"invocation resumed"',
  ',"message":"invocation completed"',
  ',"service.invocation.id":',
  ',"restate.invocation.target":',
  ',"rpc.service":',
  ',"rpc.method":',
  ',"restate.invocation.attempt":',
  ',"restate.partition.id":',
  ',"restate.invocation.event":"',
  '"',
  ',"restate.deployment.id":',
  ',"trace_id":',
  ',"restate.idempotency.key":',
  ',"restate.invocation.execution_time":',
  ',"restate.deployment.service_protocol_version":',
  ',"restate.journal.length":',
  ',"restate.invocation.result":"success"',
  '},"target":"invocation"}',
];

/**
 * Whether every chunk that has a line containing `value` holds `value` in its stored text (its records or its
 * dictionary), so that the store may skip chunks without it before rendering their lines. True when `value` lies
 * within one stored part of any line it is in: it has no quote, backslash or control character (JSON escapes them,
 * so a stored part holds it as the line shows it), is not only characters of a rendered timestamp, and neither
 * contains, overlaps nor lies within a text `ratchet.render_line` adds. Lines stored in full (format 0, and format 1's
 * literal records) are their own stored text.
 */
export function chunkMustContain(value: string): boolean {
  if (value === '' || /["\\\u0000-\u001f]/.test(value) || /^[-0-9T:.Z]+$/.test(value)) return false;
  for (const t of LINE_TEMPLATE) {
    if (t.includes(value) || value.includes(t)) return false;
    for (let n = 1; n < value.length && n <= t.length; n++) {
      if (t.endsWith(value.slice(0, n)) || t.startsWith(value.slice(value.length - n))) return false;
    }
  }
  return true;
}
