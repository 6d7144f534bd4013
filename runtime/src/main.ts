import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfig, type Config } from './config/config.ts';
import { DataDirLockedError } from './errors/config-errors.ts';
import { RatchetError } from './errors/errors.ts';
import { startRuntime, type RuntimeHandle } from './runtime.ts';
import { startEmbeddedDatabase, type EmbeddedDatabase } from './storage/pg/embedded.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';

/** The process: configuration, the embedded database in dev mode, the runtime, and a graceful stop. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    fatal(createLogger({ level: 'info' }), err);
    return;
  }
  const logger = createLogger(config.log);
  for (const w of config.warnings) logger.warn(w);

  let lock: (() => Promise<void>) | undefined;
  let embedded: EmbeddedDatabase | undefined;
  let runtime: RuntimeHandle | undefined;
  let stopping = false;

  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    try {
      await runtime?.stop();
      await embedded?.stop();
      await lock?.();
      logger.info('stopped');
      process.exit(0);
    } catch (err) {
      logger.error({ err }, 'unclean stop');
      process.exit(1);
    }
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  try {
    let databaseUrl = config.database.url;
    if (databaseUrl === undefined) {
      lock = await lockDataDir(config.dataDir);
      embedded = await startEmbeddedDatabase(config.dataDir, logger);
      databaseUrl = embedded.url;
    }
    runtime = await startRuntime(config, databaseUrl, logger);
  } catch (err) {
    await embedded?.stop().catch(() => undefined);
    await lock?.().catch(() => undefined);
    fatal(logger, err);
  }
}

function fatal(logger: Logger, err: unknown): void {
  if (err instanceof RatchetError) {
    logger.fatal({ code: err.code, err: err.cause === undefined ? undefined : err.cause }, err.codedMessage);
  } else {
    logger.fatal({ err }, 'Ratchet could not start');
  }
  logger.flush();
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100).unref();
}

/**
 * One runtime per data directory: `ratchet.pid` holds the owner's PID. A file left by a dead process is taken over.
 */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
  const file = join(dataDir, 'ratchet.pid');
  for (let i = 0; i < 2; i++) {
    try {
      const handle = await open(file, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return async () => {
        await unlink(file).catch(() => undefined);
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number((await readFile(file, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) {
        throw new DataDirLockedError(dataDir, { lockFile: file, holderPid: holder });
      }
      await unlink(file).catch(() => undefined);
    }
  }
  throw new DataDirLockedError(dataDir, { lockFile: file });
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
