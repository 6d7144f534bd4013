import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { createLogger, LOG_FIELDS } from '../../../runtime/src/telemetry/logger.ts';

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
    const engine = root.child({ [LOG_FIELDS.component]: 'engine' });
    engine.debug(
      {
        [LOG_FIELDS.invocationId]: 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4',
        [LOG_FIELDS.invocationTarget]: 'Greeter/greet',
      },
      'attempt started',
    );
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
  });

  it('is silent with RATCHET_LOG_LEVEL=silent', () => {
    const out = capture();
    const root = createLogger(loadConfig({ env: { RATCHET_LOG_LEVEL: 'silent' } }).log, { destination: out.stream });
    root.fatal('nothing');
    root.child({ component: 'admin' }).error('nothing either');
    expect(out.lines()).toEqual([]);
  });
});
