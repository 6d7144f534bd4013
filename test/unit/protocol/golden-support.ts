import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MessageType } from '../../../runtime/src/protocol/messages.ts';
import type {
  DecodedMessage,
  Failure,
  Future,
  Header,
  InvocationTarget,
  NotificationId,
  NotificationResult,
} from '../../../runtime/src/protocol/messages.ts';

/** shared/ sits beside the repository checkout, locally (/work/main, /work/shared) and in CI. */
export const GOLDEN_ROOT = fileURLToPath(new URL('../../../../shared/golden/', import.meta.url));

export interface GoldenFrame {
  dir: 'runtime->sdk' | 'sdk->runtime';
  type: string;
  name: string;
  flags: string;
  length: number;
  headerHex: string;
  payloadHex: string;
  body: unknown;
}

export interface GoldenExchange {
  /** e.g. `h2-v7/002-invoke_Greeter_greet` */
  id: string;
  protocolVersion?: number;
  frames: GoldenFrame[];
  requestBodyText?: string;
  responseBodyText?: string;
  /** Raw data chunks in arrival order, per direction. */
  chunks: { req: Buffer[]; res: Buffer[] };
}

interface CaptureEvent {
  dir: 'req' | 'res';
  kind: string;
  hex?: string;
}

export function loadGoldenExchanges(): GoldenExchange[] {
  const exchanges: GoldenExchange[] = [];
  for (const dir of readdirSync(GOLDEN_ROOT, { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    const files = readdirSync(`${GOLDEN_ROOT}${dir.name}`)
      .filter((f) => f.endsWith('.decoded.json'))
      .sort();
    for (const file of files) {
      const base = file.slice(0, -'.decoded.json'.length);
      const decoded = JSON.parse(readFileSync(`${GOLDEN_ROOT}${dir.name}/${file}`, 'utf8')) as {
        protocolVersion?: number;
        frames: GoldenFrame[];
        requestBodyText?: string;
        responseBodyText?: string;
      };
      const capture = JSON.parse(readFileSync(`${GOLDEN_ROOT}${dir.name}/${base}.capture.json`, 'utf8')) as {
        events: CaptureEvent[];
      };
      const chunks = { req: [] as Buffer[], res: [] as Buffer[] };
      for (const event of capture.events) {
        if (event.kind === 'data' && event.hex !== undefined) chunks[event.dir].push(Buffer.from(event.hex, 'hex'));
      }
      const exchange: GoldenExchange = { id: `${dir.name}/${base}`, frames: decoded.frames, chunks };
      if (decoded.protocolVersion !== undefined) exchange.protocolVersion = decoded.protocolVersion;
      if (decoded.requestBodyText !== undefined) exchange.requestBodyText = decoded.requestBodyText;
      if (decoded.responseBodyText !== undefined) exchange.responseBodyText = decoded.responseBodyText;
      exchanges.push(exchange);
    }
  }
  return exchanges;
}

export const hex = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');

/** Golden bodies show bytes as `{utf8?, hex}`; reduce them to the hex string. */
export function normalizeGoldenBody(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalizeGoldenBody);
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (typeof record['hex'] === 'string' && keys.every((k) => k === 'hex' || k === 'utf8')) return record['hex'];
    return Object.fromEntries(keys.map((k) => [k, normalizeGoldenBody(record[k])]));
  }
  return value;
}

type Obj = Record<string, unknown>;

/** Sets a plain proto3 field, leaving it out when it holds its default (as the golden JSON does). */
function put(o: Obj, key: string, v: unknown): void {
  if (v === undefined || v === 0 || v === '' || v === false || v === 0n) return;
  if (Array.isArray(v) && v.length === 0) return;
  if (v instanceof Uint8Array) {
    if (v.length > 0) o[key] = hex(v);
    return;
  }
  o[key] = typeof v === 'bigint' ? v.toString() : v;
}

/** Sets an `optional` field: present whenever defined, whatever its value. */
function opt(o: Obj, key: string, v: string | number | bigint | undefined): void {
  if (v !== undefined) o[key] = typeof v === 'bigint' ? v.toString() : v;
}

const COMBINATORS = [
  'UNKNOWN',
  'FIRST_COMPLETED',
  'ALL_COMPLETED',
  'FIRST_SUCCEEDED_OR_ALL_FAILED',
  'ALL_SUCCEEDED_OR_FIRST_FAILED',
];
const BEHAVIORS = ['RETRY', 'PAUSE', 'FAIL'];

function valueMsg(content: Uint8Array): Obj {
  return content.length === 0 ? {} : { content: hex(content) };
}

function pair(p: Header): Obj {
  const o: Obj = {};
  put(o, 'key', p.key);
  put(o, 'value', p.value);
  return o;
}

function failure(f: Failure): Obj {
  const o: Obj = {};
  put(o, 'code', f.code);
  put(o, 'message', f.message);
  put(o, 'metadata', f.metadata.map(pair));
  return o;
}

function future(f: Future): Obj {
  const o: Obj = {};
  put(o, 'waiting_completions', f.waitingCompletions);
  put(o, 'waiting_signals', f.waitingSignals);
  put(o, 'waiting_named_signals', f.waitingNamedSignals);
  put(o, 'nested_futures', f.nestedFutures.map(future));
  if (f.combinatorType !== 0) o['combinator_type'] = COMBINATORS[f.combinatorType];
  return o;
}

function result(o: Obj, r: NotificationResult, fields: { void: string; value: string; failure: string }): void {
  switch (r.kind) {
    case 'void':
      o[fields.void] = {};
      break;
    case 'value':
      o[fields.value] = valueMsg(r.value);
      break;
    case 'failure':
      o[fields.failure] = failure(r.failure);
      break;
    case 'invocationId':
      o['invocation_id'] = r.invocationId;
      break;
    case 'stateKeys':
      o['state_keys'] = r.keys.length === 0 ? {} : { keys: r.keys.map(hex) };
      break;
  }
}

const PLAIN_RESULT = { void: 'void', value: 'value', failure: 'failure' };

function notificationId(o: Obj, id: NotificationId): void {
  if (id.kind === 'completion') o['completion_id'] = id.id;
  else if (id.kind === 'signal') o['idx'] = id.idx;
  else o['name'] = id.name;
}

function target(o: Obj, t: InvocationTarget): void {
  if (t.kind === 'invocationId') {
    o['invocation_id'] = t.invocationId;
  } else if (t.kind === 'workflow') {
    const w: Obj = {};
    put(w, 'workflow_name', t.workflowName);
    put(w, 'workflow_key', t.workflowKey);
    opt(w, 'scope', t.scope);
    o['workflow_target'] = w;
  } else {
    const i: Obj = {};
    put(i, 'service_name', t.serviceName);
    opt(i, 'service_key', t.serviceKey);
    put(i, 'handler_name', t.handlerName);
    put(i, 'idempotency_key', t.idempotencyKey);
    opt(i, 'scope', t.scope);
    o['idempotent_request_target'] = i;
  }
}

/** Renders a decoded message the way the golden `body` shows it (snake_case, defaults left out, bytes as hex). */
export function toGoldenBody(decoded: DecodedMessage): Obj {
  const o: Obj = {};
  switch (decoded.type) {
    case MessageType.Start: {
      const m = decoded.message;
      put(o, 'id', m.id);
      put(o, 'debug_id', m.debugId);
      put(o, 'known_entries', m.knownEntries);
      put(
        o,
        'state_map',
        m.stateMap.map((e) => {
          const entry: Obj = {};
          put(entry, 'key', e.key);
          put(entry, 'value', e.value);
          return entry;
        }),
      );
      put(o, 'partial_state', m.partialState);
      put(o, 'key', m.key);
      put(o, 'retry_count_since_last_stored_entry', m.retryCountSinceLastStoredEntry);
      put(o, 'duration_since_last_stored_entry', m.durationSinceLastStoredEntry);
      put(o, 'random_seed', m.randomSeed);
      opt(o, 'scope', m.scope);
      opt(o, 'limit_key', m.limitKey);
      opt(o, 'idempotency_key', m.idempotencyKey);
      break;
    }
    case MessageType.Suspension: {
      const m = decoded.message;
      put(o, 'waiting_completions', m.waitingCompletions);
      put(o, 'waiting_signals', m.waitingSignals);
      put(o, 'waiting_named_signals', m.waitingNamedSignals);
      if (m.awaitingOn !== undefined) o['awaiting_on'] = future(m.awaitingOn);
      break;
    }
    case MessageType.Error: {
      const m = decoded.message;
      put(o, 'code', m.code);
      put(o, 'message', m.message);
      put(o, 'stacktrace', m.stacktrace);
      opt(o, 'related_command_index', m.relatedCommandIndex);
      opt(o, 'related_command_name', m.relatedCommandName);
      opt(o, 'related_command_type', m.relatedCommandType);
      opt(o, 'next_retry_delay', m.nextRetryDelay);
      if (m.behavior !== 0) o['behavior'] = BEHAVIORS[m.behavior];
      break;
    }
    case MessageType.End:
      break;
    case MessageType.CommandAck:
      put(o, 'command_index', decoded.message.commandIndex);
      break;
    case MessageType.ProposeRunCompletion: {
      const m = decoded.message;
      put(o, 'result_completion_id', m.resultCompletionId);
      if (m.result.kind === 'value') o['value'] = hex(m.result.value);
      else o['failure'] = failure(m.result.failure);
      break;
    }
    case MessageType.AwaitingOn:
      o['awaiting_on'] = future(decoded.message.awaitingOn);
      put(o, 'executing_side_effects', decoded.message.executingSideEffects);
      break;
    case MessageType.ProposeRunCompletionAck:
      put(o, 'completion_id', decoded.message.completionId);
      break;
    case MessageType.InputCommand:
      put(o, 'headers', decoded.message.headers.map(pair));
      put(o, 'name', decoded.message.name);
      o['value'] = valueMsg(decoded.message.value);
      break;
    case MessageType.OutputCommand:
      put(o, 'name', decoded.message.name);
      result(o, decoded.message.result, PLAIN_RESULT);
      break;
    case MessageType.GetLazyStateCommand:
      put(o, 'key', decoded.message.key);
      put(o, 'result_completion_id', decoded.message.resultCompletionId);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.SetStateCommand:
      put(o, 'key', decoded.message.key);
      o['value'] = valueMsg(decoded.message.value);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.ClearStateCommand:
      put(o, 'key', decoded.message.key);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.ClearAllStateCommand:
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.GetLazyStateKeysCommand:
    case MessageType.RunCommand:
      put(o, 'result_completion_id', decoded.message.resultCompletionId);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.GetEagerStateCommand:
      put(o, 'key', decoded.message.key);
      put(o, 'name', decoded.message.name);
      result(o, decoded.message.result, PLAIN_RESULT);
      break;
    case MessageType.GetEagerStateKeysCommand:
      put(o, 'name', decoded.message.name);
      o['value'] = decoded.message.keys.length === 0 ? {} : { keys: decoded.message.keys.map(hex) };
      break;
    case MessageType.GetPromiseCommand:
    case MessageType.PeekPromiseCommand:
      put(o, 'key', decoded.message.key);
      put(o, 'result_completion_id', decoded.message.resultCompletionId);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.CompletePromiseCommand:
      put(o, 'key', decoded.message.key);
      result(o, decoded.message.completion, {
        void: 'void',
        value: 'completion_value',
        failure: 'completion_failure',
      });
      put(o, 'result_completion_id', decoded.message.resultCompletionId);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.SleepCommand:
      put(o, 'wake_up_time', decoded.message.wakeUpTime);
      put(o, 'result_completion_id', decoded.message.resultCompletionId);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.CallCommand: {
      const m = decoded.message;
      put(o, 'service_name', m.serviceName);
      put(o, 'handler_name', m.handlerName);
      put(o, 'parameter', m.parameter);
      put(o, 'headers', m.headers.map(pair));
      put(o, 'key', m.key);
      opt(o, 'idempotency_key', m.idempotencyKey);
      opt(o, 'scope', m.scope);
      opt(o, 'limit_key', m.limitKey);
      put(o, 'invocation_id_notification_idx', m.invocationIdNotificationIdx);
      put(o, 'result_completion_id', m.resultCompletionId);
      put(o, 'name', m.name);
      break;
    }
    case MessageType.OneWayCallCommand: {
      const m = decoded.message;
      put(o, 'service_name', m.serviceName);
      put(o, 'handler_name', m.handlerName);
      put(o, 'parameter', m.parameter);
      put(o, 'invoke_time', m.invokeTime);
      put(o, 'headers', m.headers.map(pair));
      put(o, 'key', m.key);
      opt(o, 'idempotency_key', m.idempotencyKey);
      opt(o, 'scope', m.scope);
      opt(o, 'limit_key', m.limitKey);
      put(o, 'invocation_id_notification_idx', m.invocationIdNotificationIdx);
      put(o, 'name', m.name);
      break;
    }
    case MessageType.SendSignalCommand: {
      const m = decoded.message;
      put(o, 'target_invocation_id', m.targetInvocationId);
      notificationId(o, m.signalId);
      result(o, m.result, PLAIN_RESULT);
      put(o, 'entry_name', m.name);
      break;
    }
    case MessageType.AttachInvocationCommand:
    case MessageType.GetInvocationOutputCommand:
      target(o, decoded.message.target);
      put(o, 'result_completion_id', decoded.message.resultCompletionId);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.CompleteAwakeableCommand:
      put(o, 'awakeable_id', decoded.message.awakeableId);
      result(o, decoded.message.result, PLAIN_RESULT);
      put(o, 'name', decoded.message.name);
      break;
    case MessageType.GetLazyStateCompletionNotification:
    case MessageType.GetLazyStateKeysCompletionNotification:
    case MessageType.GetPromiseCompletionNotification:
    case MessageType.PeekPromiseCompletionNotification:
    case MessageType.CompletePromiseCompletionNotification:
    case MessageType.SleepCompletionNotification:
    case MessageType.CallCompletionNotification:
    case MessageType.CallInvocationIdCompletionNotification:
    case MessageType.RunCompletionNotification:
    case MessageType.AttachInvocationCompletionNotification:
    case MessageType.GetInvocationOutputCompletionNotification:
    case MessageType.SignalNotification:
      notificationId(o, decoded.message.id);
      result(o, decoded.message.result, PLAIN_RESULT);
  }
  return o;
}
