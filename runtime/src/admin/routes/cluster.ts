import type { ClusterHealthResponse } from '../model/cluster-health.ts';
import { sendJson } from '../reply.ts';
import type { AdminRoutes } from './context.ts';

/** `GET /cluster-health`: restate's cluster name and metadata members, and Ratchet's nodes with their partitions. */
export function clusterRoutes(health: () => Promise<ClusterHealthResponse>): AdminRoutes {
  return (scope) => {
    scope.get('/cluster-health', async (_req, reply) => sendJson(reply, await health()));
  };
}
