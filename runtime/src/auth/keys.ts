import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { importJWK, type CryptoKey } from 'jose';

/*
 * The verification keys of managed mode, parsed from the keys file: either a JWKS document (`{"keys": […]}`) or one
 * or more PEM blocks (SPKI public keys, or PKCS#8 private keys whose public half is used). Pure: the file is read and
 * watched by `key-file.ts`.
 */

/** The signature algorithms of access tokens, by key type. */
export const SIGNING_ALGORITHMS = ['EdDSA', 'ES256', 'RS256'] as const;
export type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[number];

export interface VerificationKey {
  /** The JWS `alg` values this key verifies (an Ed25519 key takes `EdDSA` and its newer name `Ed25519`). */
  readonly algorithms: readonly string[];
  /** The JWK `kid`; PEM keys have none. A token naming a `kid` is tried against that key first. */
  readonly kid: string | undefined;
  /** Imported once, used for every verification. */
  readonly key: CryptoKey;
  /** Where the key came from, for messages: `PEM block 2 (Ed25519)`. */
  readonly label: string;
}

/** The keys file cannot be used; the message says why (never with key material). */
export class KeyFileError extends Error {
  override readonly name = 'KeyFileError';
}

const MIN_RSA_BITS = 2048;

/** PEM labels whose content Node parses into a key: SPKI and PKCS#8 (the contract), and the older RSA/EC forms. */
const PUBLIC_LABELS = new Set(['PUBLIC KEY', 'RSA PUBLIC KEY']);
const PRIVATE_LABELS = new Set(['PRIVATE KEY', 'RSA PRIVATE KEY', 'EC PRIVATE KEY']);

/** Parses a keys file; throws `KeyFileError` when it holds no usable key or any key that is not usable. */
export async function parseKeyFile(text: string): Promise<VerificationKey[]> {
  const trimmed = text.trim();
  if (trimmed === '') throw new KeyFileError('the file is empty');
  const keys = trimmed.startsWith('{') ? parseJwks(trimmed) : parsePem(trimmed);
  return Promise.all(keys.map((k) => importKey(k)));
}

interface ParsedKey {
  readonly publicKey: KeyObject;
  readonly kid: string | undefined;
  readonly label: string;
  /** The JWK's own `alg`, when it names one. */
  readonly alg: string | undefined;
}

function parseJwks(text: string): ParsedKey[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new KeyFileError(`the file starts with '{' but is not valid JSON: ${(err as Error).message}`);
  }
  const keys = (doc as { keys?: unknown }).keys;
  if (!Array.isArray(keys)) throw new KeyFileError('expected a JWKS document: {"keys": [ … ]}');
  if (keys.length === 0) throw new KeyFileError('the JWKS document holds no keys');
  return keys.map((entry: unknown, i) => {
    let label = `JWKS key ${i + 1}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new KeyFileError(`${label}: expected a JSON Web Key object`);
    }
    const jwk = entry as Record<string, unknown>;
    const kid = typeof jwk['kid'] === 'string' ? jwk['kid'] : undefined;
    if (kid !== undefined) label += ` (kid ${JSON.stringify(kid)})`;
    if (jwk['use'] !== undefined && jwk['use'] !== 'sig') {
      throw new KeyFileError(`${label}: not a signature key (use ${JSON.stringify(jwk['use'])})`);
    }
    if (jwk['kty'] === 'oct') throw new KeyFileError(`${label}: symmetric keys (kty "oct") are not accepted`);
    let publicKey: KeyObject;
    try {
      // A private JWK (with "d") yields its public half.
      publicKey = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
    } catch (err) {
      throw new KeyFileError(`${label}: not a usable JSON Web Key: ${(err as Error).message}`);
    }
    const alg = typeof jwk['alg'] === 'string' ? jwk['alg'] : undefined;
    return { publicKey, kid, label, alg };
  });
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;

function parsePem(text: string): ParsedKey[] {
  const blocks = [...text.matchAll(PEM_BLOCK)];
  const begins = text.split('-----BEGIN ').length - 1;
  if (blocks.length === 0) {
    throw new KeyFileError(
      begins === 0
        ? 'expected a JWKS document ({"keys": […]}) or PEM blocks (-----BEGIN PUBLIC KEY----- / PRIVATE KEY-----)'
        : 'a PEM block has no matching -----END line',
    );
  }
  if (begins !== blocks.length) throw new KeyFileError('a PEM block has no matching -----END line');
  return blocks.map((match, i) => {
    const kind = match[1]!;
    const label = `PEM block ${i + 1} (${kind})`;
    const pem = match[0];
    let publicKey: KeyObject;
    try {
      if (PUBLIC_LABELS.has(kind)) publicKey = createPublicKey({ key: pem, format: 'pem' });
      else if (PRIVATE_LABELS.has(kind)) publicKey = createPublicKey(createPrivateKey({ key: pem, format: 'pem' }));
      else if (kind === 'ENCRYPTED PRIVATE KEY')
        throw new KeyFileError(`${label}: encrypted private keys are not accepted`);
      else throw new KeyFileError(`${label}: expected PUBLIC KEY (SPKI) or PRIVATE KEY (PKCS#8)`);
    } catch (err) {
      if (err instanceof KeyFileError) throw err;
      throw new KeyFileError(`${label}: not a usable key: ${(err as Error).message}`);
    }
    return { publicKey, kid: undefined, label, alg: undefined };
  });
}

/** The algorithms a key verifies, from its type; throws for types access tokens do not use. */
function algorithmsOf(parsed: ParsedKey): { primary: SigningAlgorithm; all: readonly string[] } {
  const { publicKey, label } = parsed;
  let result: { primary: SigningAlgorithm; all: readonly string[] };
  const type = publicKey.asymmetricKeyType;
  if (type === 'ed25519') {
    result = { primary: 'EdDSA', all: ['EdDSA', 'Ed25519'] };
  } else if (type === 'ec' && publicKey.asymmetricKeyDetails?.namedCurve === 'prime256v1') {
    result = { primary: 'ES256', all: ['ES256'] };
  } else if (type === 'rsa') {
    const bits = publicKey.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) {
      throw new KeyFileError(`${label}: an RSA key needs at least ${MIN_RSA_BITS} bits, this one has ${bits}`);
    }
    result = { primary: 'RS256', all: ['RS256'] };
  } else {
    const curve = publicKey.asymmetricKeyDetails?.namedCurve;
    throw new KeyFileError(
      `${label}: unsupported key type ${type ?? 'unknown'}${curve === undefined ? '' : ` (${curve})`}; ` +
        `expected Ed25519 (EdDSA), P-256 (ES256) or RSA of ${MIN_RSA_BITS} bits or more (RS256)`,
    );
  }
  if (parsed.alg !== undefined && !result.all.includes(parsed.alg)) {
    throw new KeyFileError(`${label}: its alg ${JSON.stringify(parsed.alg)} does not fit the key (${result.primary})`);
  }
  return result;
}

async function importKey(parsed: ParsedKey): Promise<VerificationKey> {
  const { primary, all } = algorithmsOf(parsed);
  const jwk = parsed.publicKey.export({ format: 'jwk' });
  let key: CryptoKey;
  try {
    key = (await importJWK(jwk, primary)) as CryptoKey;
  } catch (err) {
    throw new KeyFileError(`${parsed.label}: cannot be imported for ${primary}: ${(err as Error).message}`);
  }
  return { algorithms: all, kid: parsed.kid, key, label: `${parsed.label}, ${primary}` };
}

/** A private key to sign tokens with (the `token` command): the first private key of a PEM file. */
export interface SigningKey {
  readonly key: KeyObject;
  readonly alg: SigningAlgorithm;
}

export function parseSigningKey(text: string): SigningKey {
  for (const match of text.matchAll(PEM_BLOCK)) {
    const kind = match[1]!;
    if (kind === 'ENCRYPTED PRIVATE KEY') throw new KeyFileError('encrypted private keys are not accepted');
    if (!PRIVATE_LABELS.has(kind)) continue;
    let key: KeyObject;
    try {
      key = createPrivateKey({ key: match[0], format: 'pem' });
    } catch (err) {
      throw new KeyFileError(`not a usable private key: ${(err as Error).message}`);
    }
    const { primary } = algorithmsOf({ publicKey: createPublicKey(key), kid: undefined, label: kind, alg: undefined });
    return { key, alg: primary };
  }
  throw new KeyFileError('expected a PEM private key (-----BEGIN PRIVATE KEY-----)');
}
