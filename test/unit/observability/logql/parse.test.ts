import { describe, expect, it } from 'vitest';
import { ObservabilityQueryError } from '../../../../runtime/src/observability/errors.ts';
import type { Expr, LogQuery, MetricExpr } from '../../../../runtime/src/observability/logql/ast.ts';
import { parseLogQL, parseSelector } from '../../../../runtime/src/observability/logql/parse.ts';

function log(q: string): LogQuery {
  const e = parseLogQL(q);
  if (e.kind !== 'log') throw new Error(`not a log query: ${q}`);
  return e;
}

function metric(q: string): MetricExpr {
  const e = parseLogQL(q);
  if (e.kind === 'log') throw new Error(`not a metric query: ${q}`);
  return e;
}

function error(q: string): ObservabilityQueryError {
  try {
    parseLogQL(q);
  } catch (err) {
    expect(err).toBeInstanceOf(ObservabilityQueryError);
    expect((err as ObservabilityQueryError).status).toBe(400);
    return err as ObservabilityQueryError;
  }
  throw new Error(`parsed: ${q}`);
}

/** A compact rendering of a metric expression, to check the shape and the operator precedence. */
function show(e: Expr): string {
  switch (e.kind) {
    case 'number':
      return String(e.value);
    case 'vector':
      return `vector(${e.value})`;
    case 'binop':
      return `(${show(e.left)} ${e.op}${e.bool ? ' bool' : ''} ${show(e.right)})`;
    case 'vagg':
      return `${e.op}${e.grouping ? ` ${e.grouping.without ? 'without' : 'by'}(${e.grouping.labels.join(',')})` : ''}(${show(e.expr)})`;
    case 'range':
      return `${e.op}[${e.rangeNs / 1_000_000_000n}s]`;
    case 'labelReplace':
      return `label_replace(${show(e.expr)})`;
    case 'log':
      return '{…}';
  }
}

describe('LogQL parser (Grafana lezer grammar)', () => {
  it('parses stream selectors with all four matcher operators', () => {
    const q = log('{kubernetes_container_name=~"restate.*", namespace!="dev", a!~"x|y", b="c"}');
    expect(q.matchers).toEqual([
      { name: 'kubernetes_container_name', op: '=~', value: 'restate.*' },
      { name: 'namespace', op: '!=', value: 'dev' },
      { name: 'a', op: '!~', value: 'x|y' },
      { name: 'b', op: '=', value: 'c' },
    ]);
    expect(q.stages).toEqual([]);
  });

  it('parses the documented Restate recipe (backtick strings, json named extraction, line_format)', () => {
    const q = log('{kubernetes_container_name="restate"} != `DEBUG` | json fields | line_format `{{ .fields }}`');
    expect(q.stages.map((s) => s.kind)).toEqual(['lineFilter', 'json', 'lineFormat']);
    expect(q.stages[0]).toEqual({ kind: 'lineFilter', op: '!=', values: ['DEBUG'] });
    expect(q.stages[1]).toEqual({ kind: 'json', extractions: [{ label: 'fields', path: ['fields'] }] });
  });

  it('parses chained line filters, or-alternatives, Go escapes and filters after parsers', () => {
    const q = log('{a="b"} |= "x\\ty" != "z" |~ `(?i)err` or "warn" !~ "d+" |> "<_> ok" | json |= "after"');
    expect(q.stages).toEqual([
      { kind: 'lineFilter', op: '|=', values: ['x\ty'] },
      { kind: 'lineFilter', op: '!=', values: ['z'] },
      { kind: 'lineFilter', op: '|~', values: ['(?i)err', 'warn'] },
      { kind: 'lineFilter', op: '!~', values: ['d+'] },
      { kind: 'lineFilter', op: '|>', values: ['<_> ok'] },
      { kind: 'json', extractions: [] },
      { kind: 'lineFilter', op: '|=', values: ['after'] },
    ]);
  });

  it('parses parsers: json paths, logfmt with flags and extractions, regexp, pattern, unpack', () => {
    const q = log(
      '{a="b"} | json x="fields[\\"restate.invocation.id\\"]", y="spans[0].name" | logfmt --strict --keep-empty k, m="msg" ' +
        '| regexp "(?P<method>\\\\w+) (?P<path>\\\\S+)" | pattern "<ip> - <_>" | unpack | decolorize',
    );
    expect(q.stages[0]).toEqual({
      kind: 'json',
      extractions: [
        { label: 'x', path: ['fields', 'restate.invocation.id'] },
        { label: 'y', path: ['spans', 0, 'name'] },
      ],
    });
    expect(q.stages[1]).toEqual({
      kind: 'logfmt',
      strict: true,
      keepEmpty: true,
      extractions: [
        { label: 'k', key: 'k' },
        { label: 'm', key: 'msg' },
      ],
    });
    expect(q.stages.slice(2).map((s) => s.kind)).toEqual(['regexp', 'pattern', 'unpack', 'decolorize']);
  });

  it('parses label filters with and / or / comma, numbers, durations and bytes', () => {
    const q = log('{a="b"} | json | level="ERROR" or x=~"re.*", status >= 400 and latency > 1.5s | size < 1KB');
    expect(q.stages[1]).toEqual({
      kind: 'labelFilter',
      filter: {
        kind: 'or',
        left: { kind: 'match', matcher: { name: 'level', op: '=', value: 'ERROR' } },
        right: {
          kind: 'and',
          left: {
            kind: 'and',
            left: { kind: 'match', matcher: { name: 'x', op: '=~', value: 're.*' } },
            right: { kind: 'number', name: 'status', op: '>=', value: 400 },
          },
          right: { kind: 'duration', name: 'latency', op: '>', seconds: 1.5 },
        },
      },
    });
    expect(q.stages[2]).toEqual({
      kind: 'labelFilter',
      filter: { kind: 'bytes', name: 'size', op: '<', bytes: 1000 },
    });
  });

  it('parses drop / keep, label_format and line_format', () => {
    const q = log(
      '{a="b"} | drop __error__, x="y" | keep a, b | label_format c=d, e="{{.f}}-x" | line_format "{{.c}}"',
    );
    expect(q.stages[0]).toEqual({
      kind: 'drop',
      items: [{ name: '__error__' }, { name: 'x', matcher: { name: 'x', op: '=', value: 'y' } }],
    });
    expect(q.stages[1]).toEqual({ kind: 'keep', items: [{ name: 'a' }, { name: 'b' }] });
    expect(q.stages[2]?.kind).toBe('labelFormat');
    expect(q.stages[3]?.kind).toBe('lineFormat');
  });

  it('parses metric queries: range and vector aggregations, grouping, offset, unwrap', () => {
    expect(show(metric('sum by (level, detected_level) (count_over_time({a="b"} | drop __error__ [1m]))'))).toBe(
      'sum by(level,detected_level)(count_over_time[60s])',
    );
    expect(show(metric('sum(rate({a="b"}[5m])) without (x)'))).toBe('sum without(x)(rate[300s])');
    expect(metric('count_over_time({a="b"}[5m] offset 5m)')).toMatchObject({ offsetNs: 300_000_000_000n });
    const r = metric('avg_over_time({a="b"} | logfmt | unwrap duration(latency) | __error__="" [1m]) by (a)');
    expect(r).toMatchObject({
      kind: 'range',
      op: 'avg_over_time',
      unwrap: { label: 'latency', conversion: 'duration', filters: [{ kind: 'match' }] },
      grouping: { without: false, labels: ['a'] },
    });
    expect(show(metric('topk(3, sum by (x) (bytes_over_time({a="b"}[1h])))'))).toBe(
      'topk(sum by(x)(bytes_over_time[3600s]))',
    );
  });

  it('parses vector(1)+vector(1) and restores Prometheus operator precedence', () => {
    expect(show(metric('vector(1)+vector(1)'))).toBe('(vector(1) + vector(1))');
    expect(show(metric('1 + 2 * 3'))).toBe('(1 + (2 * 3))');
    expect(show(metric('(1 + 2) * 3'))).toBe('((1 + 2) * 3)');
    expect(show(metric('2 ^ 3 ^ 2'))).toBe('(2 ^ (3 ^ 2))');
    expect(show(metric('1 - 2 - 3'))).toBe('((1 - 2) - 3)');
    expect(show(metric('rate({a="b"}[1m]) > bool 2 * -3'))).toBe('(rate[60s] > bool (2 * -3))');
  });

  it('parses vector matching modifiers', () => {
    const e = metric('sum by (a, b) (rate({a="b"}[1m])) / on (a) group_left (b) sum by (a) (rate({a="b"}[1m]))');
    expect(e).toMatchObject({
      kind: 'binop',
      op: '/',
      matching: { on: true, labels: ['a'], group: { side: 'left', include: ['b'] } },
    });
  });

  it('reports syntax errors with Loki wording and position', () => {
    expect(error('{a="b" |= "x"').message).toBe('parse error at line 1, col 8: syntax error: unexpected |=');
    expect(error('{a="b"}}').message).toBe('parse error at line 1, col 8: syntax error: unexpected }');
    expect(error('rate({a="b"}[5m]').message).toBe(
      'parse error at line 1, col 17: syntax error: unexpected end of input',
    );
    expect(error('{a="b"}\n| json |').message).toMatch(/^parse error at line 2, col \d+: syntax error: unexpected/);
    expect(error('').message).toMatch(/^parse error at line 1, col 1/);
    expect(error('{a="b"}[5m]').message).toBe('parse error at line 1, col 8: syntax error: unexpected [');
  });

  it('rejects selectors that match everything, invalid regexes and unsupported constructs with 400', () => {
    expect(error('{a=~".*"}').message).toMatch(
      /at least one regexp or equality matcher that does not have an empty-compatible value/,
    );
    expect(error('{a=""}').message).toMatch(/empty-compatible/);
    expect(error('{a=~"("}').message).toMatch(/^invalid regex/);
    expect(error('{a="b"} |~ "[z-a]"').message).toMatch(/^invalid regex/);
    expect(error('{a="b"} | regexp "(\\\\w+)"').message).toMatch(/named capture/);
    expect(error('{a="b"} | line_format "{{ if .a }}x{{ end }}"').message).toMatch(/unsupported action/);
    expect(error('{a="b"} |= ip("1.2.3.4")').message).toMatch(/ip\(\) filters are not supported/);
    expect(error('sum_over_time({a="b"}[1m])').message).toMatch(/without unwrap/);
    expect(error('1 > 2').message).toMatch(/BOOL modifier/);
    expect(error('{a="b"} | json x="a..b"').message).toMatch(/invalid JSON expression/);
  });

  it('accepts (?i) and Go named groups, which JS spells differently', () => {
    expect(log('{a=~"(?i)RESTATE"} |~ "(?i)error"').matchers[0]).toEqual({ name: 'a', op: '=~', value: '(?i)RESTATE' });
    expect(log('{a="b"} | regexp "(?P<x>\\\\d+)"').stages[0]?.kind).toBe('regexp');
  });

  it('parseSelector takes the matchers of a stream selector and refuses metric queries', () => {
    expect(parseSelector('{a="b", c=~"d.*"}')).toEqual([
      { name: 'a', op: '=', value: 'b' },
      { name: 'c', op: '=~', value: 'd.*' },
    ]);
    expect(() => parseSelector('count_over_time({a="b"}[1m])')).toThrow(ObservabilityQueryError);
  });
});
