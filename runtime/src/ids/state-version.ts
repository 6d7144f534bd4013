/**
 * The `version` of an object's state as the admin API exposes it and checks it on `PATCH …/state`
 * (optimistic concurrency): base64url-no-pad SHA-256 over the entries in key order, each framed as
 * `u64be(index) 0x01 key 0x02 value 0x03`, so that no two different states frame to the same bytes.
 */

import { createHash } from 'node:crypto';

export type StateEntries = Iterable<readonly [key: string | Uint8Array, value: Uint8Array]>;

const KEY_MARK = Uint8Array.of(0x01);
const VALUE_MARK = Uint8Array.of(0x02);
const END_MARK = Uint8Array.of(0x03);

export function stateVersion(entries: StateEntries): string {
  const sorted: [Uint8Array, Uint8Array][] = [];
  for (const [key, value] of entries) {
    sorted.push([typeof key === 'string' ? Buffer.from(key, 'utf8') : key, value]);
  }
  // Restate orders keys as bytes; JS string order (UTF-16 units) differs for characters above U+FFFF.
  sorted.sort((a, b) => Buffer.compare(a[0], b[0]));
  const sha = createHash('sha256');
  const index = Buffer.alloc(8);
  for (let i = 0; i < sorted.length; i++) {
    const [key, value] = sorted[i]!;
    index.writeBigUInt64BE(BigInt(i));
    sha.update(index).update(KEY_MARK).update(key).update(VALUE_MARK).update(value).update(END_MARK);
  }
  return sha.digest('base64url');
}
