import { describe, expect, it } from 'vitest';
import { ObservabilityQueryError } from '../../../../runtime/src/observability/errors.ts';
import type { MetricExpr } from '../../../../runtime/src/observability/logql/ast.ts';
import { evalMetricQuery, type MetricResult } from '../../../../runtime/src/observability/logql/metrics.ts';
import { parseLogQL } from '../../../../runtime/src/observability/logql/parse.ts';
import { MemoryLogSource } from '../../../support/observability/memory-log-source.ts';

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

function metric(q: string): MetricExpr {
  const e = parseLogQL(q);
  if (e.kind === 'log') throw new Error('not a metric query');
  return e;
}

/** Lines at T0+1s … T0+6s: levels INFO, INFO, ERROR, INFO, WARN, ERROR on node n1 / n2 alternating. */
function source(): MemoryLogSource {
  const s = new MemoryLogSource();
  const levels = ['INFO', 'INFO', 'ERROR', 'INFO', 'WARN', 'ERROR'];
  levels.forEach((level, i) => {
    s.add(
      T0 + BigInt(i + 1) * S,
      { service_name: 'svc', level, node: i % 2 === 0 ? 'n1' : 'n2' },
      `status=${200 + i} took=${i + 1}00ms msg="m${i}"`,
    );
  });
  return s;
}

async function evalAt(q: string, startS: bigint, endS: bigint, stepS = 1n, src = source()): Promise<MetricResult> {
  const options = { detectedLevel: q.includes('detected_level') };
  return evalMetricQuery(
    src,
    metric(q),
    { startNs: T0 + startS * S, endNs: T0 + endS * S, stepNs: stepS * S },
    undefined,
    options,
  );
}

/** The vector at each step as `{labels}=value` strings. */
function table(r: MetricResult): string[][] {
  if (r.value.kind === 'scalar') return r.value.values.map((v) => [String(v)]);
  return r.value.steps.map((v) => v.map((s) => `${JSON.stringify(s.labels)}=${s.value}`).sort());
}

describe('metric query evaluation', () => {
  it('count_over_time over windows (t - range, t] at each step', async () => {
    const r = await evalAt('count_over_time({service_name="svc"}[2s])', 1n, 6n, 1n);
    const totals = table(r).map((rows) => rows.map((x) => Number(x.split('=').pop())).reduce((a, b) => a + b, 0));
    expect(totals).toEqual([1, 2, 2, 2, 2, 2]);
    expect(r.steps).toHaveLength(6);
  });

  it('sum by (level) of rate and of count_over_time', async () => {
    const r = await evalAt('sum by (level) (count_over_time({service_name="svc"}[10s]))', 6n, 6n);
    expect(table(r)).toEqual([['{"level":"ERROR"}=2', '{"level":"INFO"}=3', '{"level":"WARN"}=1']]);
    const rate = await evalAt('sum(rate({service_name="svc"}[10s]))', 6n, 6n);
    expect(table(rate)).toEqual([['{}=0.6']]);
    const without = await evalAt(
      'sum without (level, service_name) (count_over_time({service_name="svc"}[10s]))',
      6n,
      6n,
    );
    expect(table(without)).toEqual([['{"node":"n1"}=3', '{"node":"n2"}=3']]);
  });

  it("answers Grafana's log-volume query (detected_level from the level label)", async () => {
    const r = await evalAt(
      'sum by (level, detected_level) (count_over_time({service_name="svc"} | drop __error__ [1m]))',
      6n,
      6n,
    );
    expect(table(r)).toEqual([
      [
        '{"detected_level":"error","level":"ERROR"}=2',
        '{"detected_level":"info","level":"INFO"}=3',
        '{"detected_level":"warn","level":"WARN"}=1',
      ],
    ]);
  });

  it('vector(1)+vector(1) and scalar arithmetic', async () => {
    expect(table(await evalAt('vector(1)+vector(1)', 0n, 0n))).toEqual([['{}=2']]);
    expect(table(await evalAt('1 + 2 * 3', 0n, 0n))).toEqual([['7']]);
    expect(table(await evalAt('2 ^ 3 ^ 2', 0n, 0n))).toEqual([['512']]);
  });

  it('bytes_over_time, bytes_rate, comparisons and bool', async () => {
    const bytes = await evalAt('sum(bytes_over_time({node="n1"}[10s]))', 6n, 6n);
    const expected = source()
      .records.filter((r) => r.labels['node'] === 'n1')
      .reduce((a, r) => a + Buffer.byteLength(r.line), 0);
    expect(table(bytes)).toEqual([[`{}=${expected}`]]);
    expect(table(await evalAt('sum(bytes_rate({node="n1"}[10s]))', 6n, 6n))).toEqual([[`{}=${expected / 10}`]]);
    const filtered = await evalAt('sum by (level) (count_over_time({service_name="svc"}[10s])) > 1', 6n, 6n);
    expect(table(filtered)).toEqual([['{"level":"ERROR"}=2', '{"level":"INFO"}=3']]);
    const bool = await evalAt('sum by (level) (count_over_time({service_name="svc"}[10s])) > bool 1', 6n, 6n);
    expect(table(bool)).toEqual([['{"level":"ERROR"}=1', '{"level":"INFO"}=1', '{"level":"WARN"}=0']]);
  });

  it('vector / vector matching with on and group_left; and / or / unless', async () => {
    const ratio = await evalAt(
      'sum by (level) (count_over_time({service_name="svc"}[10s])) / ignoring (level) group_left sum(count_over_time({service_name="svc"}[10s]))',
      6n,
      6n,
    );
    expect(table(ratio)).toEqual([
      ['{"level":"ERROR"}=0.3333333333333333', '{"level":"INFO"}=0.5', '{"level":"WARN"}=0.16666666666666666'],
    ]);
    const unless = await evalAt(
      'sum by (level) (count_over_time({service_name="svc"}[10s])) unless sum by (level) (count_over_time({level="INFO"}[10s]))',
      6n,
      6n,
    );
    expect(table(unless)).toEqual([['{"level":"ERROR"}=2', '{"level":"WARN"}=1']]);
  });

  it('topk, avg, count, min, max, sort_desc', async () => {
    const by = 'by (level) (count_over_time({service_name="svc"}[10s]))';
    expect(table(await evalAt(`topk(1, sum ${by})`, 6n, 6n))).toEqual([['{"level":"INFO"}=3']]);
    expect(table(await evalAt(`avg(sum ${by})`, 6n, 6n))).toEqual([['{}=2']]);
    expect(table(await evalAt(`count(sum ${by})`, 6n, 6n))).toEqual([['{}=3']]);
    expect(table(await evalAt(`max(sum ${by})`, 6n, 6n))).toEqual([['{}=3']]);
    expect(table(await evalAt(`min(sum ${by})`, 6n, 6n))).toEqual([['{}=1']]);
    const sorted = await evalAt(`sort_desc(sum ${by})`, 6n, 6n);
    if (sorted.value.kind !== 'vector') throw new Error('vector expected');
    expect(sorted.value.steps[0]!.map((s) => s.value)).toEqual([3, 2, 1]);
  });

  it('unwrapped range aggregations with conversions and grouping', async () => {
    const q = (op: string) => `${op}({service_name="svc"} | logfmt | unwrap duration(took) [10s]) by (node)`;
    expect(table(await evalAt(q('sum_over_time'), 6n, 6n))).toEqual([
      ['{"node":"n1"}=0.9', '{"node":"n2"}=1.2000000000000002'],
    ]);
    expect(table(await evalAt(q('max_over_time'), 6n, 6n))).toEqual([['{"node":"n1"}=0.5', '{"node":"n2"}=0.6']]);
    expect(table(await evalAt(q('last_over_time'), 6n, 6n))).toEqual([['{"node":"n1"}=0.5', '{"node":"n2"}=0.6']]);
    const status = await evalAt(
      'quantile_over_time(0.5, {service_name="svc"} | logfmt | unwrap status [10s]) by (service_name)',
      6n,
      6n,
    );
    expect(table(status)).toEqual([['{"service_name":"svc"}=202.5']]);
  });

  it('a parser error left in a metric query is a pipeline error (400); drop or filter __error__ avoids it', async () => {
    const src = new MemoryLogSource().add(T0 + S, { a: 'b' }, 'not json');
    await expect(evalAt('count_over_time({a="b"} | json [1m])', 1n, 1n, 1n, src)).rejects.toThrow(
      /pipeline error: 'JSONParserErr' for series/,
    );
    await expect(evalAt('count_over_time({a="b"} | json [1m])', 1n, 1n, 1n, src)).rejects.toBeInstanceOf(
      ObservabilityQueryError,
    );
    expect(table(await evalAt('count_over_time({a="b"} | json | __error__="" [1m])', 1n, 1n, 1n, src))).toEqual([[]]);
    const dropped = await evalAt(
      'sum(count_over_time({a="b"} | json | drop __error__, __error_details__ [1m]))',
      1n,
      1n,
      1n,
      src,
    );
    expect(table(dropped)).toEqual([['{}=1']]);
  });

  it('offset shifts the window; label_replace rewrites labels', async () => {
    const r = await evalAt('count_over_time({level="WARN"}[1s] offset 2s)', 7n, 7n);
    expect(table(r)).toEqual([['{"level":"WARN","node":"n1","service_name":"svc"}=1']]);
    const lr = await evalAt(
      'label_replace(sum by (level) (count_over_time({level="WARN"}[10s])), "sev", "$1-x", "level", "(W)ARN")',
      6n,
      6n,
    );
    expect(table(lr)).toEqual([['{"level":"WARN","sev":"W-x"}=1']]);
  });

  it('reads the data of every step in one forward pass over (start - range, end]', async () => {
    const src = source();
    await evalAt('count_over_time({service_name="svc"}[5s])', 3n, 6n, 1n, src);
    expect(src.selections).toHaveLength(1);
    expect(src.selections[0]).toMatchObject({
      direction: 'forward',
      startNs: T0 + 3n * S - 5n * S + 1n,
      endNs: T0 + 6n * S + 1n,
    });
  });
});
