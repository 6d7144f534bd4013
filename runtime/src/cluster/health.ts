import type { ClusterHealthResponse, ClusterNode } from '../admin/model/cluster-health.ts';
import type { LeaseRow } from '../storage/pg/leases.ts';
import type { NodeRow } from './membership.ts';

/** `GET /cluster-health`: every node with the partitions it holds a live lease of (also what `sys_node` shows). */
export function clusterHealth(clusterName: string, nodes: NodeRow[], leases: LeaseRow[]): ClusterHealthResponse {
  const leaderOf = new Map<string, number[]>();
  for (const l of leases) {
    if (!l.live || l.owner === null) continue;
    let list = leaderOf.get(l.owner);
    if (list === undefined) leaderOf.set(l.owner, (list = []));
    list.push(l.partition);
  }
  const described = nodes.map((n): ClusterNode => ({
    name: n.name,
    id: n.id,
    address: n.adminAddress,
    ingress_address: n.ingressAddress,
    alive: n.alive,
    leaving: n.leaving,
    started_at: n.startedAt.toISOString(),
    last_heartbeat: n.heartbeatAt.toISOString(),
    leader_of: n.alive ? (leaderOf.get(n.name) ?? []) : [],
  }));
  return {
    cluster_name: clusterName,
    // Every live node holds the whole metadata (it is in PostgreSQL): all of them are members.
    metadata_cluster_health: { members: described.filter((n) => n.alive && !n.leaving).map((n) => n.id) },
    nodes: described,
  };
}
