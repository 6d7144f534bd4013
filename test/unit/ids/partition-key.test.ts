import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';

import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import {
  PARTITION_KEY_BUCKETS,
  idempotencyBucket,
  partitionKeyForBucket,
  partitionKeyForKey,
  partitionKeyForUnkeyedIdempotent,
  randomPartitionKey,
} from '../../../runtime/src/ids/partition-key.ts';

const pkOf = (id: string): bigint => InvocationId.partitionKey(InvocationId.parse(id));

describe('partition keys', () => {
  it('hashes a key as Rust hashes a str: xxh3-64(utf8 ‖ 0xff)', () => {
    expect(partitionKeyForKey('u1')).toBe(pkOf('inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa'));
    expect(partitionKeyForKey('k3')).toBe(pkOf('inv_1ceQMii6q8iL7yDzWEbdirQIjEtELrlgv5'));
    expect(partitionKeyForKey('u1')).toBe(xxh3.xxh64(Buffer.from([0x75, 0x31, 0xff])));
    expect(partitionKeyForKey('')).toBe(xxh3.xxh64(Buffer.from([0xff])));
  });

  it('encodes non-ASCII keys as UTF-8 and handles keys longer than the scratch buffer', () => {
    for (const key of ['Grüße', '鍵🔑', 'x'.repeat(5000), '€'.repeat(3000)]) {
      const expected = xxh3.xxh64(Buffer.concat([Buffer.from(key, 'utf8'), Buffer.from([0xff])]));
      expect(partitionKeyForKey(key)).toBe(expected);
    }
    // and the scratch buffer is still right for short keys afterwards
    expect(partitionKeyForKey('u1')).toBe(pkOf('inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa'));
  });

  it('derives the controlled-sharding key of an unkeyed idempotent call (spec vector Greeter/greet idem-1)', () => {
    const bucket = idempotencyBucket('idem-1');
    expect(bucket).toBe(Number(partitionKeyForKey('idem-1') % 512n));
    const tuple = Buffer.concat([
      Buffer.from('Greeter'),
      Buffer.from([0xff]),
      Buffer.from('unscoped/service'),
      Buffer.from([0xff]),
      Buffer.from([bucket & 0xff, bucket >> 8, 0, 0, 0, 0, 0, 0]),
    ]);
    expect(partitionKeyForBucket('Greeter', bucket)).toBe(xxh3.xxh64(tuple));
    expect(partitionKeyForUnkeyedIdempotent('Greeter', 'idem-1')).toBe(pkOf('inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4'));
  });

  it('keeps buckets in range', () => {
    for (let i = 0; i < 1000; i++) {
      const b = idempotencyBucket(`key-${i}`);
      expect(b).toBeGreaterThanOrEqual(0);
      expect(b).toBeLessThan(PARTITION_KEY_BUCKETS);
    }
    expect(() => partitionKeyForBucket('Greeter', -1)).toThrow(RangeError);
    expect(() => partitionKeyForBucket('Greeter', 512)).toThrow(RangeError);
    expect(() => partitionKeyForBucket('Greeter', 1.5)).toThrow(RangeError);
  });

  it('picks a random partition key among the service’s 512 bucket keys', () => {
    const allowed = new Set<bigint>();
    for (let b = 0; b < PARTITION_KEY_BUCKETS; b++) allowed.add(partitionKeyForBucket('Greeter', b));
    expect(allowed.size).toBe(PARTITION_KEY_BUCKETS);
    const seen = new Set<bigint>();
    for (let i = 0; i < 2000; i++) {
      const pk = randomPartitionKey('Greeter');
      expect(allowed.has(pk)).toBe(true);
      seen.add(pk);
    }
    expect(seen.size).toBeGreaterThan(300);
  });
});
