import { STATE_KEYS, STRING_PAIR, VALUE_OR_FAILURE, VOID_VALUE_OR_FAILURE } from './common-codec.ts';
import { MessageSchema, bytes, oneof, optStr, repeated, str, u32, u64 } from './fields.ts';
import type { FieldSpec, UnionCodec } from './fields.ts';
import type {
  AttachInvocationCommand,
  CallCommand,
  CallRequest,
  CompleteAwakeableCommand,
  IdempotentRequestTarget,
  InvocationTarget,
  NotificationId,
  NotificationMessage,
  NotificationResult,
  OneWayCallCommand,
  SendSignalCommand,
  WorkflowTarget,
} from './message-schema.ts';
import {
  EMPTY_BYTES,
  LEN,
  VARINT,
  readNested,
  readStateKeys,
  readString,
  readU32,
  tagOf,
  writeMessage,
} from './wire.ts';

/* Journal commands that reach other invocations (call, one-way call, send signal, attach, get output, complete
 * awakeable) and the notification layout they share. */

/** Fields of Call and OneWayCall; OneWayCall puts invoke_time at 4 and moves headers…limit_key up by one. */
function callFields(shift: number): FieldSpec<CallRequest>[] {
  return [
    str(1, 'serviceName'),
    str(2, 'handlerName'),
    bytes(3, 'parameter'),
    repeated(4 + shift, 'headers', STRING_PAIR),
    str(5 + shift, 'key'),
    optStr(6 + shift, 'idempotencyKey'),
    optStr(7 + shift, 'scope'),
    optStr(8 + shift, 'limitKey'),
    u32(10, 'invocationIdNotificationIdx'),
    str(12, 'name'),
  ];
}

export const CALL = new MessageSchema<CallCommand>(
  () => ({
    serviceName: '',
    handlerName: '',
    parameter: EMPTY_BYTES,
    headers: [],
    key: '',
    invocationIdNotificationIdx: 0,
    resultCompletionId: 0,
    name: '',
  }),
  [...callFields(0), u32(11, 'resultCompletionId')],
);

export const ONE_WAY_CALL = new MessageSchema<OneWayCallCommand>(
  () => ({
    serviceName: '',
    handlerName: '',
    parameter: EMPTY_BYTES,
    invokeTime: 0n,
    headers: [],
    key: '',
    invocationIdNotificationIdx: 0,
    name: '',
  }),
  [...callFields(1), u64(4, 'invokeTime')],
);

/** `1 completion_id · 2 signal idx · 3 signal name`; SendSignal declares only the last two. */
const NOTIFICATION_ID: UnionCodec<NotificationId> = {
  read: (r, wt, field) => {
    switch (field) {
      case 1:
        return { kind: 'completion', id: readU32(r, wt, 1) };
      case 2:
        return { kind: 'signal', idx: readU32(r, wt, 2) };
      default:
        return { kind: 'signalName', name: readString(r, wt, field) };
    }
  },
  write: (w, _base, id) => {
    switch (id.kind) {
      case 'completion':
        w.uint32(tagOf(1, VARINT)).uint32(id.id);
        break;
      case 'signal':
        w.uint32(tagOf(2, VARINT)).uint32(id.idx);
        break;
      case 'signalName':
        w.uint32(tagOf(3, LEN)).string(id.name);
        break;
    }
  },
};

export const SEND_SIGNAL = new MessageSchema<SendSignalCommand>(
  () => ({ targetInvocationId: '', signalId: undefined, result: undefined, name: '' }),
  [
    str(1, 'targetInvocationId'),
    oneof('signalId', [2, 3], NOTIFICATION_ID, 'signal id (idx or name)'),
    oneof('result', [4, 5, 6], VOID_VALUE_OR_FAILURE, 'result (void, value or failure)'),
    str(12, 'name'),
  ],
);

const WORKFLOW_TARGET = new MessageSchema<WorkflowTarget>(
  () => ({ kind: 'workflow', workflowName: '', workflowKey: '' }),
  [str(1, 'workflowName'), str(2, 'workflowKey'), optStr(3, 'scope')],
);

const IDEMPOTENT_REQUEST_TARGET = new MessageSchema<IdempotentRequestTarget>(
  () => ({ kind: 'idempotentRequest', serviceName: '', handlerName: '', idempotencyKey: '' }),
  [str(1, 'serviceName'), optStr(2, 'serviceKey'), str(3, 'handlerName'), str(4, 'idempotencyKey'), optStr(5, 'scope')],
);

/** `1 invocation_id · 3 idempotent_request_target · 4 workflow_target`. */
const INVOCATION_TARGET: UnionCodec<InvocationTarget> = {
  read: (r, wt, field) => {
    switch (field) {
      case 1:
        return { kind: 'invocationId', invocationId: readString(r, wt, 1) };
      case 3:
        return readNested(r, wt, 3, IDEMPOTENT_REQUEST_TARGET.read);
      default:
        return readNested(r, wt, field, WORKFLOW_TARGET.read);
    }
  },
  write: (w, _base, t) => {
    switch (t.kind) {
      case 'invocationId':
        w.uint32(tagOf(1, LEN)).string(t.invocationId);
        break;
      case 'idempotentRequest':
        writeMessage(w, 3, IDEMPOTENT_REQUEST_TARGET.write, t);
        break;
      case 'workflow':
        writeMessage(w, 4, WORKFLOW_TARGET.write, t);
        break;
    }
  },
};

/** AttachInvocation and GetInvocationOutput. */
export const ATTACH_INVOCATION = new MessageSchema<AttachInvocationCommand>(
  () => ({ target: undefined, resultCompletionId: 0, name: '' }),
  [oneof('target', [1, 3, 4], INVOCATION_TARGET, 'target'), u32(11, 'resultCompletionId'), str(12, 'name')],
);

export const COMPLETE_AWAKEABLE = new MessageSchema<CompleteAwakeableCommand>(
  () => ({ awakeableId: '', result: undefined, name: '' }),
  [str(1, 'awakeableId'), oneof('result', [2, 3], VALUE_OR_FAILURE, 'result (value or failure)'), str(12, 'name')],
);

/** `4 void · 5 value · 6 failure · 16 invocation_id · 17 state_keys`. */
const NOTIFICATION_RESULT: UnionCodec<NotificationResult> = {
  read: (r, wt, field, base) => {
    switch (field) {
      case 16:
        return { kind: 'invocationId', invocationId: readString(r, wt, 16) };
      case 17:
        return { kind: 'stateKeys', keys: readNested(r, wt, 17, readStateKeys) };
      default:
        return VOID_VALUE_OR_FAILURE.read(r, wt, field, base);
    }
  },
  write: (w, base, result) => {
    switch (result.kind) {
      case 'invocationId':
        w.uint32(tagOf(16, LEN)).string(result.invocationId);
        break;
      case 'stateKeys':
        writeMessage(w, 17, STATE_KEYS.write, result.keys);
        break;
      case 'void':
      case 'value':
      case 'failure':
        VOID_VALUE_OR_FAILURE.write(w, base, result);
        break;
    }
  },
};

/** Every notification type (completions 0x8002–0x8013 and SignalNotification 0xFBFF) shares this layout. */
export const NOTIFICATION = new MessageSchema<NotificationMessage>(
  () => ({ id: undefined, result: undefined }),
  [
    oneof('id', [1, 2, 3], NOTIFICATION_ID, 'id (completion_id, idx or name)'),
    oneof('result', [4, 5, 6, 16, 17], NOTIFICATION_RESULT, 'result'),
  ],
);
