import { FIELD_MANAGER, type Cluster } from '../../api/v1alpha1/index.ts';
import { KubeApiError } from '../../kube/port.ts';
import type { Condition, KubeObject } from '../../kube/types.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { namespaceOf } from '../../specs/meta.ts';
import { clusterNames } from '../../specs/names.ts';
import type { StatefulSetStatus } from '../../specs/objects.ts';
import { buildPostgresSecret } from '../../specs/secret.ts';
import { databaseSecret, type DatabaseSecret } from '../../specs/settings.ts';
import { generatePassword } from './material.ts';
import { getSecret, rawValue, textValue, type SecretData } from './secrets.ts';

export interface DatabaseResolution {
  readonly ready: boolean;
  readonly reason: string;
  readonly message: string;
  /**
   * The DSN's Secret and its value as stored; undefined while the Secret or key is missing, when runtime pods could
   * not start (their RATCHET_DATABASE_URL comes from it).
   */
  readonly dsn?: { readonly source: DatabaseSecret; readonly value: string };
}

export const CNPG_API_VERSION = 'postgresql.cnpg.io/v1';

/** Where the DSN comes from, and whether the database behind it is ready as far as Kubernetes can tell. */
export async function resolveDatabase(cluster: Cluster, ctx: ReconcileContext): Promise<DatabaseResolution> {
  const source = databaseSecret(cluster);
  switch (source.kind) {
    case 'secretRef':
      return resolveSecretRef(cluster, ctx, source);
    case 'cnpg':
      return resolveCnpg(cluster, ctx, source);
    case 'bundled':
      return resolveBundled(cluster, ctx, source);
  }
}

type Dsn = NonNullable<DatabaseResolution['dsn']>;

function readDsn(
  secret: SecretData | undefined,
  source: DatabaseSecret,
  what: string,
): { dsn: Dsn; missing?: undefined } | { missing: DatabaseResolution } {
  if (secret === undefined) {
    return {
      missing: {
        ready: false,
        reason: 'SecretNotFound',
        message: `waiting for Secret ${source.secretName} (${what})`,
      },
    };
  }
  const value = rawValue(secret, source.key);
  if (value === undefined || (textValue(secret, source.key) ?? '').trim() === '') {
    return {
      missing: {
        ready: false,
        reason: 'SecretKeyMissing',
        message: `Secret ${source.secretName} (${what}) has no key '${source.key}' with a PostgreSQL DSN`,
      },
    };
  }
  return { dsn: { source, value } };
}

async function resolveSecretRef(
  cluster: Cluster,
  ctx: ReconcileContext,
  source: DatabaseSecret,
): Promise<DatabaseResolution> {
  const read = readDsn(await getSecret(ctx, cluster, source.secretName), source, 'spec.database.secretRef');
  if (read.missing !== undefined) return read.missing;
  return {
    ready: true,
    reason: 'SecretFound',
    message: `DSN from Secret ${source.secretName} key '${source.key}'`,
    dsn: read.dsn,
  };
}

async function resolveCnpg(
  cluster: Cluster,
  ctx: ReconcileContext,
  source: DatabaseSecret,
): Promise<DatabaseResolution> {
  const cnpgName = cluster.spec.database.cnpg?.clusterName ?? '';
  const secret = await getSecret(ctx, cluster, source.secretName);
  const read = readDsn(secret, source, `application Secret of CloudNativePG Cluster ${cnpgName}`);
  const pg = await getCnpgCluster(cluster, ctx, cnpgName);
  const ready = pg?.status?.conditions?.find((c) => c.type === 'Ready');
  if (read.missing !== undefined) {
    if (pg === undefined) {
      return {
        ...read.missing,
        message: `waiting for CloudNativePG Cluster ${cnpgName} and its Secret ${source.secretName}`,
      };
    }
    return read.missing;
  }
  const dsn = read.dsn;
  if (ready !== undefined && ready.status !== 'True') {
    const detail = ready.message === '' ? '' : `: ${ready.message}`;
    return {
      ready: false,
      reason: 'CNPGClusterNotReady',
      message: `CloudNativePG Cluster ${cnpgName} is not ready${detail}`,
      dsn,
    };
  }
  return {
    ready: true,
    reason: 'SecretFound',
    message: `DSN from Secret ${source.secretName} of CloudNativePG Cluster ${cnpgName}`,
    dsn,
  };
}

interface CnpgCluster extends KubeObject {
  status?: { conditions?: Condition[] };
}

/**
 * The CloudNativePG Cluster, when the operator may see it. Its readiness is a courtesy: without the CRD installed, or
 * without RBAC on it, the application Secret alone decides.
 */
async function getCnpgCluster(cluster: Cluster, ctx: ReconcileContext, name: string): Promise<CnpgCluster | undefined> {
  try {
    return await ctx.kube.get<CnpgCluster>({
      apiVersion: CNPG_API_VERSION,
      kind: 'Cluster',
      namespace: namespaceOf(cluster),
      name,
    });
  } catch (err) {
    if (err instanceof KubeApiError && (err.code === 404 || err.code === 403)) return undefined;
    throw err;
  }
}

/** The bundled PostgreSQL's credentials are made here (before the pods' config hash needs the DSN), once. */
async function resolveBundled(
  cluster: Cluster,
  ctx: ReconcileContext,
  source: DatabaseSecret,
): Promise<DatabaseResolution> {
  let secret = await getSecret(ctx, cluster, source.secretName);
  if (secret === undefined) {
    secret = await ctx.kube.apply<SecretData>(buildPostgresSecret(cluster, generatePassword()), {
      fieldManager: FIELD_MANAGER,
      force: true,
    });
  }
  const read = readDsn(secret, source, 'bundled PostgreSQL credentials');
  if (read.missing !== undefined) return read.missing;
  const dsn = read.dsn;
  const statefulSet = await ctx.kube.get<KubeObject & { status?: StatefulSetStatus }>({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    namespace: namespaceOf(cluster),
    name: clusterNames.postgres(cluster.metadata.name),
  });
  if ((statefulSet?.status?.readyReplicas ?? 0) < 1) {
    return {
      ready: false,
      reason: 'BundledPostgresNotReady',
      message: `waiting for the bundled PostgreSQL StatefulSet ${clusterNames.postgres(cluster.metadata.name)} (test clusters only)`,
      dsn,
    };
  }
  return {
    ready: true,
    reason: 'BundledPostgresReady',
    message: 'bundled PostgreSQL is ready (for test clusters only: no backups, no high availability)',
    dsn,
  };
}
