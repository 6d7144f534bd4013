import { createPrivateKey, createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import { errors, exportPKCS8, generateKeyPair, jwtVerify, SignJWT } from 'jose';

/*
 * Key material of a Cluster: the signing key, the access token, the bundled database's password. The only module of
 * the Cluster controller with randomness; builders receive what it makes.
 */

/** The algorithms the runtime verifies, by key type (PKCS#8 Ed25519, P-256, RSA). */
export type SigningAlgorithm = 'EdDSA' | 'ES256' | 'RS256';

export const TOKEN_ISSUER = 'ratchet-operator';
export const TOKEN_SUBJECT = 'operator';
export const OPERATOR_ROLE = 'full';
/** Roles whose tokens open the admin API, which is all the operator needs of a user's own token. */
const ADMIN_ROLES: ReadonlySet<string> = new Set(['full', 'admin']);

export interface SigningKey {
  readonly alg: SigningAlgorithm;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  /** SPKI PEM: what the runtime verifies tokens with (the ConfigMap's auth-keys.pem). */
  readonly publicKeyPem: string;
}

/** The PEM is not a private key the runtime can verify tokens of. */
export class KeyMaterialError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyMaterialError';
  }
}

/** A new Ed25519 key as PKCS#8 PEM. */
export async function generateSigningKeyPem(): Promise<string> {
  const { privateKey } = await generateKeyPair('Ed25519', { extractable: true });
  return exportPKCS8(privateKey);
}

export function parseSigningKey(pem: string): SigningKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    throw new KeyMaterialError(`not a PEM private key (${(err as Error).message})`);
  }
  const alg = algorithmOf(privateKey);
  const publicKey = createPublicKey(privateKey);
  const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
  return { alg, privateKey, publicKey, publicKeyPem };
}

function algorithmOf(key: KeyObject): SigningAlgorithm {
  const details = key.asymmetricKeyDetails;
  const type = key.asymmetricKeyType;
  if (type === 'ed25519') return 'EdDSA';
  if (type === 'ec') {
    if (details?.namedCurve === 'prime256v1') return 'ES256';
    throw new KeyMaterialError(
      `an EC key on ${details?.namedCurve ?? 'an unknown curve'}; only P-256 (ES256) is supported`,
    );
  }
  if (type === 'rsa') {
    if ((details?.modulusLength ?? 0) >= 2048) return 'RS256';
    throw new KeyMaterialError('an RSA key shorter than 2048 bits');
  }
  throw new KeyMaterialError(
    `a ${type ?? 'unknown'} key; supported are Ed25519 (EdDSA), P-256 (ES256) and RSA (RS256)`,
  );
}

/**
 * The operator's token for a cluster: role `full`, `aud` = the cluster name, no `exp` (it lives as long as the key;
 * rotating means replacing the signing-key Secret).
 */
export function issueToken(key: SigningKey, cluster: string, issuedAt: Date): Promise<string> {
  return new SignJWT({ role: OPERATOR_ROLE })
    .setProtectedHeader({ alg: key.alg, typ: 'JWT' })
    .setIssuer(TOKEN_ISSUER)
    .setSubject(TOKEN_SUBJECT)
    .setAudience(cluster)
    .setIssuedAt(Math.floor(issuedAt.getTime() / 1000))
    .sign(key.privateKey);
}

export type TokenCheck =
  { readonly ok: true; readonly role: string } | { readonly ok: false; readonly problem: string };

/** Whether the runtime would accept `token` under `key` for `cluster` at `now`, and with which role. */
export async function checkToken(
  token: string,
  key: SigningKey,
  cluster: string,
  now: Date,
  roles: ReadonlySet<string> = ADMIN_ROLES,
): Promise<TokenCheck> {
  let payload;
  try {
    ({ payload } = await jwtVerify(token, key.publicKey, {
      audience: cluster,
      algorithms: [key.alg],
      currentDate: now,
    }));
  } catch (err) {
    if (err instanceof errors.JWTClaimValidationFailed && err.claim === 'aud') {
      return { ok: false, problem: `its audience (aud) is not the cluster name '${cluster}'` };
    }
    if (err instanceof errors.JWTExpired) return { ok: false, problem: 'it has expired' };
    if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JOSEAlgNotAllowed) {
      return { ok: false, problem: 'it is not signed by the signing key' };
    }
    return { ok: false, problem: `it is not a valid token (${(err as Error).message})` };
  }
  const role = payload['role'];
  if (typeof role !== 'string' || !roles.has(role)) {
    return { ok: false, problem: `its role is ${JSON.stringify(role ?? null)}, not one of ${[...roles].join(', ')}` };
  }
  return { ok: true, role };
}

/** Only the operator's own token must be `full`: users and other controllers rely on it opening everything. */
export const OWN_TOKEN_ROLES: ReadonlySet<string> = new Set([OPERATOR_ROLE]);

/** 48 hex characters: URI-safe in a DSN, 192 bits. */
export function generatePassword(): string {
  return randomBytes(24).toString('hex');
}
