import type { AdminTarget } from '../../admin-client/types.ts';
import { API_VERSION } from '../../api/v1alpha1/index.ts';
import { LISTENER_PORTS } from '../../api/v1alpha1/cluster.ts';
import { findCondition } from '../../reconcile/conditions.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { TOKEN_KEY, clusterNames } from '../../specs/names.ts';
import type { ClusterObject } from './objects.ts';
import { httpScheme } from '../../specs/tls.ts';
import { clusterClientTls } from './cluster-tls.ts';
import { readSecretKey, type Secret } from './secrets.ts';

/*
 * Where the admin API of the runtime a Deployment or Subscription talks to is, and the bearer token to use: a Cluster
 * of the same namespace (its admin Service and token Secret), or an external runtime's URL with an optional token
 * Secret. Failures are answers with a stable reason, so callers can put them in conditions.
 */

/** The Cluster condition the Cluster controller sets once the admin API answers. */
export const ADMIN_API_READY = 'AdminAPIReady';

export type TargetFailureReason = 'ClusterNotFound' | 'ClusterNotReady' | 'SecretNotFound';

export interface TargetSpec {
  readonly clusterRef?: { readonly name: string } | undefined;
  readonly adminUrl?: string | undefined;
  readonly adminTokenSecretRef?: { readonly name: string; readonly key?: string | undefined } | undefined;
}

export type TargetResolution =
  | { readonly ok: true; readonly target: AdminTarget; readonly cluster: ClusterObject | undefined }
  | {
      readonly ok: false;
      readonly reason: TargetFailureReason;
      readonly message: string;
      readonly cluster: ClusterObject | undefined;
      /**
       * The referenced Cluster does not exist or is being deleted: its runtime, and everything registered with it,
       * goes away with it. A finalizer that waits for that runtime must let go.
       */
      readonly clusterGone: boolean;
    };

export interface ResolveTargetOptions {
  /**
   * Require the Cluster's AdminAPIReady condition (default true). Deletion handling tries the admin API whatever the
   * Cluster says, and decides on the answer.
   */
  readonly requireReady?: boolean;
}

/** The Secret (and key) holding a Cluster's admin token; undefined when auth is off. */
export function clusterTokenSecret(cluster: ClusterObject): { name: string; key: string } | undefined {
  if (cluster.spec.auth?.enabled === false) return undefined;
  const name =
    cluster.status?.tokenSecret ?? cluster.spec.auth?.tokenSecret ?? clusterNames.token(cluster.metadata.name);
  return { name, key: TOKEN_KEY };
}

export async function resolveAdminTarget(
  ctx: ReconcileContext,
  namespace: string,
  spec: TargetSpec,
  options: ResolveTargetOptions = {},
): Promise<TargetResolution> {
  if (spec.clusterRef === undefined) {
    if (spec.adminUrl === undefined) {
      // The CRD's CEL rule makes this unreachable for stored objects; say so plainly anyway.
      return {
        ok: false,
        reason: 'ClusterNotFound',
        message: 'neither clusterRef nor adminUrl is set',
        cluster: undefined,
        clusterGone: true,
      };
    }
    const ref = spec.adminTokenSecretRef;
    if (ref === undefined) return { ok: true, target: { url: spec.adminUrl }, cluster: undefined };
    const token = await readSecretKey(ctx.kube, namespace, ref.name, ref.key ?? TOKEN_KEY);
    if (!token.found) {
      return {
        ok: false,
        reason: 'SecretNotFound',
        message: `admin token: ${token.message}`,
        cluster: undefined,
        clusterGone: false,
      };
    }
    // A token file written with a trailing newline (kubectl create secret --from-file) is still the same token.
    return { ok: true, target: { url: spec.adminUrl, token: token.value.trim() }, cluster: undefined };
  }

  const name = spec.clusterRef.name;
  const cluster = await ctx.kube.get<ClusterObject>({ apiVersion: API_VERSION, kind: 'Cluster', namespace, name });
  if (cluster === undefined) {
    return {
      ok: false,
      reason: 'ClusterNotFound',
      message: `Cluster ${namespace}/${name} not found`,
      cluster: undefined,
      clusterGone: true,
    };
  }
  if (cluster.metadata.deletionTimestamp !== undefined) {
    return {
      ok: false,
      reason: 'ClusterNotFound',
      message: `Cluster ${namespace}/${name} is being deleted`,
      cluster,
      clusterGone: true,
    };
  }
  if (options.requireReady !== false) {
    const ready = findCondition(cluster.status?.conditions, ADMIN_API_READY);
    if (ready?.status !== 'True') {
      const detail = ready === undefined ? 'not reported yet' : `${ready.reason}: ${ready.message}`;
      return {
        ok: false,
        reason: 'ClusterNotReady',
        message: `the admin API of Cluster ${namespace}/${name} is not ready (${detail})`,
        cluster,
        clusterGone: false,
      };
    }
  }
  const url = ctx.serviceUrl(
    namespace,
    clusterNames.service(name, 'admin'),
    LISTENER_PORTS.admin,
    httpScheme(cluster, 'admin'),
  );
  const tls = await clusterClientTls(cluster, 'admin', (secretName) =>
    ctx.kube.get<Secret>({ apiVersion: 'v1', kind: 'Secret', namespace, name: secretName }),
  );
  if (!tls.ok) {
    // The Cluster controller waits for the same Secret; until it exists the Cluster is not usable.
    return {
      ok: false,
      reason: 'ClusterNotReady',
      message: `TLS of the admin API of Cluster ${namespace}/${name}: ${tls.problem.message}`,
      cluster,
      clusterGone: false,
    };
  }
  const secured: AdminTarget = tls.tls === undefined ? { url } : { url, tls: tls.tls };
  const secret = clusterTokenSecret(cluster);
  if (secret === undefined) return { ok: true, target: secured, cluster };
  const token = await readSecretKey(ctx.kube, namespace, secret.name, secret.key);
  if (!token.found) {
    // The Cluster controller creates the token Secret; until it exists the Cluster is not usable.
    return {
      ok: false,
      reason: 'ClusterNotReady',
      message: `admin token of Cluster ${namespace}/${name}: ${token.message}`,
      cluster,
      clusterGone: false,
    };
  }
  return { ok: true, target: { ...secured, token: token.value.trim() }, cluster };
}
