import { Type, type Static } from '@sinclair/typebox';
import { Component, OrNull } from './json-schema.ts';

/** A runtime node as `GET /cluster-health` lists it: Ratchet's addition to restate's shape (also `sys_node`). */
export const ClusterNode = Type.Object({
  name: Type.String({ description: 'RATCHET_NODE_NAME of the node.' }),
  id: Type.Integer({ minimum: 0, description: 'Its plain node id.' }),
  address: Type.String({ description: 'host:port of its admin listener, as peers reach it.' }),
  ingress_address: Type.String({ description: 'host:port of its ingress listener, as peers reach it.' }),
  alive: Type.Boolean({ description: 'Its heartbeat is younger than the lease timeout.' }),
  leaving: Type.Boolean({ description: 'It is stopping and hands its partitions over.' }),
  started_at: Type.String({ format: 'date-time' }),
  last_heartbeat: Type.String({ format: 'date-time' }),
  leader_of: Type.Array(Type.Integer({ minimum: 0 }), { description: 'Partitions it leads.' }),
});
export type ClusterNode = Static<typeof ClusterNode>;

/** `GET /cluster-health`: restate 1.7's `ClusterHealthResponse`, plus `nodes`. */
export const ClusterHealthResponse = Component(
  'ClusterHealthResponse',
  Type.Object(
    {
      cluster_name: Type.String({ description: 'Cluster name' }),
      metadata_cluster_health: Type.Optional(
        OrNull(
          Type.Object({
            members: Type.Array(Type.Integer({ minimum: 0 }), {
              description: 'Plain node ids of the live nodes (each holds the whole metadata: it is in PostgreSQL).',
            }),
          }),
        ),
      ),
      nodes: Type.Array(ClusterNode, { description: 'Every registered runtime node (Ratchet).' }),
    },
    { description: 'Cluster health information' },
  ),
);
export type ClusterHealthResponse = Static<typeof ClusterHealthResponse>;
