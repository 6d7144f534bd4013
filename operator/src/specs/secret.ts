import type { Cluster } from '../api/v1alpha1/index.ts';
import { base64, childMeta, DESCRIPTION_ANNOTATION, namespaceOf, TEST_ONLY_ANNOTATION } from './meta.ts';
import { clusterNames, SIGNING_KEY_KEY, TOKEN_KEY } from './names.ts';
import type { SecretObject } from './objects.ts';

/*
 * Secrets whose material the operator generates. The material is an input: builders stay pure, and the controller
 * creates each of these only when it is missing, so a key or password is never replaced behind the user's back.
 */

export const POSTGRES_USER = 'ratchet';
export const POSTGRES_DATABASE = 'ratchet';
export const POSTGRES_PORT = 5432;

/** `<cluster>-signing-key`: the PKCS#8 PEM private key every access token of the cluster is signed with. */
export function buildSigningKeySecret(cluster: Cluster, privateKeyPem: string): SecretObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: childMeta(cluster, clusterNames.signingKey(cluster.metadata.name), {
      annotations: {
        [DESCRIPTION_ANNOTATION]:
          'Signs the access tokens of this Ratchet cluster. Created once; replace it to rotate the key (the token is ' +
          'then issued again and the runtime pods roll).',
      },
    }),
    type: 'Opaque',
    data: { [SIGNING_KEY_KEY]: base64(privateKeyPem) },
  };
}

/** `<cluster>-token`: an access token with role `full` (what the operator and its users call the cluster with). */
export function buildTokenSecret(cluster: Cluster, token: string): SecretObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: childMeta(cluster, clusterNames.token(cluster.metadata.name), {
      annotations: {
        [DESCRIPTION_ANNOTATION]:
          'Access token (role full) of this Ratchet cluster: send it as "Authorization: Bearer <token>", or as the ' +
          'password of SQL introspection (user = the cluster name).',
      },
    }),
    type: 'Opaque',
    data: { [TOKEN_KEY]: base64(token) },
  };
}

/** The DSN of the bundled PostgreSQL: its Service in the Cluster's namespace. */
export function bundledPostgresUri(cluster: Cluster, password: string): string {
  const host = `${clusterNames.postgres(cluster.metadata.name)}.${namespaceOf(cluster)}.svc`;
  return `postgres://${POSTGRES_USER}:${encodeURIComponent(password)}@${host}:${POSTGRES_PORT}/${POSTGRES_DATABASE}`;
}

export const BUNDLED_POSTGRES_DESCRIPTION =
  'Bundled PostgreSQL for TEST CLUSTERS ONLY: one pod, no backups, no high availability, no upgrades; its data is ' +
  'deleted with the Cluster. Use spec.database.secretRef or spec.database.cnpg in production.';

/** Credentials of the bundled PostgreSQL (`username`, `password`, `database`, and `uri` for the runtime). */
export function buildPostgresSecret(cluster: Cluster, password: string): SecretObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: childMeta(cluster, clusterNames.postgres(cluster.metadata.name), {
      component: 'postgres',
      annotations: { [TEST_ONLY_ANNOTATION]: 'true', [DESCRIPTION_ANNOTATION]: BUNDLED_POSTGRES_DESCRIPTION },
    }),
    type: 'Opaque',
    data: {
      username: base64(POSTGRES_USER),
      password: base64(password),
      database: base64(POSTGRES_DATABASE),
      uri: base64(bundledPostgresUri(cluster, password)),
    },
  };
}
