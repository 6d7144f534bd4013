import { decodeProtectedHeader, errors as jose, jwtVerify, type JWTPayload } from 'jose';
import type { Logger } from 'pino';
import { ConfigError } from '../errors/config-errors.ts';
import { AuthErrors, PermissionDeniedError, type AuthError } from './errors.ts';
import { loadKeyFile, watchKeyFile, type KeyFileWatch } from './key-file.ts';
import { KeyFileError, SIGNING_ALGORITHMS, type VerificationKey } from './keys.ts';
import { isRole, roleAllows, type Access, type Principal } from './roles.ts';

/*
 * Managed mode's access tokens: a JWT (compact JWS) signed by one of the keys of the keys file, with `aud` = (or
 * containing) the cluster name, `exp` and `nbf` enforced when present, and a `role` claim. See `README.md`.
 */

/** The setting that names the keys file; RT0002 blames it. */
export const KEYS_FILE_SETTING = 'RATCHET_AUTH_KEYS_FILE';

export interface TokenVerifierOptions {
  /** Absolute path of the keys file (`config.auth.keysFile`). */
  readonly keysFile: string;
  /** The audience every token must name (`config.clusterName`). */
  readonly clusterName: string;
  readonly logger: Logger;
  /** How often the keys file is re-read besides watching it; default 10 s. */
  readonly pollIntervalMs?: number;
}

/** What the listeners need: verification of a bearer token (HTTP) or of a bare one (a SQL password). */
export interface Authenticator {
  /** The `Authorization` header's bearer token, verified; throws `AuthenticationError` (401). */
  authenticate(authorization: string | undefined): Promise<Principal>;
  /** A bare token, verified; throws `AuthenticationError`. */
  verify(token: string): Promise<Principal>;
}

/** Clock skew allowed on `exp` and `nbf` between the issuer and this process. */
export const CLOCK_TOLERANCE_S = 30;
/** How long a verified token string is trusted without verifying its signature again. */
const CACHE_TTL_MS = 10_000;
const CACHE_MAX_ENTRIES = 1024;
/** Longer than any token the operator or the `token` command mints; refused before any parsing. */
const MAX_TOKEN_LENGTH = 8 * 1024;
const BEARER = /^Bearer +([^\s]+) *$/i;
/** Every JWS `alg` some key type of the contract verifies (`Ed25519` is the newer name of EdDSA over Ed25519). */
const TOKEN_ALGORITHMS: ReadonlySet<string> = new Set([...SIGNING_ALGORITHMS, 'Ed25519']);

/** Throws `PermissionDeniedError` (403) unless the principal's role opens `access`. */
export function authorize(principal: Principal, access: Access): void {
  if (!roleAllows(principal.role, access)) throw new PermissionDeniedError(principal.role, access);
}

/**
 * Verifies access tokens against the keys file, which it keeps current (see `key-file.ts`). Start with
 * `TokenVerifier.start`, stop with `stop()` (ends the reload timer and the watch).
 */
export class TokenVerifier implements Authenticator {
  private keys: readonly VerificationKey[];
  /** Verified token strings: a client sends the same token with every request. */
  private readonly cache = new Map<string, { principal: Principal; until: number }>();
  /** Bumped by each key change, so that a verification that started under the old keys is not cached. */
  private generation = 0;
  private readonly watch: KeyFileWatch;

  private constructor(
    private readonly options: TokenVerifierOptions,
    initial: Awaited<ReturnType<typeof loadKeyFile>>,
  ) {
    this.keys = initial.keys;
    this.watch = watchKeyFile({
      path: options.keysFile,
      initial,
      logger: options.logger,
      pollIntervalMs: options.pollIntervalMs ?? 10_000,
      onKeys: (keys) => {
        this.keys = keys;
        this.generation++;
        this.cache.clear();
      },
    });
  }

  /** Reads the keys file; a missing or invalid one is RT0002 naming `RATCHET_AUTH_KEYS_FILE`. */
  static async start(options: TokenVerifierOptions): Promise<TokenVerifier> {
    let initial;
    try {
      initial = await loadKeyFile(options.keysFile);
    } catch (err) {
      if (err instanceof KeyFileError) throw ConfigError.invalidValue(KEYS_FILE_SETTING, err.message, { cause: err });
      throw err;
    }
    options.logger.info(
      { file: options.keysFile, keys: initial.keys.map((k) => k.label), cluster: options.clusterName },
      'managed mode: requests need an access token',
    );
    return new TokenVerifier(options, initial);
  }

  /** Re-reads the keys file now rather than at the next change or poll. */
  reloadKeys(): Promise<void> {
    return this.watch.check();
  }

  stop(): void {
    this.watch.stop();
    this.cache.clear();
  }

  authenticate(authorization: string | undefined): Promise<Principal> {
    if (authorization === undefined || authorization.trim() === '') return Promise.reject(AuthErrors.missing());
    const match = BEARER.exec(authorization);
    if (match === null) return Promise.reject(AuthErrors.notBearer());
    return this.verify(match[1]!);
  }

  async verify(token: string): Promise<Principal> {
    const now = Date.now();
    const cached = this.cache.get(token);
    if (cached !== undefined) {
      if (cached.until > now) return cached.principal;
      this.cache.delete(token);
    }
    const generation = this.generation;
    const { principal, exp } = await this.verifySignatureAndClaims(token);
    if (generation === this.generation) {
      // Insertion order is age order: the oldest entry makes room.
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
      let until = now + CACHE_TTL_MS;
      if (exp !== undefined) until = Math.min(until, (exp + CLOCK_TOLERANCE_S) * 1000);
      this.cache.set(token, { principal, until });
    }
    return principal;
  }

  private async verifySignatureAndClaims(token: string): Promise<{ principal: Principal; exp: number | undefined }> {
    if (token.length > MAX_TOKEN_LENGTH || token.split('.').length !== 3) throw AuthErrors.malformed();
    let alg: unknown;
    let kid: unknown;
    try {
      ({ alg, kid } = decodeProtectedHeader(token));
    } catch (err) {
      throw AuthErrors.malformed(err);
    }
    if (typeof alg !== 'string') throw AuthErrors.malformed();
    const candidates = this.keys.filter((k) => k.algorithms.includes(alg));
    if (candidates.length === 0) {
      // An algorithm of the contract that no current key uses: signed by a key this cluster does not have (yet).
      throw TOKEN_ALGORITHMS.has(alg) ? AuthErrors.badSignature() : AuthErrors.unsupportedAlgorithm(alg);
    }
    // Any key of the file may have signed (rotation); the one the token names, if any, is the likely one.
    if (typeof kid === 'string') candidates.sort((a, b) => Number(b.kid === kid) - Number(a.kid === kid));
    for (const key of candidates) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, key.key, {
          algorithms: [alg],
          audience: this.options.clusterName,
          clockTolerance: CLOCK_TOLERANCE_S,
        }));
      } catch (err) {
        if (err instanceof jose.JWSSignatureVerificationFailed) continue;
        throw claimError(err, this.options.clusterName);
      }
      return { principal: principalOf(payload), exp: payload.exp };
    }
    throw AuthErrors.badSignature();
  }
}

/** jose checks the claims only once the signature verified, so these never tell a forger anything. */
function claimError(err: unknown, cluster: string): AuthError {
  if (err instanceof jose.JWTExpired) return AuthErrors.expired();
  if (err instanceof jose.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return AuthErrors.wrongAudience(cluster);
    if (err.claim === 'nbf') return AuthErrors.notYetValid();
    return AuthErrors.invalidClaims(err.message);
  }
  if (err instanceof jose.JOSEError) return AuthErrors.malformed(err);
  throw err;
}

function principalOf(payload: JWTPayload): Principal {
  const role = payload['role'];
  if (role === undefined || role === null) throw AuthErrors.missingRole();
  if (!isRole(role)) throw AuthErrors.unknownRole();
  return { role, subject: typeof payload.sub === 'string' ? payload.sub : undefined };
}
