import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The real `restate` CLI 1.7.12 (npm `@restatedev/restate`, its platform binary), pointed at an admin URL through
 * `RESTATE_ADMIN_URL`, with its own empty config directory and no terminal: `CI=1` makes it take `--yes` answers
 * without prompting and print plain text.
 */

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function restateCliBinary(): string {
  const pkg = `@restatedev/restate-${process.platform}-${process.arch}`;
  const packageJson = createRequire(import.meta.url).resolve(`${pkg}/package.json`);
  const binary = join(dirname(packageJson), 'bin', 'restate');
  if (!existsSync(binary)) throw new Error(`restate CLI binary missing at ${binary}`);
  return binary;
}

export interface RestateCli {
  run(...args: string[]): Promise<CliResult>;
  close(): Promise<void>;
}

export async function restateCli(adminUrl: string, ingressUrl: string): Promise<RestateCli> {
  const home = await mkdtemp(join(tmpdir(), 'ratchet-cli-'));
  const binary = restateCliBinary();
  const env: Record<string, string> = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(
        (e): e is [string, string] => !e[0].startsWith('RESTATE_') && e[1] !== undefined,
      ),
    ),
    HOME: home,
    RESTATE_CLI_CONFIG_HOME: home,
    RESTATE_ADMIN_URL: adminUrl,
    RESTATE_INGRESS_URL: ingressUrl,
    CI: '1',
    NO_COLOR: '1',
    TERM: 'dumb',
    COLUMNS: '400',
  };
  return {
    run: (...args) =>
      new Promise((resolve) => {
        execFile(binary, args, { env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
          const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
          resolve({ code, stdout, stderr });
        });
      }),
    close: () => rm(home, { recursive: true, force: true }),
  };
}

/** For assertion messages: everything the CLI printed. */
export function printed(result: CliResult): string {
  return `exit ${String(result.code)}\n--- stdout ---\n${result.stdout}\n--- stderr ---\n${result.stderr}`;
}
