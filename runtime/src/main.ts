import { link, mkdir, open, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfig, type Config } from './config/config.ts';
import { DataDirLockedError } from './errors/config-errors.ts';
import { RatchetError } from './errors/errors.ts';
import { createNode, type RuntimeHandle } from './runtime.ts';
import { startEmbeddedDatabase, type EmbeddedDatabase } from './storage/pg/embedded.ts';
import { LogCapture } from './observability/log-capture.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';

/** How long the runtime may take to drain on SIGINT/SIGTERM before PostgreSQL is stopped under it. */
const DRAIN_TIMEOUT_MS = 30_000;

/** The process: configuration, the embedded database in dev mode, the runtime, and a graceful stop. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    fatal(createLogger({ level: 'info' }), err);
    return;
  }
  // With the store on, every line also goes to the cluster's log store (the observability API), at its own level.
  const logCapture = new LogCapture();
  const logger = createLogger(
    config.log,
    config.observability.store ? { capture: { stream: logCapture, level: config.observability.logLevel } } : {},
  );
  for (const w of config.warnings) logger.warn(w);

  let lock: (() => Promise<void>) | undefined;
  let embedded: EmbeddedDatabase | undefined;
  let runtime: RuntimeHandle | undefined;
  let stopping = false;

  const start = async (): Promise<void> => {
    let databaseUrl = config.database.url;
    if (databaseUrl === undefined) {
      lock = await lockDataDir(config.dataDir);
      embedded = await startEmbeddedDatabase(config.dataDir, logger, {
        avoidPorts: [config.ingress, config.admin, config.introspection, config.observability, config.metrics].map(
          (l) => l.bind.port,
        ),
        // The runtime rides out the outage (not ready, requests answered 503, partitions recovered afterwards).
        restart: true,
        onUnexpectedExit: (status) => {
          logger.error(status, 'the embedded PostgreSQL exited unexpectedly; restarting it on the same data');
        },
      });
      databaseUrl = embedded.url;
    }
    if (stopping) return; // a signal came while PostgreSQL started: stop() takes it down again
    runtime = await createNode(config, {
      databaseUrl,
      logger,
      logCapture,
      onFatal: (reason) => void stop(reason, 1),
    });
  };

  // A signal during startup waits for it, then stops whatever came up, so a Ctrl-C while PostgreSQL initialises leaves
  // no server behind.
  const stop = async (reason: string, exitCode: number): Promise<void> => {
    if (stopping) {
      // Ctrl-C in a terminal reaches npm, tsx and us at once, and npm and tsx forward it again: not a second request.
      logger.debug({ reason }, 'already stopping');
      return;
    }
    stopping = true;
    logger.info({ reason }, 'stopping');
    try {
      await startup;
    } catch {
      return; // the startup failure is reported, and the process ended, by main's catch below
    }
    let code = exitCode;
    try {
      // The hand-over and the shutdown delay come first; the drain gets its own time after them.
      const drained = await withTimeout(runtime?.stop(), config.cluster.shutdownDelayMs + DRAIN_TIMEOUT_MS);
      if (!drained) {
        logger.warn({ timeoutMs: DRAIN_TIMEOUT_MS }, 'the runtime did not drain in time; stopping anyway');
        code = 1;
      }
    } catch (err) {
      logger.error({ err }, 'unclean stop of the runtime');
      code = 1;
    }
    try {
      await embedded?.stop();
      await lock?.();
    } catch (err) {
      logger.error({ err }, 'unclean stop of the embedded PostgreSQL');
      code = 1;
    }
    logger.info('stopped');
    logger.flush();
    process.exit(code);
  };
  // Last line of defence: a promise rejection nobody handled is a bug to report, not a reason to drop every
  // invocation in flight (the process stays up; the error names the bug).
  process.on('unhandledRejection', (reason) => {
    logger.error({ err: reason }, 'unhandled promise rejection (a bug in Ratchet; please report it)');
  });
  const startup = start();
  process.on('SIGINT', () => void stop('SIGINT', 0));
  process.on('SIGTERM', () => void stop('SIGTERM', 0));

  try {
    await startup;
  } catch (err) {
    await embedded?.stop().catch(() => undefined); // reporting the startup failure matters more
    await lock?.().catch(() => undefined);
    fatal(logger, err, config);
  }
}

async function withTimeout(promise: Promise<void> | undefined, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise === undefined ? true : promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function fatal(logger: Logger, err: unknown, config?: Config): void {
  if (err instanceof RatchetError) {
    logger.fatal({ code: err.code, err: err.cause === undefined ? undefined : err.cause }, err.codedMessage);
  } else if (config?.database.url !== undefined && isConnectionError(err)) {
    logger.fatal({ err }, `Ratchet could not start: ${describeConnectionError(err, config.database.url)}`);
  } else {
    logger.fatal({ err }, `Ratchet could not start: ${errorText(err)}`);
  }
  logger.flush();
  process.exitCode = 1;
  // Whatever is still open (a half-closed pool, sockets) must not keep a failed process alive.
  setTimeout(() => process.exit(1), 500).unref();
}

/** Network errors while connecting, and PostgreSQL refusing the login or the database (classes 08, 28, 3D). */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return (
    /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$/.test(code) ||
    /^(08|28|3D)/.test(code)
  );
}

/** Names the server and database without the password, which the URL may carry. */
function describeConnectionError(err: unknown, url: string): string {
  let where = 'the PostgreSQL server';
  try {
    const u = new URL(url);
    where = `PostgreSQL at ${u.host}${u.pathname}${u.username === '' ? '' : ` as ${decodeURIComponent(u.username)}`}`;
  } catch {
    // Not a URL the WHATWG parser takes; the config accepted it, so pg may still have; say less.
  }
  return `cannot connect to ${where} (RATCHET_DATABASE_URL): ${errorText(err)}`;
}

/** Node reports a refused connection to a name with several addresses as an AggregateError with an empty message. */
function errorText(err: unknown): string {
  if (err instanceof AggregateError && err.message === '') {
    const first: unknown = err.errors[0];
    if (first instanceof Error) return first.message;
  }
  if (err instanceof Error) {
    if (err.message !== '') return err.message;
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? code : err.name;
  }
  return String(err);
}

/**
 * One runtime per data directory: `ratchet.pid` holds the owner's PID. It is created complete (written aside, then
 * hard-linked into place, which fails if it exists), so a reader never sees it empty. A file left by a dead process is
 * taken over; two starters taking over the same stale file both move it aside by rename, and the one that moved a file
 * other than the stale one it read knows it lost and puts it back.
 */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
  const file = join(dataDir, 'ratchet.pid');
  const mine = `${file}.${process.pid}`;
  await writeFile(mine, String(process.pid));
  try {
    for (let i = 0; i < 3; i++) {
      try {
        await link(mine, file);
        return async () => {
          // Only our own lock: a runtime that took over after a forced stop must keep its file.
          const holder = await readFile(file, 'utf8').catch(() => '');
          if (holder.trim() === String(process.pid)) await unlink(file).catch(() => undefined); // raced: gone
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const seen = await readLock(file);
      if (seen === undefined) continue; // removed meanwhile
      if (seen.pid !== process.pid && seen.pid > 0 && isAlive(seen.pid)) {
        throw new DataDirLockedError(dataDir, { lockFile: file, holderPid: seen.pid });
      }
      const aside = `${file}.stale-${process.pid}`;
      try {
        await rename(file, aside);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // another starter moved it first
        throw err;
      }
      const moved = await readLock(aside);
      if (moved !== undefined && moved.ino !== seen.ino) {
        // Another starter replaced the stale file with its own between our read and our rename.
        await link(aside, file).catch(() => undefined); // EEXIST: a third one got in; it holds the lock then
        await unlink(aside);
        throw new DataDirLockedError(dataDir, { lockFile: file, holderPid: moved.pid });
      }
      await unlink(aside);
    }
    throw new DataDirLockedError(dataDir, { lockFile: file });
  } finally {
    await unlink(mine).catch(() => undefined); // the link in place keeps the content
  }
}

/** The PID in a lock file and the file's inode, read through one handle so they belong together. */
async function readLock(file: string): Promise<{ pid: number; ino: number } | undefined> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const { ino } = await handle.stat();
    const pid = Number((await handle.readFile('utf8')).trim());
    return { pid: Number.isInteger(pid) ? pid : 0, ino };
  } finally {
    await handle.close();
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

void main();
