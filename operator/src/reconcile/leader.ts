import type { Logger } from 'pino';
import { microTime } from '../kube/micro-time.ts';
import { KubeApiError } from '../kube/port.ts';
import type { KubeObject, ObjectRef } from '../kube/types.ts';

/*
 * Leader election on a coordination.k8s.io/v1 Lease, after client-go's leaderelection package:
 * - a candidate takes the Lease when it has no holder, or when the Lease has not changed for leaseDurationSeconds as
 *   measured on this machine's clock from when this candidate first saw its current content (never by comparing
 *   another machine's renewTime with our clock, so clock skew cannot make two leaders);
 * - writes are guarded by resourceVersion (create answers 409 when someone else created the Lease first, replace
 *   answers 409 when it changed since we read it), so two candidates never both win a round;
 * - the leader renews every retry period and steps down (onStoppedLeading) once renewDeadline has passed since the
 *   start of its last successful renewal, even while a renewal is still hanging; renewDeadline < leaseDuration, so it
 *   stops before anyone else may start;
 * - after stepping down it keeps campaigning: if the Lease still names it, nobody else took over and it may lead again;
 * - on shutdown it clears holderIdentity so a standby takes over at once instead of after a lease duration.
 */

export interface LeaseClient {
  get(ref: ObjectRef): Promise<KubeObject | undefined>;
  /** KubeApiError 409 when the object already exists. */
  create(obj: KubeObject): Promise<KubeObject>;
  /** KubeApiError 409 when metadata.resourceVersion is stale. */
  replace(obj: KubeObject): Promise<KubeObject>;
}

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number;
}

export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectionOptions {
  readonly client: LeaseClient;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  /** Default 15 s. */
  readonly leaseDurationMs?: number;
  /** Default 10 s. */
  readonly renewDeadlineMs?: number;
  /** Default 2 s. */
  readonly retryPeriodMs?: number;
  readonly onStartedLeading: () => void;
  readonly onStoppedLeading: () => void;
  readonly log: Logger;
  /** Local clock in milliseconds. */
  readonly now?: () => number;
}

export const LEASE_API_VERSION = 'coordination.k8s.io/v1';

export class LeaderElector {
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly now: () => number;
  private leading = false;
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** The last Lease we read or wrote, and when (local clock) its content last changed in our eyes. */
  private observed: { lease: Lease; at: number; record: string } | undefined;
  /** Bumped by stop(): a round still in flight must not take or keep leadership. */
  private epoch = 0;
  private round: Promise<void> = Promise.resolve();

  constructor(private readonly options: LeaderElectionOptions) {
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.now = options.now ?? Date.now;
    if (!(this.leaseDurationMs > this.renewDeadlineMs && this.renewDeadlineMs > this.retryPeriodMs)) {
      throw new Error('leader election needs leaseDuration > renewDeadline > retryPeriod');
    }
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** Campaigns (and, once leading, renews) until stop(). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /**
   * Stops campaigning; when leading, steps down (onStoppedLeading) and releases the Lease by clearing its holder. Call
   * after in-flight reconciles have drained: once released, a standby starts at once.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.epoch++;
    clearTimeout(this.timer);
    // Let a round in flight finish (bounded) so the release below works on the Lease it wrote.
    await Promise.race([this.round, new Promise((resolve) => setTimeout(resolve, this.retryPeriodMs).unref())]);
    if (!this.leading) return;
    this.stepDown('shutdown');
    const lease = this.observed?.lease;
    if (lease?.spec?.holderIdentity !== this.options.identity) return;
    try {
      await this.options.client.replace({
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: null,
          acquireTime: null,
          renewTime: microTime(new Date(this.now())),
          leaseDurationSeconds: 1,
        },
      });
      this.options.log.info({ lease: this.leaseName }, 'released the leader lease');
    } catch (err) {
      // Someone changed it since (so it is not ours any more) or the API is unreachable: the Lease simply expires.
      this.options.log.warn({ err, lease: this.leaseName }, 'could not release the leader lease');
    }
  }

  private get leaseName(): string {
    return `${this.options.namespace}/${this.options.name}`;
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.round = this.tick();
    }, delayMs);
  }

  private async tick(): Promise<void> {
    const epoch = this.epoch;
    const startedAt = this.now();
    const ok = await this.tryAcquireOrRenew(epoch, startedAt);
    if (epoch !== this.epoch) return;
    // The deadline counts from when this round started: the renewTime it wrote is that old.
    const remaining = startedAt + this.renewDeadlineMs - this.now();
    if (ok && remaining > 0) {
      clearTimeout(this.deadlineTimer);
      this.deadlineTimer = setTimeout(() => this.stepDown('renew deadline passed'), remaining);
      if (!this.leading) {
        this.leading = true;
        this.options.log.info({ lease: this.leaseName, identity: this.options.identity }, 'became leader');
        this.options.onStartedLeading();
      }
    }
    // Jitter spreads the standbys' attempts (client-go: a factor up to 1.2 on the retry period).
    this.schedule(this.leading ? this.retryPeriodMs : this.retryPeriodMs * (1 + Math.random() * 0.2));
  }

  private stepDown(why: string): void {
    clearTimeout(this.deadlineTimer);
    if (!this.leading) return;
    this.leading = false;
    // Losing the Lease is a degradation worth a warning; handing it over at shutdown is not.
    const level = why === 'shutdown' ? 'info' : 'warn';
    this.options.log[level]({ lease: this.leaseName, identity: this.options.identity, why }, 'stopped leading');
    this.options.onStoppedLeading();
  }

  /** One round: true when we hold the Lease afterwards. */
  private async tryAcquireOrRenew(epoch: number, startedAt: number): Promise<boolean> {
    const { client, namespace, name, identity } = this.options;
    const ref = { apiVersion: LEASE_API_VERSION, kind: 'Lease', namespace, name };
    const now = microTime(new Date(startedAt));
    const leaseDurationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    try {
      const current = (await client.get(ref)) as Lease | undefined;
      if (epoch !== this.epoch) return false;
      if (current === undefined) {
        const created = (await client.create({
          apiVersion: LEASE_API_VERSION,
          kind: 'Lease',
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: 0,
          },
        })) as Lease;
        this.observe(created);
        return true;
      }
      this.observe(current);
      const spec = current.spec ?? {};
      const holder = spec.holderIdentity ?? '';
      const mine = holder === identity;
      if (!mine && holder !== '' && !this.observedExpired(spec)) return false;
      const transitions = spec.leaseTransitions ?? 0;
      const next: Lease = {
        ...current,
        spec: {
          ...spec,
          holderIdentity: identity,
          leaseDurationSeconds,
          renewTime: now,
          acquireTime: mine ? (spec.acquireTime ?? now) : now,
          leaseTransitions: mine ? transitions : transitions + 1,
        },
      };
      if (epoch !== this.epoch) return false;
      this.observe(await client.replace(next));
      return true;
    } catch (err) {
      if (KubeApiError.isConflict(err)) {
        this.options.log.debug({ lease: this.leaseName }, 'lost a leader election race');
      } else {
        this.options.log.warn({ err, lease: this.leaseName }, 'leader election round failed');
      }
      return false;
    }
  }

  private observe(lease: Lease): void {
    const s = lease.spec ?? {};
    const record = JSON.stringify([s.holderIdentity ?? '', s.renewTime ?? '', s.leaseDurationSeconds ?? 0]);
    this.observed = this.observed?.record === record ? { ...this.observed, lease } : { lease, at: this.now(), record };
  }

  private observedExpired(spec: LeaseSpec): boolean {
    const durationMs = (spec.leaseDurationSeconds ?? this.leaseDurationMs / 1000) * 1000;
    return this.observed !== undefined && this.now() - this.observed.at >= durationMs;
  }
}
