import { hostname } from 'node:os';
import { pino, type DestinationStream, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
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
  /**
   * A second destination (the observability log store) with a level of its own: lines at `level` or above go there,
   * whether or not the destination's level lets them through to stdout.
   */
  capture?: { stream: DestinationStream; level: Level };
}

export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

const LEVEL_ORDER: readonly Level[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Whether a line at `level` passes a destination set to `threshold`. */
export function levelPasses(level: Level, threshold: Level): boolean {
  return threshold !== 'silent' && LEVEL_ORDER.indexOf(level) >= LEVEL_ORDER.indexOf(threshold);
}

/**
 * Where stdout lines go: JSON as they are, or through pino-pretty (pino's standard prettifier, run in this thread)
 * for `pretty`, and for `auto` when stdout is a terminal.
 */
function stdoutDestination(format: LogConfig['format'] | undefined): DestinationStream {
  const pretty = format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true);
  if (!pretty) return pino.destination(1);
  return pinoPretty({
    colorize: process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    destination: 1,
  });
}

/**
 * The process's one root logger: JSON lines, `level` as a label (`"info"`, not `30`), ISO time (or pretty lines on a
 * terminal, see `stdoutDestination`). Every part of the runtime takes a child: `logger.child({ component: 'engine'
 * })`. `level: 'silent'` turns logging off, which is what tests use.
 */
export function createLogger(
  config: Pick<LogConfig, 'level'> & Partial<Pick<LogConfig, 'format'>>,
  options: CreateLoggerOptions = {},
): Logger {
  const capture = options.capture;
  const level =
    capture === undefined || capture.level === 'silent'
      ? config.level
      : LEVEL_ORDER[Math.min(LEVEL_ORDER.indexOf(config.level), LEVEL_ORDER.indexOf(capture.level))]!;
  const loggerOptions = {
    level,
    // `base` replaces pino's defaults, so they are repeated here.
    base: { pid: process.pid, hostname: hostname(), ...options.base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label: string) => ({ level: label }),
    },
  };
  if (capture !== undefined && capture.level !== 'silent') {
    const streams: pino.StreamEntry[] = [{ stream: capture.stream, level: capture.level }];
    if (config.level !== 'silent') {
      streams.push({ stream: options.destination ?? stdoutDestination(config.format), level: config.level });
    }
    return pino(loggerOptions, pino.multistream(streams));
  }
  return pino(loggerOptions, options.destination ?? stdoutDestination(config.format));
}
