import { RatchetError } from '../errors/errors.ts';
import { ROLES, type Access, type Role } from './roles.ts';

/*
 * Refusals of managed-mode authentication. They carry no META/RT code: 401 and 403 are what the client must act on.
 * Each listener renders them in its own error shape (ingress `{code, message}`, admin `{message, …}`, FATAL 28P01 on
 * 9071) with the `WWW-Authenticate` challenge below. No message ever contains the token.
 */

/** Why a token was refused; for logs (the message says the same in words). */
export type AuthFailure =
  | 'missing'
  | 'malformed'
  | 'unsupported-algorithm'
  | 'bad-signature'
  | 'wrong-audience'
  | 'expired'
  | 'not-yet-valid'
  | 'invalid-claims'
  | 'missing-role'
  | 'unknown-role';

export abstract class AuthError extends RatchetError {
  readonly code = undefined;
  /** The `WWW-Authenticate` header value sent with the refusal (RFC 6750 §3). */
  abstract readonly challenge: string;
}

/** 401: no usable bearer token. */
export class AuthenticationError extends AuthError {
  readonly status = 401;

  constructor(
    readonly reason: AuthFailure,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }

  get challenge(): string {
    // Without credentials the challenge carries no error code (RFC 6750 §3.1).
    return this.reason === 'missing' ? 'Bearer' : 'Bearer error="invalid_token"';
  }
}

/** 403: a valid token whose role does not open what was asked for. */
export class PermissionDeniedError extends AuthError {
  readonly status = 403;
  readonly challenge = 'Bearer error="insufficient_scope"';

  constructor(
    readonly role: Role,
    readonly access: Access,
  ) {
    super(`the token's role '${role}' does not allow ${DESCRIPTIONS[access]}`);
  }
}

const DESCRIPTIONS: Readonly<Record<Access, string>> = {
  admin: 'the admin API (it needs the role full or admin)',
  ingress: 'this ingress request (it needs the role full or ingress)',
  'awakeable-completion': 'completing awakeables (it needs the role full, ingress or awakeables)',
  introspection: 'SQL introspection (it needs the role full or admin)',
  observability: 'the log and trace API (it needs the role full, admin or observability)',
};

export const AuthErrors = {
  missing: () =>
    new AuthenticationError('missing', "missing bearer token: send the header 'Authorization: Bearer <token>'"),
  notBearer: () => new AuthenticationError('malformed', "malformed Authorization header: expected 'Bearer <token>'"),
  malformed: (cause?: unknown) =>
    new AuthenticationError('malformed', 'the bearer token is not a well-formed JWT (compact JWS)', { cause }),
  unsupportedAlgorithm: (alg: string) =>
    new AuthenticationError(
      'unsupported-algorithm',
      // Only a plausible algorithm name is repeated: the header is the client's text.
      `the token's algorithm${/^[A-Za-z0-9]{1,16}$/.test(alg) ? ` ${alg}` : ''} is not accepted ` +
        '(supported: EdDSA, ES256, RS256)',
    ),
  badSignature: () =>
    new AuthenticationError('bad-signature', "the token's signature does not verify under any key of this cluster"),
  wrongAudience: (cluster: string) =>
    new AuthenticationError(
      'wrong-audience',
      `the token is not issued for this cluster: its audience (aud) must be or contain '${cluster}'`,
    ),
  expired: () => new AuthenticationError('expired', 'the token has expired (exp)'),
  notYetValid: () => new AuthenticationError('not-yet-valid', 'the token is not valid yet (nbf)'),
  invalidClaims: (detail: string) =>
    new AuthenticationError('invalid-claims', `the token's claims are invalid: ${detail}`),
  missingRole: () =>
    new AuthenticationError('missing-role', `the token has no role claim (one of ${ROLES.join(', ')})`),
  unknownRole: () => new AuthenticationError('unknown-role', `the token's role is not one of ${ROLES.join(', ')}`),
} as const;
