import { type pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { LogCapture } from '../../../runtime/src/observability/log-capture.ts';
import { InvocationLog } from '../../../runtime/src/observability/invocation-log.ts';
import type { LogLineInsert } from '../../../runtime/src/observability/model.ts';
import { createLogger } from '../../../runtime/src/telemetry/logger.ts';

/**
 * The runtime's log lines as the store keeps them: Restate's JSON log format (so that the recipes written for
 * Restate's lines work on Ratchet's), stream labels, the invocation id both as Restate and the specification name it.
 */
describe('log capture', () => {
  function captured(level: 'debug' | 'info' = 'debug'): {
    capture: LogCapture;
    lines: LogLineInsert[];
    logger: pino.Logger;
  } {
    const capture = new LogCapture();
    const lines: LogLineInsert[] = [];
    const logger = createLogger({ level }, { destination: capture, base: { node: 'n1' } });
    return { capture, lines, logger };
  }

  it('keeps the lines logged before the store is there, and sends them first once it is attached', () => {
    const { capture, lines, logger } = captured();
    logger.child({ component: 'main' }).info({ port: 8080 }, 'listening');
    expect(lines).toEqual([]);
    capture.attach({ log: (l) => lines.push(l) }, { node: 'n1', cluster: 'c1' });
    logger.child({ component: 'admin' }).warn('second');
    expect(
      lines.map((l) => JSON.parse(l.line) as { fields: { message: string } }).map((l) => l.fields.message),
    ).toEqual(['listening', 'second']);
    expect(lines[0]!.labels).toEqual({
      service_name: 'ratchet',
      level: 'info',
      component: 'main',
      node: 'n1',
      cluster: 'c1',
    });
    expect(JSON.parse(lines[0]!.line)).toMatchObject({
      level: 'INFO',
      target: 'main',
      fields: { message: 'listening', port: 8080 },
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as string,
    });
    // Lines of the same millisecond keep their order.
    expect(lines[1]!.tsNs).toBeGreaterThan(lines[0]!.tsNs);
  });

  it("writes an invocation's lifecycle line so that Restate's derived-field regex and `| json` labels find its id", () => {
    const { capture, lines, logger } = captured();
    capture.attach({ log: (l) => lines.push(l) }, { node: 'n1', cluster: 'c1' });
    new InvocationLog(logger).event(
      {
        id: 'inv_1abc',
        target: 'Greeter/greet',
        service: 'Greeter',
        handler: 'greet',
        key: null,
        deploymentId: 'dp_1',
        attempt: 2,
        partition: 3,
        traceContext: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      },
      { kind: 'retrying', code: 'RT0007', message: 'boom', stacktrace: 'Error: boom\n  at x', delayMs: 100 },
    );
    expect(lines).toHaveLength(1);
    const l = lines[0]!;
    expect(l.invocationId).toBe('inv_1abc');
    expect(l.labels).toMatchObject({ service_name: 'Greeter', level: 'warn', component: 'invocation' });
    // The Loki derived field of Restate's documentation: regex `"restate.invocation.id":"(.+?)"`.
    expect(/"restate.invocation.id":"(.+?)"/.exec(l.line)?.[1]).toBe('inv_1abc');
    expect(JSON.parse(l.line)).toMatchObject({
      level: 'WARN',
      target: 'invocation',
      fields: {
        message: '[RT0007] invocation attempt failed; retrying in 100 ms: boom',
        'restate.invocation.id': 'inv_1abc',
        'service.invocation.id': 'inv_1abc',
        'restate.invocation.target': 'Greeter/greet',
        'rpc.service': 'Greeter',
        'rpc.method': 'greet',
        'restate.deployment.id': 'dp_1',
        'restate.error.code': 'RT0007',
        'restate.invocation.error.stacktrace': 'Error: boom\n  at x',
        'restate.invocation.attempt': 2,
        trace_id: '0af7651916cd43dd8448eb211c80319c',
      },
    });
  });

  it('skips routine lifecycle lines the logger is not enabled for', () => {
    const { capture, lines, logger } = captured('info');
    capture.attach({ log: (l) => lines.push(l) }, { node: 'n1', cluster: 'c1' });
    const inv = {
      id: 'inv_1',
      target: 'A/b',
      service: 'A',
      handler: 'b',
      key: null,
      deploymentId: null,
      attempt: 0,
      partition: 0,
      traceContext: null,
    };
    new InvocationLog(logger).event(inv, { kind: 'started', protocolVersion: 6 });
    new InvocationLog(logger).event(inv, { kind: 'killed' });
    expect(lines.map((l) => (JSON.parse(l.line) as { fields: { message: string } }).fields.message)).toEqual([
      'invocation killed',
    ]);
  });

  it('captures at its own level: debug lines reach the store while stdout stays at info', () => {
    const capture = new LogCapture();
    const lines: LogLineInsert[] = [];
    capture.attach({ log: (l) => lines.push(l) }, { node: 'n1', cluster: 'c1' });
    const stdout: string[] = [];
    const logger = createLogger(
      { level: 'info' },
      { destination: { write: (m: string) => void stdout.push(m) }, capture: { stream: capture, level: 'debug' } },
    );
    logger.debug('quiet');
    logger.info('loud');
    expect(stdout.map((m) => (JSON.parse(m) as { msg: string }).msg)).toEqual(['loud']);
    expect(lines.map((l) => (JSON.parse(l.line) as { fields: { message: string } }).fields.message)).toEqual([
      'quiet',
      'loud',
    ]);
  });

  it('stores a line it cannot read as it came', () => {
    const capture = new LogCapture();
    const lines: LogLineInsert[] = [];
    capture.attach({ log: (l) => lines.push(l) }, { node: 'n1', cluster: 'c1' });
    capture.write('not json\n');
    expect(lines[0]).toMatchObject({ line: 'not json', labels: { component: 'runtime', level: 'info' } });
  });
});
