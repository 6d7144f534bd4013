import type { LeaseRow } from '../storage/pg/leases.ts';
import type { NodeRow } from './membership.ts';

/** One node in `GET /cluster-health` (Ratchet's addition to restate's shape) and in `sys_node`. */
export interface NodeHealth {
  name: string;
  /** restate's plain node id of this node (what `metadata_cluster_health.members` lists). */
  id: number;
  /** Where peers reach its admin listener (`host:port`). */
  address: string;
  ingress_address: string;
  alive: boolean;
  leaving: boolean;
  started_at: string;
  last_heartbeat: string;
  /** The partitions it holds a live lease of. */
  leader_of: number[];
}

/** restate 1.7's `ClusterHealthResponse`, plus `nodes`. */
export interface ClusterHealth {
  cluster_name: string;
  metadata_cluster_health: { members: number[] } | null;
  nodes: NodeHealth[];
}

export function clusterHealth(clusterName: string, nodes: NodeRow[], leases: LeaseRow[]): ClusterHealth {
  const leaderOf = new Map<string, number[]>();
  for (const l of leases) {
    if (!l.live || l.owner === null) continue;
    let list = leaderOf.get(l.owner);
    if (list === undefined) leaderOf.set(l.owner, (list = []));
    list.push(l.partition);
  }
  const described = nodes.map((n): NodeHealth => ({
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
