import type { ClientTls } from '../../admin-client/types.ts';
import type { Cluster } from '../../api/v1alpha1/index.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { clusterClientTls, memoizedReader, tlsProblem } from '../shared/cluster-tls.ts';
import { getSecret, type Blocker } from './secrets.ts';

export type TlsResolution =
  | {
      readonly ok: true;
      /** How the operator calls the admin and observability listeners: undefined for plain HTTP. */
      readonly admin: ClientTls | undefined;
      readonly observability: ClientTls | undefined;
    }
  | { readonly ok: false; readonly blocker: Blocker };

/**
 * spec.tls: every Secret and key present, and the operator's own TLS options. A missing Secret or key is waited for,
 * not Stalled: cert-manager creates the Secret some time after the Certificate, and the watch on Secrets brings the
 * Cluster back when it does. The contents go nowhere near the pods' config hash: the runtime re-reads renewed files.
 */
export async function resolveTls(cluster: Cluster, ctx: ReconcileContext): Promise<TlsResolution> {
  if (cluster.spec.tls === undefined) return { ok: true, admin: undefined, observability: undefined };
  const read = memoizedReader((name) => getSecret(ctx, cluster, name));
  const problem = await tlsProblem(cluster, read);
  if (problem !== undefined) return { ok: false, blocker: { ...problem, stalled: false } };
  const admin = await clusterClientTls(cluster, 'admin', read);
  const observability = await clusterClientTls(cluster, 'observability', read);
  // tlsProblem checked every key both read.
  if (!admin.ok) return { ok: false, blocker: { ...admin.problem, stalled: false } };
  if (!observability.ok) return { ok: false, blocker: { ...observability.problem, stalled: false } };
  return { ok: true, admin: admin.tls, observability: observability.tls };
}
