import type { Pool } from '../storage/pg/pool.ts';

/** A runtime process as the membership table shows it (liveness judged by the database's clock). */
export interface NodeRow {
  name: string;
  /** A small number that names the node in restate's cluster-health shape (`PlainNodeId`). */
  id: number;
  incarnation: string;
  /** `host:port` of its ingress and admin listeners, as peers reach them. */
  ingressAddress: string;
  adminAddress: string;
  startedAt: Date;
  heartbeatAt: Date;
  leaving: boolean;
  /** Its heartbeat is younger than the lease timeout. */
  alive: boolean;
  /** Alive, not leaving, and a member for at least the settle time: it counts in the fair share. */
  settled: boolean;
}

export interface MembershipOptions {
  node: string;
  /** Distinguishes this process from an earlier (or a concurrent, misconfigured) one with the same name. */
  incarnation: string;
  ingressAddress: string;
  adminAddress: string;
  leaseTimeoutMs: number;
  /** How long a new node must have been alive before others hand partitions over to it. */
  settleMs: number;
}

/** The `ratchet.node` table: this process's registration and heartbeat, and the view of every other node. */
export class Membership {
  constructor(
    private readonly pool: Pool,
    private readonly options: MembershipOptions,
  ) {}

  /** Registers this incarnation (replacing an earlier one of the same name). */
  async join(): Promise<void> {
    await this.pool.query(
      `INSERT INTO ratchet.node (name, incarnation, ingress_address, admin_address, started_at, heartbeat_at,
         lease_timeout_ms, leaving)
       VALUES ($1, $2, $3, $4, now(), now(), $5, false)
       ON CONFLICT (name) DO UPDATE SET incarnation = EXCLUDED.incarnation, ingress_address = EXCLUDED.ingress_address,
         admin_address = EXCLUDED.admin_address, started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at,
         lease_timeout_ms = EXCLUDED.lease_timeout_ms, leaving = false`,
      [
        this.options.node,
        this.options.incarnation,
        this.options.ingressAddress,
        this.options.adminAddress,
        this.options.leaseTimeoutMs,
      ],
    );
  }

  /**
   * Writes the heartbeat. False when the row names another incarnation: a process with the same node name started
   * after this one (which is then superseded and must stop serving).
   */
  async heartbeat(): Promise<boolean> {
    const res = await this.pool.query(
      `UPDATE ratchet.node SET heartbeat_at = now() WHERE name = $1 AND incarnation = $2`,
      [this.options.node, this.options.incarnation],
    );
    return (res.rowCount ?? 0) > 0;
  }

  /** Marks this node as leaving: peers stop counting it in the fair share and take its partitions. */
  async leave(): Promise<void> {
    await this.pool.query(`UPDATE ratchet.node SET leaving = true WHERE name = $1 AND incarnation = $2`, [
      this.options.node,
      this.options.incarnation,
    ]);
  }

  /** Removes this node's row (after a graceful stop). */
  async remove(): Promise<void> {
    await this.pool.query(`DELETE FROM ratchet.node WHERE name = $1 AND incarnation = $2`, [
      this.options.node,
      this.options.incarnation,
    ]);
  }

  /** Every registered node, ordered by name; rows of nodes dead for more than a day are removed first. */
  async list(): Promise<NodeRow[]> {
    const res = await this.pool.query<{
      name: string;
      id: number;
      incarnation: string;
      ingress_address: string;
      admin_address: string;
      started_at: Date;
      heartbeat_at: Date;
      leaving: boolean;
      alive: boolean;
      settled: boolean;
    }>(
      `WITH gone AS (DELETE FROM ratchet.node WHERE heartbeat_at < now() - interval '1 day')
       SELECT name, id, incarnation, ingress_address, admin_address, started_at, heartbeat_at, leaving,
              heartbeat_at >= now() - ($1::int * interval '1 millisecond') AS alive,
              (heartbeat_at >= now() - ($1::int * interval '1 millisecond') AND NOT leaving
                AND started_at <= now() - ($2::int * interval '1 millisecond')) AS settled
       FROM ratchet.node ORDER BY name`,
      [this.options.leaseTimeoutMs, this.options.settleMs],
    );
    return res.rows.map((r) => ({
      name: r.name,
      id: r.id,
      incarnation: r.incarnation,
      ingressAddress: r.ingress_address,
      adminAddress: r.admin_address,
      startedAt: r.started_at,
      heartbeatAt: r.heartbeat_at,
      leaving: r.leaving,
      alive: r.alive,
      settled: r.settled,
    }));
  }
}
