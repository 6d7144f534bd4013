/**
 * Awakeable ids: `sign_1` (signal index, SDK ≥ protocol v4) or legacy `prom_1` (journal entry index), followed
 * by base64url of raw invocation id (24 B) ‖ u32be index. Restate prints them unpadded and accepts padding.
 */

import { InvalidIdError, idPayloadOffset, type IdPrefix } from './id-codec.ts';
import { INVOCATION_ID_RAW_LENGTH, InvocationId } from './invocation-id.ts';

export type AwakeableIdKind = 'signal' | 'legacy';

export interface AwakeableId {
  readonly kind: AwakeableIdKind;
  readonly invocationId: InvocationId;
  /** Signal index for `signal` (SDK awakeables start at 17), journal entry index for `legacy`. */
  readonly index: number;
}

const PAYLOAD_LENGTH = INVOCATION_ID_RAW_LENGTH + 4;
const ACCEPTED_PREFIXES: readonly IdPrefix[] = ['sign', 'prom'];

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const B64_DECODE = new Int8Array(128).fill(-1);
for (let i = 0; i < B64URL.length; i++) B64_DECODE[B64URL.charCodeAt(i)] = i;

const payload = Buffer.allocUnsafeSlow(PAYLOAD_LENGTH);

function b64Digit(s: string, i: number): number {
  const c = s.charCodeAt(i);
  return c < 128 ? B64_DECODE[c]! : -1;
}

/**
 * Strict base64url decode of `s[start..]` into `payload`, returning the decoded length. Like Restate's decoder it
 * takes padded or unpadded input but rejects foreign characters, misplaced padding and non-zero trailing bits.
 */
function decodeBase64Url(input: string, start: number): number {
  let end = input.length;
  let pads = 0;
  while (end > start && input.charCodeAt(end - 1) === 0x3d /* = */ && pads < 2) {
    end--;
    pads++;
  }
  const chars = end - start;
  if (pads > 0 && (chars + pads) % 4 !== 0) throw new InvalidIdError('base62 decode error', input);
  if (chars % 4 === 1) throw new InvalidIdError('base62 decode error', input);
  for (let i = start; i < end; i++) {
    if (b64Digit(input, i) < 0) throw new InvalidIdError('base62 decode error', input);
  }
  const tail = chars % 4;
  if (tail !== 0) {
    const last = b64Digit(input, end - 1);
    if ((tail === 2 && (last & 0x0f) !== 0) || (tail === 3 && (last & 0x03) !== 0)) {
      throw new InvalidIdError('base62 decode error', input);
    }
  }
  const length = (chars * 3) >> 2;
  if (length !== PAYLOAD_LENGTH) return length;
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = start; i < end; i++) {
    acc = ((acc << 6) | b64Digit(input, i)) & 0xfff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      payload[o++] = (acc >>> bits) & 0xff;
    }
  }
  return length;
}

/** Parses `sign_1…` or `prom_1…`. Throws InvalidIdError with Restate's reason phrase. */
export function parseAwakeableId(input: string): AwakeableId {
  const start = idPayloadOffset(input, ACCEPTED_PREFIXES);
  // The reason phrase for undecodable base64 really is Restate's "base62 decode error".
  if (decodeBase64Url(input, start) !== PAYLOAD_LENGTH) throw new InvalidIdError('bad length', input);
  return {
    kind: input.charCodeAt(0) === 0x73 /* s */ ? 'signal' : 'legacy',
    invocationId: InvocationId.fromRaw(payload.subarray(0, INVOCATION_ID_RAW_LENGTH)),
    index: payload.readUInt32BE(INVOCATION_ID_RAW_LENGTH),
  };
}

/** The text form of an awakeable id; `signal` is what SDK 1.17 creates and what the runtime should hand out. */
export function formatAwakeableId(kind: AwakeableIdKind, invocationId: InvocationId, index: number): string {
  if (!Number.isInteger(index) || index < 0 || index > 0xffffffff) throw new RangeError(`not a u32 index: ${index}`);
  InvocationId.writeRaw(invocationId, payload, 0);
  payload.writeUInt32BE(index, INVOCATION_ID_RAW_LENGTH);
  return (kind === 'signal' ? 'sign_1' : 'prom_1') + payload.toString('base64url');
}
