import { RatchetError, type RatchetErrorOptions } from './errors.ts';

/*
 * Startup errors: they stop the process before it serves anything, so their status only matters if one ever
 * surfaces through a listener (it should not); 500 says "the server is broken", which is true.
 */

function causeText(cause: unknown): string | undefined {
  if (cause instanceof Error) return cause.message;
  if (typeof cause === 'string') return cause;
  return undefined;
}

export interface ConfigErrorOptions extends RatchetErrorOptions {
  /** The offending setting, as the user wrote it: an env var name, or a config file key (with the file). */
  key?: string;
}

/** RT0002: the configuration cannot be read or parsed. The message always names what to fix. */
export class ConfigError extends RatchetError {
  readonly code = 'RT0002';
  readonly status = 500;
  readonly key: string | undefined;

  constructor(message: string, options: ConfigErrorOptions = {}) {
    super(message, options);
    this.key = options.key;
  }

  /** `invalid value for RATCHET_ADMIN_BIND: expected host:port …, got "x"`. */
  static invalidValue(key: string, problem: string, options: RatchetErrorOptions = {}): ConfigError {
    return new ConfigError(`invalid value for ${key}: ${problem}`, { ...options, key });
  }
}

export interface BindErrorOptions extends RatchetErrorOptions {
  /** Which listener failed: `ingress`, `admin`, `introspection`, `observability`, `metrics`. */
  listener?: string;
}

/** RT0004: a listener cannot bind to its configured address. */
export class BindError extends RatchetError {
  readonly code = 'RT0004';
  readonly status = 500;
  readonly address: string;
  readonly listener: string | undefined;

  /** `address` as the user configured it, e.g. `127.0.0.1:9070` or `[::1]:8080`. */
  constructor(address: string, options: BindErrorOptions = {}) {
    const who = options.listener === undefined ? '' : ` the ${options.listener} listener`;
    const why = causeText(options.cause);
    super(`cannot bind${who} to ${address}${why === undefined ? '' : `: ${why}`}`, options);
    this.address = address;
    this.listener = options.listener;
  }
}

export interface DataDirLockedErrorOptions extends RatchetErrorOptions {
  /** The lock file inside the data directory, when known. */
  lockFile?: string;
  /** The process holding the lock, when known. */
  holderPid?: number;
}

/** RT0005: another process holds the lock on the data directory. */
export class DataDirLockedError extends RatchetError {
  readonly code = 'RT0005';
  readonly status = 500;
  readonly dataDir: string;

  constructor(dataDir: string, options: DataDirLockedErrorOptions = {}) {
    const details = [
      options.lockFile === undefined ? undefined : `lock file ${options.lockFile}`,
      options.holderPid === undefined ? undefined : `held by pid ${options.holderPid}`,
    ].filter((part) => part !== undefined);
    super(
      `the data directory ${dataDir} is locked by another process` +
        (details.length > 0 ? ` (${details.join(', ')})` : '') +
        '; stop the other Ratchet using it, or point RATCHET_DATA_DIR at another directory',
      options,
    );
    this.dataDir = dataDir;
  }
}

export interface StorageVersionMismatchErrorOptions extends RatchetErrorOptions {
  /** The storage format version found in storage. */
  found?: number;
  /** The newest storage format version this Ratchet reads. */
  supported?: number;
}

/**
 * META0010: the storage records a storage format version this Ratchet cannot read (written by a newer Ratchet, or
 * too old to upgrade). The message, written where the versions are known, says which and what to do.
 */
export class StorageVersionMismatchError extends RatchetError {
  readonly code = 'META0010';
  readonly status = 500;
  readonly found: number | undefined;
  readonly supported: number | undefined;

  constructor(message: string, options: StorageVersionMismatchErrorOptions = {}) {
    super(message, options);
    this.found = options.found;
    this.supported = options.supported;
  }
}

/**
 * META0011: the storage is not empty but records no storage format version, and holds no invocation storage of
 * Ratchet's (that is RT0009). Restate reports the worker-storage case as RT0009; the message names both codes.
 */
export class StorageVersionMissingError extends RatchetError {
  readonly code = 'META0011';
  readonly status = 500;

  constructor(message: string, options: RatchetErrorOptions = {}) {
    super(message.includes('RT0009') ? message : `${message} (META0011, also known as RT0009)`, options);
  }
}

/**
 * RT0009: the `ratchet` schema holds Ratchet's invocation storage (the worker storage: invocations, journals, state)
 * but records no storage format version: a partial restore, a deleted `ratchet.meta` row, or tables from a Ratchet
 * before storage versions. Ratchet cannot tell which layout the rows have, so it refuses to start.
 */
export class WorkerStorageVersionMissingError extends RatchetError {
  readonly code = 'RT0009';
  readonly status = 500;
}
