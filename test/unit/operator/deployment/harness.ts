import { API_VERSION, PAUSE_ANNOTATION, PAUSE_VALUE } from '../../../../operator/src/api/v1alpha1/index.ts';
import type { ClusterSpec, DeploymentSpec, SubscriptionSpec } from '../../../../operator/src/api/v1alpha1/index.ts';
import type {
  ClusterObject,
  DeploymentObject,
  SubscriptionObject,
} from '../../../../operator/src/controllers/shared/objects.ts';
import type { Condition, KubeObject, ObjectRef } from '../../../../operator/src/kube/types.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../../../../operator/src/reconcile/types.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { FakeAdmin } from '../../../support/operator/fake-admin.ts';
import { MemoryEvents, MemoryKube } from '../../../support/operator/memory-kube.ts';

/*
 * One namespace of an in-memory cluster (MemoryKube), one fake runtime behind every admin target, and a clock the
 * test moves: what the Deployment and Subscription reconcilers see in production, without a server.
 */

export const NS = 'default';
export const CLUSTER = 'main';
export const TOKEN = 'token-of-main';

export class Clock {
  constructor(private current: Date = new Date('2026-03-01T12:00:00.000Z')) {}
  readonly now = (): Date => new Date(this.current.getTime());
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

export function ref(kind: string, name: string): ObjectRef {
  return { apiVersion: kind === 'Secret' ? 'v1' : API_VERSION, kind, namespace: NS, name };
}

export class Harness {
  readonly clock = new Clock();
  readonly kube = new MemoryKube(this.clock.now);
  readonly events = new MemoryEvents();
  readonly admin = new FakeAdmin();
  readonly ctx: ReconcileContext = {
    kube: this.kube,
    events: this.events,
    admin: this.admin.factory,
    now: this.clock.now,
    log: silentLogger(),
    serviceUrl: (namespace, service, port, scheme = 'http') => `${scheme}://${service}.${namespace}.svc:${port}`,
    operatorNamespace: 'ratchet-system',
  };

  constructor(readonly controller: Controller) {}

  reconcile(name: string): Promise<ReconcileResult> {
    return this.controller.reconcile({ namespace: NS, name }, this.ctx);
  }

  /** Reconciles until the object is stable (no status or metadata change) or gone; at most `max` passes. */
  async settle(name: string, kind: string, max = 5): Promise<ReconcileResult> {
    let result: ReconcileResult = {};
    for (let i = 0; i < max; i++) {
      const before = JSON.stringify(this.kube.peek(ref(kind, name)) ?? null);
      result = await this.reconcile(name);
      const after = JSON.stringify(this.kube.peek(ref(kind, name)) ?? null);
      if (before === after) break;
    }
    return result;
  }

  secret(name: string, data: Record<string, string>): void {
    const encoded = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
    const existing = this.kube.peek(ref('Secret', name));
    const obj: KubeObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NS }, data: encoded };
    if (existing === undefined) this.kube.create(obj);
    else this.kube.update(obj);
  }

  cluster(options: { ready?: boolean; kafka?: string[]; name?: string } = {}): ClusterObject {
    const name = options.name ?? CLUSTER;
    const spec: ClusterSpec = {
      image: 'ratchet:test',
      database: { bundled: {} },
      ...(options.kafka === undefined
        ? {}
        : { kafka: { clusters: options.kafka.map((k) => ({ name: k, bootstrapServers: ['127.0.0.1:9092'] })) } }),
    };
    const created = this.kube.create<ClusterObject>({
      apiVersion: API_VERSION,
      kind: 'Cluster',
      metadata: { name, namespace: NS },
      spec,
    });
    this.secret(`${name}-token`, { token: name === CLUSTER ? TOKEN : `token-of-${name}` });
    this.setClusterReady(options.ready ?? true, name);
    return created;
  }

  setClusterReady(ready: boolean, name = CLUSTER): void {
    const condition: Condition = {
      type: 'AdminAPIReady',
      status: ready ? 'True' : 'False',
      lastTransitionTime: this.clock.now().toISOString(),
      reason: ready ? 'Answering' : 'Unreachable',
      message: ready ? 'admin API answers' : 'admin API does not answer yet',
    };
    this.kube.setStatus(ref('Cluster', name), { conditions: [condition], tokenSecret: `${name}-token` });
  }

  deployment(name: string, spec: Partial<DeploymentSpec> & Pick<DeploymentSpec, 'endpoint'>): DeploymentObject {
    return this.kube.create<DeploymentObject>({
      apiVersion: API_VERSION,
      kind: 'Deployment',
      metadata: { name, namespace: NS },
      spec: { clusterRef: { name: CLUSTER }, ...spec },
    });
  }

  subscription(name: string, spec: Partial<SubscriptionSpec> = {}): SubscriptionObject {
    return this.kube.create<SubscriptionObject>({
      apiVersion: API_VERSION,
      kind: 'Subscription',
      metadata: { name, namespace: NS },
      spec: {
        clusterRef: { name: CLUSTER },
        source: { kafka: { cluster: 'events', topic: 'orders' } },
        sink: { service: { name: 'Orders', handler: 'process' } },
        ...spec,
      },
    });
  }

  /** A user's edit of spec (kubectl apply): bumps generation. */
  editSpec<T extends DeploymentObject | SubscriptionObject>(
    kind: T['kind'],
    name: string,
    edit: (spec: T['spec']) => void,
  ): void {
    const obj = structuredClone(this.kube.peek<T>(ref(kind, name)));
    if (obj === undefined) throw new Error(`${kind} ${name} not found`);
    edit(obj.spec);
    this.kube.update(obj);
  }

  pause(kind: string, name: string, paused = true): void {
    const obj = structuredClone(this.kube.peek(ref(kind, name)));
    if (obj === undefined) throw new Error(`${kind} ${name} not found`);
    const annotations = { ...(obj.metadata.annotations ?? {}) };
    if (paused) annotations[PAUSE_ANNOTATION] = PAUSE_VALUE;
    else delete annotations[PAUSE_ANNOTATION];
    obj.metadata.annotations = annotations;
    this.kube.update(obj);
  }

  /** What a status loss looks like (restore from a backup without status, or a re-created object). */
  wipeStatus(kind: string, name: string): void {
    this.kube.setStatus(ref(kind, name), {});
  }

  get<T extends KubeObject>(kind: string, name: string): T | undefined {
    return this.kube.peek<T>(ref(kind, name));
  }

  condition(kind: string, name: string, type: string): Condition | undefined {
    const obj = this.get<KubeObject & { status?: { conditions?: Condition[] } }>(kind, name);
    return obj?.status?.conditions?.find((c) => c.type === type);
  }

  deleteAsUser(kind: string, name: string): void {
    this.kube.deleteAsUser(ref(kind, name));
  }
}
