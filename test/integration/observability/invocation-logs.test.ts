import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';

/**
 * A runtime process stores the lifecycle lines of every invocation in the cluster's log store, in Restate's JSON log
 * format and with its stream labels — also across a SIGKILL of the runtime: the lines written before the crash stay,
 * the invocation's later lines follow from the restarted runtime, and nothing is stored twice.
 */
let failures = 0;
const flaky = restate.service({
  name: 'Flaky',
  handlers: {
    run: async (ctx: restate.Context, sleepMs: number) => {
      await ctx.run('first', () => 1);
      if (failures++ === 0) throw new Error('first attempt fails');
      await ctx.sleep(sleepMs);
      return 'done';
    },
  },
});

interface StoredLine {
  line: string;
  labels: Record<string, string>;
}

describe('invocation logs in the log store', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess | undefined;
  let client: pg.Client;
  // An idle stream is closed after 200 ms, so that the handler suspends on its sleep.
  const env = {
    RATCHET_OBSERVABILITY_STORE: 'on',
    // Routine lifecycle lines are debug; the store keeps info and above unless told otherwise.
    RATCHET_OBSERVABILITY_LOG_LEVEL: 'debug',
    RATCHET_NODE_NAME: 'obs-node',
    RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
    RATCHET_CLUSTER_NAME: 'obs',
    RATCHET_INVOKER_INACTIVITY_TIMEOUT: '200ms',
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [flaky], transport: 'h2' });
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

  async function linesOf(id: string): Promise<StoredLine[]> {
    const { rows } = await client.query<StoredLine>(
      `SELECT l.line, s.labels FROM ratchet.log_line l JOIN ratchet.log_stream s ON s.id = l.stream_id
       WHERE l.invocation_id = $1 ORDER BY l.ts_ns, l.seq, l.position`,
      [id],
    );
    return rows;
  }
  /** The invocation of the first test (retried, suspended, resumed, completed). */
  let retried = '';
  const events = (lines: StoredLine[]): string[] =>
    lines.map((l) => (JSON.parse(l.line) as { fields: Record<string, string> }).fields['restate.invocation.event']!);

  it('stores accepted, started, retrying with the error and its stack, suspended, resumed and completed', async () => {
    const res = await fetch(`${runtime!.ingressUrl}/Flaky/run/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '1000',
    });
    const { invocationId: id } = (await res.json()) as { invocationId: string };
    retried = id;
    await waitFor(async () => expect(events(await linesOf(id))).toContain('completed'), 15_000);
    const lines = await linesOf(id);
    expect(events(lines)).toEqual([
      'accepted',
      'started',
      'retrying',
      'started',
      'replayed',
      'suspended',
      'resumed',
      'started',
      'replayed',
      'completed',
    ]);
    const retry = JSON.parse(lines[2]!.line) as { level: string; target: string; fields: Record<string, unknown> };
    expect(retry).toMatchObject({
      level: 'WARN',
      target: 'invocation',
      fields: {
        'restate.invocation.id': id,
        'service.invocation.id': id,
        'restate.invocation.target': 'Flaky/run',
        'rpc.service': 'Flaky',
        'rpc.method': 'run',
        'restate.error.code': 'RT0007',
        'restate.invocation.error.message': expect.stringContaining('first attempt fails') as string,
        'restate.invocation.error.stacktrace': expect.stringContaining('Error: first attempt fails') as string,
      },
    });
    expect(retry.fields['restate.deployment.id']).toMatch(/^dp_/);
    expect(lines[0]!.labels).toEqual({
      service_name: 'Flaky',
      level: 'debug',
      component: 'invocation',
      node: 'obs-node',
      cluster: 'obs',
    });
    // The runtime's own lines are there too, under service_name "ratchet".
    const own = await client.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM ratchet.log_line l JOIN ratchet.log_stream s ON s.id = l.stream_id
       WHERE s.labels->>'service_name' = 'ratchet' AND l.line LIKE '%Ratchet is ready%'`,
    );
    expect(Number(own.rows[0]!.n)).toBe(1);
  }, 30_000);

  it("serves an invocation's lines and trace through the admin API (the console's same-origin view)", async () => {
    expect(retried).not.toBe('');
    const since = new Date(Date.now() - 120_000).toISOString();
    const logs = await fetch(`${runtime!.adminUrl}/invocations/${retried}/logs?since=${since}`);
    expect(logs.status).toBe(200);
    const body = (await logs.json()) as {
      lines: { timestamp: string; labels: Record<string, string>; line: string }[];
    };
    expect(events(body.lines.filter((l) => l.labels.component === 'invocation'))).toEqual(
      events(await linesOf(retried)),
    );
    expect(body.lines[0]!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
    const trace = await fetch(`${runtime!.adminUrl}/invocations/${retried}/trace?since=${since}`);
    expect(trace.status).toBe(200);
    const spans = (await trace.json()) as {
      trace_ids: string[];
      spans: { name: string; status_code: number; status_message: string; node: string | null }[];
    };
    expect(spans.trace_ids).toHaveLength(1);
    const names = spans.spans.map((s) => s.name);
    expect(names).toEqual(
      expect.arrayContaining(['ingress Flaky/run', 'invocation-start Flaky/run', 'invocation-end Flaky/run']),
    );
    expect(names.filter((n) => n === 'invocation-attempt Flaky/run').length).toBeGreaterThanOrEqual(3);
    expect(spans.spans.find((s) => s.status_code === 2)?.status_message).toContain('first attempt fails');
    expect(spans.spans.every((s) => s.node === 'obs/obs-node')).toBe(true);

    // Refusals: an id that is none, a time that is none, a limit out of range.
    const badId = await fetch(`${runtime!.adminUrl}/invocations/inv_nope/logs`);
    expect(badId.status).toBe(400);
    expect(((await badId.json()) as { message: string }).message).toContain('invocation_id');
    const badSince = await fetch(`${runtime!.adminUrl}/invocations/${retried}/trace?since=yesterday`);
    expect(badSince.status).toBe(400);
    // Query strings are refused as restate refuses them: in plain text.
    expect(await badSince.text()).toMatch(/^Failed to deserialize query string: since: /);
    const badLimit = await fetch(`${runtime!.adminUrl}/invocations/${retried}/logs?limit=0`);
    expect(badLimit.status).toBe(400);
    expect(await badLimit.text()).toContain('limit: expected an integer from 1 to 5000, got `0`');
    // A limit below the count says so.
    const one = (await (await fetch(`${runtime!.adminUrl}/invocations/${retried}/logs?limit=1`)).json()) as {
      lines: unknown[];
      limited: boolean;
    };
    expect(one.lines).toHaveLength(1);
    expect(one.limited).toBe(true);
  }, 30_000);

  it('keeps the lines written before a SIGKILL, adds those of the restarted runtime, and stores none twice', async () => {
    failures = 1; // no failing attempt this time
    const res = await fetch(`${runtime!.ingressUrl}/Flaky/run/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '4000',
    });
    const { invocationId: id } = (await res.json()) as { invocationId: string };
    // Suspended on its sleep, and the writer has flushed that line: the worst moment to crash is any moment now.
    await waitFor(async () => expect(events(await linesOf(id))).toContain('suspended'), 10_000);
    const ports = runtime!.ports;
    await runtime!.kill('SIGKILL');
    runtime = await startRuntimeProcess({ databaseUrl: db.url, env, ports });
    await waitFor(async () => expect(events(await linesOf(id))).toContain('completed'), 20_000);
    const got = events(await linesOf(id));
    expect(got.slice(0, 3)).toEqual(['accepted', 'started', 'suspended']);
    expect(got.filter((e) => e === 'accepted')).toHaveLength(1);
    expect(got.filter((e) => e === 'completed')).toHaveLength(1);
    expect(got.at(-1)).toBe('completed');
  }, 45_000);
  it('answers Loki queries on the observability listener as logcli and Grafana send them', async () => {
    failures = 0;
    const res = await fetch(`${runtime!.ingressUrl}/Flaky/run/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '0',
    });
    const { invocationId: id } = (await res.json()) as { invocationId: string };
    await waitFor(async () => expect(events(await linesOf(id))).toContain('completed'), 15_000);
    const loki = async (path: string, params: Record<string, string>): Promise<Response> =>
      fetch(`${runtime!.observabilityUrl}/loki/api/v1/${path}?${new URLSearchParams(params).toString()}`, {
        headers: { 'x-scope-orgid': 'ignored' },
      });
    type Streams = {
      status: string;
      data: { resultType: string; result: { stream: Record<string, string>; values: [string, string][] }[] };
    };

    // The derived-field recipe: a line filter on the id.
    const byLine = (await (
      await loki('query_range', { query: `{service_name="Flaky"} |= "${id}"`, limit: '100' })
    ).json()) as Streams;
    expect(byLine.status).toBe('success');
    expect(byLine.data.resultType).toBe('streams');
    const lines = byLine.data.result.flatMap((r) =>
      r.values.map(([, l]) => JSON.parse(l) as { fields: Record<string, string> }),
    );
    expect(lines.map((l) => l.fields['restate.invocation.event'])).toContain('retrying');
    expect(byLine.data.result[0]!.stream).toMatchObject({ service_name: 'Flaky', node: 'obs-node', cluster: 'obs' });

    // `| json` flattens Restate's fields into labels that filter.
    const byLabel = (await (
      await loki('query_range', {
        query: `{component="invocation"} | json | fields_restate_invocation_id="${id}" | fields_restate_error_code="RT0007"`,
      })
    ).json()) as Streams;
    expect(byLabel.data.result.flatMap((r) => r.values)).toHaveLength(1);

    // The README's recipes with Ratchet's labels: the starter query (its DEBUG lines filtered out, each line rendered as
    // its fields), and trace → logs with the span's invocation id.
    const starter = (await (
      await loki('query_range', {
        query: '{cluster="obs"} != `DEBUG` | json fields | line_format `{{ .fields }}`',
        limit: '1000',
      })
    ).json()) as Streams;
    const rendered = starter.data.result.flatMap((r) => r.values.map(([, l]) => l));
    expect(rendered.length).toBeGreaterThan(0);
    expect(rendered.some((l) => l.includes(id) && l.includes('RT0007'))).toBe(true);
    expect(rendered.every((l) => !l.startsWith('{"timestamp"'))).toBe(true);
    const traceToLogs = (await (
      await loki('query_range', { query: `{cluster="obs"} |= "${id}"`, limit: '1000' })
    ).json()) as Streams;
    expect(traceToLogs.data.result.flatMap((r) => r.values).length).toBeGreaterThanOrEqual(4);

    // Labels, values, Grafana's health check, a bad query.
    expect(((await (await loki('labels', {})).json()) as { data: string[] }).data).toEqual(
      expect.arrayContaining(['cluster', 'component', 'level', 'node', 'service_name']),
    );
    expect(((await (await loki('label/service_name/values', {})).json()) as { data: string[] }).data).toEqual(
      expect.arrayContaining(['Flaky', 'ratchet']),
    );
    const health = (await (await loki('query', { query: 'vector(1)+vector(1)' })).json()) as {
      data: { result: { value: [number, string] }[] };
    };
    expect(health.data.result[0]!.value[1]).toBe('2');
    const bad = await loki('query_range', { query: '{service_name="Flaky"' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/parse error at line 1, col \d+/);
    expect((await fetch(`${runtime!.observabilityUrl}/ready`)).status).toBe(200);
  }, 30_000);
});
