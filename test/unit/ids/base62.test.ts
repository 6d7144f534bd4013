import { describe, expect, it } from 'vitest';

import {
  BASE62_ALPHABET,
  decodeU128,
  decodeU64,
  encodeU128,
  encodeU64,
  readBase62,
  writeBase62,
} from '../../../runtime/src/ids/base62.ts';
import { InvalidIdError } from '../../../runtime/src/ids/id-codec.ts';

/** Straightforward BigInt model of the spec: encode bswap(value) in fixed width, left-padded with '0'. */
function reference(value: bigint, bytes: 8 | 16): string {
  let swapped = 0n;
  for (let i = 0; i < bytes; i++) swapped = (swapped << 8n) | ((value >> BigInt(8 * i)) & 0xffn);
  let out = '';
  for (let i = 0; i < (bytes === 8 ? 11 : 22); i++) {
    out = BASE62_ALPHABET[Number(swapped % 62n)]! + out;
    swapped /= 62n;
  }
  return out;
}

function randomBig(bytes: number): bigint {
  let v = 0n;
  for (let i = 0; i < bytes; i++) v = (v << 8n) | BigInt(Math.floor(Math.random() * 256));
  return v;
}

function reasonOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidIdError);
    return (err as InvalidIdError).reason;
  }
  return undefined;
}

describe('base62', () => {
  it('uses digits, then lowercase, then uppercase', () => {
    expect(BASE62_ALPHABET).toBe('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ');
  });

  it('encodes the fields of the spec example id (pk 7407d8358fcbb7c7, uuid 1aca47e2…2ded4d)', () => {
    expect(encodeU64(0x7407d8358fcbb7c7n)).toBe('h95Pbq3QeUs');
    expect(encodeU128(0x1aca47e2270ef5437d87af37362ded4dn)).toBe('2n2Ny5B47gzkUUVJxcLIHo');
    expect(decodeU64('h95Pbq3QeUs')).toBe(0x7407d8358fcbb7c7n);
    expect(decodeU128('2n2Ny5B47gzkUUVJxcLIHo')).toBe(0x1aca47e2270ef5437d87af37362ded4dn);
  });

  it('byte-swaps before encoding and pads to fixed width', () => {
    expect(encodeU64(0n)).toBe('00000000000');
    expect(encodeU128(0n)).toBe('0'.repeat(22));
    // 1 swapped is 2^56, so the padding is not all there is
    expect(encodeU64(1n)).toBe(reference(1n, 8));
    expect(encodeU64(1n << 56n)).toBe('00000000001');
    expect(encodeU128(1n << 120n)).toBe('0'.repeat(21) + '1');
    expect(encodeU64((1n << 64n) - 1n)).toBe('lYGhA16ahyf');
    expect(decodeU64('lYGhA16ahyf')).toBe((1n << 64n) - 1n);
    expect(decodeU128(encodeU128((1n << 128n) - 1n))).toBe((1n << 128n) - 1n);
  });

  it('matches the BigInt model and round-trips on random values', () => {
    for (let i = 0; i < 2000; i++) {
      const v64 = randomBig(1 + (i % 8));
      const s64 = encodeU64(v64);
      expect(s64).toBe(reference(v64, 8));
      expect(decodeU64(s64)).toBe(v64);
      const v128 = randomBig(1 + (i % 16));
      const s128 = encodeU128(v128);
      expect(s128).toBe(reference(v128, 16));
      expect(decodeU128(s128)).toBe(v128);
    }
  });

  it('works on raw big-endian bytes at offsets', () => {
    const src = Uint8Array.from(Buffer.from('00ff7407d8358fcbb7c7', 'hex'));
    const out = new Uint8Array(13).fill(0x2e);
    writeBase62(src, 2, 8, out, 1);
    expect(Buffer.from(out).toString('latin1')).toBe('.h95Pbq3QeUs.');
    const back = new Uint8Array(10);
    expect(readBase62('xxh95Pbq3QeUs', 2, 8, back, 1)).toBe(true);
    expect(Buffer.from(back.subarray(1, 9)).toString('hex')).toBe('7407d8358fcbb7c7');
  });

  it('rejects bad length, foreign characters and overflow', () => {
    expect(reasonOf(() => decodeU64('h95Pbq3QeU'))).toBe('bad length');
    expect(reasonOf(() => decodeU64('h95Pbq3QeUs0'))).toBe('bad length');
    expect(reasonOf(() => decodeU128('2n2Ny5B47gzkUUVJxcLIH'))).toBe('bad length');
    expect(reasonOf(() => decodeU64('h95Pbq3QeU!'))).toBe('base62 decode error');
    expect(reasonOf(() => decodeU64('h95Pbq3QeU_'))).toBe('base62 decode error');
    expect(reasonOf(() => decodeU64('h95Pbq3QeUé'))).toBe('base62 decode error');
    // 62^11 - 1 > 2^64 - 1 and 62^22 - 1 > 2^128 - 1
    expect(reasonOf(() => decodeU64('ZZZZZZZZZZZ'))).toBe('base62 decode error');
    expect(reasonOf(() => decodeU64('lYGhA16ahyg'))).toBe('base62 decode error');
    expect(reasonOf(() => decodeU128('Z'.repeat(22)))).toBe('base62 decode error');
  });

  it('refuses values outside the width', () => {
    expect(() => encodeU64(-1n)).toThrow(RangeError);
    expect(() => encodeU64(1n << 64n)).toThrow(RangeError);
    expect(() => encodeU128(1n << 128n)).toThrow(RangeError);
  });
});
