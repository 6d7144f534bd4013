/**
 * Restate's fixed-width base62 for u64 / u128 id fields.
 *
 * Restate encodes `value.to_be()` as an integer on a little-endian host, so the number that gets base62'd is
 * the field's big-endian bytes read back little-endian. Working on the raw bytes directly therefore needs no
 * byte swap at all: the encoders below take the field exactly as it sits in the raw (big-endian) id.
 *
 * The arithmetic runs on 32-bit limbs held in doubles, two base62 digits (62^2) per step: every intermediate stays
 * below 2^53, so it is exact without BigInts. Id formatting and parsing sit on the invocation hot path.
 */

import { InvalidIdError } from './id-codec.ts';

export const BASE62_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
export const BASE62_U64_CHARS = 11;
export const BASE62_U128_CHARS = 22;

export type Base62Width = 8 | 16;

const ENCODE = Uint8Array.from(BASE62_ALPHABET, (c) => c.charCodeAt(0));
const DECODE = new Int8Array(128).fill(-1);
for (let i = 0; i < ENCODE.length; i++) DECODE[ENCODE[i]!] = i;

// Most-significant limb first. Shared scratch is safe: every function here runs to completion synchronously.
const limbs = new Float64Array(4);
const LIMB = 4294967296;
const PAIR = 62 * 62;

export function base62Chars(byteLen: Base62Width): number {
  return byteLen === 8 ? BASE62_U64_CHARS : BASE62_U128_CHARS;
}

function loadLimbs(src: Uint8Array, off: number, byteLen: Base62Width): number {
  const n = byteLen >> 2;
  for (let k = 0; k < n; k++) {
    const hi = off + byteLen - 1 - 4 * k; // little-endian reading: the last byte is the most significant
    limbs[k] = ((src[hi]! << 24) | (src[hi - 1]! << 16) | (src[hi - 2]! << 8) | src[hi - 3]!) >>> 0;
  }
  return n;
}

/** Divides the limbs in place and returns the remainder. */
function divLimbs(n: number, divisor: number): number {
  let rem = 0;
  for (let k = 0; k < n; k++) {
    const cur = rem * LIMB + limbs[k]!;
    const q = Math.floor(cur / divisor);
    limbs[k] = q;
    rem = cur - q * divisor;
  }
  return rem;
}

/** limbs = limbs * factor + addend; false if the result no longer fits. */
function mulAddLimbs(n: number, factor: number, addend: number): boolean {
  let carry = addend;
  for (let k = n - 1; k >= 0; k--) {
    const t = limbs[k]! * factor + carry;
    carry = Math.floor(t / LIMB);
    limbs[k] = t - carry * LIMB;
  }
  return carry === 0;
}

/**
 * Writes the base62 form of `src[srcOff, srcOff + byteLen)` as ASCII codes into `out` at `outOff`
 * (11 bytes for a u64 field, 22 for a u128 field), left-padded with '0'.
 */
export function writeBase62(
  src: Uint8Array,
  srcOff: number,
  byteLen: Base62Width,
  out: Uint8Array,
  outOff: number,
): void {
  const n = loadLimbs(src, srcOff, byteLen);
  let pos = outOff + base62Chars(byteLen) - 1;
  for (; pos > outOff; pos -= 2) {
    const pair = divLimbs(n, PAIR);
    const hi = (pair / 62) | 0;
    out[pos] = ENCODE[pair - hi * 62]!;
    out[pos - 1] = ENCODE[hi]!;
  }
  // u64 has an odd digit count; what is left after 10 digits is below 62
  if (pos === outOff) out[pos] = ENCODE[divLimbs(n, 62)]!;
}

function digitAt(s: string, i: number): number {
  const code = s.charCodeAt(i);
  return code < 128 ? DECODE[code]! : -1;
}

/**
 * Parses `base62Chars(byteLen)` characters of `s` starting at `sOff` and writes the field's big-endian bytes
 * into `out` at `outOff`. Returns false on a character outside the alphabet or a value that does not fit the
 * width (22 base62 digits can exceed 2^128); the caller must have checked that enough characters exist.
 */
export function readBase62(s: string, sOff: number, byteLen: Base62Width, out: Uint8Array, outOff: number): boolean {
  const n = byteLen >> 2;
  limbs.fill(0, 0, n);
  const end = sOff + base62Chars(byteLen);
  let i = sOff;
  if (((end - i) & 1) === 1) {
    const d = digitAt(s, i++);
    if (d < 0) return false;
    limbs[n - 1] = d;
  }
  for (; i < end; i += 2) {
    const hi = digitAt(s, i);
    const lo = digitAt(s, i + 1);
    if (hi < 0 || lo < 0 || !mulAddLimbs(n, PAIR, hi * 62 + lo)) return false;
  }
  for (let k = 0; k < n; k++) {
    const limb = limbs[k]!;
    const hi = outOff + byteLen - 1 - 4 * k;
    out[hi] = limb >>> 24;
    out[hi - 1] = (limb >>> 16) & 0xff;
    out[hi - 2] = (limb >>> 8) & 0xff;
    out[hi - 3] = limb & 0xff;
  }
  return true;
}

const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;
const valueScratch = new Uint8Array(16);
const valueView = new DataView(valueScratch.buffer);
const textScratch = Buffer.allocUnsafeSlow(BASE62_U128_CHARS);

/** The 11-char field Restate prints for the u64 `value` (e.g. an invocation id's partition key). */
export function encodeU64(value: bigint): string {
  if (value < 0n || value > U64_MAX) throw new RangeError(`not a u64: ${value}`);
  valueView.setBigUint64(0, value);
  writeBase62(valueScratch, 0, 8, textScratch, 0);
  return textScratch.toString('latin1', 0, BASE62_U64_CHARS);
}

/** The 22-char field Restate prints for the u128 `value` (e.g. a deployment id's ULID). */
export function encodeU128(value: bigint): string {
  if (value < 0n || value > U128_MAX) throw new RangeError(`not a u128: ${value}`);
  valueView.setBigUint64(0, value >> 64n);
  valueView.setBigUint64(8, value & U64_MAX);
  writeBase62(valueScratch, 0, 16, textScratch, 0);
  return textScratch.toString('latin1', 0, BASE62_U128_CHARS);
}

export function decodeU64(s: string): bigint {
  if (s.length !== BASE62_U64_CHARS) throw new InvalidIdError('bad length', s);
  if (!readBase62(s, 0, 8, valueScratch, 0)) throw new InvalidIdError('base62 decode error', s);
  return valueView.getBigUint64(0);
}

export function decodeU128(s: string): bigint {
  if (s.length !== BASE62_U128_CHARS) throw new InvalidIdError('bad length', s);
  if (!readBase62(s, 0, 16, valueScratch, 0)) throw new InvalidIdError('base62 decode error', s);
  return (valueView.getBigUint64(0) << 64n) | valueView.getBigUint64(8);
}
