import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../support/runtime-process.ts';

const run = promisify(execFile);

/** What a process logging through `createLogger` writes to stdout (a pipe here, as under a log shipper). */
async function stdoutOf(format: string): Promise<string> {
  const script =
    "import { createLogger } from './runtime/src/telemetry/logger.ts';" +
    `createLogger({ level: 'info', format: '${format}' }).child({ component: 'engine' })` +
    ".info({ 'service.invocation.id': 'inv_1' }, 'hello');";
  const { stdout } = await run(join(REPO_ROOT, 'node_modules', '.bin', 'tsx'), ['-e', script], { cwd: REPO_ROOT });
  return stdout;
}

describe('log format on stdout', () => {
  it('auto: JSON lines when stdout is not a terminal', async () => {
    const line = JSON.parse((await stdoutOf('auto')).trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 'info', component: 'engine', 'service.invocation.id': 'inv_1', msg: 'hello' });
  });

  it('pretty: human-readable lines (pino-pretty), fields below the message', async () => {
    const out = await stdoutOf('pretty');
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: hello\n/);
    expect(out).toContain('service.invocation.id: "inv_1"');
    expect(() => JSON.parse(out.trim()) as unknown).toThrow();
  });
});
