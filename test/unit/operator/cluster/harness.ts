import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Cluster, ClusterSpec, ClusterStatus } from '../../../../operator/src/api/v1alpha1/index.ts';
import { clusterController } from '../../../../operator/src/controllers/cluster/index.ts';
import type { Condition, KubeObject, ObjectRef } from '../../../../operator/src/kube/types.ts';
import type { ReconcileContext, ReconcileResult } from '../../../../operator/src/reconcile/types.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { MemoryEvents, MemoryKube } from '../../../support/operator/memory-kube.ts';
import { b64, NAMESPACE, OPERATOR_NAMESPACE, unb64 } from './fixtures.ts';
import { MemoryAdmin } from './memory-admin.ts';

export const START = new Date('2026-01-01T00:00:00Z');

/**
 * The runtime pods' observability listener, as the harness's Service URL reaches it: a loopback server answering
 * `GET /ready` with `observabilityStatus.code` (the operator publishes the endpoint only while it answers 200), and
 * recording the authorization it was sent.
 */
export const observabilityStatus = { code: 200, authorization: [] as (string | undefined)[] };
const observabilityServer = createServer((req, res) => {
  observabilityStatus.authorization.push(req.headers.authorization);
  res.writeHead(req.url === '/ready' ? observabilityStatus.code : 404).end();
});
observabilityServer.listen(0, '127.0.0.1');
observabilityServer.unref();

export const ref = {
  cluster: (name = 'demo'): ObjectRef => ({
    apiVersion: 'ratchet.dev/v1alpha1',
    kind: 'Cluster',
    namespace: NAMESPACE,
    name,
  }),
  secret: (name: string): ObjectRef => ({ apiVersion: 'v1', kind: 'Secret', namespace: NAMESPACE, name }),
  configMap: (name = 'demo-config'): ObjectRef => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: NAMESPACE, name }),
  service: (name: string): ObjectRef => ({ apiVersion: 'v1', kind: 'Service', namespace: NAMESPACE, name }),
  deployment: (name = 'demo'): ObjectRef => ({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NAMESPACE, name }),
  statefulSet: (name: string): ObjectRef => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    namespace: NAMESPACE,
    name,
  }),
  networkPolicy: (name: string): ObjectRef => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    namespace: NAMESPACE,
    name,
  }),
};

interface Data {
  data?: Record<string, string>;
}

/** A MemoryKube with the namespace, a Cluster created as a user would, the fake admin API and a clock. */
export class Harness {
  clock = START;
  readonly kube = new MemoryKube(() => this.clock);
  readonly events = new MemoryEvents();
  readonly admin = new MemoryAdmin();
  readonly ctx: ReconcileContext = {
    kube: this.kube,
    events: this.events,
    admin: this.admin.factory,
    now: () => this.clock,
    log: silentLogger(),
    serviceUrl: (namespace, service, port, scheme = 'http') =>
      service.endsWith('-observability')
        ? `http://127.0.0.1:${(observabilityServer.address() as AddressInfo).port}`
        : `${scheme}://${service}.${namespace}.svc:${port}`,
    operatorNamespace: OPERATOR_NAMESPACE,
  };

  constructor(
    spec: Partial<ClusterSpec> = {},
    readonly name = 'demo',
  ) {
    this.kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
    this.kube.create({
      apiVersion: 'ratchet.dev/v1alpha1',
      kind: 'Cluster',
      metadata: { name, namespace: NAMESPACE },
      spec: { image: 'ghcr.io/example/ratchet:0.1.0', database: { secretRef: { name: 'pg-dsn' } }, ...spec },
    });
  }

  reconcile(): Promise<ReconcileResult> {
    return clusterController.reconcile({ namespace: NAMESPACE, name: this.name }, this.ctx);
  }

  advance(ms: number): void {
    this.clock = new Date(this.clock.getTime() + ms);
  }

  cluster(): Cluster {
    return this.kube.peek(ref.cluster(this.name)) as unknown as Cluster;
  }

  status(): ClusterStatus {
    return this.cluster().status ?? {};
  }

  condition(type: string): Condition | undefined {
    return this.status().conditions?.find((c) => c.type === type);
  }

  /** A user's edit of the spec (kubectl apply): bumps generation. */
  editSpec(change: (spec: ClusterSpec) => void): void {
    const c = structuredClone(this.cluster());
    change(c.spec);
    this.kube.update(c);
  }

  annotate(annotations: Record<string, string>): void {
    const c = structuredClone(this.cluster());
    c.metadata.annotations = { ...c.metadata.annotations, ...annotations };
    this.kube.update(c);
  }

  putSecret(name: string, data: Record<string, string>): void {
    const encoded = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)]));
    const existing = this.kube.peek(ref.secret(name));
    const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NAMESPACE }, data: encoded };
    if (existing === undefined) this.kube.create(secret);
    else this.kube.update({ ...secret, metadata: { ...existing.metadata } });
  }

  secretText(name: string, key: string): string | undefined {
    const data = this.kube.peek<KubeObject & Data>(ref.secret(name))?.data?.[key];
    return data === undefined ? undefined : unb64(data);
  }

  configMapData(): Record<string, string> {
    return this.kube.peek<KubeObject & Data>(ref.configMap())?.data ?? {};
  }

  /** What the kubelet and the Deployment controller of Kubernetes would report once the pods run. */
  runtimePodsReady(ready?: number): void {
    const d = this.kube.peek(ref.deployment(this.name)) as KubeObject & { spec: { replicas: number } };
    const n = ready ?? d.spec.replicas;
    this.kube.setStatus(ref.deployment(this.name), {
      observedGeneration: d.metadata.generation,
      replicas: d.spec.replicas,
      readyReplicas: n,
      updatedReplicas: d.spec.replicas,
      availableReplicas: n,
    });
  }

  /** resourceVersion of every stored object, to prove a pass wrote nothing. */
  versions(): Record<string, string | undefined> {
    return Object.fromEntries(
      this.kube
        .all()
        .map((o) => [`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, o.metadata.resourceVersion]),
    );
  }

  /** A cluster brought to Ready: DSN Secret present, pods ready, admin API answering. */
  static async ready(spec: Partial<ClusterSpec> = {}): Promise<Harness> {
    const h = new Harness(spec);
    h.putSecret('pg-dsn', { uri: 'postgres://ratchet:pw@db.example:5432/ratchet' });
    await h.reconcile();
    h.runtimePodsReady();
    await h.reconcile();
    return h;
  }
}
