import { describe, expect, it } from 'vitest';
import { ObservabilityQueryError } from '../../../../runtime/src/observability/errors.ts';
import { parseTraceQL } from '../../../../runtime/src/observability/traceql/parse.ts';

function error(q: string): ObservabilityQueryError {
  try {
    parseTraceQL(q);
  } catch (err) {
    expect(err).toBeInstanceOf(ObservabilityQueryError);
    return err as ObservabilityQueryError;
  }
  throw new Error(`${q} parsed`);
}

describe('parseTraceQL', () => {
  it('reads the documented derived-field query as an unscoped dotted attribute', () => {
    expect(parseTraceQL('{ .restate.invocation.id="inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW" }').root).toEqual({
      kind: 'filter',
      expr: {
        kind: 'binary',
        op: '=',
        left: {
          kind: 'attribute',
          scope: 'unscoped',
          name: 'restate.invocation.id',
          parent: false,
          text: '.restate.invocation.id',
        },
        right: { kind: 'static', value: { type: 'string', value: 'inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW' } },
      },
    });
  });

  it('reads Grafana’s default `{}` and `{ true }`', () => {
    expect(parseTraceQL('{}').root).toEqual({ kind: 'filter', expr: null });
    expect(parseTraceQL('{ true }').root).toEqual({
      kind: 'filter',
      expr: { kind: 'static', value: { type: 'bool', value: true } },
    });
  });

  it('reads scopes, quoted names, intrinsics and typed literals', () => {
    const q = parseTraceQL(
      '{ resource.service.name = "Restate" && span."x y" = 1.5 && trace:rootService = `R` && duration > 1.5ms && kind = server && status != error && parent.span.a = -2 }',
    );
    expect(JSON.stringify(q, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))).toContain('"1500000n"');
    const fields: string[] = [];
    JSON.stringify(q.root, (_k, v: unknown) => {
      const f = v as { kind?: string; scope?: string; name?: string; parent?: boolean } | null;
      if (f !== null && typeof f === 'object' && (f.kind === 'attribute' || f.kind === 'intrinsic')) {
        fields.push(`${f.kind}:${f.scope ?? ''}:${f.name}${f.parent === true ? ':parent' : ''}`);
      }
      return typeof v === 'bigint' ? v.toString() : v;
    });
    expect(fields).toEqual([
      'attribute:resource:service.name',
      'attribute:span:x y',
      'intrinsic::rootServiceName',
      'intrinsic::duration',
      'intrinsic::kind',
      'intrinsic::status',
      'attribute:span:a:parent',
    ]);
  });

  it('associates operators as Tempo does, not as the highlighting grammar nests them', () => {
    // `!` binds tighter than `&&`; `&&` and `||` share a level, left to right; `*` before `+`.
    const not = parseTraceQL('{ !(.a = 1) && .b = 2 }').root;
    expect(not).toMatchObject({ expr: { kind: 'binary', op: '&&', left: { kind: 'not' } } });
    const andOr = parseTraceQL('{ .a = 1 || .b = 2 && .c = 3 }').root;
    expect(andOr).toMatchObject({ expr: { op: '&&', left: { op: '||' } } });
    const arith = parseTraceQL('{ .a + .b * 2 > 3 }').root;
    expect(arith).toMatchObject({ expr: { op: '>', left: { op: '+', right: { op: '*' } } } });
    const pipe = parseTraceQL('{ .a } !>> { .b } | count() > 1').root;
    expect(pipe).toMatchObject({ kind: 'pipe', left: { kind: 'structural', op: '>>', negated: true } });
  });

  it('reads spanset operators, pipelines and hints', () => {
    const q = parseTraceQL(
      '({ .a } && { .b }) | by(resource.service.name) | select(span.x, .y) with(most_recent=true)',
    );
    expect(q.hints).toEqual({ most_recent: true });
    expect(q.root).toMatchObject({
      kind: 'pipe',
      left: { kind: 'pipe', left: { kind: 'and' }, right: { kind: 'by', text: 'by(resource.service.name)' } },
      right: {
        kind: 'select',
        fields: [
          { scope: 'span', name: 'x' },
          { scope: 'unscoped', name: 'y' },
        ],
      },
    });
    expect(parseTraceQL('{ .a } | avg(duration) > 1ms').root).toMatchObject({
      right: { kind: 'scalarFilter', op: '>', left: { kind: 'aggregate', fn: 'avg' } },
    });
  });

  it('reports syntax errors with Tempo’s message and position', () => {
    expect(error('{ .a = }').message).toBe(
      'invalid TraceQL query: parse error at line 1, col 8: syntax error: unexpected }',
    );
    expect(error('{ .a = "x" }\n && { .b =! }').message).toBe(
      'invalid TraceQL query: parse error at line 2, col 13: syntax error: unexpected }',
    );
    expect(error('{ .a = 1').message).toMatch(/col 9: syntax error: unexpected \$end$/);
    expect(error('{ nestedSetParent < 0 }').status).toBe(400);
  });

  it('refuses what it cannot evaluate with a 400 naming it', () => {
    expect(error('{ .a } | rate()').message).toBe(
      'invalid TraceQL query: the TraceQL metrics function rate() in a search is not supported',
    );
    expect(error('{ .a = $var }').message).toBe('invalid TraceQL query: the template variable $var is not supported');
    expect(error('{ parent = nil }').message).toBe('invalid TraceQL query: the intrinsic parent is not supported');
    expect(error('{ .a =~ "(" }').message).toBe(
      'invalid TraceQL query: invalid regex "(": Invalid regular expression: /^(?:()$/: Unterminated group',
    );
  });
});
