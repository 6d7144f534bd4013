/**
 * Virtual queue ids in restate-server 1.7's format: `vq_1` + base62(partition key, 11) + base62(128 bits, 22), 37
 * characters. A queue lives on one partition key (its invocations'), so the id tells which partition owns it. The
 * 128 bits are the first 16 bytes of SHA-256 over what identifies the queue (service, scope, limit key, lock).
 */

import { hash } from 'node:crypto';
import { readBase62, writeBase62 } from './base62.ts';
import { InvalidIdError, idPayloadOffset } from './id-codec.ts';

export const VQUEUE_ID_LENGTH = 37;
const PREFIX = 'vq_1';

export interface VQueueKey {
  readonly service: string;
  readonly scope: string | null;
  readonly limitKey: string | null;
  /** `service/key` for an exclusive handler of an object or a workflow run; null otherwise. */
  readonly lock: string | null;
}

export function vqueueId(partitionKey: bigint, key: VQueueKey): string {
  const raw = new Uint8Array(24);
  new DataView(raw.buffer).setBigUint64(0, partitionKey);
  const material = `vq,${key.service},${key.scope ?? ''},${key.limitKey ?? ''},${key.lock ?? ''}`;
  hash('sha256', material, 'buffer').copy(raw, 8, 0, 16);
  const text = Buffer.alloc(VQUEUE_ID_LENGTH);
  text.write(PREFIX, 0, 'latin1');
  writeBase62(raw, 0, 8, text, PREFIX.length);
  writeBase62(raw, 8, 16, text, PREFIX.length + 11);
  return text.toString('latin1');
}

/** Validates a vqueue id and returns its partition key; throws InvalidIdError with restate's reason. */
export function parseVQueueId(input: string): bigint {
  const start = idPayloadOffset(input, 'vq');
  if (input.length !== start + 33) throw new InvalidIdError('bad length', input);
  const raw = new Uint8Array(24);
  if (!readBase62(input, start, 8, raw, 0) || !readBase62(input, start + 11, 16, raw, 8)) {
    throw new InvalidIdError('base62 decode error', input);
  }
  return new DataView(raw.buffer).getBigUint64(0);
}
