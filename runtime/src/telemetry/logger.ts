import { hostname } from 'node:os';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogConfig } from '../config/config.ts';

export type { Logger };

/**
 * Field names of structured log lines. Invocation fields use the specification's names, so logs correlate with
 * traces (`service.invocation.id`) in the observability API and in Loki-compatible tools.
 */
export const LOG_FIELDS = {
  component: 'component',
  invocationId: 'service.invocation.id',
  invocationTarget: 'service.invocation.target',
  deploymentId: 'service.deployment.id',
  /** The name of a service (restate's span attribute for it). */
  serviceName: 'rpc.service',
  /** The META/RT code of an error or warning, e.g. `RT0007`. */
  errorCode: 'error.code',
} as const;

export interface CreateLoggerOptions {
  /** Where lines go; stdout by default. Tests pass a stream to read what was logged. */
  destination?: DestinationStream;
  /** Fields on every line, besides `pid`, `hostname` and `time`; e.g. the node name. */
  base?: Record<string, unknown>;
}

/**
 * The process's one root logger: JSON lines, `level` as a label (`"info"`, not `30`), ISO time. Every part of the
 * runtime takes a child: `logger.child({ component: 'engine' })`. `level: 'silent'` turns logging off, which is what
 * tests use.
 */
export function createLogger(config: Pick<LogConfig, 'level'>, options: CreateLoggerOptions = {}): Logger {
  const loggerOptions = {
    level: config.level,
    // `base` replaces pino's defaults, so they are repeated here.
    base: { pid: process.pid, hostname: hostname(), ...options.base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label: string) => ({ level: label }),
    },
  };
  return options.destination === undefined ? pino(loggerOptions) : pino(loggerOptions, options.destination);
}
