import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { expect } from 'vitest';

/** Keys, tokens and requests of the managed-mode tests: tokens exactly as the operator mints them. */

export type KeyKind = 'ed25519' | 'p256' | 'rsa';

export interface TestKey {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  readonly alg: 'EdDSA' | 'ES256' | 'RS256';
}

export function newKey(kind: KeyKind = 'ed25519'): TestKey {
  switch (kind) {
    case 'ed25519':
      return { ...generateKeyPairSync('ed25519'), alg: 'EdDSA' };
    case 'p256':
      return { ...generateKeyPairSync('ec', { namedCurve: 'P-256' }), alg: 'ES256' };
    case 'rsa':
      return { ...generateKeyPairSync('rsa', { modulusLength: 2048 }), alg: 'RS256' };
  }
}

export const publicPem = (key: TestKey): string => key.publicKey.export({ format: 'pem', type: 'spki' }) as string;
export const privatePem = (key: TestKey): string => key.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;

/** A JWKS document of the keys' public halves, each with its kid. */
export function jwks(...keys: readonly { key: TestKey; kid: string }[]): string {
  return JSON.stringify({
    keys: keys.map(({ key, kid }) => ({ ...key.publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: key.alg })),
  });
}

export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** A token signed with `key`; `claims` are the whole claim set (so tests can leave any out). */
export function mint(key: TestKey, claims: Record<string, unknown>, kid?: string): Promise<string> {
  const header = kid === undefined ? { alg: key.alg, typ: 'JWT' } : { alg: key.alg, typ: 'JWT', kid };
  return new SignJWT(claims).setProtectedHeader(header).sign(key.privateKey);
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly json: unknown;
}

export async function send(
  method: string,
  url: string,
  options: {
    token?: string;
    authorization?: string;
    /** Sent as JSON. */
    body?: unknown;
    /** Sent as is (set its content-type in `headers`). */
    text?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  if (options.authorization !== undefined) headers['authorization'] = options.authorization;
  if (options.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(url, {
    method,
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    ...(options.text === undefined ? {} : { body: options.text }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** An ingress refusal: `{code, message, source: "ingress"}`, `x-restate-error-source: ingress`, a Bearer challenge. */
export function expectIngressRefusal(res: Answer, status: 401 | 403, message: RegExp): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('x-restate-error-source')).toBe('ingress');
  expect(res.headers.get('content-type')).toBe('application/json');
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
  const body = res.json as { code: number; message: string; source: string };
  expect(Object.keys(body)).toEqual(['code', 'message', 'source']);
  expect(body.code).toBe(status);
  expect(body.source).toBe('ingress');
  expect(body.message).toMatch(message);
}

/** An admin refusal: the admin API's JSON error body (no error code), and a Bearer challenge. */
export function expectAdminRefusal(res: Answer, status: 401 | 403, message: RegExp): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json');
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
  const body = res.json as Record<string, unknown>;
  expect(body).toEqual({ message: expect.stringMatching(message) as unknown, restate_code: null, service_code: null });
}
