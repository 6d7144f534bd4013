import { describe, expect, it } from 'vitest';
import { parseLogQL } from '../../../../runtime/src/observability/logql/parse.ts';
import { compilePipeline, labelsObject } from '../../../../runtime/src/observability/logql/pipeline.ts';

const STREAM = { service_name: 'ratchet', level: 'INFO', component: 'engine' };

/** A line of Restate's JSON log format, as the store keeps it. */
const RESTATE_LINE = JSON.stringify({
  timestamp: '2024-03-01T10:00:00.000000Z',
  level: 'INFO',
  fields: {
    message: 'Invocation completed',
    'restate.invocation.id': 'inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW',
    'rpc.service': 'counter',
    'restate.journal.index': 3,
    retry: true,
    nothing: null,
  },
  target: 'restate_invoker',
  span: { name: 'invoke', 'rpc.method': 'add' },
  spans: [{ name: 'invoke' }],
});

function run(
  query: string,
  line: string,
  labels: Record<string, string> = STREAM,
): { line: string; labels: Record<string, string> } | undefined {
  const q = parseLogQL(query);
  if (q.kind !== 'log') throw new Error('not a log query');
  const e = compilePipeline(q.stages, { detectedLevel: query.includes('detected_level') })({ tsNs: 1n, labels, line });
  return e === undefined ? undefined : { line: e.line, labels: labelsObject(e.labels) };
}

describe('log pipeline stages', () => {
  it('| json flattens nested keys with _ and sanitizes dots, skipping arrays and nulls', () => {
    const out = run('{service_name="ratchet"} | json', RESTATE_LINE)!;
    expect(out.labels).toEqual({
      ...STREAM,
      timestamp: '2024-03-01T10:00:00.000000Z',
      level_extracted: 'INFO',
      fields_message: 'Invocation completed',
      fields_restate_invocation_id: 'inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW',
      fields_rpc_service: 'counter',
      fields_restate_journal_index: '3',
      fields_retry: 'true',
      target: 'restate_invoker',
      span_name: 'invoke',
      span_rpc_method: 'add',
    });
    expect(out.line).toBe(RESTATE_LINE);
  });

  it('| json keeps numbers as written and sanitizes a leading digit', () => {
    expect(run('{a="b"} | json', '{"1st":1.0,"x y":"a\\"b"}', {})!.labels).toEqual({ _1st: '1.0', x_y: 'a"b' });
  });

  it('| json on a line that is not JSON sets __error__=JSONParserErr and keeps the line', () => {
    const out = run('{a="b"} | json', 'plain text', { a: 'b' })!;
    expect(out.labels['__error__']).toBe('JSONParserErr');
    expect(out.labels['__error_details__']).toBeTypeOf('string');
    const dropped = run('{a="b"} | json | drop __error__, __error_details__', 'plain text', { a: 'b' })!;
    expect(dropped.labels).toEqual({ a: 'b' });
    expect(run('{a="b"} | json | __error__=""', 'plain text', { a: 'b' })).toBeUndefined();
    expect(run('{a="b"} | json | __error__!="JSONParserErr"', 'plain text', { a: 'b' })).toBeUndefined();
  });

  it('| json fields extracts the object as its JSON text, and line_format prints it (the Restate recipe)', () => {
    const out = run(
      '{kubernetes_container_name="restate"} != `DEBUG` | json fields | line_format `{{ .fields }}`',
      RESTATE_LINE,
    )!;
    const fields = (JSON.parse(RESTATE_LINE) as { fields: unknown }).fields;
    expect(out.line).toBe(JSON.stringify(fields));
    expect(out.labels['fields']).toBe(JSON.stringify(fields));
    expect(run('{a="b"} != `DEBUG` | json fields', RESTATE_LINE.replace('INFO', 'DEBUG'))).toBeUndefined();
  });

  it('| json with paths: nested keys, quoted keys with dots, array indexes; missing → empty', () => {
    const out = run(
      '{a="b"} | json id="fields[\\"restate.invocation.id\\"]", first="spans[0].name", span="span", none="x.y", level',
      RESTATE_LINE,
    )!;
    expect(out.labels).toMatchObject({
      id: 'inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW',
      first: 'invoke',
      span: '{"name":"invoke","rpc.method":"add"}',
      none: '',
      level_extracted: 'INFO',
    });
  });

  it('filters on extracted labels: the derived-field and trace-to-logs queries', () => {
    const q = '{service_name="ratchet"} | json | fields_restate_invocation_id="inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW"';
    expect(run(q, RESTATE_LINE)).toBeDefined();
    expect(run(q.replace('inv_1', 'inv_2'), RESTATE_LINE)).toBeUndefined();
    expect(run('{service_name="ratchet"} |= "inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW"', RESTATE_LINE)).toBeDefined();
    expect(run('{service_name="ratchet"} | json | level_extracted=~"INFO|WARN"', RESTATE_LINE)).toBeDefined();
  });

  it('line filters: contains, not contains, regex (unanchored, (?i)), or-alternatives, pattern', () => {
    const line = 'level=error msg="disk full" took=1.5s';
    expect(run('{a="b"} |= "disk"', line)).toBeDefined();
    expect(run('{a="b"} != "disk"', line)).toBeUndefined();
    expect(run('{a="b"} |~ "(?i)DISK"', line)).toBeDefined();
    expect(run('{a="b"} !~ "full.*took"', line)).toBeUndefined();
    expect(run('{a="b"} |= "nope" or "full"', line)).toBeDefined();
    expect(run('{a="b"} != "nope" or "full"', line)).toBeUndefined();
    expect(run('{a="b"} |> "level=<_> msg=<_>"', line)).toBeDefined();
    expect(run('{a="b"} !> "level=<_> msg=<_>"', line)).toBeUndefined();
  });

  it('| logfmt extracts keys, drops standalone keys unless --keep-empty, errors only with --strict', () => {
    const line = 'level=error msg="disk \\"full\\"" took=1.5s flag';
    expect(run('{a="b"} | logfmt', line, { a: 'b' })!.labels).toEqual({
      a: 'b',
      level: 'error',
      msg: 'disk "full"',
      took: '1.5s',
    });
    expect(run('{a="b"} | logfmt --keep-empty', line, { a: 'b' })!.labels['flag']).toBe('');
    expect(run('{a="b"} | logfmt msg, t="took"', line, { a: 'b' })!.labels).toEqual({
      a: 'b',
      msg: 'disk "full"',
      t: '1.5s',
    });
    expect(run('{a="b"} | logfmt', 'a="unterminated', { x: 'y' })!.labels['__error__']).toBeUndefined();
    expect(run('{a="b"} | logfmt --strict', 'a="unterminated', { x: 'y' })!.labels['__error__']).toBe(
      'LogfmtParserErr',
    );
  });

  it('numeric, duration and bytes label filters; conversion failures set LabelFilterErr', () => {
    const line = 'status=503 took=1.5s size=2KB';
    expect(run('{a="b"} | logfmt | status >= 500', line)).toBeDefined();
    expect(run('{a="b"} | logfmt | status == 503 and took > 1s', line)).toBeDefined();
    expect(run('{a="b"} | logfmt | status < 500 or took <= 1s', line)).toBeUndefined();
    expect(run('{a="b"} | logfmt | size > 1KB, size < 3KB', line)).toBeDefined();
    expect(run('{a="b"} | logfmt | missing > 1', line)).toBeUndefined();
    const err = run('{a="b"} | logfmt | took > 1', line)!;
    expect(err.labels['__error__']).toBe('LabelFilterErr');
  });

  it('regexp and pattern parsers, unpack, decolorize', () => {
    const line = '10.0.0.1 - GET /api/items 200';
    expect(run('{a="b"} | regexp "(?P<ip>\\\\S+) - (?P<method>\\\\w+)"', line, {})!.labels).toEqual({
      ip: '10.0.0.1',
      method: 'GET',
    });
    expect(run('{a="b"} | pattern "<ip> - <method> <_> <status>"', line, {})!.labels).toEqual({
      ip: '10.0.0.1',
      method: 'GET',
      status: '200',
    });
    const packed = run('{a="b"} | unpack', '{"_entry":"original line","pod":"p1"}', {})!;
    expect(packed).toEqual({ line: 'original line', labels: { pod: 'p1' } });
    expect(run('{a="b"} | decolorize', '\x1b[31mred\x1b[0m text', {})!.line).toBe('red text');
  });

  it('line_format: field refs with and without spaces, literal text, __line__, functions, missing fields', () => {
    const line = 'level=warn msg=hello';
    // `level` is a stream label: the parsed one is `level_extracted`.
    expect(
      run('{a="b"} | logfmt | line_format "{{.level}}/{{.level_extracted}}: {{ .msg }} [{{.nope}}]"', line)!.line,
    ).toBe('INFO/warn: hello []');
    expect(run('{a="b"} | logfmt | line_format "{{ .msg | ToUpper }} {{ __line__ }}"', line)!.line).toBe(
      'HELLO level=warn msg=hello',
    );
    expect(run('{a="b"} | line_format "a {{- .component -}} b {{/* c */}}"', line)!.line).toBe('aengineb ');
  });

  it('label_format renames and templates; drop and keep by name and by value', () => {
    const line = 'x=1 y=2';
    expect(run('{a="b"} | logfmt | label_format z=x, w="{{.y}}-{{.x}}"', line, { a: 'b' })!.labels).toEqual({
      a: 'b',
      y: '2',
      z: '1',
      w: '2-1',
    });
    expect(run('{a="b"} | logfmt | drop x, y="3"', line, { a: 'b' })!.labels).toEqual({ a: 'b', y: '2' });
    expect(run('{a="b"} | logfmt | keep a, y', line, { a: 'b', c: 'd' })!.labels).toEqual({ a: 'b', y: '2' });
    expect(run('{a="b"} | logfmt | keep x="2"', line, { a: 'b' })!.labels).toEqual({});
  });

  it('derives detected_level from the level label only for queries that name it', () => {
    expect(run('{a="b"} | detected_level="info"', 'x')!.labels['detected_level']).toBe('info');
    expect(run('{a="b"}', 'x')!.labels['detected_level']).toBeUndefined();
    expect(run('{a="b"} | detected_level="warn"', '{"level":"WARNING"}', { a: 'b' })).toBeDefined();
    expect(run('{a="b"} | detected_level="unknown"', 'hello', { a: 'b' })).toBeDefined();
  });
});
