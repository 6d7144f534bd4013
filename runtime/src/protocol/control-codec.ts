import { FUTURE, STATE_ENTRY, VALUE_OR_FAILURE } from './common-codec.ts';
import {
  MessageSchema,
  bool,
  bytes,
  message,
  oneof,
  optStr,
  optU32,
  optU64,
  packedU32,
  repeated,
  since,
  str,
  strings,
  u32,
  u64,
} from './fields.ts';
import type { UnionCodec } from './fields.ts';
import type {
  AwaitingOnMessage,
  CommandAckMessage,
  EndMessage,
  ErrorMessage,
  FailureResult,
  ProposeRunCompletionAckMessage,
  ProposeRunCompletionMessage,
  StartMessage,
  SuspensionMessage,
  ValueResult,
} from './message-schema.ts';
import { EMPTY_BYTES, LEN, readBytes, tagOf } from './wire.ts';

/* The control messages (0x0000–0x0007), which are never journaled. */

/** Written for a given protocol version, Start leaves out random_seed below V6 and scope & co. below V7. */
export const START = new MessageSchema<StartMessage>(
  () => ({
    id: EMPTY_BYTES,
    debugId: '',
    knownEntries: 0,
    stateMap: [],
    partialState: false,
    key: '',
    retryCountSinceLastStoredEntry: 0,
    durationSinceLastStoredEntry: 0n,
    randomSeed: 0n,
  }),
  [
    bytes(1, 'id'),
    str(2, 'debugId'),
    u32(3, 'knownEntries'),
    repeated(4, 'stateMap', STATE_ENTRY),
    bool(5, 'partialState'),
    str(6, 'key'),
    u32(7, 'retryCountSinceLastStoredEntry'),
    u64(8, 'durationSinceLastStoredEntry'),
    since(6, u64(9, 'randomSeed')),
    since(7, optStr(10, 'scope')),
    since(7, optStr(11, 'limitKey')),
    since(7, optStr(12, 'idempotencyKey')),
  ],
);

export const SUSPENSION = new MessageSchema<SuspensionMessage>(
  () => ({ waitingCompletions: [], waitingSignals: [], waitingNamedSignals: [] }),
  [
    packedU32(1, 'waitingCompletions'),
    packedU32(2, 'waitingSignals'),
    strings(3, 'waitingNamedSignals'),
    message(4, 'awaitingOn', FUTURE),
  ],
);

export const ERROR = new MessageSchema<ErrorMessage>(
  () => ({ code: 0, message: '', stacktrace: '', behavior: 0 }),
  [
    u32(1, 'code'),
    str(2, 'message'),
    str(3, 'stacktrace'),
    optU32(4, 'relatedCommandIndex'),
    optStr(5, 'relatedCommandName'),
    optU32(6, 'relatedCommandType'),
    optU64(8, 'nextRetryDelay'),
    u32(9, 'behavior'),
  ],
);

export const END = new MessageSchema<EndMessage>(() => ({}), []);

export const COMMAND_ACK = new MessageSchema<CommandAckMessage>(() => ({ commandIndex: 0 }), [u32(1, 'commandIndex')]);

/** Unlike commands, the proposal carries the value as raw bytes, not in a Value wrapper. */
const RAW_VALUE_OR_FAILURE: UnionCodec<ValueResult | FailureResult> = {
  read: (r, wt, field, base) =>
    field === base ? { kind: 'value', value: readBytes(r, wt, field) } : VALUE_OR_FAILURE.read(r, wt, field, base),
  write: (w, base, u) => {
    if (u.kind === 'value') w.uint32(tagOf(base, LEN)).bytes(u.value);
    else VALUE_OR_FAILURE.write(w, base, u);
  },
};

export const PROPOSE_RUN_COMPLETION = new MessageSchema<ProposeRunCompletionMessage>(
  () => ({ resultCompletionId: 0, result: undefined }),
  [u32(1, 'resultCompletionId'), oneof('result', [14, 15], RAW_VALUE_OR_FAILURE, 'result (value or failure)')],
);

export const AWAITING_ON = new MessageSchema<AwaitingOnMessage>(
  () => ({ awaitingOn: undefined, executingSideEffects: false }),
  [message(1, 'awaitingOn', FUTURE, 'awaiting_on'), bool(2, 'executingSideEffects')],
);

export const PROPOSE_RUN_COMPLETION_ACK = new MessageSchema<ProposeRunCompletionAckMessage>(
  () => ({ completionId: 0 }),
  [u32(1, 'completionId')],
);
