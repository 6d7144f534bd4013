import { describe, expect, it } from 'vitest';
import { traceQLMatcher } from '../../../../runtime/src/observability/traceql/matcher.ts';
import { parseTraceQL } from '../../../../runtime/src/observability/traceql/parse.ts';
import { type SearchOutcome, searchTraces } from '../../../../runtime/src/observability/traceql/search.ts';
import {
  INV_A,
  INV_B,
  MS,
  type MemorySpanSource,
  T0,
  TRACE_A,
  TRACE_B,
  TRACE_C,
  TRACE_D,
  restateFixture,
} from '../../../support/observability/memory-span-source.ts';

const WINDOW = { startNs: T0, endNs: T0 + 10_000n * MS };

async function run(q: string, source: MemorySpanSource = restateFixture(), maxSpans?: number): Promise<SearchOutcome> {
  return searchTraces(source, traceQLMatcher(parseTraceQL(q)), { ...WINDOW, limit: 20, maxSpans });
}

const ids = (...xs: string[]): string[] => xs.sort();

async function traces(q: string): Promise<string[]> {
  return (await run(q)).hits.map((h) => h.trace.traceId).sort();
}

async function spanNames(q: string): Promise<string[]> {
  const out = await run(q);
  return out.hits.flatMap((h) => h.spansets.flatMap((ss) => ss.spans.map((s) => s.name))).sort();
}

describe('TraceQL search', () => {
  it('finds the invocation of the documented derived-field query, pushing the id down to the store', async () => {
    const source = restateFixture();
    const out = await run(`{ .restate.invocation.id = "${INV_A}" }`, source);
    expect(out.hits.map((h) => h.trace.traceId)).toEqual(ids(TRACE_A));
    expect(out.hits[0]!.spansets[0]!.spans).toHaveLength(4);
    expect(source.scans[0]!.hints).toEqual([{ scope: 'any', key: 'restate.invocation.id', value: INV_A }]);
    // The hit's whole trace is fetched for its root span and duration.
    expect(out.hits[0]!.trace.rootServiceName()).toBe('Restate');
    expect(out.hits[0]!.trace.rootName()).toBe('ingress Greeter/greet');
  });

  it('accepts service.invocation.id and restate.invocation.sid as names of restate.invocation.id', async () => {
    const source = restateFixture();
    expect((await run(`{ span.service.invocation.id = "${INV_B}" }`, source)).hits).toHaveLength(1);
    expect(source.scans[0]!.hints).toEqual([{ scope: 'span', key: 'restate.invocation.id', value: INV_B }]);
    expect(await traces(`{ .restate.invocation.sid = "${INV_B}" }`)).toEqual(ids(TRACE_B));
  });

  it('matches every trace with `{}` and `{ true }`, newest first', async () => {
    const out = await run('{}');
    expect(out.hits.map((h) => h.trace.traceId)).toEqual([TRACE_D, TRACE_C, TRACE_B, TRACE_A]);
    expect(await traces('{ true }')).toHaveLength(4);
    expect(await traces('{ false }')).toEqual([]);
  });

  it('evaluates span intrinsics', async () => {
    expect(await traces('{ status = error }')).toEqual(ids(TRACE_B, TRACE_C));
    expect(await spanNames('{ status = error && name = "invocation-attempt counter/{key}/add" }')).toHaveLength(2);
    expect(await traces('{ kind = server }')).toEqual(ids(TRACE_D));
    expect(await traces('{ kind = internal && status = unset }')).toHaveLength(3);
    expect(await traces('{ statusMessage =~ "RT0001.*" }')).toEqual(ids(TRACE_B, TRACE_C));
    expect(await spanNames('{ duration >= 60ms && name =~ "invocation-attempt.*" }')).toEqual([
      'invocation-attempt counter/{key}/add',
    ]);
    expect(await traces('{ span:duration > 200ms }')).toEqual(ids(TRACE_D));
    expect(await traces(`{ trace:id = "${TRACE_C}" }`)).toEqual(ids(TRACE_C));
    expect(await traces('{ instrumentation:name = "services" }')).toHaveLength(3);
  });

  it('evaluates trace-level intrinsics on whole traces', async () => {
    expect(await traces('{ rootServiceName = "Restate" }')).toEqual(ids(TRACE_A, TRACE_B, TRACE_C));
    // B's ingress span has a parent outside the store: it still counts as the root.
    expect(await traces('{ rootName = "ingress counter/{key}/add" }')).toEqual(ids(TRACE_B));
    expect(await traces('{ traceDuration > 100ms && rootServiceName = "Restate" }')).toEqual(ids(TRACE_B));
    expect(await traces('{ trace:rootService = "greeter-svc" }')).toEqual(ids(TRACE_D));
  });

  it('matches regexes fully anchored, and typed attribute values', async () => {
    expect(await traces('{ name =~ "ingress.*" }')).toEqual(ids(TRACE_A, TRACE_B, TRACE_C));
    expect(await traces('{ name =~ "ingress" }')).toEqual([]);
    expect(await traces('{ name =~ "(?i)INGRESS COUNTER.*" }')).toEqual(ids(TRACE_B));
    expect(await spanNames('{ .rpc.service !~ "Greeter|counter" }')).toEqual([]);
    expect(await traces('{ .rpc.service !~ "Greeter" }')).toEqual(ids(TRACE_B));
    expect(await traces('{ span.http.status_code = 200 && .ratio < 0.75 && .sampled = true }')).toEqual(ids(TRACE_D));
    expect(await traces('{ .http.status_code >= 500 }')).toEqual([]);
    expect(await traces('{ .http.status_code = "200" }')).toEqual([]);
    expect(await traces('{ span."x y" = "spaced" }')).toEqual(ids(TRACE_D));
    expect(await traces('{ resource.service.name = "greeter-svc" }')).toEqual(ids(TRACE_D));
    expect(await traces('{ span.service.name = "greeter-svc" }')).toEqual([]);
    expect(await traces('{ .restate.deployment.service_protocol_version = 6 }')).toHaveLength(3);
  });

  it('needs an attribute to exist for `!=`, and tests existence with nil', async () => {
    expect(await spanNames('{ .restate.error.code != "RT0002" }')).toHaveLength(4);
    expect(await traces('{ .restate.error.code = nil && name =~ "invocation-attempt.*" }')).toEqual(
      ids(TRACE_A, TRACE_B),
    );
    expect(await traces('{ .restate.error.code != nil }')).toEqual(ids(TRACE_B, TRACE_C));
    expect(await traces('{ !(.restate.error.code = "RT0001") && kind = internal }')).toHaveLength(3);
  });

  it('evaluates boolean logic, arithmetic and event and link scopes', async () => {
    expect(await traces(`{ .restate.invocation.id = "${INV_A}" || .restate.invocation.id = "${INV_B}" }`)).toEqual(
      ids(TRACE_A, TRACE_B),
    );
    expect(await traces('{ (status = error || kind = server) && .rpc.service != "counter" }')).toEqual(ids(TRACE_C));
    expect(await traces('{ .http.status_code * 2 + 1 = 401 }')).toEqual(ids(TRACE_D));
    expect(await traces('{ event.restate.journal.command.name = "s1" && .rpc.service = "counter" }')).toEqual(
      ids(TRACE_B),
    );
    expect(await traces('{ event:name = "restate.invocation.lifecycle.new_command" }')).toHaveLength(3);
    expect(await traces(`{ link:traceID = "${TRACE_A}" && link.relation = "follows" }`)).toEqual(ids(TRACE_D));
  });

  it('combines spansets with && and || across a trace', async () => {
    expect(await traces('{ name =~ "ingress.*" } && { status = error }')).toEqual(ids(TRACE_B, TRACE_C));
    expect(await traces('{ kind = server } || { .restate.invocation.result = "failure" }')).toEqual(
      ids(TRACE_C, TRACE_D),
    );
    const both = await run('{ name =~ "ingress.*" } && { status = error }');
    expect(both.hits.find((h) => h.trace.traceId === TRACE_C)!.spansets[0]!.spans).toHaveLength(3);
  });

  it('evaluates structural operators on whole traces', async () => {
    expect(await spanNames('{ name =~ "ingress.*" } >> { status = error }')).toHaveLength(4);
    expect(await spanNames('{ name =~ "ingress.*" } > { }')).toEqual([
      'invocation-start Greeter/greet',
      'invocation-start Greeter/greet',
      'invocation-start counter/{key}/add',
    ]);
    expect(await traces('{ name =~ "invocation-end.*" } ~ { status = error }')).toEqual(ids(TRACE_B, TRACE_C));
    expect(await spanNames('{ status = error } < { }')).toEqual([
      'invocation-start Greeter/greet',
      'invocation-start counter/{key}/add',
    ]);
    expect(await traces('{ status = error } << { name =~ "ingress.*" }')).toEqual(ids(TRACE_B, TRACE_C));
    expect(await traces('{ status = error } !<< { name =~ "ingress.*" }')).toEqual(ids(TRACE_A));
    expect(await spanNames(`{ .restate.invocation.id = "${INV_A}" && name =~ "ingress.*" } &> { }`)).toEqual([
      'ingress Greeter/greet',
      'invocation-start Greeter/greet',
    ]);
  });

  it('runs pipelines: count, avg, select, by and coalesce', async () => {
    expect(await traces('{ name =~ "invocation-attempt.*" } | count() > 2')).toEqual(ids(TRACE_B));
    expect(await traces('{ name =~ "invocation-attempt.*" } | count() = 2')).toEqual(ids(TRACE_C));
    expect(await traces('{ name =~ "invocation-attempt.*" } | avg(duration) >= 40ms')).toEqual(ids(TRACE_B));
    expect(await traces('{ name =~ "invocation-attempt.*" } | max(duration) < 10ms')).toEqual(ids(TRACE_C));
    expect(await traces('{ name =~ "invocation-attempt.*" } | sum(duration) = 140ms')).toEqual(ids(TRACE_B));
    const sel = await run('{ status = error } | select(span.restate.deployment.id)');
    expect(sel.hits[0]!.spansets[0]!.selected.map((f) => f.text)).toEqual(['span.restate.deployment.id']);
    const by = await run('{ .rpc.service != nil } | by(span.rpc.service) | coalesce()');
    expect(by.hits.map((h) => h.spansets.length)).toEqual([1, 1, 1]);
    const grouped = await run('{ } | by(.restate.error.code)');
    const b = grouped.hits.find((h) => h.trace.traceId === TRACE_B)!;
    expect(b.spansets.map((ss) => ss.attributes)).toEqual([
      [],
      [{ key: 'by(.restate.error.code)', value: { type: 'string', value: 'RT0001' } }],
    ]);
  });

  it('pushes down only required equalities', async () => {
    const hintsOf = (q: string) => traceQLMatcher(parseTraceQL(q)).plan.scanHints;
    expect(hintsOf('{ .a = "x" && (span.b = 1 || .c = 2) && resource.d = true }')).toEqual([
      { scope: 'any', key: 'a', value: 'x' },
      { scope: 'resource', key: 'd', value: true },
    ]);
    expect(hintsOf('{ .a = "x" || .b = "y" }')).toEqual([]);
    expect(hintsOf('{ .a != "x" }')).toEqual([]);
    expect(hintsOf('{ parent.a = "x" }')).toEqual([]);
    expect(hintsOf('{ .a = "x" } && { .b = "y" }')).toEqual([]);
    expect(hintsOf('{ .a = "x" } | count() > 1')).toEqual([{ scope: 'any', key: 'a', value: 'x' }]);
    // Whole-trace queries use a hint only to find candidate traces.
    const plan = traceQLMatcher(parseTraceQL('{ .a = "x" } >> { .b = "y" }')).plan;
    expect(plan).toMatchObject({ wholeTrace: true, scanHints: [{ key: 'a' }] });
  });

  it('reports when the span cap cut the scan', async () => {
    const out = await run('{}', restateFixture(), 5);
    expect(out).toMatchObject({ truncated: true, maxSpans: 5, inspectedSpans: expect.any(Number) as number });
    expect((await run('{}')).truncated).toBe(false);
  });
});
