/**
 * Message type ids of the service protocol (V5–V7) and their names.
 *
 * Ranges: 0x0000–0x03FF control, 0x0400–0x7FFF commands, 0x8000–0xFBFF notifications, 0xFC00–0xFFFF custom
 * entries (opaque, never produced by the TypeScript SDK).
 */

export const MessageType = {
  Start: 0x0000,
  Suspension: 0x0001,
  Error: 0x0002,
  End: 0x0003,
  CommandAck: 0x0004,
  ProposeRunCompletion: 0x0005,
  AwaitingOn: 0x0006,
  ProposeRunCompletionAck: 0x0007,

  InputCommand: 0x0400,
  OutputCommand: 0x0401,
  GetLazyStateCommand: 0x0402,
  SetStateCommand: 0x0403,
  ClearStateCommand: 0x0404,
  ClearAllStateCommand: 0x0405,
  GetLazyStateKeysCommand: 0x0406,
  GetEagerStateCommand: 0x0407,
  GetEagerStateKeysCommand: 0x0408,
  GetPromiseCommand: 0x0409,
  PeekPromiseCommand: 0x040a,
  CompletePromiseCommand: 0x040b,
  SleepCommand: 0x040c,
  CallCommand: 0x040d,
  OneWayCallCommand: 0x040e,
  SendSignalCommand: 0x0410,
  RunCommand: 0x0411,
  AttachInvocationCommand: 0x0412,
  GetInvocationOutputCommand: 0x0413,
  CompleteAwakeableCommand: 0x0414,

  GetLazyStateCompletionNotification: 0x8002,
  GetLazyStateKeysCompletionNotification: 0x8006,
  GetPromiseCompletionNotification: 0x8009,
  PeekPromiseCompletionNotification: 0x800a,
  CompletePromiseCompletionNotification: 0x800b,
  SleepCompletionNotification: 0x800c,
  CallCompletionNotification: 0x800d,
  CallInvocationIdCompletionNotification: 0x800e,
  RunCompletionNotification: 0x8011,
  AttachInvocationCompletionNotification: 0x8012,
  GetInvocationOutputCompletionNotification: 0x8013,
  SignalNotification: 0xfbff,
} as const;

export type MessageTypeKey = keyof typeof MessageType;
export type MessageTypeId = (typeof MessageType)[MessageTypeKey];

type Ids<K extends MessageTypeKey> = (typeof MessageType)[K];
export type NotificationMessageType = Ids<Extract<MessageTypeKey, `${string}Notification`>>;

/**
 * Human-readable names; commands and notifications use the spelling of Restate's `sys_journal.entry_type`
 * ("Command: Run", "Notification: Run") so introspection output matches restate-server's.
 */
const MESSAGE_TYPE_NAMES: Readonly<Record<MessageTypeId, string>> = {
  [MessageType.Start]: 'Start',
  [MessageType.Suspension]: 'Suspension',
  [MessageType.Error]: 'Error',
  [MessageType.End]: 'End',
  [MessageType.CommandAck]: 'CommandAck',
  [MessageType.ProposeRunCompletion]: 'ProposeRunCompletion',
  [MessageType.AwaitingOn]: 'AwaitingOn',
  [MessageType.ProposeRunCompletionAck]: 'ProposeRunCompletionAck',

  [MessageType.InputCommand]: 'Command: Input',
  [MessageType.OutputCommand]: 'Command: Output',
  [MessageType.GetLazyStateCommand]: 'Command: GetLazyState',
  [MessageType.SetStateCommand]: 'Command: SetState',
  [MessageType.ClearStateCommand]: 'Command: ClearState',
  [MessageType.ClearAllStateCommand]: 'Command: ClearAllState',
  [MessageType.GetLazyStateKeysCommand]: 'Command: GetLazyStateKeys',
  [MessageType.GetEagerStateCommand]: 'Command: GetEagerState',
  [MessageType.GetEagerStateKeysCommand]: 'Command: GetEagerStateKeys',
  [MessageType.GetPromiseCommand]: 'Command: GetPromise',
  [MessageType.PeekPromiseCommand]: 'Command: PeekPromise',
  [MessageType.CompletePromiseCommand]: 'Command: CompletePromise',
  [MessageType.SleepCommand]: 'Command: Sleep',
  [MessageType.CallCommand]: 'Command: Call',
  [MessageType.OneWayCallCommand]: 'Command: OneWayCall',
  [MessageType.SendSignalCommand]: 'Command: SendSignal',
  [MessageType.RunCommand]: 'Command: Run',
  [MessageType.AttachInvocationCommand]: 'Command: AttachInvocation',
  [MessageType.GetInvocationOutputCommand]: 'Command: GetInvocationOutput',
  [MessageType.CompleteAwakeableCommand]: 'Command: CompleteAwakeable',

  [MessageType.GetLazyStateCompletionNotification]: 'Notification: GetLazyState',
  [MessageType.GetLazyStateKeysCompletionNotification]: 'Notification: GetLazyStateKeys',
  [MessageType.GetPromiseCompletionNotification]: 'Notification: GetPromise',
  [MessageType.PeekPromiseCompletionNotification]: 'Notification: PeekPromise',
  [MessageType.CompletePromiseCompletionNotification]: 'Notification: CompletePromise',
  [MessageType.SleepCompletionNotification]: 'Notification: Sleep',
  [MessageType.CallCompletionNotification]: 'Notification: Call',
  [MessageType.CallInvocationIdCompletionNotification]: 'Notification: CallInvocationId',
  [MessageType.RunCompletionNotification]: 'Notification: Run',
  [MessageType.AttachInvocationCompletionNotification]: 'Notification: AttachInvocation',
  [MessageType.GetInvocationOutputCompletionNotification]: 'Notification: GetInvocationOutput',
  [MessageType.SignalNotification]: 'Notification: Signal',
};

const KEYS_BY_ID: ReadonlyMap<number, MessageTypeKey> = new Map(
  (Object.keys(MessageType) as MessageTypeKey[]).map((key) => [MessageType[key], key]),
);

function hex(type: number): string {
  return `0x${type.toString(16).padStart(4, '0')}`;
}

export function isKnownMessageType(type: number): type is MessageTypeId {
  return KEYS_BY_ID.has(type);
}

/** `"Command: Sleep"` etc.; unknown ids are shown as `Unknown(0x....)` so they can still be logged. */
export function messageTypeName(type: number): string {
  return isKnownMessageType(type) ? MESSAGE_TYPE_NAMES[type] : `Unknown(${hex(type)})`;
}

/** The identifier used in code and in the golden captures (`"SleepCommand"`), or undefined for unknown ids. */
export function messageTypeKey(type: number): MessageTypeKey | undefined {
  return KEYS_BY_ID.get(type);
}

export function isControl(type: number): boolean {
  return type >= 0 && type < 0x0400;
}

export function isCommand(type: number): boolean {
  return type >= 0x0400 && type < 0x8000;
}

export function isNotification(type: number): boolean {
  return type >= 0x8000 && type < 0xfc00;
}

export function isCustomEntry(type: number): boolean {
  return type >= 0xfc00 && type <= 0xffff;
}

const NOTIFICATION_FOR_COMMAND: ReadonlyMap<number, NotificationMessageType> = new Map<number, NotificationMessageType>(
  [
    [MessageType.GetLazyStateCommand, MessageType.GetLazyStateCompletionNotification],
    [MessageType.GetLazyStateKeysCommand, MessageType.GetLazyStateKeysCompletionNotification],
    [MessageType.GetPromiseCommand, MessageType.GetPromiseCompletionNotification],
    [MessageType.PeekPromiseCommand, MessageType.PeekPromiseCompletionNotification],
    [MessageType.CompletePromiseCommand, MessageType.CompletePromiseCompletionNotification],
    [MessageType.SleepCommand, MessageType.SleepCompletionNotification],
    [MessageType.CallCommand, MessageType.CallCompletionNotification],
    [MessageType.OneWayCallCommand, MessageType.CallInvocationIdCompletionNotification],
    [MessageType.RunCommand, MessageType.RunCompletionNotification],
    [MessageType.AttachInvocationCommand, MessageType.AttachInvocationCompletionNotification],
    [MessageType.GetInvocationOutputCommand, MessageType.GetInvocationOutputCompletionNotification],
  ],
);

/**
 * Type id of the notification that completes `commandType` (its `result_completion_id`), or undefined for commands
 * the runtime never answers. A Call is answered twice: its `invocation_id_notification_idx` gets a
 * `CallInvocationIdCompletionNotification` first; this returns the result notification (`CallCompletionNotification`).
 */
export function notificationTypeFor(commandType: number): NotificationMessageType | undefined {
  return NOTIFICATION_FOR_COMMAND.get(commandType);
}
