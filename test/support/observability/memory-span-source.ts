/*
 * An in-memory SpanSource for the Tempo/TraceQL unit tests, and a builder of traces laid out as restate-server 1.7
 * emits them (spec 2.4): `ingress <Service>/<handler>` → `invocation-start …` → one `invocation-attempt …` per
 * attempt and `invocation-end …`, all INTERNAL, scope `services`, resource `service.name = "Restate"`.
 */
import {
  type AttributeValue,
  SpanKind,
  type SpanHint,
  type SpanRecord,
  type SpanScan,
  type SpanSource,
  StatusCode,
} from '../../../runtime/src/observability/model.ts';

function hintHolds(s: SpanRecord, h: SpanHint): boolean {
  const inSpan = s.attributes[h.key] === h.value;
  const inResource = s.resource[h.key] === h.value;
  return h.scope === 'span' ? inSpan : h.scope === 'resource' ? inResource : inSpan || inResource;
}

export class MemorySpanSource implements SpanSource {
  readonly spans: SpanRecord[] = [];
  /** Every scan asked for, to check hints and caps. */
  readonly scans: SpanScan[] = [];
  readonly traceLookups: string[][] = [];

  constructor(spans: readonly SpanRecord[] = []) {
    this.spans.push(...spans);
  }

  add(...spans: SpanRecord[]): void {
    this.spans.push(...spans);
  }

  trace(traceId: string, startNs?: bigint, endNs?: bigint): Promise<SpanRecord[]> {
    return Promise.resolve(
      this.spans.filter(
        (s) =>
          s.traceId === traceId &&
          (startNs === undefined || s.startNs >= startNs) &&
          (endNs === undefined || s.startNs < endNs),
      ),
    );
  }

  scan(q: SpanScan): Promise<SpanRecord[]> {
    this.scans.push(q);
    const hits = this.spans
      .filter((s) => s.startNs >= q.startNs && s.startNs < q.endNs && q.hints.every((h) => hintHolds(s, h)))
      .sort((a, b) => (a.startNs > b.startNs ? -1 : a.startNs < b.startNs ? 1 : 0));
    return Promise.resolve(hits.slice(0, q.maxSpans));
  }

  traces(traceIds: readonly string[]): Promise<SpanRecord[]> {
    this.traceLookups.push([...traceIds]);
    const ids = new Set(traceIds);
    return Promise.resolve(this.spans.filter((s) => ids.has(s.traceId)));
  }
}

export const MS = 1_000_000n;
/** 2024-03-01T00:00:00Z in Unix nanoseconds: the base time of the fixtures. */
export const T0 = 1_709_251_200_000_000_000n;
export const RESTATE_RESOURCE: Readonly<Record<string, AttributeValue>> = {
  'service.name': 'Restate',
  'service.namespace': 'Restate',
  'service.version': '1.7.12',
  'service.instance.id': 'localcluster/tr1',
};

export interface InvocationTrace {
  readonly traceId: string;
  readonly invocationId: string;
  /** `Greeter/greet` or `counter/{key}/add` (keyed targets keep the placeholder in span names). */
  readonly target: string;
  /** The real target (`counter/k1/add`); defaults to `target`. */
  readonly realTarget?: string;
  /** Start of the ingress span, ns after T0. */
  readonly atMs: number;
  /** Durations of the attempts in ms; every attempt but the last fails with RT0001 unless `failed`. */
  readonly attemptsMs?: readonly number[];
  /** The last attempt fails too and the invocation ends in failure. */
  readonly failed?: boolean;
  /** The caller's span id from an incoming `traceparent` (ingress is then not a root of the store). */
  readonly callerSpanId?: string;
  readonly deploymentId?: string;
}

function hex(n: number, len: number): string {
  return n.toString(16).padStart(len, '0');
}

let spanCounter = 1;

/** The spans of one invocation as restate-server 1.7 emits them. */
export function invocationTrace(t: InvocationTrace): SpanRecord[] {
  const [service = '', ...rest] = t.target.split('/');
  const handler = rest[rest.length - 1] ?? '';
  const realTarget = t.realTarget ?? t.target;
  const common = {
    'rpc.service': service,
    'rpc.method': handler,
    'restate.invocation.id': t.invocationId,
    'restate.invocation.target': realTarget,
  };
  const attempts = t.attemptsMs ?? [20];
  const start = T0 + BigInt(t.atMs) * MS;
  const id = (): string => hex(spanCounter++, 16);
  const span = (
    fields: Pick<SpanRecord, 'spanId' | 'parentSpanId' | 'name' | 'startNs' | 'endNs'> & Partial<SpanRecord>,
  ): SpanRecord => ({
    traceId: t.traceId,
    kind: SpanKind.internal,
    statusCode: StatusCode.unset,
    statusMessage: '',
    attributes: common,
    events: [],
    links: [],
    resource: RESTATE_RESOURCE,
    scope: 'services',
    ...fields,
  });
  const total = attempts.reduce((a, b) => a + b + 5, 10);
  const ingressId = id();
  const startId = id();
  const out: SpanRecord[] = [
    span({
      spanId: ingressId,
      parentSpanId: t.callerSpanId ?? '',
      name: `ingress ${t.target}`,
      startNs: start,
      endNs: start + BigInt(total) * MS,
      attributes: { ...common, 'client.socket.address': '127.0.0.1', 'client.socket.port': 50412 },
    }),
    span({
      spanId: startId,
      parentSpanId: ingressId,
      name: `invocation-start ${t.target}`,
      startNs: start + 1n * MS,
      endNs: start + 2n * MS,
    }),
  ];
  let at = start + 3n * MS;
  attempts.forEach((ms, i) => {
    const failing = i < attempts.length - 1 || t.failed === true;
    out.push(
      span({
        spanId: id(),
        parentSpanId: startId,
        name: `invocation-attempt ${t.target}`,
        startNs: at,
        endNs: at + BigInt(ms) * MS,
        statusCode: failing ? StatusCode.error : StatusCode.unset,
        statusMessage: failing ? 'RT0001: the deployment answered 500' : '',
        attributes: {
          ...common,
          'rpc.system': 'restate',
          'restate.deployment.id': t.deploymentId ?? 'dp_11nGQpCRmau6ypL82KH2TnP',
          'restate.deployment.address': 'http://127.0.0.1:9080/',
          'restate.deployment.service_protocol_version': 6,
          ...(failing ? { 'restate.error.code': 'RT0001' } : {}),
        },
        events: [
          {
            timeNs: at + 1n * MS,
            name: 'restate.invocation.lifecycle.new_command',
            attributes: { 'restate.journal.command.type': 'Command/Run', 'restate.journal.command.name': 's1' },
          },
        ],
      }),
    );
    at += BigInt(ms + 5) * MS;
  });
  out.push(
    span({
      spanId: id(),
      parentSpanId: startId,
      name: `invocation-end ${t.target}`,
      startNs: at,
      endNs: at + 1n * MS,
      attributes: { ...common, 'restate.invocation.result': t.failed === true ? 'failure' : 'success' },
    }),
  );
  return out;
}

export const INV_A = 'inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW';
export const INV_B = 'inv_17l9ZLwBY3bz6HEIybYB6Rh9SbV6khuc0N';
export const INV_C = 'inv_1gdJBtdVEcM97Rn4K5nDgLRbCxMfHyLtTf';
export const TRACE_A = '0af7651916cd43dd8448eb211c80319c';
export const TRACE_B = '4bf92f3577b34da6a3ce929d0e0e4736';
export const TRACE_C = '00000000000000000000000000c0ffee';
export const TRACE_D = 'd0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0';

/**
 * Four traces: A `Greeter/greet` (one attempt, 20 ms); B `counter/{key}/add` on key k1 (three attempts, the first two
 * failing with RT0001, ingress parented to a caller's span); C `Greeter/greet` that fails (two failing attempts); D a
 * SERVER span of an SDK service (`greeter-svc`) with int, float and bool attributes.
 */
export function restateFixture(): MemorySpanSource {
  const d: SpanRecord = {
    traceId: TRACE_D,
    spanId: 'dddddddddddddddd',
    parentSpanId: '',
    name: 'POST /Greeter/greet',
    kind: SpanKind.server,
    startNs: T0 + 3000n * MS,
    endNs: T0 + 3250n * MS,
    statusCode: StatusCode.ok,
    statusMessage: '',
    attributes: { 'http.status_code': 200, ratio: 0.5, sampled: true, 'x y': 'spaced' },
    events: [],
    links: [{ traceId: TRACE_A, spanId: '0000000000000001', attributes: { relation: 'follows' } }],
    resource: { 'service.name': 'greeter-svc' },
    scope: '@restatedev/restate-sdk',
  };
  return new MemorySpanSource([
    ...invocationTrace({ traceId: TRACE_A, invocationId: INV_A, target: 'Greeter/greet', atMs: 0 }),
    ...invocationTrace({
      traceId: TRACE_B,
      invocationId: INV_B,
      target: 'counter/{key}/add',
      realTarget: 'counter/k1/add',
      atMs: 1000,
      attemptsMs: [50, 60, 30],
      callerSpanId: 'cafecafecafecafe',
      deploymentId: 'dp_22nGQpCRmau6ypL82KH2TnP',
    }),
    ...invocationTrace({
      traceId: TRACE_C,
      invocationId: INV_C,
      target: 'Greeter/greet',
      atMs: 2000,
      attemptsMs: [5, 7],
      failed: true,
    }),
    d,
  ]);
}
