import type { Logger } from 'pino';
import type { InvocationObserver, LifecycleEvent, ObservedInvocation } from '../engine/observer.ts';
import { LOG_FIELDS } from '../telemetry/logger.ts';
import type { LogCapture } from './log-capture.ts';
import type { CompactLine } from './model.ts';
import { FS } from './store-format.ts';

type Level = 'debug' | 'info' | 'warn';

/**
 * The log store reached without pino: a lifecycle line that stdout would not show is formatted once, straight into
 * the store's format, instead of being serialised by pino, parsed back and formatted again by the capture.
 */
export interface DirectStore {
  readonly capture: LogCapture;
  /** Whether stdout shows lines of this level (RATCHET_LOG_LEVEL). */
  readonly stdout: (level: Level) => boolean;
  /** Whether the store keeps lines of this level (RATCHET_OBSERVABILITY_LOG_LEVEL). */
  readonly store: (level: Level) => boolean;
}

/**
 * Lifecycle events of invocations as log lines, with the names Restate logs them with (`restate.invocation.id`,
 * `restate.invocation.target`, `rpc.service`, `rpc.method`, `restate.deployment.id`, `restate.error.code`) and the
 * specification's `service.invocation.id`. Routine events are `debug` (the log store keeps them; stdout shows them
 * at RATCHET_LOG_LEVEL=debug), what needs a look — a retry, a pause, a kill — `info` or `warn`.
 */
export class InvocationLog implements InvocationObserver {
  private readonly log: Logger;

  constructor(
    logger: Logger,
    private readonly direct?: DirectStore,
  ) {
    this.log = logger.child({ component: 'invocation' });
  }

  event(inv: ObservedInvocation, e: LifecycleEvent): void {
    const level = levelOf(e);
    const direct = this.direct;
    const toStdout = direct === undefined ? this.log.isLevelEnabled(level) : direct.stdout(level);
    if (!toStdout && !(direct?.store(level) ?? false)) return;
    if (!toStdout && direct !== undefined && level === 'debug') {
      const compact = compactLine(inv, e);
      if (compact !== undefined) {
        const stream = direct.capture.stream(inv.service, level, 'invocation');
        direct.capture.direct({
          labels: stream.labels,
          labelsKey: stream.key,
          invocationId: inv.id,
          line: '',
          compact,
        });
        return;
      }
    }
    if (toStdout || direct === undefined) {
      const { fields, message } = lineFields(inv, e);
      delete fields.message;
      this.log[level](fields, message);
      return;
    }
    const stream = direct.capture.stream(inv.service, level, 'invocation');
    direct.capture.direct({
      labels: stream.labels,
      labelsKey: stream.key,
      invocationId: inv.id,
      line: storedLine(inv, e, new Date().toISOString()),
      json: true,
    });
  }
}

/** The fields of an event's line (`message` first after the id, as Restate's lines have it) and its message. */
function lineFields(inv: ObservedInvocation, e: LifecycleEvent): { fields: Record<string, unknown>; message: string } {
  const fields: Record<string, unknown> = {
    'restate.invocation.id': inv.id,
    message: '',
    [LOG_FIELDS.invocationId]: inv.id,
    'restate.invocation.target': inv.target,
    [LOG_FIELDS.serviceName]: inv.service,
    'rpc.method': inv.handler,
    'restate.invocation.attempt': inv.attempt,
    'restate.partition.id': inv.partition,
    'restate.invocation.event': e.kind,
  };
  if (inv.deploymentId !== null) fields['restate.deployment.id'] = inv.deploymentId;
  // The trace id of its spans (traceparent: version "-" trace id "-" …): from a log line to its trace.
  if (inv.traceContext !== null) fields.trace_id = inv.traceContext.slice(3, 35);
  let message: string;
  switch (e.kind) {
    case 'accepted':
      if (e.idempotencyKey !== null) fields['restate.idempotency.key'] = e.idempotencyKey;
      message = 'invocation accepted';
      break;
    case 'scheduled':
      fields['restate.invocation.execution_time'] = e.at.toISOString();
      message = `invocation scheduled for ${e.at.toISOString()}`;
      break;
    case 'inboxed':
      message = 'invocation inboxed: its key is busy';
      break;
    case 'started':
      fields['restate.deployment.service_protocol_version'] = e.protocolVersion;
      message = `invocation attempt ${inv.attempt} started`;
      break;
    case 'replayed':
      fields['restate.journal.length'] = e.entries;
      message = `journal replayed: ${e.entries} entries`;
      break;
    case 'suspended':
      message = 'invocation suspended';
      break;
    case 'resumed':
      message = e.by === 'admin' ? 'invocation resumed by the admin API' : 'invocation resumed';
      break;
    case 'retrying':
      fields['restate.error.code'] = e.code;
      fields[LOG_FIELDS.errorCode] = e.code;
      fields['restate.invocation.error.message'] = e.message;
      if (e.stacktrace !== undefined) fields['restate.invocation.error.stacktrace'] = e.stacktrace;
      fields['restate.invocation.retry_delay_ms'] = e.delayMs;
      message = `[${e.code}] invocation attempt failed; retrying in ${e.delayMs} ms: ${e.message}`;
      break;
    case 'paused':
      if (e.code !== undefined) fields['restate.error.code'] = e.code;
      if (e.message !== undefined) fields['restate.invocation.error.message'] = e.message;
      message =
        e.by === 'admin'
          ? 'invocation paused by the admin API'
          : `[${e.code}] invocation paused after a failure: ${e.message}`;
      break;
    case 'cancelled':
      message = 'invocation cancelled';
      break;
    case 'killed':
      message = 'invocation killed';
      break;
    case 'completed':
      fields['restate.invocation.result'] = e.outcome;
      if (e.code !== undefined) fields['restate.invocation.error.code'] = e.code;
      if (e.message !== undefined) fields['restate.invocation.error.message'] = e.message;
      message = e.outcome === 'success' ? 'invocation completed' : `invocation completed with a failure: ${e.message}`;
      break;
    case 'restarted-as-new':
      fields['restate.invocation.restart_as_new.new_invocation_id'] = e.newId;
      message = `invocation restarted as ${e.newId}`;
      break;
  }
  return { fields, message };
}

/** An event's line in full as the log store keeps it (Restate's JSON format), at `timestamp` (ISO 8601). */
export function storedLine(inv: ObservedInvocation, e: LifecycleEvent, timestamp: string): string {
  const { fields, message } = lineFields(inv, e);
  fields.message = message;
  return JSON.stringify({ timestamp, level: levelOf(e).toUpperCase(), fields, target: 'invocation' });
}

/**
 * A routine line in the store's compact form (migration 0012's `ratchet.render_line` turns it into the same text as
 * the full form above, from the time the store keeps with it); undefined for an event that has no compact form.
 */
export function compactLine(inv: ObservedInvocation, e: LifecycleEvent): CompactLine | undefined {
  if (!Number.isSafeInteger(inv.attempt) || !Number.isSafeInteger(inv.partition)) return undefined;
  let value: string;
  switch (e.kind) {
    case 'accepted':
      value = e.idempotencyKey === null ? '' : JSON.stringify(e.idempotencyKey);
      break;
    case 'scheduled':
      value = JSON.stringify(e.at.toISOString());
      break;
    case 'started':
      if (!Number.isSafeInteger(e.protocolVersion)) return undefined;
      value = String(e.protocolVersion);
      break;
    case 'replayed':
      if (!Number.isSafeInteger(e.entries)) return undefined;
      value = String(e.entries);
      break;
    case 'resumed':
      value = JSON.stringify(e.by);
      break;
    case 'completed':
      if (e.outcome !== 'success') return undefined;
      value = '';
      break;
    case 'inboxed':
    case 'suspended':
      value = '';
      break;
    case 'retrying':
    case 'paused':
    case 'cancelled':
    case 'killed':
    case 'restarted-as-new':
      return undefined;
  }
  return {
    id: inv.id,
    target: inv.target,
    service: inv.service,
    handler: inv.handler,
    trace: inv.traceContext === null ? null : inv.traceContext.slice(3, 35),
    deployment: inv.deploymentId,
    fields: `${e.kind}${FS}${inv.attempt}${FS}${inv.partition}${FS}${value}`,
  };
}

function levelOf(e: LifecycleEvent): Level {
  switch (e.kind) {
    case 'retrying':
      return 'warn';
    case 'paused':
      return e.by === 'admin' ? 'info' : 'warn';
    case 'cancelled':
    case 'killed':
    case 'restarted-as-new':
      return 'info';
    case 'completed':
      return e.outcome === 'success' ? 'debug' : 'info';
    case 'accepted':
    case 'scheduled':
    case 'inboxed':
    case 'started':
    case 'replayed':
    case 'suspended':
    case 'resumed':
      return 'debug';
  }
}
