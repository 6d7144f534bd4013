import { describe, expect, it } from 'vitest';
import type { ApiParams } from '../../../../runtime/src/observability/errors.ts';
import { search } from '../../../../runtime/src/observability/tempo/api.ts';
import { DEFAULT_MAX_SCANNED_SPANS } from '../../../../runtime/src/observability/traceql/search.ts';
import {
  INV_A,
  INV_B,
  MS,
  T0,
  TRACE_A,
  TRACE_B,
  TRACE_C,
  TRACE_D,
  restateFixture,
} from '../../../support/observability/memory-span-source.ts';

const S = 1_000_000_000n;
const now = (): bigint => T0 + 60n * S;
const range = { start: String(T0 / S - 60n), end: String(T0 / S + 60n) };

interface TraceJson {
  traceID: string;
  rootServiceName: string;
  rootTraceName?: string;
  startTimeUnixNano: string;
  durationMs?: number;
  spanSet?: SpansetJson;
  spanSets?: SpansetJson[];
}
interface SpansetJson {
  matched: number;
  spans: { spanID: string; name: string; startTimeUnixNano: string; durationNanos: string; attributes?: unknown[] }[];
  attributes?: unknown[];
}
interface SearchJson {
  traces: TraceJson[];
  metrics: Record<string, unknown>;
  warnings?: string[];
}

async function searchBody(params: ApiParams): Promise<SearchJson> {
  const res = await search(restateFixture(), { ...range, ...params }, now);
  expect(res.status).toBe(200);
  return res.body as SearchJson;
}

describe('Tempo /api/search', () => {
  it('answers the derived-field TraceQL query with the invocation’s trace and its matched spans', async () => {
    const body = await searchBody({ q: `{ .restate.invocation.id="${INV_A}" }` });
    expect(body.traces).toHaveLength(1);
    const t = body.traces[0]!;
    expect(t).toMatchObject({
      traceID: TRACE_A,
      rootServiceName: 'Restate',
      rootTraceName: 'ingress Greeter/greet',
      startTimeUnixNano: T0.toString(),
      durationMs: 35,
    });
    expect(t.spanSet).toEqual(t.spanSets![0]);
    const ss = t.spanSets![0]!;
    expect(ss.matched).toBe(4);
    expect(ss.spans).toHaveLength(3); // spss defaults to 3
    expect(ss.spans[0]).toEqual({
      spanID: expect.any(String) as unknown,
      name: 'ingress Greeter/greet',
      startTimeUnixNano: T0.toString(),
      durationNanos: (35n * MS).toString(),
      attributes: [
        { key: 'restate.invocation.id', value: { stringValue: INV_A } },
        { key: 'service.name', value: { stringValue: 'Restate' } },
      ],
    });
    expect(body.metrics).toMatchObject({ inspectedTraces: 1, completedJobs: 1, totalJobs: 1 });
  });

  it('answers Grafana’s default `{}` newest first, honouring limit and spss', async () => {
    const body = await searchBody({ q: '{}', limit: '3', spss: '1' });
    expect(body.traces.map((t) => t.traceID)).toEqual([TRACE_D, TRACE_C, TRACE_B]);
    expect(body.traces.every((t) => t.spanSets![0]!.spans.length === 1)).toBe(true);
    // B's ingress is parented to the caller's span, outside the store: it is still taken as the root.
    expect(body.traces[2]).toMatchObject({ rootServiceName: 'Restate', rootTraceName: 'ingress counter/{key}/add' });
    expect(body.traces[0]).toMatchObject({ rootServiceName: 'greeter-svc', durationMs: 250 });
  });

  it('returns the fields a query used and the ones it selects', async () => {
    const body = await searchBody({ q: '{ status = error && kind = internal } | select(span.restate.deployment.id)' });
    expect(body.traces.map((t) => t.traceID)).toEqual([TRACE_C, TRACE_B]);
    expect(body.traces[1]!.spanSets![0]!.spans[0]!.attributes).toEqual([
      { key: 'status', value: { stringValue: 'error' } },
      { key: 'kind', value: { stringValue: 'internal' } },
      { key: 'restate.deployment.id', value: { stringValue: 'dp_22nGQpCRmau6ypL82KH2TnP' } },
      { key: 'service.name', value: { stringValue: 'Restate' } },
    ]);
    const by = await searchBody({ q: `{ .restate.invocation.id = "${INV_B}" } | by(span.restate.error.code)` });
    expect(by.traces[0]!.spanSets!.map((ss) => ss.attributes)).toEqual([
      undefined,
      [{ key: 'by(span.restate.error.code)', value: { stringValue: 'RT0001' } }],
    ]);
  });

  it('searches legacy tags as substrings, with the invocation-id aliases and Tempo’s special keys', async () => {
    const ids = async (params: ApiParams): Promise<string[]> =>
      (await searchBody(params)).traces.map((t) => t.traceID).sort();
    expect(await ids({ tags: `service.invocation.id=${INV_B}` })).toEqual([TRACE_B]);
    expect(await ids({ tags: `restate.invocation.id=${INV_A.slice(0, 12)}` })).toEqual([TRACE_A]);
    expect(await ids({ tags: 'name="invocation-attempt counter" rpc.service=COUNTER' })).toEqual([TRACE_B]);
    expect(await ids({ tags: 'status.code=error rpc.method=greet' })).toEqual([TRACE_C]);
    expect(await ids({ tags: 'root.service.name=greeter' })).toEqual([TRACE_D]);
    expect(await ids({ tags: 'root.name="ingress Greeter"' })).toEqual([TRACE_C, TRACE_A].sort());
    expect(await ids({ tags: 'http.status_code=200 service.name=greeter-svc' })).toEqual([TRACE_D]);
    expect(await ids({ 'rpc.service': 'counter' })).toEqual([TRACE_B]);
    expect(await ids({})).toHaveLength(4);
    expect((await searchBody({ tags: 'rpc.service=Greeter' })).traces[0]).not.toHaveProperty('spanSets');
  });

  it('filters by trace duration with minDuration and maxDuration (Go durations)', async () => {
    const ids = async (params: ApiParams): Promise<string[]> =>
      (await searchBody(params)).traces.map((t) => t.traceID).sort();
    expect(await ids({ minDuration: '100ms' })).toEqual([TRACE_B, TRACE_D].sort());
    expect(await ids({ q: '{ rootServiceName = "Restate" }', maxDuration: '40ms' })).toEqual([TRACE_C, TRACE_A].sort());
    expect(await ids({ minDuration: '1m' })).toEqual([]);
  });

  it('says so when the span cap cut the scan', async () => {
    const source = restateFixture();
    const [template] = source.spans;
    for (let i = 0; i < DEFAULT_MAX_SCANNED_SPANS; i++) {
      source.add({ ...template!, traceId: i.toString(16).padStart(32, '0'), startNs: T0 + BigInt(i) * 1000n });
    }
    const body = (await search(source, { ...range, q: '{}', limit: '2' }, now)).body as SearchJson;
    expect(body.traces).toHaveLength(2);
    expect(body.warnings).toEqual([
      'the search stopped after scanning 100000 spans: older traces in the range were not searched; narrow the time range or the query',
    ]);
    expect(source.scans[0]!.maxSpans).toBe(100_000);
    expect((await searchBody({ q: '{}' })).warnings).toBeUndefined();
  });

  it('refuses bad requests with 400s naming the problem', async () => {
    const fails = (params: ApiParams) => expect(search(restateFixture(), params, now)).rejects;
    await fails({ q: '{ .a = ', tags: 'a=b' }).toMatchObject({
      status: 400,
      message: expect.stringContaining("can't specify tags and q") as unknown,
    });
    await fails({ q: '{ .a = }' }).toMatchObject({
      status: 400,
      message: 'invalid TraceQL query: parse error at line 1, col 8: syntax error: unexpected }',
    });
    await fails({ q: '{}', limit: '1001' }).toMatchObject({
      status: 400,
      message: 'invalid limit: 1001 exceeds the maximum of 1000',
    });
    await fails({ q: '{}', limit: '0' }).toMatchObject({ status: 400 });
    await fails({ start: '0', end: String(8 * 86400) }).toMatchObject({
      status: 400,
      message: 'range specified by start and end (192h0m0s) exceeds the maximum of 168h0m0s',
    });
    await fails({ start: '100', end: '100' }).toMatchObject({
      message: 'http parameter start must be before end. received start=100 end=100',
    });
    await fails({ minDuration: '5 parsecs' }).toMatchObject({
      message: 'invalid minDuration: time: invalid duration "5 parsecs"',
    });
    await fails({ minDuration: '2s', maxDuration: '1s' }).toMatchObject({ status: 400 });
    await fails({ tags: 'a=1 a=2' }).toMatchObject({ message: 'invalid tags: duplicate key "a"' });
    await fails({ q: '{ .a } | count_over_time()' }).toMatchObject({
      message: expect.stringContaining('is not supported') as unknown,
    });
  });
});
