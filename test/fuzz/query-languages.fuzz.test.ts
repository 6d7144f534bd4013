import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildObservabilityApp } from '../../runtime/src/observability/listener/app.ts';
import { lokiRoutes } from '../../runtime/src/observability/listener/loki-routes.ts';
import { tempoRoutes } from '../../runtime/src/observability/listener/tempo-routes.ts';
import { ObservabilityQueryError } from '../../runtime/src/observability/errors.ts';
import { parseLogQL } from '../../runtime/src/observability/logql/parse.ts';
import { compilePipeline } from '../../runtime/src/observability/logql/pipeline.ts';
import type { LogRecord } from '../../runtime/src/observability/model.ts';
import { traceQLMatcher } from '../../runtime/src/observability/traceql/matcher.ts';
import { parseTraceQL } from '../../runtime/src/observability/traceql/parse.ts';
import { startTestRuntime, type TestRuntime } from '../integration/support/runtime.ts';
import { MemoryLogSource } from '../support/observability/memory-log-source.ts';
import { T0, restateFixture } from '../support/observability/memory-span-source.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { mutatedString, nastyFragment, nastyString } from './support/arbitraries.ts';
import { PARSER_TIMEOUT, expectOwnError, fuzz, fuzzAsync, timeoutFor, watchProcessErrors } from './support/fuzz.ts';

/**
 * LogQL and TraceQL on port 3100: the parsers on their own (and what is compiled from what they accept), then whole
 * Loki and Tempo API requests with arbitrary queries and parameters: in process over in-memory stores, and to a
 * runtime node over its PostgreSQL store (where filters are pushed down into SQL). A bad query or parameter is an
 * ObservabilityQueryError, answered 4xx with the reason as the body; never a 5xx.
 */

const SURFACE = 'query-languages';
const processErrors = watchProcessErrors();

// ---- corpora: valid queries of every construct, to be taken apart -------------------------------------------------

const LOGQL = [
  '{a="b"}',
  '{service_name=~"Greeter.*", level!="debug", x!~"a|b"}',
  '{a="b"} |= "x" != "y" |~ `(?i)err` or "warn" !~ "d+"',
  '{a="b"} |> "<_> ok" !> "<x>"',
  '{a="b"} | json',
  '{a="b"} | json foo="bar.baz", x="[0]", y=`a["b"][1]`',
  '{a="b"} | logfmt',
  '{a="b"} | logfmt --strict --keep-empty a, b="c"',
  '{a="b"} | regexp `(?P<x>\\w+) (?P<y>\\d+)`',
  '{a="b"} | pattern `<ip> - <_> "<method> <path>" <status>`',
  '{a="b"} | unpack',
  '{a="b"} | decolorize',
  '{a="b"} | json | level="error" and status >= 500 or duration > 1s, bytes <= 10KB',
  '{a="b"} | logfmt | level=~"err.*" | __error__=""',
  '{a="b"} | line_format `{{.msg}} {{ .level | upper }} {{ if eq .a "x" }}y{{ end }}`',
  '{a="b"} | label_format x=y, z=`{{.a}}-{{ __line__ }}`',
  '{a="b"} | drop a, b="c", __error__',
  '{a="b"} | keep a, b',
  'count_over_time({a="b"}[5m])',
  'rate({a="b"} |= "x" [1m])',
  'sum by (level) (rate({a="b"}[1m]))',
  'topk(3, sum by (a) (count_over_time({a="b"}[1h])))',
  'sum_over_time({a="b"} | json | unwrap duration(latency) [5m]) by (a)',
  'quantile_over_time(0.99, {a="b"} | logfmt | unwrap bytes(size) | __error__="" [1m]) without (x)',
  'avg(rate({a="b"}[1m])) / on(a) group_left(b) sum(rate({c="d"}[1m]))',
  'sum(rate({a="b"}[1m])) > bool 0 and sum(rate({c="d"}[1m])) unless vector(1)',
  '1 + 2 * 3 ^ 2 % 4 - -1',
  'vector(1) > bool 0',
  'label_replace(rate({a="b"}[1m]), "x", "$1", "a", "(.*)")',
  'bytes_rate({a="b"}[30s])',
  'absent_over_time({a="b"}[1m])',
  'sort_desc(sum(count_over_time({a="b"}[1m])))',
  'first_over_time({a="b"} | unwrap x [1m] offset 5m)',
  'max_over_time({a="b"} | json | unwrap latency [1m]) by (a)',
];

const LOGQL_TOKENS = [
  '|',
  '|=',
  '!=',
  '|~',
  '!~',
  '=~',
  '|>',
  '{',
  '}',
  '(',
  ')',
  '[',
  ']',
  '"',
  '`',
  '\\',
  ',',
  ' by ',
  ' without ',
  ' and ',
  ' or ',
  ' unless ',
  ' on(',
  ' ignoring(',
  ' group_left ',
  ' bool ',
  'json',
  'logfmt',
  'unwrap ',
  'duration(',
  'bytes(',
  'line_format ',
  'label_format ',
  '{{',
  '}}',
  '{{ .a | ',
  '.',
  '1m',
  '0s',
  '-1',
  '1e400',
  'offset ',
  '__error__',
  '<_>',
  '(?P<',
  '(?i)',
  '[[:alpha:]]',
  '\\p{L}',
  '*',
  '+',
  '?',
];

const TRACEQL = [
  '{}',
  '{ true }',
  '{ .restate.invocation.id = "inv_1foAirY4KKzi3fVBeMbYWNaZt3lMUqOgzW" }',
  '{ resource.service.name = "Restate" && span."x y" = 1.5 }',
  '{ duration > 1.5ms && kind = server && status != error }',
  '{ name =~ "invocation-.*" && statusMessage != "" }',
  '{ .a } >> { .b }',
  '{ .a } << { .b }',
  '{ .a } && { .b }',
  '{ .a } || { .b }',
  '{ .a } ~ { .b }',
  '{ .a } > { .b } < { .c }',
  '({ .a } && { .b }) || { .c }',
  '{ .a } | count() > 2',
  '{ .a } | avg(duration) > 1s',
  '{ .a } | min(span.x) <= 1 | max(.y) != 2 | sum(duration) = 0',
  '{ .a } | select(span.x, resource.y, duration)',
  '{ .a } | by(span.restate.error.code)',
  '{ status = error } | max(duration) < 5s',
  '{ parent.span.a = -2 }',
  '{ trace:rootService = `R` && trace:duration > 1s && trace:rootName = "x" }',
  '{ .n = 1 + 2 * 3 ^ 2 % 4 - 1 / 2 }',
  '{ span:name = "x" && span:kind = client && span:status = ok && span:duration >= 0 }',
  '{ event:name = "e" && link:traceID = "a" && instrumentation:name = "i" }',
  '{ .a != nil && .b = true && .c = false }',
  '{ .x =~ "(?i)abc" && .y !~ "^[a-z]+$" }',
  '{ rootServiceName = "Restate" && rootName != "" && traceDuration > 1ms }',
  '{ nestedSetParent < 0 }',
  '{ .a = 1 } | rate()',
];

const TRACEQL_TOKENS = [
  '{',
  '}',
  '(',
  ')',
  '"',
  '`',
  '.',
  ':',
  '=',
  '!=',
  '=~',
  '!~',
  '<',
  '>',
  '>>',
  '<<',
  '~',
  '&&',
  '||',
  '!',
  '|',
  ' span.',
  ' resource.',
  ' parent.',
  'trace:',
  'span:',
  'event:',
  'duration',
  'status',
  'kind',
  ' nil',
  'count()',
  'avg(',
  'select(',
  'by(',
  '1ms',
  '1.5',
  '-',
  '1e999',
  '0x1',
  '\\',
  '(?P<',
  '[',
];

const query = (corpus: readonly string[], tokens: readonly string[]): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...corpus) },
    {
      weight: 4,
      arbitrary: mutatedString(fc.constantFrom(...corpus), fc.oneof(fc.constantFrom(...tokens), nastyFragment)),
    },
    { weight: 1, arbitrary: fc.array(fc.constantFrom(...tokens), { maxLength: 12 }).map((t) => t.join('')) },
    { weight: 1, arbitrary: nastyString() },
  );

const logql = query(LOGQL, LOGQL_TOKENS);
const traceql = query(TRACEQL, TRACEQL_TOKENS);

// ---- stores ---------------------------------------------------------------------------------------------------------

const NOW_NS = BigInt(Date.now()) * 1_000_000n;
const LINES = [
  '{"level":"error","msg":"boom","status":503,"latency":"1.5s","a":{"b":[1,{"c":"d"}]}}',
  'level=info msg="hello world" status=200 latency=12ms size=1KB',
  '192.168.0.1 - - "GET /x HTTP/1.1" 200',
  '\u001b[31mred\u001b[0m plain text',
  '',
  '{"unterminated": ',
  'a=b=c "quoted \\" x=',
];
const RECORDS: LogRecord[] = LINES.map((line, i) => ({
  tsNs: NOW_NS - BigInt(i + 1) * 1_000_000_000n,
  labels: { a: 'b', service_name: 'Greeter', level: i % 2 === 0 ? 'error' : 'info' },
  line,
}));

let app: FastifyInstance;

beforeAll(async () => {
  const logs = new MemoryLogSource();
  for (const r of RECORDS) logs.add(r.tsNs, { ...r.labels }, r.line);
  app = buildObservabilityApp({
    routes: [...lokiRoutes(logs), ...tempoRoutes(restateFixture())],
    logger: pino({ level: 'silent' }),
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
});

function expectRefusal(err: unknown): void {
  expectOwnError(err, [ObservabilityQueryError]);
  const status = (err as ObservabilityQueryError).status;
  expect(status >= 400 && status < 500).toBe(true);
}

// ---- properties -----------------------------------------------------------------------------------------------------

describe('LogQL', () => {
  it(
    'parses any query or refuses it with a 4xx, and runs the pipeline it parsed on any line',
    () => {
      fuzz(
        SURFACE,
        'parseLogQL',
        fc.property(logql, (q) => {
          let expr;
          try {
            expr = parseLogQL(q);
          } catch (err) {
            expectRefusal(err);
            return;
          }
          if (expr.kind !== 'log') return;
          let pipeline;
          try {
            pipeline = compilePipeline(expr.stages, { detectedLevel: true });
          } catch (err) {
            expectRefusal(err);
            return;
          }
          // Lines a stage cannot read get `__error__`, they never make the pipeline throw.
          for (const r of RECORDS) pipeline(r);
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('TraceQL', () => {
  it(
    'parses any query or refuses it with a 4xx, and builds the matcher of what it parsed',
    () => {
      fuzz(
        SURFACE,
        'parseTraceQL',
        fc.property(traceql, (q) => {
          try {
            traceQLMatcher(parseTraceQL(q));
          } catch (err) {
            expectRefusal(err);
          }
        }),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('Loki and Tempo API requests', () => {
  const S = 1_000_000_000n;
  /** Mostly values that work, so that requests get past parameter checks to the query; sometimes bad ones. */
  const mostly = (good: readonly string[], bad: readonly string[]): fc.Arbitrary<string> =>
    fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(...good) },
      { weight: 1, arbitrary: fc.constantFrom(...bad) },
      { weight: 1, arbitrary: nastyString(8) },
    );
  const time = mostly(
    [
      String(NOW_NS - 3600n * S),
      String(NOW_NS / S),
      String(T0 / S - 60n),
      String(T0 / S + 60n),
      '2024-03-01T00:00:00Z',
    ],
    ['', 'now', '-1', '0', '1e30', '9999999999999999999999', 'NaN', '2024-13-01T00:00:00Z'],
  );
  const duration = mostly(['1m', '15s', '1h30m', '5m'], ['0', '-1s', '1', '0.5', '1e9', '100000d', '1y']);
  const number = mostly(['1', '10', '100', '20'], ['0', '-1', '1001', '5000', '1e3', 'x', '']);
  const params = (queryName: string, q: fc.Arbitrary<string>) =>
    fc.record(
      {
        [queryName]: q,
        start: time,
        end: time,
        since: duration,
        step: duration,
        interval: duration,
        limit: number,
        spss: number,
        direction: mostly(['forward', 'backward'], ['FORWARD', '']),
        minDuration: duration,
        maxDuration: duration,
        tags: mostly(['service.name=Restate', 'restate.invocation.target="Greeter/greet"'], ['a=', '="x', 'x y=']),
        scope: mostly(['span', 'resource', 'intrinsic'], ['none', 'all', '']),
        'match[]': logql,
      },
      { requiredKeys: [queryName] },
    );
  const LOKI = [
    '/loki/api/v1/query',
    '/loki/api/v1/query_range',
    '/loki/api/v1/labels',
    '/loki/api/v1/label/level/values',
    '/loki/api/v1/series',
    '/loki/api/v1/index/stats',
    '/loki/api/v1/index/volume',
    '/loki/api/v1/index/volume_range',
  ];
  const TEMPO = [
    '/api/search',
    '/api/search/tags',
    '/api/v2/search/tags',
    '/api/search/tag/service.name/values',
    '/api/v2/search/tag/span.restate.invocation.id/values',
    '/api/traces/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    '/api/v2/traces/0123',
  ];
  type Request = [method: 'GET' | 'POST', url: string, params: Record<string, string>];
  const request: fc.Arbitrary<Request> = fc.oneof(
    fc.tuple(fc.constantFrom<'GET' | 'POST'>('GET', 'POST'), fc.constantFrom(...LOKI), params('query', logql)),
    fc.tuple(fc.constant<'GET'>('GET'), fc.constantFrom(...TEMPO), params('q', traceql)),
    // Path parameters: trace ids, tag names and label names of any text.
    fc
      .tuple(
        fc.constantFrom(
          ['/api/traces/', ''],
          ['/api/v2/traces/', ''],
          ['/api/search/tag/', '/values'],
          ['/api/v2/search/tag/', '/values'],
          ['/loki/api/v1/label/', '/values'],
        ),
        fc.oneof(traceql, nastyString()),
      )
      .map(([[prefix, suffix], segment]): Request => [
        'GET',
        prefix + encodeURIComponent(wellFormed(segment)) + suffix,
        {},
      ]),
  );

  it(
    'answers every request with a 2xx or a 4xx that says why',
    async () => {
      await fuzzAsync(
        SURFACE,
        'api-inject',
        fc.asyncProperty(request, async ([method, url, p]) => {
          const search = new URLSearchParams(Object.entries(p)).toString();
          const res = await app.inject({
            method,
            url: `${url}?${search}`,
            headers: { accept: 'application/json' },
          });
          if (res.statusCode >= 500)
            throw new Error(`${method} ${url}?${search} answered ${res.statusCode}: ${res.body}`);
          if (res.statusCode >= 400) expect(res.body.trim()).not.toBe('');
          await processErrors.check();
        }),
        { runs: 1000, weight: 0.3 },
      );
    },
    timeoutFor(1000, 0.3, 5),
  );

  describe('of a runtime node (PostgreSQL store)', () => {
    let db: TestDatabase;
    let runtime: TestRuntime;

    beforeAll(async () => {
      db = await createTestDatabase();
      runtime = await startTestRuntime(db.url);
    }, 120_000);

    afterAll(async () => {
      await runtime?.stop();
      await db?.drop();
    });

    it(
      'answers every request with a 2xx or a 4xx that says why',
      async () => {
        const port = runtime.handle.observability?.port;
        if (port === undefined) throw new Error('the runtime serves no observability API');
        await fuzzAsync(
          SURFACE,
          'api-runtime-node',
          fc.asyncProperty(request, async ([method, url, p]) => {
            const search = new URLSearchParams(Object.entries(p)).toString();
            const res = await fetch(`http://127.0.0.1:${port}${url}?${search}`, {
              method,
              headers: { accept: 'application/json' },
              signal: AbortSignal.timeout(30_000),
            });
            const body = await res.text();
            if (res.status >= 500) throw new Error(`${method} ${url}?${search} answered ${res.status}: ${body}`);
            if (res.status >= 400) expect(body.trim()).not.toBe('');
            await processErrors.check();
          }),
          { runs: 300, weight: 0.02 },
        );
      },
      timeoutFor(300, 0.02, 20),
    );
  });
});

/** Arbitrary text made encodable in a path (lone surrogates become U+FFFD). */
function wellFormed(s: string): string {
  return Buffer.from(s, 'utf8').toString('utf8');
}
