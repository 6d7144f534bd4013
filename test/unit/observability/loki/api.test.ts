import { describe, expect, it } from 'vitest';
import {
  ObservabilityQueryError,
  type ApiParams,
  type ApiResponse,
} from '../../../../runtime/src/observability/errors.ts';
import {
  buildInfo,
  DEFAULT_LOKI_LIMITS,
  indexStats,
  indexVolume,
  indexVolumeRange,
  labels,
  labelValues,
  query,
  queryRange,
  series,
} from '../../../../runtime/src/observability/loki/api.ts';
import { MemoryLogSource } from '../../../support/observability/memory-log-source.ts';

const S = 1_000_000_000n;
const NOW = 1_700_000_000n * S;
const now = () => NOW;

const INV = 'inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW';

function restateLine(level: string, message: string, invocationId?: string): string {
  return JSON.stringify({
    timestamp: '2023-11-14T22:00:00Z',
    level,
    fields: { message, ...(invocationId === undefined ? {} : { 'restate.invocation.id': invocationId }) },
    target: 'restate_invoker',
  });
}

/** Six lines in the last 10 minutes, Restate's format, labelled as a K8s agent would and as Ratchet does. */
function source(): MemoryLogSource {
  const s = new MemoryLogSource();
  const k8s = { kubernetes_container_name: 'restate', namespace: 'prod' };
  s.add(NOW - 600n * S, { ...k8s, level: 'DEBUG' }, restateLine('DEBUG', 'polling'));
  s.add(NOW - 500n * S, { ...k8s, level: 'INFO' }, restateLine('INFO', 'Invocation started', INV));
  s.add(NOW - 400n * S, { ...k8s, level: 'INFO' }, restateLine('INFO', 'Invocation completed', INV));
  s.add(NOW - 300n * S, { ...k8s, level: 'ERROR' }, restateLine('ERROR', 'boom', 'inv_other'));
  s.add(NOW - 200n * S, { service_name: 'ratchet', level: 'INFO', node: 'n1' }, restateLine('INFO', 'ready'));
  s.add(NOW - 100n * S, { service_name: 'ratchet', level: 'WARN', node: 'n2' }, restateLine('WARN', 'slow'));
  return s;
}

interface Body {
  status: string;
  data: { resultType: string; result: unknown; stats: unknown };
  warnings?: string[];
}

function body(r: ApiResponse): Body {
  expect(r.status).toBe(200);
  return r.body as Body;
}

async function rejects(p: Promise<unknown>, message: string | RegExp): Promise<void> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ObservabilityQueryError);
  expect((err as ObservabilityQueryError).status).toBe(400);
  if (typeof message === 'string') expect((err as Error).message).toBe(message);
  else expect((err as Error).message).toMatch(message);
}

describe('Loki API: query (instant)', () => {
  it("answers Grafana's health check vector(1)+vector(1) with a vector of value 2", async () => {
    const b = body(await query(source(), { query: 'vector(1)+vector(1)' }, now));
    expect(b).toEqual({
      status: 'success',
      data: { resultType: 'vector', result: [{ metric: {}, value: [1_700_000_000, '2'] }], stats: {} },
    });
  });

  it('answers at `time`, and scalars as resultType scalar', async () => {
    const b = body(await query(source(), { query: '1 + 1', time: '1700000100.5' }, now));
    expect(b.data).toEqual({ resultType: 'scalar', result: [1_700_000_100.5, '2'], stats: {} });
  });

  it('evaluates an instant metric query over (time - range, time]', async () => {
    const b = body(await query(source(), { query: 'sum by (level) (count_over_time({namespace="prod"}[450s]))' }, now));
    expect(b.data.result).toEqual([
      { metric: { level: 'INFO' }, value: [1_700_000_000, '1'] },
      { metric: { level: 'ERROR' }, value: [1_700_000_000, '1'] },
    ]);
  });

  it('refuses log queries as current Loki does', async () => {
    await rejects(
      query(source(), { query: '{namespace="prod"}' }, now),
      'log queries are not supported as an instant query type, please change your query to a range query type',
    );
  });
});

describe('Loki API: query_range', () => {
  it('answers the documented recipe as logcli sends it (streams, newest first)', async () => {
    const params: ApiParams = {
      query: '{kubernetes_container_name="restate"} != `DEBUG` | json fields | line_format `{{.fields}}`',
      limit: '30',
      start: String(NOW - 3600n * S),
      end: String(NOW),
      direction: 'BACKWARD',
    };
    const b = body(await queryRange(source(), params, now));
    expect(b.data.resultType).toBe('streams');
    expect(b.data.stats).toEqual({});
    const result = b.data.result as { stream: Record<string, string>; values: [string, string][] }[];
    const all = result.flatMap((s) => s.values).sort(([a], [b2]) => (BigInt(b2) > BigInt(a) ? 1 : -1));
    expect(all.map(([, line]) => (JSON.parse(line) as { message: string }).message)).toEqual([
      'boom',
      'Invocation completed',
      'Invocation started',
    ]);
    expect(result[0]!.stream).toHaveProperty('fields');
    expect(result.every((s) => s.values.every(([ts]) => /^\d{19}$/.test(ts)))).toBe(true);
  });

  it('defaults: last hour, limit 100, backward', async () => {
    const b = body(await queryRange(source(), { query: '{service_name="ratchet"}' }, now));
    const values = (b.data.result as { values: [string, string][] }[]).flatMap((s) => s.values);
    expect(values.map(([ts]) => ts).sort()).toEqual([String(NOW - 200n * S), String(NOW - 100n * S)]);
  });

  it('answers the derived-field and trace-to-logs queries Grafana sends', async () => {
    const byFilter = body(
      await queryRange(source(), { query: `{kubernetes_container_name="restate"} |= "${INV}"` }, now),
    );
    expect((byFilter.data.result as { values: unknown[] }[]).flatMap((s) => s.values)).toHaveLength(2);
    const byLabel = body(
      await queryRange(
        source(),
        { query: `{kubernetes_container_name="restate"} | json | fields_restate_invocation_id="${INV}"` },
        now,
      ),
    );
    const streams = byLabel.data.result as { stream: Record<string, string>; values: unknown[] }[];
    expect(streams.flatMap((s) => s.values)).toHaveLength(2);
    expect(streams[0]!.stream['fields_restate_invocation_id']).toBe(INV);
  });

  it("answers Grafana Explore's log-volume query with a matrix", async () => {
    const params: ApiParams = {
      query:
        'sum by (level, detected_level) (count_over_time({kubernetes_container_name="restate"} | drop __error__ [1m]))',
      start: String(NOW - 3600n * S),
      end: String(NOW),
      step: '60000ms',
    };
    const b = body(await queryRange(source(), params, now));
    expect(b.data.resultType).toBe('matrix');
    const result = b.data.result as { metric: Record<string, string>; values: [number, string][] }[];
    expect(result.map((r) => r.metric)).toEqual([
      { detected_level: 'debug', level: 'DEBUG' },
      { detected_level: 'error', level: 'ERROR' },
      { detected_level: 'info', level: 'INFO' },
    ]);
    // Steps every 60 s from start; each counts the lines of (t - 1m, t]: the INFO lines at now-500s and now-400s.
    expect(result[2]!.values).toEqual([
      [1_699_999_520, '1'],
      [1_699_999_640, '1'],
    ]);
    expect(result[2]!.values.every(([t, v]) => typeof t === 'number' && typeof v === 'string')).toBe(true);
  });

  it('caps limit, time range and resolution with Loki messages', async () => {
    const q = '{service_name="ratchet"}';
    await rejects(
      queryRange(source(), { query: q, limit: '5001' }, now),
      'max entries limit per query exceeded, limit > max_entries_limit_per_query (5001 > 5000)',
    );
    await rejects(
      queryRange(source(), { query: q, since: '744h', step: '1h' }, now),
      'the query time range exceeds the limit (query length: 744h0m0s, limit: 721h0m0s)',
    );
    await rejects(
      queryRange(source(), { query: 'count_over_time({service_name="ratchet"}[1m])', since: '24h', step: '1s' }, now),
      'exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)',
    );
    await rejects(
      queryRange(source(), { query: q, start: String(NOW), end: String(NOW - S) }, now),
      'end timestamp must not be before start time',
    );
    await rejects(
      queryRange(source(), { query: q, step: '0' }, now),
      'zero or negative query resolution step widths are not accepted. Try a positive integer',
    );
    await rejects(queryRange(source(), { query: '{service_name="ratchet"' }, now), /^parse error at line 1, col 24/);
  });

  it('pages with later filters and warns when the scan cap stops it', async () => {
    const s = new MemoryLogSource();
    for (let i = 0; i < 3000; i++) s.add(NOW - 3000n * S + BigInt(i) * S, { app: 'x' }, `{"n":${i}}`);
    const limits = { ...DEFAULT_LOKI_LIMITS, scan: { pageSize: 200, maxScan: 1000 } };
    const capped = body(await queryRange(s, { query: '{app="x"} | json | n="5"', since: '1h' }, now, limits));
    expect(capped.data.result).toEqual([]);
    expect(capped.warnings?.[0]).toMatch(/maximum of 1000 log lines/);
    const found = body(await queryRange(s, { query: '{app="x"} | json | n=~"2999|5"', since: '1h' }, now));
    expect((found.data.result as { values: unknown[] }[]).flatMap((r) => r.values)).toHaveLength(2);
    expect(found.warnings).toBeUndefined();
  });
});

describe('Loki API: labels, series, index, buildinfo', () => {
  it('labels and label values, optionally narrowed by a selector', async () => {
    expect(body(await labels(source(), {}, now)).data).toEqual([
      'kubernetes_container_name',
      'level',
      'namespace',
      'node',
      'service_name',
    ]);
    expect(body(await labels(source(), { query: '{service_name="ratchet"}' }, now)).data).toEqual([
      'level',
      'node',
      'service_name',
    ]);
    expect(body(await labelValues(source(), 'level', {}, now)).data).toEqual(['DEBUG', 'ERROR', 'INFO', 'WARN']);
    expect(body(await labelValues(source(), 'level', { query: '{node=~"n.*"}' }, now)).data).toEqual(['INFO', 'WARN']);
    expect(body(await labels(source(), { start: String(NOW - 150n * S) }, now)).data).toEqual([
      'level',
      'node',
      'service_name',
    ]);
  });

  it('series with repeated match[]; at least one is required', async () => {
    const b = body(await series(source(), { 'match[]': ['{service_name="ratchet"}', '{level="ERROR"}'] }, now));
    expect(b.data).toEqual([
      { kubernetes_container_name: 'restate', level: 'ERROR', namespace: 'prod' },
      { level: 'INFO', node: 'n1', service_name: 'ratchet' },
      { level: 'WARN', node: 'n2', service_name: 'ratchet' },
    ]);
    await rejects(series(source(), {}, now), '0 matcher groups supplied');
  });

  it('index/stats counts streams, entries and bytes of the selector over the range (not wrapped)', async () => {
    const r = await indexStats(source(), { query: '{namespace="prod"}' }, now);
    const bytes = source()
      .records.filter((x) => x.labels['namespace'] === 'prod')
      .reduce((a, x) => a + Buffer.byteLength(x.line), 0);
    expect(r).toEqual({ status: 200, body: { streams: 3, chunks: 3, entries: 4, bytes } });
  });

  it('index/volume aggregates bytes by the selector labels or targetLabels; volume_range per step', async () => {
    const v = body(await indexVolume(source(), { query: '{level=~".+"}' }, now));
    expect(v.data.resultType).toBe('vector');
    const result = v.data.result as { metric: Record<string, string>; value: [number, string] }[];
    expect(result.map((r) => r.metric)).toEqual([
      { level: 'INFO' },
      { level: 'ERROR' },
      { level: 'DEBUG' },
      { level: 'WARN' },
    ]);
    expect(result[0]!.value[0]).toBe(1_700_000_000);
    const target = body(
      await indexVolume(source(), { query: '{level=~".+"}', targetLabels: 'service_name', limit: '5' }, now),
    );
    expect((target.data.result as { metric: unknown }[]).map((r) => r.metric)).toEqual([{ service_name: 'ratchet' }]);
    const byLabels = body(
      await indexVolume(source(), { query: '{service_name="ratchet"}', aggregateBy: 'labels' }, now),
    );
    expect(
      (byLabels.data.result as { metric: Record<string, string> }[]).map((r) => Object.keys(r.metric)[0]).sort(),
    ).toEqual(['level', 'node', 'service_name']);
    const range = body(await indexVolumeRange(source(), { query: '{service_name="ratchet"}', step: '100' }, now));
    expect(range.data.resultType).toBe('matrix');
    const series0 = (range.data.result as { values: [number, string][] }[])[0]!;
    expect(series0.values.map(([t]) => t)).toEqual([1_699_999_800, 1_699_999_900]);
  });

  it('buildinfo reports a Loki 2.9 version', () => {
    expect(buildInfo().body).toMatchObject({ version: '2.9.10', branch: 'HEAD' });
    expect(Object.keys(buildInfo().body as object).sort()).toEqual([
      'branch',
      'buildDate',
      'buildUser',
      'goVersion',
      'revision',
      'version',
    ]);
  });
});
