import { LISTENER_PORTS } from '../../api/v1alpha1/cluster.ts';
import type { Cluster } from '../../api/v1alpha1/index.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { namespaceOf } from '../../specs/meta.ts';
import { clusterNames } from '../../specs/names.ts';
import { serviceEnabled, type Endpoints } from '../../specs/settings.ts';
import { httpCall } from '../../admin-client/transport.ts';
import { httpScheme } from '../../specs/tls.ts';
import type { AuthResolution } from './auth.ts';
import type { TlsResolution } from './tls.ts';

/** How long the readiness probe of the observability listener may take. */
const PROBE_TIMEOUT_MS = 3_000;

/**
 * Whether the cluster's observability Service answers: `GET /ready` through it (with the access token in managed mode)
 * returns 200. The store can be switched off (spec.observability.store), and then nothing listens on the port: the
 * endpoint is only published in the status once something answers there.
 */
export async function observabilityAnswers(
  cluster: Cluster,
  ctx: ReconcileContext,
  auth: AuthResolution,
  tls: TlsResolution,
  readyPods: number,
): Promise<boolean> {
  if (!serviceEnabled(cluster, 'observability') || readyPods < 1 || auth.state === 'blocked' || !tls.ok) return false;
  const url = ctx.serviceUrl(
    namespaceOf(cluster),
    clusterNames.service(cluster.metadata.name, 'observability'),
    LISTENER_PORTS.observability,
    httpScheme(cluster, 'observability'),
  );
  try {
    const res = await httpCall(
      `${url}/ready`,
      {
        method: 'GET',
        headers: auth.state === 'ready' ? { authorization: `Bearer ${auth.token}` } : {},
        signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
      },
      tls.observability,
    );
    return res.status === 200;
  } catch {
    // Unreachable, refused or not trusted: the endpoint is not published, which is all a probe can say.
    return false;
  }
}

/** The status endpoints: those of the enabled Services, observability only while it answers. */
export function publishedEndpoints(all: Endpoints, observability: boolean): Endpoints {
  if (observability) return all;
  const { observability: _omitted, ...rest } = all;
  return rest;
}
