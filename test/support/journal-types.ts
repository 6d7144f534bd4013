/**
 * Journal entry types as `ratchet.journal.entry_type` stores them: the service protocol's message type ids (V5–V7),
 * written out from the protocol's message catalogue rather than taken from the runtime, so a test notices when the
 * runtime's own table drifts. Commands and notifications only, plus the control messages tests assert never reach a
 * journal.
 */
export const EntryType = {
  // Commands (0x0400–0x7FFF)
  Input: 0x0400,
  Output: 0x0401,
  GetLazyState: 0x0402,
  SetState: 0x0403,
  ClearState: 0x0404,
  ClearAllState: 0x0405,
  GetLazyStateKeys: 0x0406,
  GetEagerState: 0x0407,
  GetEagerStateKeys: 0x0408,
  GetPromise: 0x0409,
  PeekPromise: 0x040a,
  CompletePromise: 0x040b,
  Sleep: 0x040c,
  Call: 0x040d,
  OneWayCall: 0x040e,
  SendSignal: 0x0410,
  Run: 0x0411,
  AttachInvocation: 0x0412,
  GetInvocationOutput: 0x0413,
  CompleteAwakeable: 0x0414,
  // Notifications (0x8000–0xFBFF)
  GetLazyStateCompletion: 0x8002,
  GetLazyStateKeysCompletion: 0x8006,
  GetPromiseCompletion: 0x8009,
  PeekPromiseCompletion: 0x800a,
  CompletePromiseCompletion: 0x800b,
  SleepCompletion: 0x800c,
  CallCompletion: 0x800d,
  CallInvocationId: 0x800e,
  RunCompletion: 0x8011,
  AttachInvocationCompletion: 0x8012,
  GetInvocationOutputCompletion: 0x8013,
  Signal: 0xfbff,
  // Control messages (0x0000–0x03FF): never journal entries.
  Suspension: 0x0001,
  Error: 0x0002,
  End: 0x0003,
  ProposeRunCompletion: 0x0005,
  AwaitingOn: 0x0006,
} as const;

export type EntryTypeName = keyof typeof EntryType;

const NAMES: ReadonlyMap<number, EntryTypeName> = new Map(
  (Object.keys(EntryType) as EntryTypeName[]).map((name) => [EntryType[name], name]),
);

/** `Run`, `SleepCompletion`, …, or `0x7777` for a type this table does not know (for readable failure messages). */
export function entryTypeName(type: number): string {
  return NAMES.get(type) ?? `0x${type.toString(16).padStart(4, '0')}`;
}
