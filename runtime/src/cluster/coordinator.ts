import type { Client, Pool } from '../storage/pg/pool.ts';
import type { Logger } from 'pino';
import type { Engine } from '../engine/engine.ts';
import { OUTBOX_CHANNEL } from '../storage/pg/storage.ts';
import type { LeaseRow, PartitionLeases } from '../storage/pg/leases.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Membership, NodeRow } from './membership.ts';
import { placementStep } from './placement.ts';

/** The channel nodes NOTIFY when they give partitions up, join or leave: the others rebalance at once. */
export const CLUSTER_CHANNEL = 'ratchet_cluster';

export interface CoordinatorOptions {
  node: string;
  partitions: number;
  leaseTimeoutMs: number;
  heartbeatIntervalMs: number;
  /** How long a partition may be without a live owner before this node reports not-ready. */
  partitionWaitMs: number;
  /** Most partitions one node gives up per heartbeat when others are short (keeps moves gradual). */
  maxReleasePerStep: number;
}

/** What this node knows of the cluster as of its last successful step. */
export interface ClusterView {
  nodes: NodeRow[];
  leases: LeaseRow[];
  /** When it was read (this process's clock). */
  at: number;
}

/**
 * Runs this node's part of the cluster: heartbeat, lease renewal, the fair share (taking free partitions, giving
 * partitions up to nodes that are short), failover (expired leases of dead nodes are free), recovery of partitions
 * whose memory became suspect (a failed write, a lost connection), and the hand-over on stop. One step at a time:
 * every change of which partitions the engine serves happens here, in order.
 */
export class ClusterCoordinator {
  private view: ClusterView = { nodes: [], leases: [], at: 0 };
  /** Partitions held whose memory was dropped after a failed write: taken back with a new epoch, then recovered. */
  private readonly suspects = new Set<number>();
  private readonly ownerlessSince = new Map<number, number>();
  private lastRenewOk = 0;
  private databaseOk = false;
  private joined = false;
  private stopping = false;
  private stopped = false;
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private listener: Client | undefined;
  private listening: Promise<void> | undefined;
  private failures = 0;
  private readonly log: Logger;

  constructor(
    private readonly pool: Pool,
    private readonly connectListener: () => Promise<Client>,
    private readonly leases: PartitionLeases,
    private readonly membership: Membership,
    private readonly engine: Engine,
    private readonly options: CoordinatorOptions,
    private readonly metrics: Metrics,
    logger: Logger,
    /** Called when another process registered with this node's name: this one must stop. */
    private readonly onSuperseded: () => void,
  ) {
    this.log = logger.child({ component: 'cluster' });
  }

  /**
   * Joins (registers this node), takes back what an earlier incarnation of it held, takes its share of the free
   * partitions and recovers them; returns once that first step is done, then keeps stepping every heartbeat.
   */
  async start(): Promise<void> {
    await this.leases.ensureRows();
    await this.membership.join();
    this.joined = true;
    const reclaimed = await this.leases.reclaim();
    if (reclaimed.length > 0) {
      this.log.info({ partitions: reclaimed.length }, 'took back the partitions of an earlier incarnation');
      this.metrics.partitionMoves.inc({ kind: 'acquired' }, reclaimed.length);
      await this.recover(reclaimed);
    }
    await this.step();
    void this.listen();
    this.schedule();
  }

  /** Ready: joined, the database answers, and no partition has been without a live owner for long. */
  ready(): boolean {
    if (!this.joined || this.stopping || !this.databaseOk) return false;
    const now = Date.now();
    if (now - this.view.at > this.options.leaseTimeoutMs * 2) return false;
    for (const since of this.ownerlessSince.values()) if (now - since > this.options.partitionWaitMs) return false;
    return true;
  }

  /** The last view of nodes and leases (for forwarding and cluster health). */
  current(): ClusterView {
    return this.view;
  }

  /** The live node that owns `partition`, as of the last step. */
  ownerOf(partition: number): NodeRow | undefined {
    const lease = this.view.leases[partition];
    if (lease === undefined || !lease.live || lease.owner === null) return undefined;
    return this.view.nodes.find((n) => n.name === lease.owner && n.alive);
  }

  /** Re-reads the view now (a request found the partition elsewhere than expected). */
  async refresh(): Promise<void> {
    const [nodes, leases] = await Promise.all([this.membership.list(), this.leases.list()]);
    this.setView(nodes, leases);
  }

  /**
   * A write of these partitions failed (or its outcome is unknown), or a read the engine needed: what memory holds of
   * them may be ahead of the database, or incomplete. They stop being served at once and are recovered from
   * PostgreSQL in the next step.
   */
  suspect(partitions: number[]): void {
    const held = partitions.filter((p) => this.leases.holds(p));
    if (held.length === 0) return;
    this.leases.forget(held);
    this.engine.drop(held);
    for (const p of held) this.suspects.add(p);
    this.log.warn({ partitions: held }, 'a read or write failed: recovering the partitions from PostgreSQL');
    this.wake();
  }

  /**
   * Graceful stop: not ready at once, every partition given up (the engine's attempts stop, the leases are freed and
   * the others are told), the node's row removed. Others take over within a heartbeat or less.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopping = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    // A step may be waiting on an unreachable database: the hand-over does not wait for it for long.
    await Promise.race([this.running, new Promise((r) => setTimeout(r, this.options.heartbeatIntervalMs).unref())]);
    this.stopped = true;
    const all = [...this.leases.owned(), ...this.suspects];
    this.engine.drop(all);
    this.suspects.clear();
    try {
      await this.membership.leave();
      await this.leases.releaseAll();
      this.metrics.partitionMoves.inc({ kind: 'released' }, all.length);
      await this.pool.query(`SELECT pg_notify($1, 'leave')`, [CLUSTER_CHANNEL]);
      await this.membership.remove();
      this.log.info({ partitions: all.length }, 'left the cluster and handed every partition over');
    } catch (err) {
      this.log.warn({ err }, 'could not hand the partitions over; they move once their leases expire');
    }
    this.metrics.ownedPartitions.set(0);
    const l = this.listener;
    this.listener = undefined;
    await l?.end().catch(() => undefined);
  }

  private schedule(): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.runStep();
    }, this.options.heartbeatIntervalMs);
    this.timer.unref();
  }

  /** Steps now (after the one running, if any). */
  private wake(): void {
    if (this.stopping) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    setImmediate(() => void this.runStep());
  }

  private async runStep(): Promise<void> {
    if (this.stopping || this.running !== undefined) return;
    this.running = this.step().finally(() => {
      this.running = undefined;
    });
    await this.running;
    if (this.stopping) return;
    if (this.again) {
      this.again = false;
      setImmediate(() => void this.runStep());
    } else {
      this.schedule();
    }
  }

  /** One step; never throws. */
  private async step(): Promise<void> {
    const started = Date.now();
    try {
      await this.stepOnce();
    } finally {
      const ms = Date.now() - started;
      // Leases are renewed once per step: a step this slow lets them run out (the database or this process stalls).
      if (ms > this.options.leaseTimeoutMs) this.log.warn({ ms }, 'a cluster step took longer than the lease timeout');
    }
  }

  private async stepOnce(): Promise<void> {
    try {
      if (!(await this.membership.heartbeat())) {
        this.log.error(
          { node: this.options.node },
          'another process registered with this node name (RATCHET_NODE_NAME must be unique); stopping',
        );
        this.stopping = true;
        this.engine.drop([...this.leases.owned(), ...this.suspects]);
        this.leases.forget(this.leases.owned());
        this.onSuperseded();
        return;
      }
      const lost = await this.leases.renew();
      this.lastRenewOk = Date.now();
      if (!this.databaseOk && this.failures > 0) this.log.info('PostgreSQL is reachable again');
      this.databaseOk = true;
      this.failures = 0;
      if (lost.length > 0) {
        this.engine.drop(lost);
        for (const p of lost) this.suspects.delete(p);
        this.metrics.partitionMoves.inc({ kind: 'lost' }, lost.length);
        this.log.warn({ partitions: lost }, 'lost partition leases; another process owns them now');
      }
      for (const p of [...this.suspects]) {
        this.suspects.delete(p);
        if (await this.leases.retake(p)) await this.recover([p]);
        else {
          this.metrics.partitionMoves.inc({ kind: 'lost' });
          this.log.warn({ partition: p }, 'a partition being recovered was taken over by another process');
        }
      }
      await this.refresh();
      if (!this.stopping) await this.rebalance();
      // Rows other nodes wrote for partitions served here, whose notification was missed (and deliveries that failed).
      await this.engine.pollOutbox();
      if (this.listener === undefined) void this.listen();
    } catch (err) {
      this.failures += 1;
      if (this.databaseOk || this.failures === 1) {
        this.log.warn({ err }, 'cannot reach PostgreSQL; not ready until it answers again');
      }
      this.databaseOk = false;
      // Leases not renewed for their whole timeout may belong to others now: stop acting on them (they are taken
      // back, or recovered by their new owner, once the database answers).
      if (Date.now() - this.lastRenewOk > this.options.leaseTimeoutMs) {
        const held = this.leases.owned();
        if (held.length > 0) {
          this.leases.forget(held);
          this.engine.drop(held);
          for (const p of held) this.suspects.add(p);
          this.log.warn({ partitions: held.length }, 'leases could not be renewed in time; partitions dropped');
        }
      }
    } finally {
      this.metrics.ownedPartitions.set(this.engine.servedPartitions().length);
    }
  }

  private async rebalance(): Promise<void> {
    const nodes = this.view.nodes;
    const members = nodes.filter((n) => n.settled || n.name === this.options.node).map((n) => n.name);
    const alive = new Set(nodes.filter((n) => n.alive).map((n) => n.name));
    const owners = this.view.leases.map((l) =>
      l.live && l.owner !== null && (alive.has(l.owner) || l.owner === this.options.node) ? l.owner : undefined,
    );
    const mine = this.leases.owned().length + this.suspects.size;
    const step = placementStep({
      self: this.options.node,
      partitions: this.options.partitions,
      members,
      owners,
      mine,
      maxRelease: this.options.maxReleasePerStep,
    });
    if (step.take > 0) {
      const got = await this.leases.acquire(step.take, false);
      if (got.length > 0) {
        this.metrics.partitionMoves.inc({ kind: 'acquired' }, got.length);
        this.log.info({ partitions: got, target: step.target }, 'took partitions');
        await this.recover(got);
      }
    }
    if (step.release > 0) {
      const give = this.leases
        .owned()
        .sort((a, b) => b - a)
        .slice(0, step.release);
      this.engine.drop(give);
      try {
        await this.leases.release(give);
      } catch (err) {
        // Still named by their rows and no longer served: taken back and recovered, like suspects, next step.
        for (const p of give) this.suspects.add(p);
        throw err;
      }
      this.metrics.partitionMoves.inc({ kind: 'released' }, give.length);
      this.log.info({ partitions: give, target: step.target }, 'handed partitions over to nodes below their share');
      await this.pool.query(`SELECT pg_notify($1, 'release')`, [CLUSTER_CHANNEL]);
    }
  }

  /** Recovers partitions just taken; those whose recovery fails are retried as suspects. */
  private async recover(partitions: number[]): Promise<void> {
    const started = process.hrtime.bigint();
    try {
      const r = await this.engine.recover(partitions);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.metrics.partitionRecovery.observe(seconds);
      this.log.info(
        { partitions, invocations: r.invocations, timers: r.timers, ms: Math.round(seconds * 1000) },
        'recovered partitions',
      );
    } catch (err) {
      this.log.warn({ err, partitions }, 'could not recover partitions; trying again');
      this.engine.drop(partitions);
      this.leases.forget(partitions);
      for (const p of partitions) this.suspects.add(p);
      throw err;
    }
  }

  private setView(nodes: NodeRow[], leases: LeaseRow[]): void {
    const now = Date.now();
    const alive = new Set(nodes.filter((n) => n.alive).map((n) => n.name));
    for (const l of leases) {
      const owned = l.live && l.owner !== null && alive.has(l.owner);
      if (owned) this.ownerlessSince.delete(l.partition);
      else if (!this.ownerlessSince.has(l.partition)) this.ownerlessSince.set(l.partition, now);
    }
    this.view = { nodes, leases, at: now };
    this.metrics.liveNodes.set(alive.size);
  }

  /** Another node wrote outbox rows for these partitions: those served here deliver them now. */
  private outboxChanged(payload: string): void {
    const partitions = payload
      .split(',')
      .map(Number)
      .filter((p) => Number.isInteger(p) && this.engine.serves(p));
    if (partitions.length === 0) return;
    this.engine.pollOutbox(partitions).catch((err: unknown) => {
      this.log.debug({ err }, 'could not read the outbox; the next step does');
    });
  }

  /** LISTENs for other nodes' changes, so that freed partitions are taken at once rather than at the next step. */
  private listen(): Promise<void> {
    this.listening ??= (async () => {
      try {
        const client = await this.connectListener();
        client.on('error', () => {
          if (this.listener === client) this.listener = undefined;
          void client.end().catch(() => undefined);
        });
        client.on('notification', (msg) => {
          if (msg.channel === CLUSTER_CHANNEL) this.wake();
          else if (msg.channel === OUTBOX_CHANNEL) this.outboxChanged(msg.payload ?? '');
        });
        await client.query(`LISTEN ${CLUSTER_CHANNEL}; LISTEN ${OUTBOX_CHANNEL}`);
        if (this.stopping) {
          await client.end().catch(() => undefined);
          return;
        }
        this.listener = client;
      } catch (err) {
        this.log.debug({ err }, 'cannot listen for cluster changes yet');
      } finally {
        this.listening = undefined;
      }
    })();
    return this.listening;
  }
}
