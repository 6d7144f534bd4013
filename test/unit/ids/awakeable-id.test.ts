import { describe, expect, it } from 'vitest';

import { formatAwakeableId, parseAwakeableId } from '../../../runtime/src/ids/awakeable-id.ts';
import { InvalidIdError } from '../../../runtime/src/ids/id-codec.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';

const SPEC_EXAMPLE = 'sign_11nJO0NTseecX_9Lz29UJJ30t5DYWfLefAAAAEQ';
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

function reasonOf(input: string): string {
  try {
    parseAwakeableId(input);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidIdError);
    expect((err as InvalidIdError).input).toBe(input);
    return (err as InvalidIdError).message;
  }
  throw new Error(`parsed ${input}`);
}

describe('awakeable ids', () => {
  it('decodes the service-protocol §6.2 example', () => {
    const a = parseAwakeableId(SPEC_EXAMPLE);
    expect(SPEC_EXAMPLE).toHaveLength(44);
    expect(a.kind).toBe('signal');
    expect(a.index).toBe(17);
    const raw = hex(InvocationId.toRaw(a.invocationId));
    expect(raw.startsWith('d6724ed0')).toBe(true);
    expect(raw.endsWith('7cb79f')).toBe(true);
    expect(formatAwakeableId('signal', a.invocationId, 17)).toBe(SPEC_EXAMPLE);
  });

  it('accepts padded input', () => {
    expect(parseAwakeableId(SPEC_EXAMPLE + '==')).toEqual(parseAwakeableId(SPEC_EXAMPLE));
  });

  it('reads legacy prom_1 ids with the same layout', () => {
    const legacy = 'prom_1' + SPEC_EXAMPLE.slice('sign_1'.length);
    const a = parseAwakeableId(legacy);
    expect(a.kind).toBe('legacy');
    expect(a.index).toBe(17);
    expect(a.invocationId).toBe(parseAwakeableId(SPEC_EXAMPLE).invocationId);
    expect(formatAwakeableId('legacy', a.invocationId, 17)).toBe(legacy);
  });

  it('round-trips random invocation ids and indexes', () => {
    for (let i = 0; i < 500; i++) {
      const id = InvocationId.generate((BigInt(i) * 0x9e3779b97f4a7c15n) % (1n << 64n));
      const index = i === 0 ? 0xffffffff : i;
      const s = formatAwakeableId('signal', id, index);
      expect(s).toMatch(/^sign_1[A-Za-z0-9_-]{38}$/);
      expect(parseAwakeableId(s)).toEqual({ kind: 'signal', invocationId: id, index });
    }
  });

  it('rejects malformed ids with Restate reason phrases', () => {
    const body = SPEC_EXAMPLE.slice('sign_1'.length);
    expect(reasonOf('')).toBe('bad length');
    expect(reasonOf('garbage')).toBe('bad format');
    expect(reasonOf('prom_garbage')).toBe('unrecognized codec version');
    expect(reasonOf('sign_2' + body)).toBe('unrecognized codec version');
    expect(reasonOf('awk_1' + body)).toBe('unrecognized resource type: awk');
    expect(reasonOf('inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo')).toBe("id doesn't match the expected type");
    expect(reasonOf('sign_')).toBe('bad length');
    expect(reasonOf('sign_1')).toBe('bad length');
    expect(reasonOf('sign_1AAAA')).toBe('bad length');
    expect(reasonOf('sign_1' + body + 'AAAA')).toBe('bad length');
    expect(reasonOf('sign_1' + body.slice(0, -1) + '!')).toBe('base62 decode error');
    expect(reasonOf('sign_1' + body.replace('_', '/'))).toBe('base62 decode error');
    expect(reasonOf('sign_1' + body + '=')).toBe('base62 decode error');
    expect(reasonOf('sign_1' + body + '===')).toBe('base62 decode error');
    expect(reasonOf('sign_1' + body.slice(0, 10) + '=' + body.slice(11))).toBe('base62 decode error');
    expect(reasonOf('sign_1' + body.slice(0, -1))).toBe('base62 decode error'); // 37 chars: 1 left over
    // the last character may only carry data bits
    expect(reasonOf('sign_1' + body.slice(0, -1) + 'R')).toBe('base62 decode error');
  });

  it('refuses indexes that are not u32', () => {
    const id = InvocationId.parse('inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo');
    expect(() => formatAwakeableId('signal', id, -1)).toThrow(RangeError);
    expect(() => formatAwakeableId('signal', id, 2 ** 32)).toThrow(RangeError);
    expect(() => formatAwakeableId('signal', id, 1.5)).toThrow(RangeError);
  });
});
