import type { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import type {
  AttachInvocationCommand,
  CallCommand,
  CompleteAwakeableCommand,
  FailureResult,
  IdempotentRequestTarget,
  InvocationTarget,
  NotificationId,
  NotificationMessage,
  NotificationResult,
  OneWayCallCommand,
  SendSignalCommand,
  SignalId,
  ValueResult,
  VoidResult,
  WorkflowTarget,
} from './message-schema.ts';
import {
  EMPTY_BYTES,
  LEN,
  VARINT,
  checkEnd,
  missing,
  readBytes,
  readEmpty,
  readFailure,
  readNested,
  readStateKeys,
  readString,
  readStringPair,
  readU32,
  readU64,
  readValue,
  readValueOrFailure,
  skipField,
  tagOf,
  writeBytes,
  writeEmpty,
  writeFailure,
  writeHeaders,
  writeMessage,
  writeStateKeys,
  writeString,
  writeStringPresent,
  writeU32,
  writeU64,
  writeValue,
  writeValueOrFailure,
} from './wire.ts';

/* Readers and writers of the journal commands that reach other invocations (call, one-way call, send signal, attach, get output, complete awakeable) and of the notification layout they share. */

export function readCall(r: BinaryReader, end: number): CallCommand {
  const m: CallCommand = {
    serviceName: '',
    handlerName: '',
    parameter: EMPTY_BYTES,
    headers: [],
    key: '',
    invocationIdNotificationIdx: 0,
    resultCompletionId: 0,
    name: '',
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.serviceName = readString(r, wt, 1);
        break;
      case 2:
        m.handlerName = readString(r, wt, 2);
        break;
      case 3:
        m.parameter = readBytes(r, wt, 3);
        break;
      case 4:
        m.headers.push(readNested(r, wt, 4, readStringPair));
        break;
      case 5:
        m.key = readString(r, wt, 5);
        break;
      case 6:
        m.idempotencyKey = readString(r, wt, 6);
        break;
      case 7:
        m.scope = readString(r, wt, 7);
        break;
      case 8:
        m.limitKey = readString(r, wt, 8);
        break;
      case 10:
        m.invocationIdNotificationIdx = readU32(r, wt, 10);
        break;
      case 11:
        m.resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

export function writeCall(w: BinaryWriter, m: CallCommand): void {
  writeString(w, 1, m.serviceName);
  writeString(w, 2, m.handlerName);
  writeBytes(w, 3, m.parameter);
  writeHeaders(w, 4, m.headers);
  writeString(w, 5, m.key);
  writeStringPresent(w, 6, m.idempotencyKey);
  writeStringPresent(w, 7, m.scope);
  writeStringPresent(w, 8, m.limitKey);
  writeU32(w, 10, m.invocationIdNotificationIdx);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

export function readOneWayCall(r: BinaryReader, end: number): OneWayCallCommand {
  const m: OneWayCallCommand = {
    serviceName: '',
    handlerName: '',
    parameter: EMPTY_BYTES,
    invokeTime: 0n,
    headers: [],
    key: '',
    invocationIdNotificationIdx: 0,
    name: '',
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        m.serviceName = readString(r, wt, 1);
        break;
      case 2:
        m.handlerName = readString(r, wt, 2);
        break;
      case 3:
        m.parameter = readBytes(r, wt, 3);
        break;
      case 4:
        m.invokeTime = readU64(r, wt, 4);
        break;
      case 5:
        m.headers.push(readNested(r, wt, 5, readStringPair));
        break;
      case 6:
        m.key = readString(r, wt, 6);
        break;
      case 7:
        m.idempotencyKey = readString(r, wt, 7);
        break;
      case 8:
        m.scope = readString(r, wt, 8);
        break;
      case 9:
        m.limitKey = readString(r, wt, 9);
        break;
      case 10:
        m.invocationIdNotificationIdx = readU32(r, wt, 10);
        break;
      case 12:
        m.name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return m;
}

export function writeOneWayCall(w: BinaryWriter, m: OneWayCallCommand): void {
  writeString(w, 1, m.serviceName);
  writeString(w, 2, m.handlerName);
  writeBytes(w, 3, m.parameter);
  writeU64(w, 4, m.invokeTime);
  writeHeaders(w, 5, m.headers);
  writeString(w, 6, m.key);
  writeStringPresent(w, 7, m.idempotencyKey);
  writeStringPresent(w, 8, m.scope);
  writeStringPresent(w, 9, m.limitKey);
  writeU32(w, 10, m.invocationIdNotificationIdx);
  writeString(w, 12, m.name);
}

export function readSendSignal(r: BinaryReader, end: number): SendSignalCommand {
  let targetInvocationId = '';
  let signalId: SignalId | undefined;
  let result: VoidResult | ValueResult | FailureResult | undefined;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        targetInvocationId = readString(r, wt, 1);
        break;
      case 2:
        signalId = { kind: 'signal', idx: readU32(r, wt, 2) };
        break;
      case 3:
        signalId = { kind: 'signalName', name: readString(r, wt, 3) };
        break;
      case 4:
        readNested(r, wt, 4, readEmpty);
        result = { kind: 'void' };
        break;
      case 5:
        result = { kind: 'value', value: readNested(r, wt, 5, readValue) };
        break;
      case 6:
        result = { kind: 'failure', failure: readNested(r, wt, 6, readFailure) };
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return {
    targetInvocationId,
    signalId: signalId ?? missing('signal id (idx or name)'),
    result: result ?? missing('result (void, value or failure)'),
    name,
  };
}

export function writeSendSignal(w: BinaryWriter, m: SendSignalCommand): void {
  writeString(w, 1, m.targetInvocationId);
  if (m.signalId.kind === 'signal') w.uint32(tagOf(2, VARINT)).uint32(m.signalId.idx);
  else w.uint32(tagOf(3, LEN)).string(m.signalId.name);
  writeVoidValueOrFailure(w, m.result);
  writeString(w, 12, m.name);
}

/** The `4 void · 5 value · 6 failure` oneof shared by SendSignal and notifications. */
function writeVoidValueOrFailure(w: BinaryWriter, result: VoidResult | ValueResult | FailureResult): void {
  switch (result.kind) {
    case 'void':
      writeEmpty(w, 4);
      break;
    case 'value':
      writeValue(w, 5, result.value);
      break;
    case 'failure':
      writeMessage(w, 6, writeFailure, result.failure);
      break;
  }
}

function readWorkflowTarget(r: BinaryReader, end: number): WorkflowTarget {
  const t: WorkflowTarget = { kind: 'workflow', workflowName: '', workflowKey: '' };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        t.workflowName = readString(r, wt, 1);
        break;
      case 2:
        t.workflowKey = readString(r, wt, 2);
        break;
      case 3:
        t.scope = readString(r, wt, 3);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return t;
}

function readIdempotentRequestTarget(r: BinaryReader, end: number): IdempotentRequestTarget {
  const t: IdempotentRequestTarget = {
    kind: 'idempotentRequest',
    serviceName: '',
    handlerName: '',
    idempotencyKey: '',
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        t.serviceName = readString(r, wt, 1);
        break;
      case 2:
        t.serviceKey = readString(r, wt, 2);
        break;
      case 3:
        t.handlerName = readString(r, wt, 3);
        break;
      case 4:
        t.idempotencyKey = readString(r, wt, 4);
        break;
      case 5:
        t.scope = readString(r, wt, 5);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return t;
}

function writeInvocationTarget(w: BinaryWriter, t: InvocationTarget): void {
  switch (t.kind) {
    case 'invocationId':
      w.uint32(tagOf(1, LEN)).string(t.invocationId);
      break;
    case 'idempotentRequest':
      writeMessage(w, 3, writeIdempotentRequestTarget, t);
      break;
    case 'workflow':
      writeMessage(w, 4, writeWorkflowTarget, t);
      break;
  }
}

function writeIdempotentRequestTarget(w: BinaryWriter, t: IdempotentRequestTarget): void {
  writeString(w, 1, t.serviceName);
  writeStringPresent(w, 2, t.serviceKey);
  writeString(w, 3, t.handlerName);
  writeString(w, 4, t.idempotencyKey);
  writeStringPresent(w, 5, t.scope);
}

function writeWorkflowTarget(w: BinaryWriter, t: WorkflowTarget): void {
  writeString(w, 1, t.workflowName);
  writeString(w, 2, t.workflowKey);
  writeStringPresent(w, 3, t.scope);
}

export function readAttachInvocation(r: BinaryReader, end: number): AttachInvocationCommand {
  let target: InvocationTarget | undefined;
  let resultCompletionId = 0;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        target = { kind: 'invocationId', invocationId: readString(r, wt, 1) };
        break;
      case 3:
        target = readNested(r, wt, 3, readIdempotentRequestTarget);
        break;
      case 4:
        target = readNested(r, wt, 4, readWorkflowTarget);
        break;
      case 11:
        resultCompletionId = readU32(r, wt, 11);
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { target: target ?? missing('target'), resultCompletionId, name };
}

export function writeAttachInvocation(w: BinaryWriter, m: AttachInvocationCommand): void {
  writeInvocationTarget(w, m.target);
  writeU32(w, 11, m.resultCompletionId);
  writeString(w, 12, m.name);
}

export function readCompleteAwakeable(r: BinaryReader, end: number): CompleteAwakeableCommand {
  let awakeableId = '';
  let result: ValueResult | FailureResult | undefined;
  let name = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    const field = tag >>> 3;
    switch (field) {
      case 1:
        awakeableId = readString(r, wt, 1);
        break;
      case 2:
      case 3:
        result = readValueOrFailure(r, wt, field, 2);
        break;
      case 12:
        name = readString(r, wt, 12);
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { awakeableId, result: result ?? missing('result (value or failure)'), name };
}

export function writeCompleteAwakeable(w: BinaryWriter, m: CompleteAwakeableCommand): void {
  writeString(w, 1, m.awakeableId);
  writeValueOrFailure(w, 2, m.result);
  writeString(w, 12, m.name);
}

export function readNotification(r: BinaryReader, end: number): NotificationMessage {
  let id: NotificationId | undefined;
  let result: NotificationResult | undefined;
  while (r.pos < end) {
    const tag = r.uint32();
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        id = { kind: 'completion', id: readU32(r, wt, 1) };
        break;
      case 2:
        id = { kind: 'signal', idx: readU32(r, wt, 2) };
        break;
      case 3:
        id = { kind: 'signalName', name: readString(r, wt, 3) };
        break;
      case 4:
        readNested(r, wt, 4, readEmpty);
        result = { kind: 'void' };
        break;
      case 5:
        result = { kind: 'value', value: readNested(r, wt, 5, readValue) };
        break;
      case 6:
        result = { kind: 'failure', failure: readNested(r, wt, 6, readFailure) };
        break;
      case 16:
        result = { kind: 'invocationId', invocationId: readString(r, wt, 16) };
        break;
      case 17:
        result = { kind: 'stateKeys', keys: readNested(r, wt, 17, readStateKeys) };
        break;
      default:
        skipField(r, tag);
    }
  }
  checkEnd(r, end);
  return { id: id ?? missing('id (completion_id, idx or name)'), result: result ?? missing('result') };
}

export function writeNotification(w: BinaryWriter, m: NotificationMessage): void {
  const id = m.id;
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
  const result = m.result;
  switch (result.kind) {
    case 'invocationId':
      w.uint32(tagOf(16, LEN)).string(result.invocationId);
      break;
    case 'stateKeys':
      writeMessage(w, 17, writeStateKeys, result.keys);
      break;
    case 'void':
    case 'value':
    case 'failure':
      writeVoidValueOrFailure(w, result);
      break;
  }
}
