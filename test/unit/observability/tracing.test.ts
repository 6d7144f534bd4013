import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { CompactSpan, SpanRecord } from '../../../runtime/src/observability/model.ts';
import {
  contextOf,
  fromHeaders,
  serializeContext,
  spanContextOf,
  toHeaders,
} from '../../../runtime/src/observability/tracing/context.ts';
import { InvocationTracer } from '../../../runtime/src/observability/tracing/invocation-tracer.ts';
import { createTracing } from '../../../runtime/src/observability/tracing/tracing.ts';
import { IngressTracer } from '../../../runtime/src/observability/tracing/ingress-tracer.ts';
import { RecordingTracer } from '../../../runtime/src/observability/tracing/recording-tracer.ts';
import { StoreSpanProcessor, type SpanSink } from '../../../runtime/src/observability/tracing/store-exporter.ts';
import { expandCompactSpan } from '../../../runtime/src/observability/span-json.ts';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type { Tracer } from '@opentelemetry/api';

const silent = pino({ level: 'silent' });

/** A span sink into an array (compact spans as the spans they stand for, as the store renders them). */
function sinkOf(into: SpanRecord[]): SpanSink {
  return {
    span: (s) => into.push(s),
    compactSpan: (c, resource, scope) => into.push(expandCompactSpan(c, resource, scope)),
  };
}

describe('trace context', () => {
  it('round-trips a traceparent with its tracestate, and refuses an invalid one', () => {
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const stored = fromHeaders({ traceparent: tp, tracestate: 'vendor=1' });
    expect(stored).toBe(`${tp} vendor=1`);
    expect(toHeaders(stored)).toEqual([
      ['traceparent', tp],
      ['tracestate', 'vendor=1'],
    ]);
    expect(spanContextOf(stored)).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
    });
    expect(serializeContext(spanContextOf(tp)!)).toBe(tp);
    expect(fromHeaders({ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' })).toBeUndefined();
    expect(fromHeaders({ traceparent: 'garbage' })).toBeUndefined();
    expect(fromHeaders({})).toBeUndefined();
    expect(spanContextOf(null)).toBeUndefined();
    expect(contextOf(undefined)).toBeDefined();
  });
});

// Ids and times differ between the runs; the rest, and how the spans refer to each other, must not.
function shape(spans: SpanRecord[]): unknown[] {
  const ids = new Map<string, string>();
  const idOf = (id: string): string => {
    if (id === '' || id === '00f067aa0ba902b7' || id === 'b7ad6b7169203331') return id;
    if (!ids.has(id)) ids.set(id, `span${ids.size}`);
    return ids.get(id)!;
  };
  for (const s of spans) idOf(s.spanId);
  return spans.map((s) => ({
    ...s,
    traceId: s.traceId === '4bf92f3577b34da6a3ce929d0e0e4736' ? 'client trace' : 'other',
    spanId: idOf(s.spanId),
    parentSpanId: idOf(s.parentSpanId),
    startNs: 0,
    endNs: s.endNs >= s.startNs,
    events: s.events.map((e) => ({ ...e, timeNs: e.timeNs >= s.startNs })),
  }));
}

describe('tracing', () => {
  it('stores the spans of an invocation: start, attempts (a failed one with its error), end, under one trace', async () => {
    const spans: SpanRecord[] = [];
    const tracing = createTracing({
      clusterName: 'c',
      nodeName: 'n',
      version: '1.2.3',
      sink: sinkOf(spans),
      logger: silent,
    })!;
    expect(tracing.exportsOtlp).toBe(false);
    const tracer = new InvocationTracer(tracing.tracer);
    const req = { id: 'inv_1', target: 'Counter/k/add', service: 'Counter', handler: 'add', key: 'k' };
    const traceContext = tracer.newTrace({ ...req, parent: undefined, caller: undefined });
    const inv = { ...req, deploymentId: 'dp_1', attempt: 0, partition: 0, traceContext };
    tracer.event(inv, { kind: 'started', protocolVersion: 6 });
    tracer.event(inv, { kind: 'retrying', code: 'RT0007', message: 'boom', stacktrace: 'Error: boom', delayMs: 10 });
    tracer.event({ ...inv, attempt: 1 }, { kind: 'started', protocolVersion: 6 });
    tracer.event({ ...inv, attempt: 1 }, { kind: 'replayed', entries: 3 });
    tracer.event(
      { ...inv, attempt: 1 },
      { kind: 'completed', outcome: 'success', code: undefined, message: undefined },
    );
    await tracing.shutdown();

    expect(spans.map((s) => s.name)).toEqual([
      'invocation-start Counter/{key}/add',
      'invocation-attempt Counter/{key}/add',
      'invocation-attempt Counter/{key}/add',
      'invocation-end Counter/{key}/add',
    ]);
    const [start, failed, ok, end] = spans;
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
    expect(start!.parentSpanId).toBe('');
    for (const s of [failed, ok, end]) expect(s!.parentSpanId).toBe(start!.spanId);
    expect(failed).toMatchObject({
      kind: 1,
      statusCode: 2,
      statusMessage: 'boom',
      attributes: {
        'restate.invocation.id': 'inv_1',
        'restate.invocation.target': 'Counter/k/add',
        'restate.error.code': 'RT0007',
        'restate.deployment.id': 'dp_1',
        'rpc.system': 'restate',
      },
      events: [{ name: 'exception', attributes: { 'exception.stacktrace': 'Error: boom' } }],
      resource: { 'service.name': 'Ratchet', 'service.version': '1.2.3', 'service.instance.id': 'c/n' },
      scope: 'services',
    });
    expect(ok!.events.map((e) => e.name)).toEqual(['restate.invocation.lifecycle.replayed']);
    expect(end!.attributes['restate.invocation.result']).toBe('success');
    expect(end!.endNs).toBeGreaterThanOrEqual(end!.startNs);
  });

  it("records the same spans as OpenTelemetry's SDK (names, parents, attributes, events, links, status)", async () => {
    const resource = { 'service.name': 'Ratchet', 'service.instance.id': 'c/n' };
    const run = (tracer: Tracer): void => {
      const ingress = new IngressTracer(tracer).start({
        service: 'Counter',
        handler: 'add',
        key: 'k',
        headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'v=1' },
        remoteAddress: '127.0.0.1',
        remotePort: 5000,
      });
      const tracer2 = new InvocationTracer(tracer);
      const req = { id: 'inv_1', target: 'Counter/k/add', service: 'Counter', handler: 'add', key: 'k' };
      const caller = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const traceContext = tracer2.newTrace({ ...req, parent: ingress.traceContext, caller });
      ingress.end('inv_1', 200);
      const inv = { ...req, deploymentId: 'dp_1', attempt: 0, partition: 0, traceContext };
      tracer2.event(inv, { kind: 'started', protocolVersion: 6 });
      tracer2.event(inv, { kind: 'retrying', code: 'RT0007', message: 'boom', stacktrace: 'Error: boom', delayMs: 10 });
      tracer2.event({ ...inv, attempt: 1 }, { kind: 'started', protocolVersion: 6 });
      tracer2.event({ ...inv, attempt: 1 }, { kind: 'paused', by: 'admin', code: undefined, message: undefined });
      tracer2.event(inv, { kind: 'completed', outcome: 'failure', code: 500, message: 'bad' });
    };
    const viaSdk: SpanRecord[] = [];
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes(resource),
      spanProcessors: [new StoreSpanProcessor(sinkOf(viaSdk))],
    });
    run(provider.getTracer('services'));
    const direct: SpanRecord[] = [];
    run(new RecordingTracer(sinkOf(direct), resource, 'services'));

    expect(direct).toHaveLength(5);
    expect(shape(direct)).toEqual(shape(viaSdk));
    expect(direct.every((s) => s.traceId === '4bf92f3577b34da6a3ce929d0e0e4736')).toBe(true);
    expect(direct[0]!.links).toEqual([
      {
        traceId: '0af7651916cd43dd8448eb211c80319c',
        spanId: 'b7ad6b7169203331',
        attributes: { 'restate.link': 'caller' },
      },
    ]);
    // Times are Unix nanoseconds of now.
    const now = BigInt(Date.now()) * 1_000_000n;
    expect(direct[0]!.startNs > now - 60_000_000_000n && direct[0]!.startNs <= now + 1_000_000_000n).toBe(true);
    await provider.shutdown();
  });

  it("keeps an invocation's routine spans compact, and they are the SDK's spans all the same", async () => {
    const resource = { 'service.name': 'Ratchet', 'service.instance.id': 'c/n' };
    const run = (tracer: Tracer, traceparent: string | undefined): void => {
      const ingress = new IngressTracer(tracer).start({
        service: 'Counter',
        handler: 'add',
        key: 'k',
        headers: traceparent === undefined ? {} : { traceparent },
        remoteAddress: '127.0.0.1',
        remotePort: 5000,
      });
      const tracer2 = new InvocationTracer(tracer);
      const req = { id: 'inv_1', target: 'Counter/k/add', service: 'Counter', handler: 'add', key: 'k' };
      const traceContext = tracer2.newTrace({ ...req, parent: ingress.traceContext, caller: undefined });
      ingress.end('inv_1', 200);
      const inv = { ...req, deploymentId: 'dp_1', attempt: 0, partition: 0, traceContext };
      // A failed attempt (made a span like any other when it fails), then one that ends as usual.
      tracer2.event(inv, { kind: 'started', protocolVersion: 6 });
      tracer2.event(inv, { kind: 'retrying', code: 'RT0007', message: 'boom', stacktrace: undefined, delayMs: 10 });
      tracer2.event({ ...inv, attempt: 1 }, { kind: 'started', protocolVersion: 6 });
      tracer2.event(
        { ...inv, attempt: 1 },
        { kind: 'completed', outcome: 'success', code: undefined, message: undefined },
      );
      // An ingress request that failed: its span is not routine.
      new IngressTracer(tracer)
        .start({
          service: 'A',
          handler: 'b',
          key: undefined,
          headers: {},
          remoteAddress: undefined,
          remotePort: undefined,
        })
        .end(undefined, 503);
    };
    for (const traceparent of ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', undefined]) {
      const viaSdk: SpanRecord[] = [];
      const provider = new BasicTracerProvider({
        resource: resourceFromAttributes(resource),
        spanProcessors: [new StoreSpanProcessor(sinkOf(viaSdk))],
      });
      run(provider.getTracer('services'), traceparent);
      const compact: CompactSpan[] = [];
      const direct: SpanRecord[] = [];
      run(
        new RecordingTracer(
          {
            span: (s) => direct.push(s),
            compactSpan: (c, r, sc) => {
              compact.push(c);
              direct.push(expandCompactSpan(c, r, sc));
            },
          },
          resource,
          'services',
        ),
        traceparent,
      );
      // ingress, start, the second attempt and the end went compact; the failed attempt and the 503 did not.
      expect(compact.map((c) => c.kind).sort()).toEqual(['a', 'e', 'i', 's']);
      expect(direct).toHaveLength(6);
      const byName = (a: SpanRecord, b: SpanRecord): number =>
        `${a.name}${a.statusCode}`.localeCompare(`${b.name}${b.statusCode}`);
      expect(shape([...direct].sort(byName))).toEqual(shape([...viaSdk].sort(byName)));
      await provider.shutdown();
    }
  });

  it('records nothing below a parent that was not sampled, as the SDK with its default sampler', () => {
    const unsampled = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00';
    const viaSdk: SpanRecord[] = [];
    const provider = new BasicTracerProvider({
      spanProcessors: [new StoreSpanProcessor(sinkOf(viaSdk))],
    });
    const direct: SpanRecord[] = [];
    for (const tracer of [provider.getTracer('services'), new RecordingTracer(sinkOf(direct), {}, 's')]) {
      const ctx = new InvocationTracer(tracer).newTrace({
        id: 'inv_1',
        target: 'A/b',
        service: 'A',
        handler: 'b',
        key: null,
        parent: unsampled,
        caller: undefined,
      });
      // The invocation stays in the client's trace, unsampled, so that its SDK spans are not sampled either.
      expect(ctx).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/);
    }
    expect(viaSdk).toEqual([]);
    expect(direct).toEqual([]);
  });

  it('makes no spans at all without a store and a collector', () => {
    expect(createTracing({ clusterName: 'c', nodeName: 'n', version: '1', sink: undefined, logger: silent })).toBe(
      undefined,
    );
  });

  it('also exports to an OTLP/HTTP collector named by OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', async () => {
    const received: { url: string | undefined; type: string | undefined; body: Buffer }[] = [];
    const server = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ url: req.url, type: req.headers['content-type'], body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = `http://127.0.0.1:${port}/v1/traces`;
    try {
      const stored: SpanRecord[] = [];
      const tracing = createTracing({
        clusterName: 'c',
        nodeName: 'n',
        version: '1',
        sink: sinkOf(stored),
        logger: silent,
      })!;
      expect(tracing.exportsOtlp).toBe(true);
      new InvocationTracer(tracing.tracer).newTrace({
        id: 'inv_otlp',
        target: 'A/b',
        service: 'A',
        handler: 'b',
        key: null,
        parent: undefined,
        caller: undefined,
      });
      await tracing.shutdown();
      expect(stored).toHaveLength(1);
      expect(received).toHaveLength(1);
      expect(received[0]).toMatchObject({ url: '/v1/traces', type: 'application/x-protobuf' });
      // The protobuf request carries the span's name and the invocation id attribute.
      expect(received[0]!.body.includes(Buffer.from('invocation-start A/b'))).toBe(true);
      expect(received[0]!.body.includes(Buffer.from('inv_otlp'))).toBe(true);
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
      server.close();
    }
  });
});
