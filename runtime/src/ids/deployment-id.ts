/**
 * ULID-backed resource ids: deployments (`dp_1…`, 26 chars) and subscriptions (`sub_1…`, 27 chars), i.e.
 * `<prefix>_1` + base62(u128 ULID). The ULID's 48-bit time is the resource's creation time (`created_at`).
 */

import { BASE62_U128_CHARS, readBase62, writeBase62 } from './base62.ts';
import { InvalidIdError, idPayloadOffset } from './id-codec.ts';
import { ULID_BYTES, ulidTimestampMs, writeUlid } from './ulid.ts';

declare const deploymentIdBrand: unique symbol;
declare const subscriptionIdBrand: unique symbol;

export type DeploymentId = string & { readonly [deploymentIdBrand]: true };
export type SubscriptionId = string & { readonly [subscriptionIdBrand]: true };

export interface UlidIdCodec<T extends string> {
  /** Validates the text form. Throws InvalidIdError with Restate's reason phrase. */
  parse(input: string): T;
  tryParse(input: string): T | undefined;
  /** A fresh id whose ULID time is `nowMs`. */
  generate(nowMs?: number): T;
  /** Creation time in ms since the epoch. */
  timestampMs(id: T): number;
}

const ulid = new Uint8Array(ULID_BYTES);

function ulidIdCodec<T extends string>(prefix: 'dp' | 'sub'): UlidIdCodec<T> {
  const head = `${prefix}_1`;
  const length = head.length + BASE62_U128_CHARS;
  const text = Buffer.allocUnsafeSlow(length);
  text.write(head, 0, 'latin1');

  const decode = (input: string): void => {
    const start = idPayloadOffset(input, prefix);
    if (input.length < start + BASE62_U128_CHARS) throw new InvalidIdError('bad length', input);
    if (!readBase62(input, start, 16, ulid, 0)) throw new InvalidIdError('base62 decode error', input);
    if (input.length !== start + BASE62_U128_CHARS) throw new InvalidIdError('bad length', input);
  };

  return {
    parse(input) {
      decode(input);
      return input as T;
    },
    tryParse(input) {
      try {
        decode(input);
        return input as T;
      } catch {
        return undefined;
      }
    },
    generate(nowMs) {
      writeUlid(ulid, 0, nowMs);
      writeBase62(ulid, 0, 16, text, head.length);
      return text.toString('latin1', 0, length) as T;
    },
    timestampMs(id) {
      decode(id);
      return ulidTimestampMs(ulid, 0);
    },
  };
}

export const DeploymentId: UlidIdCodec<DeploymentId> = ulidIdCodec<DeploymentId>('dp');
export const SubscriptionId: UlidIdCodec<SubscriptionId> = ulidIdCodec<SubscriptionId>('sub');
