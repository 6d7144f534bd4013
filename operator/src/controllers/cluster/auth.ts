import { FIELD_MANAGER } from '../../api/v1alpha1/index.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { SIGNING_KEY_KEY, TOKEN_KEY } from '../../specs/names.ts';
import { buildSigningKeySecret, buildTokenSecret } from '../../specs/secret.ts';
import { authEnabled, authSecrets } from '../../specs/settings.ts';
import {
  checkToken,
  generateSigningKeyPem,
  issueToken,
  KeyMaterialError,
  OWN_TOKEN_ROLES,
  parseSigningKey,
  type SigningKey,
} from './material.ts';
import { getSecret, type ClusterObject, textValue, type Blocker } from './secrets.ts';

export type AuthResolution =
  | { readonly state: 'disabled' }
  | {
      readonly state: 'ready';
      readonly publicKeyPem: string;
      readonly token: string;
      /** The Secret holding the token (status.tokenSecret). */
      readonly tokenSecret: string;
    }
  | { readonly state: 'blocked'; readonly blocker: Blocker };

function blocked(reason: string, message: string, stalled: boolean): AuthResolution {
  return { state: 'blocked', blocker: { reason, message, stalled } };
}

/**
 * The signing key and the access token. The operator's own Secrets are created when missing and then never
 * overwritten, with one exception: a token of its own that the current key does not verify (the user replaced the key
 * to rotate it) is issued again, since it opens nothing any more. A user's own Secrets are only validated.
 */
export async function resolveAuth(cluster: ClusterObject, ctx: ReconcileContext): Promise<AuthResolution> {
  if (!authEnabled(cluster)) return { state: 'disabled' };
  const name = cluster.metadata.name;
  const names = authSecrets(cluster);
  const field = names.keyIsOwn ? 'the operator-made' : 'spec.auth.signingKeySecret';

  let key: SigningKey;
  const keySecret = await getSecret(ctx, cluster, names.signingKey);
  if (keySecret === undefined) {
    if (!names.keyIsOwn) {
      return blocked(
        'SigningKeySecretNotFound',
        `waiting for Secret ${names.signingKey} (spec.auth.signingKeySecret) with a PKCS#8 private key under ` +
          `'${SIGNING_KEY_KEY}'`,
        false,
      );
    }
    const pem = await generateSigningKeyPem();
    key = parseSigningKey(pem);
    await ctx.kube.apply(buildSigningKeySecret(cluster, pem), { fieldManager: FIELD_MANAGER, force: true });
    await ctx.events.record(
      cluster,
      'Normal',
      'SigningKeyCreated',
      `created an Ed25519 signing key in Secret ${names.signingKey}`,
      'CreateSigningKey',
    );
  } else {
    const pem = textValue(keySecret, SIGNING_KEY_KEY);
    if (pem === undefined) {
      return blocked(
        'InvalidSigningKey',
        `Secret ${names.signingKey} (${field} signing key) has no key '${SIGNING_KEY_KEY}'`,
        true,
      );
    }
    try {
      key = parseSigningKey(pem);
    } catch (err) {
      if (!(err instanceof KeyMaterialError)) throw err;
      return blocked(
        'InvalidSigningKey',
        `Secret ${names.signingKey} key '${SIGNING_KEY_KEY}' (${field} signing key) is ${err.message}`,
        true,
      );
    }
  }

  const tokenSecret = await getSecret(ctx, cluster, names.token);
  const token = textValue(tokenSecret, TOKEN_KEY);
  if (!names.tokenIsOwn) {
    if (tokenSecret === undefined) {
      return blocked(
        'TokenSecretNotFound',
        `waiting for Secret ${names.token} (spec.auth.tokenSecret) with an access token under '${TOKEN_KEY}'`,
        false,
      );
    }
    if (token === undefined) {
      return blocked('InvalidToken', `Secret ${names.token} (spec.auth.tokenSecret) has no key '${TOKEN_KEY}'`, true);
    }
    const check = await checkToken(token.trim(), key, name, ctx.now());
    if (!check.ok) {
      return blocked(
        'InvalidToken',
        `the token in Secret ${names.token} (spec.auth.tokenSecret) cannot open the admin API: ${check.problem}`,
        true,
      );
    }
    return { state: 'ready', publicKeyPem: key.publicKeyPem, token: token.trim(), tokenSecret: names.token };
  }

  if (token !== undefined) {
    const check = await checkToken(token, key, name, ctx.now(), OWN_TOKEN_ROLES);
    if (check.ok) return { state: 'ready', publicKeyPem: key.publicKeyPem, token, tokenSecret: names.token };
  }
  const issued = await issueToken(key, name, ctx.now());
  await ctx.kube.apply(buildTokenSecret(cluster, issued), { fieldManager: FIELD_MANAGER, force: true });
  await ctx.events.record(
    cluster,
    'Normal',
    tokenSecret === undefined ? 'TokenIssued' : 'TokenReissued',
    tokenSecret === undefined
      ? `issued an access token (role full) in Secret ${names.token}`
      : `issued the access token in Secret ${names.token} again: the one there did not verify with the signing key`,
    'IssueToken',
  );
  return { state: 'ready', publicKeyPem: key.publicKeyPem, token: issued, tokenSecret: names.token };
}
