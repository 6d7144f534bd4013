import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { compactVerify, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { KeyFileError, parseKeyFile, parseSigningKey } from '../../../runtime/src/auth/keys.ts';

/** The keys file of managed mode: JWKS documents and PEM blocks, and every way such a file can be unusable. */

function ed25519(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ed25519');
}
function p256(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' });
}
function rsa(bits = 2048): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('rsa', { modulusLength: bits });
}

const spki = (k: KeyObject): string => k.export({ format: 'pem', type: 'spki' }) as string;
const pkcs8 = (k: KeyObject): string => k.export({ format: 'pem', type: 'pkcs8' }) as string;
const jwk = (k: KeyObject): Record<string, unknown> => ({ ...k.export({ format: 'jwk' }) });

/** Signs a small JWS with `privateKey` and says which of `keys` verifies it (by index), or -1. */
async function verifiedBy(
  keys: Awaited<ReturnType<typeof parseKeyFile>>,
  privateKey: KeyObject,
  alg: string,
): Promise<number> {
  const token = await new SignJWT({ role: 'full' }).setProtectedHeader({ alg }).sign(privateKey);
  for (const [i, key] of keys.entries()) {
    if (!key.algorithms.includes(alg)) continue;
    try {
      await compactVerify(token, key.key, { algorithms: [alg] });
      return i;
    } catch {
      // not this key
    }
  }
  return -1;
}

async function refusal(text: string): Promise<string> {
  try {
    await parseKeyFile(text);
  } catch (err) {
    expect(err).toBeInstanceOf(KeyFileError);
    return (err as Error).message;
  }
  throw new Error('expected the keys file to be refused');
}

describe('JWKS documents', () => {
  it('reads Ed25519, P-256 and RSA keys with their kid, each verifying what its private key signed', async () => {
    const [a, b, c] = [ed25519(), p256(), rsa()];
    const keys = await parseKeyFile(
      JSON.stringify({
        keys: [
          { ...jwk(a.publicKey), kid: 'ed', use: 'sig', alg: 'EdDSA' },
          { ...jwk(b.publicKey), kid: 'ec' },
          { ...jwk(c.publicKey), kid: 'rsa', alg: 'RS256' },
        ],
      }),
    );
    expect(keys.map((k) => [k.kid, k.algorithms])).toEqual([
      ['ed', ['EdDSA', 'Ed25519']],
      ['ec', ['ES256']],
      ['rsa', ['RS256']],
    ]);
    expect(await verifiedBy(keys, a.privateKey, 'EdDSA')).toBe(0);
    expect(await verifiedBy(keys, a.privateKey, 'Ed25519')).toBe(0);
    expect(await verifiedBy(keys, b.privateKey, 'ES256')).toBe(1);
    expect(await verifiedBy(keys, c.privateKey, 'RS256')).toBe(2);
    // A stranger's key verifies nothing.
    expect(await verifiedBy(keys, ed25519().privateKey, 'EdDSA')).toBe(-1);
  });

  it('uses the public half of a private JWK', async () => {
    const a = ed25519();
    const keys = await parseKeyFile(JSON.stringify({ keys: [jwk(a.privateKey)] }));
    expect(keys).toHaveLength(1);
    expect(keys[0]!.key.type).toBe('public');
    expect(await verifiedBy(keys, a.privateKey, 'EdDSA')).toBe(0);
  });

  it('refuses documents that are not a usable JWKS', async () => {
    expect(await refusal('{"keys": [')).toMatch(/not valid JSON/);
    expect(await refusal('{"kty": "OKP"}')).toMatch(/expected a JWKS document/);
    expect(await refusal('{"keys": []}')).toMatch(/holds no keys/);
    expect(await refusal('{"keys": ["x"]}')).toMatch(/JWKS key 1: expected a JSON Web Key object/);
    expect(await refusal('{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}')).toMatch(/symmetric keys/);
    expect(await refusal('{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "!!"}]}')).toMatch(
      /not a usable JSON Web Key/,
    );
    const a = jwk(ed25519().publicKey);
    expect(await refusal(JSON.stringify({ keys: [{ ...a, use: 'enc' }] }))).toMatch(/not a signature key/);
    expect(await refusal(JSON.stringify({ keys: [{ ...a, kid: 'k1', alg: 'RS256' }] }))).toMatch(
      /JWKS key 1 \(kid "k1"\): its alg "RS256" does not fit the key \(EdDSA\)/,
    );
    const p384 = jwk(generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey);
    expect(await refusal(JSON.stringify({ keys: [a, p384] }))).toMatch(
      /JWKS key 2: unsupported key type ec \(secp384r1\)/,
    );
  });
});

describe('PEM files', () => {
  it('reads SPKI public keys and PKCS#8 private keys (their public half), with text between the blocks', async () => {
    const [a, b, c] = [ed25519(), p256(), rsa()];
    const text = `# the current key\n${spki(a.publicKey)}\n# the next one\n${pkcs8(b.privateKey)}${spki(c.publicKey)}`;
    const keys = await parseKeyFile(text);
    expect(keys.map((k) => [k.kid, k.algorithms, k.label])).toEqual([
      [undefined, ['EdDSA', 'Ed25519'], 'PEM block 1 (PUBLIC KEY), EdDSA'],
      [undefined, ['ES256'], 'PEM block 2 (PRIVATE KEY), ES256'],
      [undefined, ['RS256'], 'PEM block 3 (PUBLIC KEY), RS256'],
    ]);
    expect(keys.every((k) => k.key.type === 'public')).toBe(true);
    expect(await verifiedBy(keys, a.privateKey, 'EdDSA')).toBe(0);
    expect(await verifiedBy(keys, b.privateKey, 'ES256')).toBe(1);
    expect(await verifiedBy(keys, c.privateKey, 'RS256')).toBe(2);
  });

  it('refuses files without usable keys', async () => {
    expect(await refusal('')).toMatch(/empty/);
    expect(await refusal('  \n')).toMatch(/empty/);
    expect(await refusal('hello')).toMatch(/expected a JWKS document .* or PEM blocks/);
    const pem = spki(ed25519().publicKey);
    expect(await refusal(pem.replace(/-----END PUBLIC KEY-----\s*$/, ''))).toMatch(/no matching -----END/);
    expect(await refusal(`${pem}-----BEGIN PUBLIC KEY-----\nAAAA\n`)).toMatch(/no matching -----END/);
    expect(await refusal('-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n')).toMatch(
      /PEM block 1 \(PUBLIC KEY\): not a usable key/,
    );
    expect(await refusal('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n')).toMatch(
      /PEM block 1 \(CERTIFICATE\): expected PUBLIC KEY \(SPKI\) or PRIVATE KEY \(PKCS#8\)/,
    );
    const encrypted = ed25519().privateKey.export({
      format: 'pem',
      type: 'pkcs8',
      cipher: 'aes-256-cbc',
      passphrase: 'secret',
    }) as string;
    expect(await refusal(encrypted)).toMatch(/encrypted private keys are not accepted/);
    expect(await refusal(spki(rsa(1024).publicKey))).toMatch(/RSA key needs at least 2048 bits, this one has 1024/);
    expect(await refusal(spki(generateKeyPairSync('ed448').publicKey))).toMatch(/unsupported key type ed448/);
    // One bad key spoils the file: a half-read rotation would silently lose a key otherwise.
    expect(await refusal(`${pem}${spki(generateKeyPairSync('ed448').publicKey)}`)).toMatch(/PEM block 2/);
  });

  it('never puts key material in its messages', async () => {
    const pem = spki(ed25519().publicKey);
    const body = pem.split('\n')[1]!;
    const message = await refusal(pem.replace('PUBLIC KEY-----\n', 'PUBLIC KEY-----\n!'));
    expect(message).not.toContain(body);
  });
});

describe('signing keys (the token command)', () => {
  it('takes the first private key of a PEM file and its algorithm', () => {
    const a = ed25519();
    expect(parseSigningKey(`${spki(a.publicKey)}${pkcs8(a.privateKey)}`).alg).toBe('EdDSA');
    expect(parseSigningKey(pkcs8(p256().privateKey)).alg).toBe('ES256');
    expect(parseSigningKey(pkcs8(rsa().privateKey)).alg).toBe('RS256');
    expect(() => parseSigningKey(spki(a.publicKey))).toThrow(/expected a PEM private key/);
  });
});
