import { hostname } from 'node:os';
import { pino, type DestinationStream, type Level, type Logger } from 'pino';

export type { Logger };

export type LogLevel = Level | 'silent';

export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export interface CreateLoggerOptions {
  /** Where lines go; stdout by default. Tests pass a stream to read what was logged. */
  readonly destination?: DestinationStream;
  /** Fields on every line besides `pid`, `hostname` and `time` (e.g. the pod name). */
  readonly base?: Record<string, unknown>;
}

/**
 * The operator's one root logger: JSON lines, `level` as a label, ISO time (the same shape as the runtime's, so one
 * log pipeline reads both). Every part of the operator takes `componentLogger(root, '<component>')`.
 */
export function createLogger(level: LogLevel, options: CreateLoggerOptions = {}): Logger {
  const loggerOptions = {
    level,
    // `base` replaces pino's defaults, so they are repeated here.
    base: { pid: process.pid, hostname: hostname(), ...options.base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return options.destination === undefined ? pino(loggerOptions) : pino(loggerOptions, options.destination);
}

/** `root.child({ component })`. */
export function componentLogger(root: Logger, component: string): Logger {
  return root.child({ component });
}

/** A logger that drops everything: the default where a caller passes none (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
