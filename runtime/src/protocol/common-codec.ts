import { MessageSchema, bytes, packedU32, repeated, str, strings, u32 } from './fields.ts';
import type { NestedCodec, UnionCodec } from './fields.ts';
import type { Failure, FailureResult, Future, Header, StateEntry, ValueResult, VoidResult } from './message-schema.ts';
import {
  EMPTY_BYTES,
  readEmpty,
  readNested,
  readStateKeys,
  readValue,
  writeEmpty,
  writeMessage,
  writeStateKeys,
  writeValue,
} from './wire.ts';

/* Sub-messages and oneofs that several messages share. */

/** `{1 key string, 2 value string}`: Header and Failure metadata. */
export const STRING_PAIR = new MessageSchema<Header>(() => ({ key: '', value: '' }), [str(1, 'key'), str(2, 'value')]);

export const STATE_ENTRY = new MessageSchema<StateEntry>(
  () => ({ key: EMPTY_BYTES, value: EMPTY_BYTES }),
  [bytes(1, 'key'), bytes(2, 'value')],
);

export const FAILURE = new MessageSchema<Failure>(
  () => ({ code: 0, message: '', metadata: [] }),
  [u32(1, 'code'), str(2, 'message'), repeated(3, 'metadata', STRING_PAIR)],
);

/** `Future` nests itself; this indirection lets its own spec refer to it before it exists. */
const NESTED_FUTURE: NestedCodec<Future> = {
  read: (r, end) => FUTURE.read(r, end),
  write: (w, m) => FUTURE.write(w, m),
};

export const FUTURE: MessageSchema<Future> = new MessageSchema<Future>(
  () => ({ waitingCompletions: [], waitingSignals: [], waitingNamedSignals: [], nestedFutures: [], combinatorType: 0 }),
  [
    packedU32(1, 'waitingCompletions'),
    packedU32(2, 'waitingSignals'),
    strings(3, 'waitingNamedSignals'),
    repeated(4, 'nestedFutures', NESTED_FUTURE),
    u32(5, 'combinatorType'),
  ],
);

/** `StateKeys{repeated 1 keys}`, flattened to the keys. */
export const STATE_KEYS: NestedCodec<Uint8Array[]> = { read: readStateKeys, write: writeStateKeys };

/** The `value · failure` oneof, members at `base` and `base + 1`. */
export const VALUE_OR_FAILURE: UnionCodec<ValueResult | FailureResult> = {
  read: (r, wt, field, base) =>
    field === base
      ? { kind: 'value', value: readNested(r, wt, field, readValue) }
      : { kind: 'failure', failure: readNested(r, wt, field, FAILURE.read) },
  write: (w, base, u) => {
    if (u.kind === 'value') writeValue(w, base, u.value);
    else writeMessage(w, base + 1, FAILURE.write, u.failure);
  },
};

/** The `void · value · failure` oneof, members at `base` to `base + 2` (GetEagerState declares only the first two). */
export const VOID_VALUE_OR_FAILURE: UnionCodec<VoidResult | ValueResult | FailureResult> = {
  read: (r, wt, field, base) => {
    if (field !== base) return VALUE_OR_FAILURE.read(r, wt, field, base + 1);
    readNested(r, wt, field, readEmpty);
    return { kind: 'void' };
  },
  write: (w, base, u) => {
    if (u.kind === 'void') writeEmpty(w, base);
    else VALUE_OR_FAILURE.write(w, base + 1, u);
  },
};
