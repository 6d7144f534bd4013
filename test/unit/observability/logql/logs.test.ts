import { describe, expect, it } from 'vitest';
import type { LogQuery } from '../../../../runtime/src/observability/logql/ast.ts';
import { evalLogQuery, pushdownFilters } from '../../../../runtime/src/observability/logql/logs.ts';
import { parseLogQL } from '../../../../runtime/src/observability/logql/parse.ts';
import { MemoryLogSource } from '../../../support/observability/memory-log-source.ts';

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

function logQuery(q: string): LogQuery {
  const e = parseLogQL(q);
  if (e.kind !== 'log') throw new Error('not a log query');
  return e;
}

/** `n` records one second apart from T0, alternating two streams; every 100th line mentions inv_target. */
function source(n: number): MemoryLogSource {
  const s = new MemoryLogSource();
  for (let i = 0; i < n; i++) {
    const inv = i % 100 === 0 ? 'inv_target' : `inv_${i}`;
    s.add(
      T0 + BigInt(i) * S,
      { service_name: 'svc', node: i % 2 === 0 ? 'n1' : 'n2' },
      JSON.stringify({ i, fields: { 'restate.invocation.id': inv } }),
    );
  }
  return s;
}

describe('log query evaluation', () => {
  it('pushes the stream matchers and the leading line filters to the store, not later ones', () => {
    const q = logQuery('{service_name="svc"} |= "a" != `b` |~ "c" |= "x" or "y" |> "<_>" | json |= "d"');
    expect(pushdownFilters(q)).toEqual([
      { op: '|=', value: 'a' },
      { op: '!=', value: 'b' },
      { op: '|~', value: 'c' },
    ]);
  });

  it('returns the newest entries first for backward, grouped into streams by their final labels', async () => {
    const src = source(10);
    const r = await evalLogQuery(src, logQuery('{service_name="svc"}'), {
      startNs: T0,
      endNs: T0 + 10n * S,
      direction: 'backward',
      limit: 3,
    });
    expect(r.streams).toEqual([
      {
        stream: { node: 'n1', service_name: 'svc' },
        values: [[(T0 + 8n * S).toString(), JSON.stringify({ i: 8, fields: { 'restate.invocation.id': 'inv_8' } })]],
      },
      {
        stream: { node: 'n2', service_name: 'svc' },
        values: [
          [(T0 + 9n * S).toString(), JSON.stringify({ i: 9, fields: { 'restate.invocation.id': 'inv_9' } })],
          [(T0 + 7n * S).toString(), JSON.stringify({ i: 7, fields: { 'restate.invocation.id': 'inv_7' } })],
        ],
      },
    ]);
    expect(src.selections[0]).toMatchObject({ direction: 'backward', startNs: T0, endNs: T0 + 10n * S });
  });

  it('treats end as exclusive and returns the oldest first for forward', async () => {
    const r = await evalLogQuery(source(10), logQuery('{node="n1"}'), {
      startNs: T0 + 2n * S,
      endNs: T0 + 6n * S,
      direction: 'forward',
      limit: 100,
    });
    expect(r.streams[0]!.values.map(([ts]) => (BigInt(ts) - T0) / S)).toEqual([2n, 4n]);
  });

  it('pages through many records when a later stage filters most of them', async () => {
    const src = source(20_000);
    src.applyLineFilters = false;
    const q = logQuery('{service_name="svc"} | json | fields_restate_invocation_id="inv_target"');
    const r = await evalLogQuery(
      src,
      q,
      { startNs: T0, endNs: T0 + 20_000n * S, direction: 'backward', limit: 150 },
      { pageSize: 1000, maxScan: 200_000 },
    );
    const values = r.streams.flatMap((s) => s.values.map(([ts]) => Number((BigInt(ts) - T0) / S)));
    expect(values).toHaveLength(150);
    expect(values.sort((a, b) => b - a).slice(0, 3)).toEqual([19_900, 19_800, 19_700]);
    expect(src.selections.length).toBeGreaterThan(10);
    expect(r.warnings).toEqual([]);
    // Each page moved the end to the oldest timestamp seen (plus one ns, the boundary's records skipped).
    expect(src.selections[1]!.endNs).toBe(T0 + 19_000n * S + 1n);
  });

  it('stops at the scan cap and says so', async () => {
    const src = source(5000);
    const r = await evalLogQuery(
      src,
      logQuery('{service_name="svc"} | json | fields_restate_invocation_id="nope"'),
      { startNs: T0, endNs: T0 + 5000n * S, direction: 'forward', limit: 10 },
      { pageSize: 500, maxScan: 2000 },
    );
    expect(r.streams).toEqual([]);
    expect(r.scanned).toBe(2000);
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings[0]).toMatch(/maximum of 2000 log lines/);
  });

  it('neither loses nor repeats records that share a timestamp across page boundaries', async () => {
    const src = new MemoryLogSource();
    for (let i = 0; i < 25; i++) src.add(T0 + BigInt(Math.floor(i / 10)) * S, { a: 'b' }, `line ${i}`);
    for (const direction of ['forward', 'backward'] as const) {
      const r = await evalLogQuery(
        src,
        logQuery('{a="b"} |= "line"'),
        { startNs: T0, endNs: T0 + 10n * S, direction, limit: 100 },
        { pageSize: 4, maxScan: 1000 },
      );
      const lines = r.streams[0]!.values.map(([, l]) => l);
      expect(lines).toHaveLength(25);
      expect(new Set(lines).size).toBe(25);
    }
  });

  it('honours interval: at most one entry per interval', async () => {
    const r = await evalLogQuery(source(10), logQuery('{service_name="svc"}'), {
      startNs: T0,
      endNs: T0 + 10n * S,
      direction: 'forward',
      limit: 100,
      intervalNs: 3n * S,
    });
    const seconds = r.streams
      .flatMap((s) => s.values.map(([ts]) => Number((BigInt(ts) - T0) / S)))
      .sort((a, b) => a - b);
    expect(seconds).toEqual([0, 3, 6, 9]);
  });

  it('re-checks the matchers when a store ignores one', async () => {
    const src = source(4);
    const select = src.select.bind(src);
    src.select = (q) => select({ ...q, matchers: q.matchers.filter((m) => m.name !== 'node') });
    const r = await evalLogQuery(src, logQuery('{service_name="svc", node="n2"}'), {
      startNs: T0,
      endNs: T0 + 4n * S,
      direction: 'forward',
      limit: 10,
    });
    expect(r.streams.map((s) => s.stream['node'])).toEqual(['n2']);
  });
});
