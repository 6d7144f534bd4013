import { STATE_KEYS, STRING_PAIR, VALUE_OR_FAILURE, VOID_VALUE_OR_FAILURE } from './common-codec.ts';
import { MessageSchema, bytes, message, oneof, repeated, str, u32, u64, value } from './fields.ts';
import type {
  ClearAllStateCommand,
  ClearStateCommand,
  CompletePromiseCommand,
  GetEagerStateCommand,
  GetEagerStateKeysCommand,
  GetLazyStateCommand,
  GetPromiseCommand,
  InputCommand,
  OutputCommand,
  RunCommand,
  SetStateCommand,
  SleepCommand,
} from './message-schema.ts';
import { EMPTY_BYTES } from './wire.ts';

/* Journal commands that stay inside one invocation: input, output, state, promises, sleep (0x0400–0x040C). Calls,
 * signals, attach and the notification layout are in journal-calls-codec.ts. `name` is field 12 throughout. */

export const INPUT = new MessageSchema<InputCommand>(
  () => ({ headers: [], value: EMPTY_BYTES, name: '' }),
  [repeated(1, 'headers', STRING_PAIR), str(12, 'name'), value(14, 'value')],
);

export const OUTPUT = new MessageSchema<OutputCommand>(
  () => ({ result: undefined, name: '' }),
  [str(12, 'name'), oneof('result', [14, 15], VALUE_OR_FAILURE, 'result (value or failure)')],
);

export const GET_LAZY_STATE = new MessageSchema<GetLazyStateCommand>(
  () => ({ key: EMPTY_BYTES, resultCompletionId: 0, name: '' }),
  [bytes(1, 'key'), u32(11, 'resultCompletionId'), str(12, 'name')],
);

export const SET_STATE = new MessageSchema<SetStateCommand>(
  () => ({ key: EMPTY_BYTES, value: EMPTY_BYTES, name: '' }),
  [bytes(1, 'key'), value(3, 'value'), str(12, 'name')],
);

export const CLEAR_STATE = new MessageSchema<ClearStateCommand>(
  () => ({ key: EMPTY_BYTES, name: '' }),
  [bytes(1, 'key'), str(12, 'name')],
);

/** ClearAllState. */
export const NAME_ONLY = new MessageSchema<ClearAllStateCommand>(() => ({ name: '' }), [str(12, 'name')]);

/** Layout shared by GetLazyStateKeys and Run: `11 result_completion_id · 12 name`. */
export const COMPLETION_ID_AND_NAME = new MessageSchema<RunCommand>(
  () => ({ resultCompletionId: 0, name: '' }),
  [u32(11, 'resultCompletionId'), str(12, 'name')],
);

export const GET_EAGER_STATE = new MessageSchema<GetEagerStateCommand>(
  () => ({ key: EMPTY_BYTES, result: undefined, name: '' }),
  [bytes(1, 'key'), str(12, 'name'), oneof('result', [13, 14], VOID_VALUE_OR_FAILURE, 'result (void or value)')],
);

export const GET_EAGER_STATE_KEYS = new MessageSchema<GetEagerStateKeysCommand>(
  () => ({ keys: [], name: '' }),
  [str(12, 'name'), message(14, 'keys', STATE_KEYS)],
);

/** GetPromise and PeekPromise. */
export const GET_PROMISE = new MessageSchema<GetPromiseCommand>(
  () => ({ key: '', resultCompletionId: 0, name: '' }),
  [str(1, 'key'), u32(11, 'resultCompletionId'), str(12, 'name')],
);

export const COMPLETE_PROMISE = new MessageSchema<CompletePromiseCommand>(
  () => ({ key: '', completion: undefined, resultCompletionId: 0, name: '' }),
  [
    str(1, 'key'),
    oneof('completion', [2, 3], VALUE_OR_FAILURE, 'completion (value or failure)'),
    u32(11, 'resultCompletionId'),
    str(12, 'name'),
  ],
);

export const SLEEP = new MessageSchema<SleepCommand>(
  () => ({ wakeUpTime: 0n, resultCompletionId: 0, name: '' }),
  [u64(1, 'wakeUpTime'), u32(11, 'resultCompletionId'), str(12, 'name')],
);
