/**
 * Partition keys, derived exactly as restate-server 1.7 does so that ids (whose first 16 characters encode the
 * partition key) are identical across servers.
 *
 * Restate feeds values through Rust's `Hash` into an XXH3-64 hasher with seed 0; the writes are concatenated,
 * so a `str` hashes as its UTF-8 bytes followed by 0xff, and a `u64` as its 8 little-endian bytes.
 */

import { xxh3 } from '@node-rs/xxhash';

/** Number of controlled-idempotent-sharding buckets per unkeyed service. */
export const PARTITION_KEY_BUCKETS = 512;

const STR_TERMINATOR = 0xff;
const UNSCOPED_SERVICE = Buffer.from('unscoped/service', 'utf8');

// Worst case for UTF-8 is 3 bytes per UTF-16 unit; grown on demand so the common path never allocates bytes.
let scratch = Buffer.allocUnsafeSlow(1024);

function ensureScratch(bytes: number): Buffer {
  if (scratch.length < bytes) scratch = Buffer.allocUnsafeSlow(Math.max(bytes, scratch.length * 2));
  return scratch;
}

/** Rust `Hash` of a `str`: H(utf8(key) ‖ 0xff). For keyed targets this is the partition key. */
export function partitionKeyForKey(key: string): bigint {
  const buf = ensureScratch(key.length * 3 + 1);
  const n = buf.write(key, 0, 'utf8');
  buf[n] = STR_TERMINATOR;
  return xxh3.xxh64(buf.subarray(0, n + 1));
}

/** The sharding bucket of an idempotency key on an unkeyed target: H(idemKey) mod 512. */
export function idempotencyBucket(idempotencyKey: string): number {
  return Number(partitionKeyForKey(idempotencyKey) % BigInt(PARTITION_KEY_BUCKETS));
}

/** Rust `Hash` of the tuple `(service, "unscoped/service", bucket as u64)`. */
export function partitionKeyForBucket(service: string, bucket: number): bigint {
  if (!Number.isInteger(bucket) || bucket < 0 || bucket >= PARTITION_KEY_BUCKETS) {
    throw new RangeError(`bucket out of range: ${bucket}`);
  }
  const buf = ensureScratch(service.length * 3 + UNSCOPED_SERVICE.length + 10);
  let n = buf.write(service, 0, 'utf8');
  buf[n++] = STR_TERMINATOR;
  n += UNSCOPED_SERVICE.copy(buf, n);
  buf[n++] = STR_TERMINATOR;
  // u64le(bucket): bucket < 512, so only the two low bytes can be non-zero
  buf[n++] = bucket & 0xff;
  buf[n++] = bucket >>> 8;
  buf.fill(0, n, n + 6);
  n += 6;
  return xxh3.xxh64(buf.subarray(0, n));
}

/**
 * Partition key of an unkeyed (plain Service) invocation with an idempotency key, under 1.7's controlled
 * idempotent sharding: all invocations of a service spread over 512 partition keys, chosen by the key.
 */
export function partitionKeyForUnkeyedIdempotent(service: string, idempotencyKey: string): bigint {
  return partitionKeyForBucket(service, idempotencyBucket(idempotencyKey));
}

/**
 * Partition key for an unkeyed call without idempotency key: a random bucket of the same 512. Only placement
 * depends on it, not uniqueness or security, so Math.random is enough and avoids a crypto call per invocation.
 */
export function randomPartitionKey(service: string): bigint {
  return partitionKeyForBucket(service, Math.floor(Math.random() * PARTITION_KEY_BUCKETS));
}

/** Restate splits the u64 partition-key space into equal ranges, one per partition. */
export function partitionFor(partitionKey: bigint, partitions: number): number {
  return Number((partitionKey * BigInt(partitions)) >> 64n);
}
