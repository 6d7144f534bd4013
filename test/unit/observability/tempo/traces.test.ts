import { fromBinary, toJson } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { ObservabilityQueryError } from '../../../../runtime/src/observability/errors.ts';
import { getTraceV1, getTraceV2 } from '../../../../runtime/src/observability/tempo/api.ts';
import { TempoTraceSchema, TraceByIDResponseSchema } from '../../../../runtime/src/observability/tempo/otlp-schema.ts';
import { T0, TRACE_A, TRACE_B, TRACE_C, restateFixture } from '../../../support/observability/memory-span-source.ts';

const now = (): bigint => T0 + 3_600_000_000_000n;

type Json = Record<string, unknown>;
const b64 = (hex: string): string => Buffer.from(hex, 'hex').toString('base64');

describe('Tempo trace by id', () => {
  it('answers /api/traces/<id> as Tempo’s JSON: batches of OTLP resource spans, ids in base64', async () => {
    const res = await getTraceV1(restateFixture(), {}, now, TRACE_A.toUpperCase());
    expect(res.status).toBe(200);
    const body = res.body as { batches: Json[] };
    expect(body.batches).toHaveLength(1);
    const batch = body.batches[0] as {
      resource: { attributes: Json[] };
      scopeSpans: { scope: Json; spans: Json[] }[];
    };
    expect(batch.resource.attributes).toContainEqual({ key: 'service.name', value: { stringValue: 'Restate' } });
    expect(batch.scopeSpans[0]!.scope).toEqual({ name: 'services' });
    const spans = batch.scopeSpans[0]!.spans;
    expect(spans.map((s) => s['name'])).toEqual([
      'ingress Greeter/greet',
      'invocation-start Greeter/greet',
      'invocation-attempt Greeter/greet',
      'invocation-end Greeter/greet',
    ]);
    const ingress = spans[0]!;
    expect(ingress).toMatchObject({
      traceId: b64(TRACE_A),
      kind: 'SPAN_KIND_INTERNAL',
      startTimeUnixNano: T0.toString(),
      attributes: expect.arrayContaining([
        { key: 'restate.invocation.target', value: { stringValue: 'Greeter/greet' } },
        { key: 'client.socket.port', value: { intValue: '50412' } },
      ]) as unknown,
    });
    expect(ingress).not.toHaveProperty('parentSpanId');
    expect(spans[1]!['parentSpanId']).toBe(ingress['spanId']);
    expect(spans[2]!['events']).toEqual([
      {
        timeUnixNano: expect.any(String) as unknown,
        name: 'restate.invocation.lifecycle.new_command',
        attributes: [
          { key: 'restate.journal.command.type', value: { stringValue: 'Command/Run' } },
          { key: 'restate.journal.command.name', value: { stringValue: 's1' } },
        ],
      },
    ]);
  });

  it('answers Accept: application/protobuf with tempopb.Trace bytes that decode back', async () => {
    const res = await getTraceV1(restateFixture(), {}, now, TRACE_B, 'application/protobuf');
    expect(res.contentType).toBe('application/protobuf');
    expect(res.body).toBeInstanceOf(Uint8Array);
    const trace = fromBinary(TempoTraceSchema, res.body as Uint8Array);
    const json = toJson(TempoTraceSchema, trace) as { resourceSpans: { scopeSpans: { spans: Json[] }[] }[] };
    const spans = json.resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(spans).toHaveLength(6);
    expect(spans[0]).toMatchObject({ traceId: b64(TRACE_B), parentSpanId: b64('cafecafecafecafe') });
    expect(spans.filter((s) => (s['status'] as Json | undefined)?.['code'] === 'STATUS_CODE_ERROR')).toHaveLength(2);
  });

  it('answers /api/v2/traces/<id> as a TraceByIDResponse, JSON or protobuf', async () => {
    const source = restateFixture();
    const res = await getTraceV2(
      source,
      { start: String(T0 / 1_000_000_000n - 60n), end: String(T0 / 1_000_000_000n + 60n) },
      now,
      TRACE_A,
    );
    const body = res.body as { trace: { resourceSpans: { scopeSpans: { spans: unknown[] }[] }[] } };
    expect(body.trace.resourceSpans[0]!.scopeSpans[0]!.spans).toHaveLength(4);
    const proto = await getTraceV2(source, {}, now, TRACE_A, 'application/protobuf, application/json;q=0.9');
    const decoded = toJson(TraceByIDResponseSchema, fromBinary(TraceByIDResponseSchema, proto.body as Uint8Array));
    expect(decoded).toEqual(body);
  });

  it('pads short ids with zeros, and answers 404 for an unknown trace', async () => {
    const res = await getTraceV1(restateFixture(), {}, now, 'C0FFEE');
    expect(((res.body as { batches: unknown[] }).batches[0] as Json)['scopeSpans']).toBeDefined();
    expect(TRACE_C.endsWith('c0ffee')).toBe(true);
    await expect(getTraceV1(restateFixture(), {}, now, 'abc')).rejects.toMatchObject({
      status: 404,
      message: 'trace not found',
    });
    await expect(getTraceV2(restateFixture(), {}, now, 'xyz')).rejects.toBeInstanceOf(ObservabilityQueryError);
    await expect(getTraceV2(restateFixture(), {}, now, 'f'.repeat(33))).rejects.toMatchObject({ status: 400 });
    await expect(getTraceV2(restateFixture(), { start: '20', end: '10' }, now, TRACE_A)).rejects.toMatchObject({
      message: 'http parameter start must be before end. received start=20 end=10',
    });
  });
});
