/**
 * ULIDs as Restate uses them: 48-bit big-endian millisecond timestamp followed by 80 random bits, held as
 * 16 raw bytes (a big-endian u128). Not monotonic within a millisecond, like Restate's `Ulid::new()`.
 */

import { randomFillSync } from 'node:crypto';

export const ULID_BYTES = 16;
const RANDOM_BYTES = 10;
const MAX_TIMESTAMP_MS = 2 ** 48 - 1;

// One crypto call per ~400 ULIDs instead of one per id.
const pool = Buffer.allocUnsafeSlow(4000);
let poolPos = pool.length;

/** Writes a fresh ULID into `out[off, off + 16)`. */
export function writeUlid(out: Uint8Array, off: number, nowMs: number = Date.now()): void {
  if (!Number.isInteger(nowMs) || nowMs < 0 || nowMs > MAX_TIMESTAMP_MS) {
    throw new RangeError(`ULID timestamp out of range: ${nowMs}`);
  }
  const hi = Math.floor(nowMs / 2 ** 32);
  const lo = nowMs >>> 0;
  out[off] = hi >>> 8;
  out[off + 1] = hi & 0xff;
  out[off + 2] = lo >>> 24;
  out[off + 3] = (lo >>> 16) & 0xff;
  out[off + 4] = (lo >>> 8) & 0xff;
  out[off + 5] = lo & 0xff;
  if (poolPos + RANDOM_BYTES > pool.length) {
    randomFillSync(pool);
    poolPos = 0;
  }
  pool.copy(out, off + 6, poolPos, poolPos + RANDOM_BYTES);
  // Never hand out the same random bits twice, even if a caller keeps the id around.
  poolPos += RANDOM_BYTES;
}

/** 64 fresh random bits from the same pool (an invocation's random seed): no crypto call per invocation. */
export function randomU64(): bigint {
  if (poolPos + 8 > pool.length) {
    randomFillSync(pool);
    poolPos = 0;
  }
  const value = pool.readBigUInt64BE(poolPos);
  poolPos += 8;
  return value;
}

export function ulidTimestampMs(bytes: Uint8Array, off = 0): number {
  const hi = (bytes[off]! << 8) | bytes[off + 1]!;
  const lo = ((bytes[off + 2]! << 24) | (bytes[off + 3]! << 16) | (bytes[off + 4]! << 8) | bytes[off + 5]!) >>> 0;
  return hi * 2 ** 32 + lo;
}

const CROCKFORD = Uint8Array.from('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (c) => c.charCodeAt(0));
const ulidScratch = new Uint8Array(ULID_BYTES);
const textScratch = Buffer.allocUnsafeSlow(26);

/**
 * A fresh ULID in its canonical 26-char Crockford base32 text form, as Restate injects it as the idempotency
 * key of every unkeyed call under controlled idempotent sharding.
 */
export function newUlidString(nowMs: number = Date.now()): string {
  writeUlid(ulidScratch, 0, nowMs);
  return ulidBytesToString(ulidScratch);
}

export function ulidBytesToString(bytes: Uint8Array, off = 0): string {
  // 128 bits in 26 five-bit digits: the text starts with two implicit zero bits.
  let acc = 0;
  let bits = 2;
  let pos = 0;
  for (let i = 0; i < ULID_BYTES; i++) {
    acc = ((acc << 8) | bytes[off + i]!) & 0x1fff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      textScratch[pos++] = CROCKFORD[(acc >>> bits) & 31]!;
    }
  }
  return textScratch.toString('latin1', 0, 26);
}
