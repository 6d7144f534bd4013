import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';

/**
 * The spans of an invocation in the cluster's store, in Restate 1.7's vocabulary: one trace parented to the client's
 * `traceparent` (`ingress` → `invocation-start` → an `invocation-attempt` per attempt, the failed one with its error,
 * and `invocation-end`), its context passed to the service; a call from a handler starts a trace of its own linked
 * to the caller's; and a SIGKILL of the runtime mid-invocation leaves one readable trace.
 */
let failures = 0;
const seenTraceparents: string[] = [];
const traced = restate.service({
  name: 'Traced',
  handlers: {
    run: async (ctx: restate.Context, sleepMs: number) => {
      const tp = ctx.request().attemptHeaders.get('traceparent');
      if (typeof tp === 'string') seenTraceparents.push(tp);
      await ctx.run('first', () => 1);
      if (failures++ === 0) throw new Error('first attempt fails');
      if (sleepMs > 0) await ctx.sleep(sleepMs);
      return 'done';
    },
    caller: async (ctx: restate.Context): Promise<string> => {
      const out = await ctx.genericCall({ service: 'Traced', method: 'run', parameter: new TextEncoder().encode('0') });
      return new TextDecoder().decode(out);
    },
  },
});

interface SpanRow {
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  status_code: number;
  status_message: string;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  resource: Record<string, unknown>;
}

describe('invocation traces in the span store', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  let client: pg.Client;
  const env = {
    RATCHET_OBSERVABILITY_STORE: 'on',
    RATCHET_NODE_NAME: 'trace-node',
    RATCHET_CLUSTER_NAME: 'traces',
    RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
    RATCHET_INVOKER_INACTIVITY_TIMEOUT: '200ms',
  };
  const clientTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const clientSpan = '00f067aa0ba902b7';

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [traced], transport: 'h2' });
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env });
    await registerEndpoint(runtime, endpoint);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  async function spans(where: string, value: string): Promise<SpanRow[]> {
    const { rows } = await client.query<SpanRow>(
      `SELECT trace_id, span_id, parent_span_id, name, status_code, status_message, attributes, links, resource
       FROM ratchet.span WHERE ${where} = $1 ORDER BY start_ns, name`,
      [value],
    );
    return rows;
  }

  it('parents the invocation to the client traceparent, with one span per attempt and the failed one’s error', async () => {
    failures = 0;
    seenTraceparents.length = 0;
    const res = await fetch(`${runtime!.ingressUrl}/Traced/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${clientTrace}-${clientSpan}-01` },
      body: '0',
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-restate-id')!;
    await waitFor(async () =>
      expect((await spans('trace_id', clientTrace)).map((s) => s.name)).toContain('ingress Traced/run'),
    );
    const all = await spans('trace_id', clientTrace);
    const byName = (n: string): SpanRow[] => all.filter((s) => s.name === n);
    expect(all.map((s) => s.name).sort()).toEqual([
      'ingress Traced/run',
      'invocation-attempt Traced/run',
      'invocation-attempt Traced/run',
      'invocation-end Traced/run',
      'invocation-start Traced/run',
    ]);
    const ingress = byName('ingress Traced/run')[0]!;
    const start = byName('invocation-start Traced/run')[0]!;
    expect(ingress.parent_span_id).toBe(clientSpan);
    expect(start.parent_span_id).toBe(ingress.span_id);
    for (const s of [...byName('invocation-attempt Traced/run'), ...byName('invocation-end Traced/run')]) {
      expect(s.parent_span_id).toBe(start.span_id);
    }
    for (const s of all.filter((x) => x !== ingress)) {
      expect(s.attributes).toMatchObject({
        'restate.invocation.id': id,
        'restate.invocation.target': 'Traced/run',
        'rpc.service': 'Traced',
        'rpc.method': 'run',
      });
    }
    expect(ingress.attributes).toMatchObject({ 'restate.invocation.id': id, 'http.response.status_code': 200 });
    const [failed, ok] = byName('invocation-attempt Traced/run');
    expect(failed).toMatchObject({ status_code: 2, attributes: { 'restate.error.code': 'RT0007' } });
    expect(failed!.status_message).toContain('first attempt fails');
    expect(failed!.attributes['restate.deployment.id']).toMatch(/^dp_/);
    expect(ok).toMatchObject({ status_code: 0, attributes: { 'restate.invocation.attempt': 1 } });
    expect(byName('invocation-end Traced/run')[0]!.attributes).toMatchObject({
      'restate.invocation.result': 'success',
    });
    expect(ingress.resource).toMatchObject({ 'service.name': 'Ratchet', 'service.instance.id': 'traces/trace-node' });
    // SQL introspection names the trace.
    const q = await fetch(`${runtime!.adminUrl}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: `SELECT trace_id FROM sys_invocation WHERE id = '${id}'` }),
    });
    expect(((await q.json()) as { rows: { trace_id: string }[] }).rows).toEqual([{ trace_id: clientTrace }]);
    // The SDK was handed the invocation's context: its spans join the same trace.
    expect(seenTraceparents.length).toBeGreaterThanOrEqual(2);
    for (const tp of seenTraceparents) expect(tp).toBe(`00-${clientTrace}-${start.span_id}-01`);
  }, 30_000);

  it('starts a trace of its own for a callee, linked to its caller’s', async () => {
    failures = 1;
    const res = await fetch(`${runtime!.ingressUrl}/Traced/caller`, { method: 'POST' });
    expect(res.status).toBe(200);
    const callerId = res.headers.get('x-restate-id')!;
    const callerStart = await waitFor(async () => {
      const found = (await spans("attributes->>'restate.invocation.id'", callerId)).find((s) =>
        s.name.startsWith('invocation-start'),
      );
      expect(found).toBeDefined();
      return found!;
    });
    const calleeStart = await waitFor(async () => {
      const found = (await spans('name', 'invocation-start Traced/run')).find((s) =>
        s.links.some((l) => l.spanId === callerStart.span_id),
      );
      expect(found).toBeDefined();
      return found!;
    });
    expect(calleeStart.trace_id).not.toBe(callerStart.trace_id);
    expect(calleeStart.parent_span_id).toBe('');
    expect(calleeStart.links).toEqual([
      expect.objectContaining({ traceId: callerStart.trace_id, spanId: callerStart.span_id }),
    ]);
  }, 30_000);

  it('leaves one readable trace when the runtime is SIGKILLed mid-invocation', async () => {
    failures = 1;
    const res = await fetch(`${runtime!.ingressUrl}/Traced/run/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '3000',
    });
    const { invocationId: id } = (await res.json()) as { invocationId: string };
    // Its first attempt suspended on the sleep (its span ended and was written): crash now.
    await waitFor(async () =>
      expect((await spans("attributes->>'restate.invocation.id'", id)).map((s) => s.name)).toContain(
        'invocation-attempt Traced/run',
      ),
    );
    const ports = runtime!.ports;
    await runtime!.kill('SIGKILL');
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports });
    await waitFor(
      async () =>
        expect((await spans("attributes->>'restate.invocation.id'", id)).map((s) => s.name)).toContain(
          'invocation-end Traced/run',
        ),
      20_000,
    );
    const all = await spans("attributes->>'restate.invocation.id'", id);
    expect(new Set(all.map((s) => s.trace_id)).size).toBe(1);
    const ingress = all.filter((s) => s.name === 'ingress Traced/run');
    const start = all.filter((s) => s.name === 'invocation-start Traced/run');
    expect([ingress.length, start.length]).toEqual([1, 1]);
    expect(start[0]!.parent_span_id).toBe(ingress[0]!.span_id);
    // Attempts of both runtimes, before and after the crash, and the end: all under the one invocation-start.
    const rest = all.filter((x) => x !== start[0] && x !== ingress[0]);
    expect(rest.filter((s) => s.name === 'invocation-attempt Traced/run').length).toBeGreaterThanOrEqual(2);
    for (const s of rest) expect(s.parent_span_id).toBe(start[0]!.span_id);
    expect(all.filter((s) => s.name === 'invocation-end Traced/run')).toHaveLength(1);
  }, 45_000);
  it('answers Tempo queries for an invocation: by trace id, by tags and by TraceQL, as Grafana sends them', async () => {
    failures = 0;
    const res = await fetch(`${runtime!.ingressUrl}/Traced/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '0',
    });
    const id = res.headers.get('x-restate-id')!;
    await waitFor(async () =>
      expect((await spans("attributes->>'restate.invocation.id'", id)).map((s) => s.name)).toContain(
        'invocation-end Traced/run',
      ),
    );
    const traceId = (await spans("attributes->>'restate.invocation.id'", id))[0]!.trace_id;
    const tempo = (path: string, init?: RequestInit): Promise<Response> =>
      fetch(`${runtime!.observabilityUrl}${path}`, init);
    const start = Math.floor(Date.now() / 1000) - 600;
    const end = Math.floor(Date.now() / 1000) + 60;

    const trace = (await (await tempo(`/api/traces/${traceId}`)).json()) as {
      batches: { scopeSpans: { spans: { name: string }[] }[] }[];
    };
    const names = trace.batches.flatMap((b) => b.scopeSpans.flatMap((ss) => ss.spans.map((x) => x.name)));
    expect(names).toEqual(expect.arrayContaining(['invocation-start Traced/run', 'invocation-end Traced/run']));
    const proto = await tempo(`/api/traces/${traceId}`, { headers: { accept: 'application/protobuf' } });
    expect(proto.headers.get('content-type')).toContain('application/protobuf');
    expect(Buffer.from(await proto.arrayBuffer()).includes(Buffer.from(id))).toBe(true);

    type Found = { traces: { traceID: string }[] };
    const byTags = (await (
      await tempo(
        `/api/search?${new URLSearchParams({ tags: `service.invocation.id=${id}`, start: `${start}`, end: `${end}` }).toString()}`,
      )
    ).json()) as Found;
    expect(byTags.traces.map((t) => t.traceID.padStart(32, '0'))).toEqual([traceId]);
    const byTraceQL = (await (
      await tempo(
        `/api/search?${new URLSearchParams({ q: `{ .restate.invocation.id = "${id}" }`, start: `${start}`, end: `${end}` }).toString()}`,
      )
    ).json()) as Found;
    expect(byTraceQL.traces.map((t) => t.traceID.padStart(32, '0'))).toEqual([traceId]);
    const bad = await tempo(`/api/search?${new URLSearchParams({ q: '{ .a = ' }).toString()}`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/parse error at line 1, col \d+/);
    expect(await (await tempo('/api/echo')).text()).toBe('echo');
    expect((await tempo(`/api/traces/${'f'.repeat(32)}`)).status).toBe(404);
  }, 30_000);
});
