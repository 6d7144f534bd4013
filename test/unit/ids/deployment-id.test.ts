import { describe, expect, it } from 'vitest';

import { DeploymentId, SubscriptionId } from '../../../runtime/src/ids/deployment-id.ts';
import { InvalidIdError } from '../../../runtime/src/ids/id-codec.ts';
import { newUlidString, ulidBytesToString, ulidTimestampMs, writeUlid } from '../../../runtime/src/ids/ulid.ts';

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidIdError);
    return (err as InvalidIdError).message;
  }
  throw new Error('expected an InvalidIdError');
}

describe('deployment and subscription ids', () => {
  it('parses ids issued by restate-server', () => {
    expect(DeploymentId.parse('dp_13o2BJB8AzAA9KIwPxc6xX3')).toBe('dp_13o2BJB8AzAA9KIwPxc6xX3');
    // the golden scenarios registered these on 2026-11-21
    for (const id of [
      'dp_10IRrlpQCaIqBToiObyB9UR',
      'dp_15j9GS637F5afoButJUJTqx',
      'dp_17fcVoO9a60eiW7EAZgFF9n',
      'dp_17uwPVivU20Lvg4FiiFZ8Ln',
    ]) {
      const created = new Date(DeploymentId.timestampMs(DeploymentId.parse(id)));
      expect(created.toISOString().slice(0, 10)).toBe('2026-11-21');
    }
  });

  it('generates ids whose ULID time is the creation time', () => {
    const now = Date.UTC(2026, 10, 21, 20, 52, 22, 5);
    const dp = DeploymentId.generate(now);
    expect(dp).toMatch(/^dp_1[0-9a-zA-Z]{22}$/);
    expect(DeploymentId.timestampMs(dp)).toBe(now);
    const sub = SubscriptionId.generate(now);
    expect(sub).toMatch(/^sub_1[0-9a-zA-Z]{22}$/);
    expect(sub).toHaveLength(27);
    expect(SubscriptionId.timestampMs(sub)).toBe(now);
    expect(Math.abs(DeploymentId.timestampMs(DeploymentId.generate()) - Date.now())).toBeLessThan(5000);
    const many = new Set(Array.from({ length: 1000 }, () => DeploymentId.generate(now)));
    expect(many.size).toBe(1000);
  });

  it('rejects malformed ids', () => {
    expect(reasonOf(() => DeploymentId.parse('dp_1short'))).toBe('bad length');
    expect(reasonOf(() => DeploymentId.parse('dp_13o2BJB8AzAA9KIwPxc6xX3X'))).toBe('bad length');
    expect(reasonOf(() => DeploymentId.parse('dp_23o2BJB8AzAA9KIwPxc6xX3'))).toBe('unrecognized codec version');
    expect(reasonOf(() => DeploymentId.parse('dp_13o2BJB8AzAA9KIwPxc6x-3'))).toBe('base62 decode error');
    expect(reasonOf(() => DeploymentId.parse('sub_13o2BJB8AzAA9KIwPxc6xX3'))).toBe(
      "id doesn't match the expected type",
    );
    expect(reasonOf(() => SubscriptionId.parse('dp_13o2BJB8AzAA9KIwPxc6xX3'))).toBe(
      "id doesn't match the expected type",
    );
    expect(reasonOf(() => DeploymentId.parse('xx_13o2BJB8AzAA9KIwPxc6xX3'))).toBe('unrecognized resource type: xx');
    expect(DeploymentId.tryParse('dp_1short')).toBeUndefined();
  });
});

describe('ULIDs', () => {
  it('lays out 48-bit ms time then 80 random bits', () => {
    const out = new Uint8Array(18);
    writeUlid(out, 1, 1469918176385);
    expect(out[0]).toBe(0);
    expect(out[17]).toBe(0);
    expect(Buffer.from(out.subarray(1, 7)).toString('hex')).toBe((1469918176385).toString(16).padStart(12, '0'));
    expect(ulidTimestampMs(out, 1)).toBe(1469918176385);
    writeUlid(out, 0, 2 ** 48 - 1);
    expect(ulidTimestampMs(out, 0)).toBe(2 ** 48 - 1);
    expect(() => writeUlid(out, 0, 2 ** 48)).toThrow(RangeError);
    expect(() => writeUlid(out, 0, -1)).toThrow(RangeError);
  });

  it('prints the canonical Crockford form', () => {
    const bytes = Buffer.from('01563e3ab5d3d6764c61efb99302bd5b', 'hex');
    expect(ulidBytesToString(bytes)).toBe('01ARZ3NDEKTSV4RRFFQ69G5FAV');
    expect(ulidBytesToString(new Uint8Array(16).fill(0xff))).toBe('7ZZZZZZZZZZZZZZZZZZZZZZZZZ');
    const s = newUlidString(1469918176385);
    expect(s).toMatch(/^01ARYZ6S41[0-9A-HJKMNP-TV-Z]{16}$/);
    expect(newUlidString()).not.toBe(newUlidString());
  });
});
