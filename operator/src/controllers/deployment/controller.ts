import { API_VERSION } from '../../api/v1alpha1/index.ts';
import type { KubeObject } from '../../kube/types.ts';
import type { Controller, ObjectKey, Watch } from '../../reconcile/types.ts';
import { clusterNames } from '../../specs/names.ts';
import { resolveOptions, type DeploymentControllerOptions } from './common.ts';
import { reconcileDeletion } from './deletion.ts';
import { sqlDrainProbe } from './drain.ts';
import { reconcileLive } from './live.ts';
import { clusterTokenSecret } from '../shared/cluster-target.ts';
import type { ClusterObject, DeploymentObject } from '../shared/objects.ts';

export type { DeploymentControllerOptions } from './common.ts';

function keyOf(obj: KubeObject): ObjectKey {
  return { namespace: obj.metadata.namespace ?? 'default', name: obj.metadata.name };
}

function sameNamespace(a: KubeObject, b: KubeObject): boolean {
  return (a.metadata.namespace ?? 'default') === (b.metadata.namespace ?? 'default');
}

/**
 * Secrets a Deployment reads: header values, the external admin token, and the token Secret of its Cluster — the one
 * the Cluster names (`status.tokenSecret`, a user's `spec.auth.tokenSecret`), or the default `<cluster>-token` while
 * the Cluster is not known.
 */
export function referencedSecrets(dep: DeploymentObject, cluster?: ClusterObject): Set<string> {
  const names = new Set<string>();
  for (const h of dep.spec.additionalHeaders ?? []) {
    const ref = h.valueFrom?.secretKeyRef;
    if (ref !== undefined) names.add(ref.name);
  }
  if (dep.spec.adminTokenSecretRef !== undefined) names.add(dep.spec.adminTokenSecretRef.name);
  const clusterName = dep.spec.clusterRef?.name;
  if (clusterName !== undefined) {
    if (cluster === undefined) names.add(clusterNames.token(clusterName));
    else {
      const token = clusterTokenSecret(cluster);
      if (token !== undefined) names.add(token.name);
    }
  }
  return names;
}

const clusterWatch: Watch = {
  apiVersion: API_VERSION,
  kind: 'Cluster',
  map: (cluster, primaries) =>
    (primaries() as DeploymentObject[])
      .filter((d) => sameNamespace(d, cluster) && d.spec.clusterRef?.name === cluster.metadata.name)
      .map(keyOf),
};

const secretWatch: Watch = {
  apiVersion: 'v1',
  kind: 'Secret',
  map: (secret, primaries, cached) => {
    const namespace = secret.metadata.namespace ?? 'default';
    const clusters = new Map(
      ((cached?.(API_VERSION, 'Cluster') ?? []) as ClusterObject[])
        .filter((c) => (c.metadata.namespace ?? 'default') === namespace)
        .map((c) => [c.metadata.name, c]),
    );
    return (primaries() as DeploymentObject[])
      .filter((d) => {
        if (!sameNamespace(d, secret)) return false;
        const cluster = d.spec.clusterRef === undefined ? undefined : clusters.get(d.spec.clusterRef.name);
        return referencedSecrets(d, cluster).has(secret.metadata.name);
      })
      .map(keyOf);
  },
};

/**
 * The Deployment controller: registers one service endpoint with a runtime's admin API, keeps it the latest version,
 * retires the versions it superseded once drained, and deregisters under the deletion policy.
 */
export function createDeploymentController(options: DeploymentControllerOptions = {}): Controller {
  const resolved = resolveOptions(options, sqlDrainProbe);
  return {
    name: 'deployment',
    apiVersion: API_VERSION,
    kind: 'Deployment',
    watches: [clusterWatch, secretWatch],
    async reconcile(key, ctx) {
      const dep = await ctx.kube.get<DeploymentObject>({
        apiVersion: API_VERSION,
        kind: 'Deployment',
        namespace: key.namespace,
        name: key.name,
      });
      if (dep === undefined) {
        resolved.reportDraining(key.namespace, key.name, 0);
        return {};
      }
      return dep.metadata.deletionTimestamp !== undefined
        ? reconcileDeletion(ctx, dep, resolved)
        : reconcileLive(ctx, dep, resolved);
    },
  };
}

export const deploymentController: Controller = createDeploymentController();
