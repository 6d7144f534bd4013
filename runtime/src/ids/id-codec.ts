/**
 * Shared pieces of Restate's textual resource-id scheme: `<prefix>_<version><payload>`.
 *
 * The decode reasons are Restate's own phrases because they reach clients verbatim inside 400 messages
 * (`bad invocation id 'inv_garbage': unrecognized codec version`).
 */

export type IdDecodeReason =
  | 'bad length'
  | 'base62 decode error'
  | 'bad format'
  | 'unrecognized codec version'
  | "id doesn't match the expected type"
  | `unrecognized resource type: ${string}`;

export class InvalidIdError extends Error {
  readonly reason: IdDecodeReason;
  /** The rejected text, so callers can build Restate's `bad <kind> id '<input>': <reason>` messages. */
  readonly input: string;

  constructor(reason: IdDecodeReason, input: string) {
    super(reason);
    this.name = 'InvalidIdError';
    this.reason = reason;
    this.input = input;
  }
}

/** Every prefix restate-server 1.7 recognises; an unknown one is a different error than a known-but-wrong one. */
export type IdPrefix = 'inv' | 'dp' | 'sub' | 'prom' | 'sign' | 'mut' | 'vq' | 'snap';

const KNOWN_PREFIXES: ReadonlySet<string> = new Set<IdPrefix>([
  'inv',
  'dp',
  'sub',
  'prom',
  'sign',
  'mut',
  'vq',
  'snap',
]);

export const ID_SCHEME_VERSION = '1';

/**
 * Validates `<prefix>_1` and returns where the payload starts. The checks run in Restate's order so that a
 * malformed id gets the same reason phrase from us as from restate-server.
 */
export function idPayloadOffset(input: string, accepted: IdPrefix | readonly IdPrefix[]): number {
  if (input.length === 0) throw new InvalidIdError('bad length', input);
  const sep = input.indexOf('_');
  if (sep < 0) throw new InvalidIdError('bad format', input);
  const prefix = input.slice(0, sep);
  if (!KNOWN_PREFIXES.has(prefix)) throw new InvalidIdError(`unrecognized resource type: ${prefix}`, input);
  const ok = typeof accepted === 'string' ? prefix === accepted : (accepted as readonly string[]).includes(prefix);
  if (!ok) throw new InvalidIdError("id doesn't match the expected type", input);
  if (sep + 1 >= input.length) throw new InvalidIdError('bad length', input);
  if (input[sep + 1] !== ID_SCHEME_VERSION) throw new InvalidIdError('unrecognized codec version', input);
  return sep + 2;
}
