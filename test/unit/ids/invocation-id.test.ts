import { createHash } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { InvalidIdError } from '../../../runtime/src/ids/id-codec.ts';
import {
  INVOCATION_ID_LENGTH,
  INVOCATION_ID_PARTITION_PREFIX_LENGTH,
  InvocationId,
} from '../../../runtime/src/ids/invocation-id.ts';
import { partitionKeyForKey, partitionKeyForUnkeyedIdempotent } from '../../../runtime/src/ids/partition-key.ts';
import { ulidTimestampMs } from '../../../runtime/src/ids/ulid.ts';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const sha16 = (s: string): string => createHash('sha256').update(s).digest().subarray(0, 16).toString('hex');

function failure(fn: () => unknown): InvalidIdError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidIdError);
    return err as InvalidIdError;
  }
  throw new Error('expected an InvalidIdError');
}

describe('InvocationId test vectors (restate-server 1.7.12)', () => {
  it('workflow Signup/u1', () => {
    expect(InvocationId.forWorkflow('Signup', 'u1')).toBe('inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa');
  });

  it('virtual object Counter/k3 add, idempotency key c-1', () => {
    expect(InvocationId.forIdempotent('Counter', 'k3', 'add', 'c-1')).toBe('inv_1ceQMii6q8iL7yDzWEbdirQIjEtELrlgv5');
  });

  it('service Greeter/greet, idempotency key idem-1 (controlled sharding)', () => {
    expect(InvocationId.forIdempotent('Greeter', undefined, 'greet', 'idem-1')).toBe(
      'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4',
    );
  });

  it('raw 7407d8358fcbb7c7 1aca47e2270ef5437d87af37362ded4d ↔ inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo', () => {
    const raw = Buffer.from('7407d8358fcbb7c71aca47e2270ef5437d87af37362ded4d', 'hex');
    const id = InvocationId.fromRaw(raw);
    expect(id).toBe('inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo');
    expect(hex(InvocationId.toRaw(InvocationId.parse('inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo')))).toBe(
      raw.toString('hex'),
    );
    expect(InvocationId.partitionKey(id)).toBe(0x7407d8358fcbb7c7n);
  });

  it('uses the key hash and the SHA-256 prefix as the two halves', () => {
    const raw = InvocationId.toRaw(InvocationId.forWorkflow('Signup', 'u1'));
    expect(Buffer.from(raw.subarray(0, 8)).readBigUInt64BE()).toBe(partitionKeyForKey('u1'));
    expect(hex(raw.subarray(8))).toBe(sha16('wf,Signup,u1'));
    const unkeyed = InvocationId.toRaw(InvocationId.forIdempotent('Greeter', undefined, 'greet', 'idem-1'));
    expect(Buffer.from(unkeyed.subarray(0, 8)).readBigUInt64BE()).toBe(
      partitionKeyForUnkeyedIdempotent('Greeter', 'idem-1'),
    );
    expect(hex(unkeyed.subarray(8))).toBe(sha16('ik,Greeter,greet,idem-1'));
  });

  it("hashes the scope into the uuid and puts a scoped invocation on its scope's partition key", () => {
    const wf = InvocationId.forWorkflow('Signup', 'u1', 'tenant-a');
    expect(hex(InvocationId.toRaw(wf).subarray(8))).toBe(sha16('wf,tenant-a,Signup,u1'));
    expect(InvocationId.partitionKey(wf)).toBe(partitionKeyForKey('tenant-a'));
    // Ids restate-server 1.7.12 gave (experimental-enable-vqueues): a scoped idempotent call and a scoped workflow.
    expect(InvocationId.forIdempotent('Slow', undefined, 'run', 'idem1', 'scope1')).toBe(
      'inv_10C1ZNkluGcx1SBq00l175dEMizQKAduSW',
    );
    expect(InvocationId.forWorkflow('Wf', 'w1', 'scope1')).toBe('inv_10C1ZNkluGcx4cAej9Ggq9G9JTsEUiF3Sq');
    const ik = InvocationId.forIdempotent('Counter', 'k3', 'add', 'c-1', 'tenant-a');
    expect(hex(InvocationId.toRaw(ik).subarray(8))).toBe(sha16('ik,tenant-a,Counter,k3,add,c-1'));
    const sk = InvocationId.forIdempotent('Greeter', undefined, 'greet', 'idem-1', 'tenant-a');
    expect(hex(InvocationId.toRaw(sk).subarray(8))).toBe(sha16('ik,tenant-a,Greeter,greet,idem-1'));
  });

  it('distinguishes the empty object key from an unkeyed target', () => {
    const keyed = InvocationId.forIdempotent('Counter', '', 'add', 'x');
    expect(hex(InvocationId.toRaw(keyed).subarray(8))).toBe(sha16('ik,Counter,,add,x'));
    expect(InvocationId.partitionKey(keyed)).toBe(partitionKeyForKey(''));
  });
});

describe('InvocationId partitioning', () => {
  it('gives every call to the same object key the same first 16 characters', () => {
    const ids = [
      InvocationId.forWorkflow('Counter', 'Alice'),
      InvocationId.forIdempotent('Counter', 'Alice', 'add', 'a'),
      InvocationId.forIdempotent('Counter', 'Alice', 'get', 'b'),
      InvocationId.generate(partitionKeyForKey('Alice')),
      InvocationId.generate(partitionKeyForKey('Alice')),
    ];
    const prefixes = new Set(ids.map((id) => id.slice(0, INVOCATION_ID_PARTITION_PREFIX_LENGTH)));
    expect(prefixes.size).toBe(1);
    expect(new Set(ids).size).toBe(ids.length);
    expect(InvocationId.forWorkflow('Counter', 'Bob').slice(0, 16)).not.toBe(ids[0]!.slice(0, 16));
  });

  it('generates ULID uuids on the requested partition key', () => {
    const now = Date.UTC(2026, 10, 21, 20, 52, 22, 123);
    const id = InvocationId.generate(42n, now);
    expect(id).toHaveLength(INVOCATION_ID_LENGTH);
    expect(InvocationId.partitionKey(id)).toBe(42n);
    expect(ulidTimestampMs(InvocationId.toRaw(id), 8)).toBe(now);
    expect(InvocationId.generate(42n, now)).not.toBe(id);
    expect(InvocationId.partitionKey(InvocationId.generate((1n << 64n) - 1n))).toBe((1n << 64n) - 1n);
    expect(() => InvocationId.generate(-1n)).toThrow(RangeError);
    expect(() => InvocationId.generate(1n << 64n)).toThrow(RangeError);
  });

  it('restarts as new on the same partition key', () => {
    const original = InvocationId.forIdempotent('Counter', 'k3', 'add', 'c-1');
    const restarted = InvocationId.withSamePartition(original);
    expect(restarted).not.toBe(original);
    expect(restarted.slice(0, 16)).toBe(original.slice(0, 16));
    expect(InvocationId.partitionKey(restarted)).toBe(partitionKeyForKey('k3'));
    expect(Math.abs(ulidTimestampMs(InvocationId.toRaw(restarted), 8) - Date.now())).toBeLessThan(5000);
  });
});

describe('InvocationId round trips', () => {
  it('text → raw → text for random ids', () => {
    for (let i = 0; i < 1000; i++) {
      const pk = BigInt.asUintN(64, BigInt(Math.floor(Math.random() * 2 ** 53)) * 2654435761n);
      const id = InvocationId.generate(pk);
      expect(InvocationId.parse(id)).toBe(id);
      expect(InvocationId.fromRaw(InvocationId.toRaw(id))).toBe(id);
      expect(InvocationId.partitionKey(id)).toBe(pk);
    }
  });

  it('raw → text → raw for random bytes', () => {
    for (let i = 0; i < 1000; i++) {
      const raw = Uint8Array.from({ length: 24 }, () => Math.floor(Math.random() * 256));
      if (i === 0) raw.fill(0);
      if (i === 1) raw.fill(0xff);
      const id = InvocationId.fromRaw(raw);
      expect(id).toMatch(/^inv_1[0-9a-zA-Z]{33}$/);
      expect(hex(InvocationId.toRaw(id))).toBe(hex(raw));
    }
  });

  it('writes the raw form at an offset', () => {
    const out = new Uint8Array(30);
    InvocationId.writeRaw(InvocationId.parse('inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo'), out, 3);
    expect(hex(out)).toBe('000000' + '7407d8358fcbb7c71aca47e2270ef5437d87af37362ded4d' + '000000');
  });
});

describe('InvocationId.parse errors', () => {
  const good = 'inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo';
  const cases: [string, string][] = [
    ['', 'bad length'],
    ['inv', 'bad format'],
    ['h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo', 'bad format'],
    ['foo_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo', 'unrecognized resource type: foo'],
    ['_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo', 'unrecognized resource type: '],
    ['dp_13o2BJB8AzAA9KIwPxc6xX3', "id doesn't match the expected type"],
    ['sign_11nJO0NTseecX_9Lz29UJJ30t5DYWfLefAAAAEQ', "id doesn't match the expected type"],
    ['inv_', 'bad length'],
    ['inv_garbage', 'unrecognized codec version'],
    ['inv_2h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo', 'unrecognized codec version'],
    ['inv_1', 'bad length'],
    ['inv_1h95Pbq3QeU', 'bad length'],
    ['inv_1h95Pbq3QeUs', 'bad length'],
    ['inv_1h95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIH', 'bad length'],
    [good + 'x', 'bad length'],
    ['inv_1h95Pbq3Qe!s2n2Ny5B47gzkUUVJxcLIHo', 'base62 decode error'],
    ['inv_1h95Pbq3QeU!', 'base62 decode error'],
    ['inv_1h95Pbq3QeUs2n2Ny5B47gzk-UVJxcLIHo', 'base62 decode error'],
    ['inv_1ZZZZZZZZZZZ2n2Ny5B47gzkUUVJxcLIHo', 'base62 decode error'],
    ['inv_1h95Pbq3QeUsZZZZZZZZZZZZZZZZZZZZZZ', 'base62 decode error'],
  ];

  it.each(cases)('%j → %s', (input, reason) => {
    const err = failure(() => InvocationId.parse(input));
    expect(err.reason).toBe(reason);
    expect(err.message).toBe(reason);
    expect(err.input).toBe(input);
    expect(InvocationId.tryParse(input)).toBeUndefined();
  });

  it('accepts the good id', () => {
    expect(InvocationId.tryParse(good)).toBe(good);
  });

  it('rejects raw forms of the wrong size', () => {
    expect(failure(() => InvocationId.fromRaw(new Uint8Array(23))).reason).toBe('bad length');
    expect(failure(() => InvocationId.fromRaw(new Uint8Array(28))).reason).toBe('bad length');
  });

  it('refuses to read a partition key out of a forged id', () => {
    expect(
      failure(() => InvocationId.partitionKey('inv_1!95Pbq3QeUs2n2Ny5B47gzkUUVJxcLIHo' as InvocationId)).reason,
    ).toBe('base62 decode error');
  });
});
