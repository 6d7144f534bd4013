import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { componentLogger, createLogger, invocationLogger, LOG_FIELDS } from '../../../runtime/src/telemetry/logger.ts';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  const lines = (): Record<string, unknown>[] =>
    chunks
      .join('')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { stream, lines };
}

describe('logger from config', () => {
  it('writes JSON lines with level labels, the component and the invocation id field', () => {
    const out = capture();
    const root = createLogger(loadConfig({ env: { RATCHET_LOG_LEVEL: 'debug' } }).log, { destination: out.stream });
    const engine = componentLogger(root, 'engine');
    invocationLogger(engine, 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4', 'Greeter/greet').debug('attempt started');
    engine.trace('not shown at debug');
    const lines = out.lines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'debug',
      msg: 'attempt started',
      component: 'engine',
      'service.invocation.id': 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4',
      'service.invocation.target': 'Greeter/greet',
      pid: process.pid,
    });
    expect(typeof lines[0]?.['time']).toBe('string');
    expect(LOG_FIELDS.invocationId).toBe('service.invocation.id');
  });

  it('is silent with RATCHET_LOG_LEVEL=silent', () => {
    const out = capture();
    const root = createLogger(loadConfig({ env: { RATCHET_LOG_LEVEL: 'silent' } }).log, { destination: out.stream });
    root.fatal('nothing');
    root.child({ component: 'admin' }).error('nothing either');
    expect(out.lines()).toEqual([]);
  });
});
