import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { KeyFileError, parseKeyFile, type VerificationKey } from './keys.ts';

/*
 * The keys file on disk, re-read when it changes. In Kubernetes it is a Secret volume, which the kubelet updates by
 * swapping a symlink in the file's directory: watching the directory sees that (and in-place writes); a poll every
 * `pollIntervalMs` catches whatever a watch misses (network file systems, exhausted inotify watches). A file that
 * becomes unreadable or invalid keeps the last good keys: locking every client out is worse than a late rotation.
 */

export interface LoadedKeys {
  readonly keys: readonly VerificationKey[];
  /** SHA-256 of the file's content: a re-read of unchanged bytes imports nothing. */
  readonly digest: string;
}

/** Reads and parses the file; throws `KeyFileError` (read failures included) with a message naming the file. */
export async function loadKeyFile(path: string): Promise<LoadedKeys> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new KeyFileError(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return { keys: await parseKeyFile(text), digest: digestOf(text) };
  } catch (err) {
    if (err instanceof KeyFileError) throw new KeyFileError(`${path}: ${err.message}`);
    throw err;
  }
}

function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export interface KeyFileWatchOptions {
  readonly path: string;
  /** What the file held at startup. */
  readonly initial: LoadedKeys;
  /** Called with the new keys each time the file's content changed and parsed. */
  readonly onKeys: (keys: readonly VerificationKey[]) => void;
  readonly logger: Logger;
  readonly pollIntervalMs: number;
}

export interface KeyFileWatch {
  /** Reads the file now (also what the watch and the poll do); resolves once the keys are current. */
  check(): Promise<void>;
  stop(): void;
}

/** Debounce of watch events: an editor or the kubelet touches several entries in a row. */
const WATCH_SETTLE_MS = 100;

export function watchKeyFile(options: KeyFileWatchOptions): KeyFileWatch {
  const { path, logger } = options;
  let digest = options.initial.digest;
  /** The problem last warned about, so a broken file is reported once, not every poll. */
  let problem: string | undefined;
  let stopped = false;
  let running: Promise<void> | undefined;
  let again = false;

  const readOnce = async (): Promise<void> => {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      report(`cannot read the keys file: ${(err as Error).message}`);
      return;
    }
    const next = digestOf(text);
    if (next === digest) {
      problem = undefined;
      return;
    }
    let keys: VerificationKey[];
    try {
      keys = await parseKeyFile(text);
    } catch (err) {
      if (!(err instanceof KeyFileError)) throw err;
      report(`the keys file is not valid: ${err.message}`);
      return;
    }
    if (stopped) return;
    digest = next;
    problem = undefined;
    options.onKeys(keys);
    logger.info({ file: path, keys: keys.map((k) => k.label) }, 'auth keys reloaded');
  };

  const report = (text: string): void => {
    if (text === problem) return;
    problem = text;
    logger.warn({ file: path, reason: text }, `${text}; keeping the previous keys`);
  };

  const check = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (running !== undefined) {
      // A change may land while the previous read runs: read once more after it.
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await readOnce();
      } while (again && !stopped);
    })()
      .catch((err: unknown) => logger.error({ err, file: path }, 'reloading the auth keys failed'))
      .finally(() => {
        running = undefined;
      });
    return running;
  };

  let settle: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(path), { persistent: false }, () => {
      clearTimeout(settle);
      settle = setTimeout(() => void check(), WATCH_SETTLE_MS);
      settle.unref();
    });
    watcher.on('error', (err) => {
      logger.debug({ err, file: path }, 'watching the keys file failed; polling only');
      watcher?.close();
      watcher = undefined;
    });
  } catch (err) {
    logger.debug({ err, file: path }, 'cannot watch the keys file; polling only');
  }
  const poll = setInterval(() => void check(), options.pollIntervalMs);
  poll.unref();

  return {
    check,
    stop() {
      stopped = true;
      clearInterval(poll);
      clearTimeout(settle);
      watcher?.close();
      watcher = undefined;
    },
  };
}
