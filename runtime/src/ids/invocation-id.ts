/**
 * Invocation ids in restate-server 1.7's format.
 *
 * Raw form (24 bytes): u64be partition key ‖ u128be uuid. Text form (38 chars): `inv_1` + base62(pk, 11) +
 * base62(uuid, 22). The id is carried around as its text (a branded string) because that is what is stored,
 * compared, logged and used as a map key everywhere; the partition key and raw bytes are decoded on demand.
 *
 * Workflow and idempotent ids are pure functions of their target so that a retried request, or the same request
 * against restate-server, lands on the same invocation.
 */

import { hash } from 'node:crypto';

import { readBase62, writeBase62 } from './base62.ts';
import { InvalidIdError, idPayloadOffset } from './id-codec.ts';
import { partitionKeyForKey, partitionKeyForUnkeyedIdempotent } from './partition-key.ts';
import { writeUlid } from './ulid.ts';

declare const invocationIdBrand: unique symbol;

/** A validated `inv_1…` string. Obtain one only through the functions of `InvocationId`. */
export type InvocationId = string & { readonly [invocationIdBrand]: true };

export const INVOCATION_ID_LENGTH = 38;
export const INVOCATION_ID_RAW_LENGTH = 24;
/** `inv_1` plus the partition-key field: every id on one partition key (e.g. one object key) shares it. */
export const INVOCATION_ID_PARTITION_PREFIX_LENGTH = 16;

const PREFIX = 'inv_1';
const PK_OFFSET = PREFIX.length;
const UUID_OFFSET = PK_OFFSET + 11;
const U64_MAX = (1n << 64n) - 1n;

// Shared scratch: every function here completes synchronously, so no two uses can interleave.
const raw = new Uint8Array(INVOCATION_ID_RAW_LENGTH);
const rawView = new DataView(raw.buffer);
const text = Buffer.allocUnsafeSlow(INVOCATION_ID_LENGTH);
text.write(PREFIX, 0, 'latin1');

function formatRaw(bytes: Uint8Array): InvocationId {
  writeBase62(bytes, 0, 8, text, PK_OFFSET);
  writeBase62(bytes, 8, 16, text, UUID_OFFSET);
  return text.toString('latin1', 0, INVOCATION_ID_LENGTH) as InvocationId;
}

/** Decodes and validates `input` into `out[off, off + 24)`, failing with Restate's reason phrases. */
function decodeInto(input: string, out: Uint8Array, off: number): void {
  const start = idPayloadOffset(input, 'inv');
  if (input.length < start + 11) throw new InvalidIdError('bad length', input);
  if (!readBase62(input, start, 8, out, off)) throw new InvalidIdError('base62 decode error', input);
  if (input.length < start + 33) throw new InvalidIdError('bad length', input);
  if (!readBase62(input, start + 11, 16, out, off + 8)) throw new InvalidIdError('base62 decode error', input);
  // restate-server ignores trailing characters here; rejecting them keeps one canonical text per id.
  if (input.length !== start + 33) throw new InvalidIdError('bad length', input);
}

function withSha256Uuid(partitionKey: bigint, material: string): InvocationId {
  rawView.setBigUint64(0, partitionKey);
  hash('sha256', material, 'buffer').copy(raw, 8, 0, 16);
  return formatRaw(raw);
}

function checkU64(value: bigint): void {
  if (value < 0n || value > U64_MAX) throw new RangeError(`partition key is not a u64: ${value}`);
}

export const InvocationId = {
  /** Validates an `inv_1…` string. Throws InvalidIdError with Restate's reason phrase. */
  parse(input: string): InvocationId {
    decodeInto(input, raw, 0);
    return input as InvocationId;
  },

  tryParse(input: string): InvocationId | undefined {
    try {
      decodeInto(input, raw, 0);
      return input as InvocationId;
    } catch {
      return undefined;
    }
  },

  /** From the 24-byte raw form (as in `StartMessage.id`). */
  fromRaw(bytes: Uint8Array): InvocationId {
    if (bytes.length !== INVOCATION_ID_RAW_LENGTH) {
      throw new InvalidIdError('bad length', Buffer.from(bytes).toString('hex'));
    }
    return formatRaw(bytes);
  },

  toRaw(id: InvocationId): Uint8Array {
    const out = new Uint8Array(INVOCATION_ID_RAW_LENGTH);
    decodeInto(id, out, 0);
    return out;
  },

  /** Writes the raw form into `out[off, off + 24)` without allocating. */
  writeRaw(id: InvocationId, out: Uint8Array, off = 0): void {
    decodeInto(id, out, off);
  },

  partitionKey(id: InvocationId): bigint {
    if (id.length !== INVOCATION_ID_LENGTH || !id.startsWith(PREFIX) || !readBase62(id, PK_OFFSET, 8, raw, 0)) {
      // Only reachable through a cast; parse() gives the precise reason.
      decodeInto(id, raw, 0);
    }
    return rawView.getBigUint64(0);
  },

  /**
   * The id of a workflow run: partition key H(key) (H(scope) when scoped: a scope's invocations share a partition),
   * uuid = first 16 bytes of SHA-256("wf,[scope,]service,key"). Shared workflow handlers are not covered: they get
   * ordinary ids on the same partition key.
   */
  forWorkflow(service: string, key: string, scope?: string): InvocationId {
    if (scope !== undefined) return withSha256Uuid(partitionKeyForKey(scope), `wf,${scope},${service},${key}`);
    return withSha256Uuid(partitionKeyForKey(key), `wf,${service},${key}`);
  },

  /**
   * The id of an invocation with an idempotency key. `key` is the object/workflow key, `undefined` for a plain
   * Service (which then gets the controlled-sharding partition key of its idempotency key).
   *
   * A scoped one is on its scope's partition key, H(scope), with the scope hashed into the uuid (as restate-server
   * 1.7.12 derives them, checked against its ids).
   */
  forIdempotent(
    service: string,
    key: string | undefined,
    handler: string,
    idempotencyKey: string,
    scope?: string,
  ): InvocationId {
    const scopePart = scope === undefined ? '' : `${scope},`;
    if (scope !== undefined) {
      const target = key === undefined ? `${service},${handler}` : `${service},${key},${handler}`;
      return withSha256Uuid(partitionKeyForKey(scope), `ik,${scopePart}${target},${idempotencyKey}`);
    }
    if (key === undefined) {
      return withSha256Uuid(
        partitionKeyForUnkeyedIdempotent(service, idempotencyKey),
        `ik,${scopePart}${service},${handler},${idempotencyKey}`,
      );
    }
    return withSha256Uuid(partitionKeyForKey(key), `ik,${scopePart}${service},${key},${handler},${idempotencyKey}`);
  },

  /** A fresh id on `partitionKey` with a random ULID uuid (48-bit ms time ‖ 80 random bits). */
  generate(partitionKey: bigint, nowMs?: number): InvocationId {
    checkU64(partitionKey);
    rawView.setBigUint64(0, partitionKey);
    writeUlid(raw, 8, nowMs);
    return formatRaw(raw);
  },

  /** A fresh random id on the same partition key as `id` (restart-as-new keeps the invocation's placement). */
  withSamePartition(id: InvocationId, nowMs?: number): InvocationId {
    decodeInto(id, raw, 0);
    writeUlid(raw, 8, nowMs);
    return formatRaw(raw);
  },
} as const;
