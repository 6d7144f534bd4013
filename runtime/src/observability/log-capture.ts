import type { DestinationStream } from 'pino';
import { RUNTIME_SERVICE_NAME, streamKey } from './labels.ts';
import type { LogLineInsert } from './model.ts';

/** Where captured lines go once the node's store is up. */
export interface LogLineSink {
  log(line: LogLineInsert): void;
}

/** What a node adds to every line's stream labels. */
export interface CaptureLabels {
  readonly node: string;
  readonly cluster: string;
}

/** Lines logged before the store is attached (startup) are kept up to this many. */
const EARLY_LINES = 1_000;

/** pino's numeric levels, for lines that carry one (a logger configured without the label formatter). */
const LEVEL_NAMES: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/** Fields of a pino line that are not the line's own fields. */
const PINO_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'component', 'node']);

/**
 * A pino destination (beside stdout) that turns the runtime's log lines into the store's: Restate's JSON log format
 * (`{"timestamp","level","fields":{"message",…},"target"}`, so that the recipes written for Restate — the derived
 * field on `"restate.invocation.id":"…"`, `| json fields` — work on Ratchet's lines), with stream labels
 * `service_name`, `level`, `component`, `node` and `cluster`. Never throws into the logger: a line it cannot read
 * is stored as it came.
 */
export class LogCapture implements DestinationStream {
  private sink: LogLineSink | undefined;
  private labels: CaptureLabels = { node: '', cluster: '' };
  private early: string[] = [];
  /** Nanoseconds of the last line, so that lines of the same millisecond keep their order. */
  private lastNs = 0n;
  /** Label sets and their stream keys, by service, level and component: a handful, built once each. */
  private readonly streams = new Map<string, { labels: Record<string, string>; key: string }>();

  /** The stream of a line (cached: computing a stream key per line costs a sort and a JSON text). */
  stream(service: string, level: string, component: string): { labels: Record<string, string>; key: string } {
    const k = `${service}\u0000${level}\u0000${component}`;
    let s = this.streams.get(k);
    if (s === undefined) {
      const labels = { ...this.base(level, component), service_name: service };
      s = { labels, key: streamKey(labels) };
      if (this.streams.size > 10_000) this.streams.clear();
      this.streams.set(k, s);
    }
    return s;
  }

  write(msg: string): void {
    if (this.sink === undefined) {
      if (this.early.length < EARLY_LINES) this.early.push(msg);
      return;
    }
    this.sink.log(this.convert(msg));
  }

  /** From now on lines go to `sink`; those logged before are sent first. */
  attach(sink: LogLineSink, labels: CaptureLabels): void {
    this.labels = labels;
    this.streams.clear();
    this.sink = sink;
    const early = this.early;
    this.early = [];
    for (const m of early) sink.log(this.convert(m));
  }

  detach(): void {
    this.sink = undefined;
  }

  /** A line that did not go through pino (see InvocationLog): stored as is, in order with the others. */
  direct(line: Omit<LogLineInsert, 'tsNs'>): void {
    const sink = this.sink;
    if (sink === undefined) return;
    sink.log({
      tsNs: this.timestampNs(undefined),
      labels: line.labels,
      labelsKey: line.labelsKey,
      invocationId: line.invocationId,
      line: line.line,
      ...(line.json === undefined ? {} : { json: line.json }),
      ...(line.compact === undefined ? {} : { compact: line.compact }),
    });
  }

  private timestampNs(time: unknown): bigint {
    const ms = typeof time === 'string' ? Date.parse(time) : typeof time === 'number' ? time : Date.now();
    let ns = BigInt(Number.isFinite(ms) ? ms : Date.now()) * 1_000_000n;
    if (ns <= this.lastNs) ns = this.lastNs + 1n;
    this.lastNs = ns;
    return ns;
  }

  private convert(msg: string): LogLineInsert {
    let obj: Record<string, unknown>;
    try {
      obj = JSON.parse(msg) as Record<string, unknown>;
    } catch {
      const labels = { ...this.base('info', 'runtime'), service_name: RUNTIME_SERVICE_NAME };
      return {
        tsNs: this.timestampNs(undefined),
        labels,
        labelsKey: streamKey(labels),
        invocationId: undefined,
        line: msg.trimEnd(),
      };
    }
    const level =
      typeof obj.level === 'number'
        ? (LEVEL_NAMES[obj.level] ?? 'info')
        : typeof obj.level === 'string'
          ? obj.level
          : 'info';
    const component = typeof obj.component === 'string' ? obj.component : 'runtime';
    const fields: Record<string, unknown> = {};
    // Restate's name for the invocation id first, so that a derived field's regex finds it where Restate has it.
    const invocationId = obj['restate.invocation.id'] ?? obj['service.invocation.id'];
    if (typeof invocationId === 'string') fields['restate.invocation.id'] = invocationId;
    fields.message = obj.msg ?? '';
    for (const [k, v] of Object.entries(obj)) {
      if (!PINO_FIELDS.has(k) && !(k in fields)) fields[k] = v;
    }
    const service = obj['rpc.service'];
    const stream = this.stream(typeof service === 'string' ? service : RUNTIME_SERVICE_NAME, level, component);
    const time = obj.time;
    const line = JSON.stringify({
      timestamp: typeof time === 'number' ? new Date(time).toISOString() : time,
      level: level.toUpperCase(),
      fields,
      target: component,
    });
    return {
      tsNs: this.timestampNs(time),
      labels: stream.labels,
      labelsKey: stream.key,
      invocationId: typeof invocationId === 'string' ? invocationId : undefined,
      line,
      json: true,
    };
  }

  private base(level: string, component: string): { level: string; component: string; node: string; cluster: string } {
    return { level, component, node: this.labels.node, cluster: this.labels.cluster };
  }
}
