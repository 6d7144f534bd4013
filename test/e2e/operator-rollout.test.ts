import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorHandle } from '../../operator/src/operator.ts';
import { kubectl, startHarness, type Harness } from '../integration/fake-kube/harness.ts';
import { startKubelet, type Kubelet, type PodInfo } from '../support/operator/kubelet.ts';
import { applyAsUser, installOperator, startTestOperator } from '../support/operator/operator-env.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';
import { counter } from '../support/services/counter.ts';

/*
 * A rolling update of a Cluster under load, end to end on one machine: the fake API server, the real operator, the
 * process-backed kubelet rolling real runtime processes one at a time as the Deployment controller does (maxSurge 1,
 * maxUnavailable 0: a new pod, its readiness probe, then SIGTERM to one old pod, which leaves the Service endpoints at
 * once), and clients calling a virtual object through the ingress Service while a config change rolls every pod.
 * Two kinds of clients, each with its own object keys:
 * - clients that pick one of the Service's current endpoints for every request (client-side balancing, or a proxy
 *   that balances requests such as an ingress controller);
 * - clients with pooled keep-alive connections through a kube-proxy, which picks a pod per connection and leaves
 *   established connections with their pod even while it terminates (conntrack) — how most HTTP clients reach a
 *   ClusterIP Service.
 * For each kind: no request may fail on its first try, and every acknowledged update is applied exactly once.
 */

const NS = 'rollout';
const CLUSTER = 'main';
// Three, as a production cluster runs (and the issue asks); two took 15 s less on this machine.
const REPLICAS = 3;

interface ClusterStatus {
  observedGeneration?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  conditions?: { type: string; status: string }[];
}

interface LoadReport {
  /** Per object key, the answers of acknowledged `add(1)` calls (each the new count). */
  acknowledged: Map<string, number[]>;
  requests: number;
  /** Requests whose first try failed (status or connection); the first few of them described. */
  firstTryFailures: number;
  failures: string[];
  /** Slowest acknowledged request, retries included. */
  maxLatencyMs: number;
}

/**
 * Careful clients of the ingress: every request goes to one of `targets()` (in turn), carries the cluster's token and
 * its own idempotency key, and is retried (same key, next target) until it is acknowledged.
 */
class CounterLoad {
  private stopped = false;
  /** Requests not yet acknowledged are given up (the test failed already). */
  private abandoned = false;
  private seq = 0;
  private readonly workers: Promise<void>[] = [];
  readonly report: LoadReport = {
    acknowledged: new Map(),
    requests: 0,
    firstTryFailures: 0,
    failures: [],
    maxLatencyMs: 0,
  };

  constructor(
    private readonly targets: () => string[],
    private readonly token: string,
    private readonly keys: readonly string[],
    concurrency: number,
    private readonly tag: string,
  ) {
    for (let i = 0; i < concurrency; i++) this.workers.push(this.worker(i));
  }

  get acknowledgedCount(): number {
    return [...this.report.acknowledged.values()].reduce((n, list) => n + list.length, 0);
  }

  private async worker(w: number): Promise<void> {
    let turn = w;
    while (!this.stopped) {
      const n = this.seq++;
      const key = this.keys[(n * 7 + w) % this.keys.length]!;
      const idempotencyKey = `${this.tag}-${w}-${n}`;
      const started = Date.now();
      this.report.requests += 1;
      for (let attempt = 0; !this.abandoned; attempt++) {
        const urls = this.targets();
        const url = urls[turn++ % Math.max(1, urls.length)];
        let problem: string;
        if (url === undefined) problem = 'no endpoint';
        else {
          try {
            const res = await fetch(`${url}/Counter/${key}/add`, {
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                'idempotency-key': idempotencyKey,
                authorization: `Bearer ${this.token}`,
              },
              body: '1',
              signal: AbortSignal.timeout(30_000),
            });
            const text = await res.text();
            if (res.status === 200) {
              const list = this.report.acknowledged.get(key) ?? [];
              list.push(Number(text));
              this.report.acknowledged.set(key, list);
              this.report.maxLatencyMs = Math.max(this.report.maxLatencyMs, Date.now() - started);
              break;
            }
            problem = `${res.status} ${text}`;
          } catch (err) {
            const cause = (err as { cause?: { code?: string } }).cause?.code;
            problem = `${(err as Error).message}${cause === undefined ? '' : ` (${cause})`}`;
          }
        }
        if (attempt === 0) {
          this.report.firstTryFailures += 1;
          if (this.report.failures.length < 20) {
            this.report.failures.push(`${new Date().toISOString()} ${key} ${idempotencyKey} ${url ?? '-'}: ${problem}`);
          }
        }
        // A client's back-off before it tries again, not a test waiting for a condition.
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Stops sending new requests and waits until every one sent is acknowledged. */
  async stop(): Promise<LoadReport> {
    this.stopped = true;
    await Promise.all(this.workers);
    return this.report;
  }

  async abandon(): Promise<void> {
    this.abandoned = true;
    await this.stop();
  }
}

describe('operator end to end: a Cluster rolled under load', () => {
  let db: TestDatabase;
  let h: Harness;
  let kubelet: Kubelet;
  let operator: OperatorHandle;
  let endpoint: SdkEndpoint;
  let token = '';
  /** What the two kinds of clients saw during the rollout. */
  const reports: { endpoints?: LoadReport; kubeProxy?: LoadReport } = {};

  const apply = (objects: object[]): Promise<void> => applyAsUser(h, objects);

  function cluster(cleanupInterval: string): object {
    return {
      apiVersion: 'ratchet.dev/v1alpha1',
      kind: 'Cluster',
      metadata: { name: CLUSTER, namespace: NS },
      spec: {
        image: 'ghcr.io/ratchet-dev/ratchet-runtime:dev',
        replicas: REPLICAS,
        database: { secretRef: { name: 'main-db' } },
        // A config value: the ConfigMap changes, so does the pods' config hash, and the Deployment rolls.
        // The rollout is checked under steady load, far above a managed cluster's default ingress limit.
        config: { storage: { 'cleanup-interval': cleanupInterval }, ingress: { 'rate-limit': 'off' } },
        pod: { shutdownDelaySeconds: 1 },
      },
    };
  }

  function clusterStatus(): ClusterStatus {
    const c = h.fake.get({ apiVersion: 'ratchet.dev/v1alpha1', kind: 'Cluster', namespace: NS, name: CLUSTER });
    return c?.['status'] ?? {};
  }

  function runtimePods(): PodInfo[] {
    return kubelet.pods().filter((p) => p.namespace === NS && p.deployment === CLUSTER);
  }

  function diagnostics(): string {
    const objects = h.fake
      .list('ratchet.dev/v1alpha1', 'Cluster', NS)
      .concat(h.fake.list('ratchet.dev/v1alpha1', 'Deployment', NS), h.fake.list('apps/v1', 'Deployment', NS));
    const pods = runtimePods().map(
      (p) => `--- ${p.name} ready=${p.ready} terminating=${p.terminating}\n${p.output.slice(-6000)}`,
    );
    return `${JSON.stringify(
      objects.map((o) => ({ kind: o.kind, name: o.metadata.name, status: o['status'] })),
      null,
      1,
    )}\n${pods.join('\n')}`;
  }

  /** A failed wait, with what the cluster looked like when it gave up. */
  async function explained(wait: Promise<void>): Promise<void> {
    try {
      await wait;
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnostics()}`, { cause: err });
    }
  }

  async function waitReady(resource: string): Promise<void> {
    const res = await kubectl(h, ['wait', '-n', NS, '--for=condition=Ready', resource, '--timeout=60s'], 70_000);
    expect(res.code, `${resource} did not become Ready: ${res.stderr}\n${diagnostics()}`).toBe(0);
  }

  const ingressEndpoints = (): string[] => kubelet.endpoints(NS, `${CLUSTER}-ingress`, 8080);

  /** Exactly once: per key the acknowledged answers are 1..n, and the counter reads n. */
  async function checkCounters(report: LoadReport): Promise<void> {
    let total = 0;
    for (const [key, answers] of report.acknowledged) {
      const sorted = [...answers].sort((a, b) => a - b);
      expect({ key, answers: sorted }).toEqual({ key, answers: sorted.map((_, i) => i + 1) });
      const res = await fetch(`${ingressEndpoints()[0]!}/Counter/${key}/get`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      expect({ key, value: await res.text() }).toEqual({ key, value: String(sorted.length) });
      total += sorted.length;
    }
    expect(total).toBe(report.requests);
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await startHarness({ rbac: true, namespaces: ['ratchet-system', NS] });
    await installOperator(h);
    kubelet = await startKubelet({
      kubeconfigPath: h.kubeconfig,
      namespaces: [NS],
      // Hand-overs and shutdown steps are logged at info: the pods' output then tells what happened if a request fails.
      env: { RATCHET_LOG_LEVEL: 'info' },
      ...(process.env['RATCHET_TEST_POD_LOGS'] === undefined ? {} : { logDir: process.env['RATCHET_TEST_POD_LOGS'] }),
    });
    operator = await startTestOperator(h, {
      name: 'ratchet-operator-rollout',
      serviceUrl: (namespace, service, port, scheme) => kubelet.serviceUrl(namespace, service, port, scheme),
    });
    endpoint = await startEndpoint({ services: [counter], transport: 'h2' });
  });

  afterAll(async () => {
    await operator?.stop(5_000);
    await kubelet?.stop();
    await endpoint?.close();
    await h?.stop();
    await db?.drop();
  });

  it(
    'rolls every runtime pod, one at a time, after a config change while clients call through the Service',
    { timeout: 150_000 },
    async () => {
      const t0 = Date.now();
      await apply([
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'main-db', namespace: NS }, stringData: { uri: db.url } },
        cluster('1m'),
      ]);
      await waitReady(`clusters.ratchet.dev/${CLUSTER}`);
      const clusterReadyMs = Date.now() - t0;
      const secret = h.fake.get({ apiVersion: 'v1', kind: 'Secret', namespace: NS, name: `${CLUSTER}-token` })!;
      token = Buffer.from((secret['data'] as Record<string, string>)['token']!, 'base64').toString('utf8');

      await apply([
        {
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Deployment',
          metadata: { name: 'counter', namespace: NS },
          spec: { clusterRef: { name: CLUSTER }, endpoint: { http: { uri: endpoint.url } } },
        },
      ]);
      await waitReady('deployments.ratchet.dev/counter');
      await expect.poll(() => ingressEndpoints().length, { timeout: 30_000 }).toBe(REPLICAS);
      const registeredMs = Date.now() - t0;
      const before = new Set(runtimePods().map((p) => p.name));
      expect(before.size).toBe(REPLICAS);

      const keys = (prefix: string): string[] => Array.from({ length: 16 }, (_, i) => `${prefix}-${i}`);
      const kubeProxy = await kubelet.proxy(NS, `${CLUSTER}-ingress`, 8080);
      const loads = {
        endpoints: new CounterLoad(ingressEndpoints, token, keys('ep'), 6, 'ep'),
        kubeProxy: new CounterLoad(() => [kubeProxy], token, keys('kp'), 4, 'kp'),
      };
      const acknowledged = (): number => loads.endpoints.acknowledgedCount + loads.kubeProxy.acknowledgedCount;
      try {
        await expect.poll(acknowledged, { timeout: 30_000 }).toBeGreaterThanOrEqual(100);
        const generation = h.fake.get({
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Cluster',
          namespace: NS,
          name: CLUSTER,
        })!.metadata.generation!;

        const started = Date.now();
        const requestsBefore = loads.endpoints.report.requests + loads.kubeProxy.report.requests;
        await apply([cluster('2m')]);
        // Rolled: as many pods as replicas, all new, all ready and behind the Service, every old process exited.
        await explained(
          expect
            .poll(
              () => {
                const pods = runtimePods();
                return {
                  pods: pods.length,
                  old: pods.filter((p) => before.has(p.name)).length,
                  ready: pods.filter((p) => p.ready && !p.terminating).length,
                  endpoints: ingressEndpoints().length,
                };
              },
              { timeout: 90_000, interval: 100 },
            )
            .toEqual({ pods: REPLICAS, old: 0, ready: REPLICAS, endpoints: REPLICAS }),
        );
        const rolloutMs = Date.now() - started;
        const duringRollout = loads.endpoints.report.requests + loads.kubeProxy.report.requests - requestsBefore;
        // The operator reports the new generation rolled out.
        await expect
          .poll(
            () => {
              const status = clusterStatus();
              return {
                newer: (status.observedGeneration ?? 0) > generation,
                updated: status.updatedReplicas,
                ready: status.readyReplicas,
                condition: status.conditions?.find((x) => x.type === 'Ready')?.status,
              };
            },
            { timeout: 30_000 },
          )
          .toEqual({ newer: true, updated: REPLICAS, ready: REPLICAS, condition: 'True' });

        // A little more load on the new pods alone, then stop.
        const later = acknowledged() + 50;
        await expect.poll(acknowledged, { timeout: 30_000 }).toBeGreaterThanOrEqual(later);
        reports.endpoints = await loads.endpoints.stop();
        reports.kubeProxy = await loads.kubeProxy.stop();

        const timeline = kubelet
          .events()
          .filter((e) => e.namespace === NS && e.at >= started)
          .map((e) => `  +${String(e.at - started).padStart(6)} ms  ${e.pod}  ${e.reason} ${e.message}`);
        const figures = (name: string, r: LoadReport): string =>
          `  ${name}: ${r.requests} requests, ${r.firstTryFailures} failed on their first try, slowest ${r.maxLatencyMs} ms`;
        console.log(
          `Cluster of ${REPLICAS} ready after ${clusterReadyMs} ms, service registered after ${registeredMs} ms; ` +
            `rolled ${REPLICAS} runtime pods in ${rolloutMs} ms under load (${duringRollout} requests while rolling)\n` +
            `${figures('clients choosing an endpoint per request', reports.endpoints)}\n` +
            `${figures('keep-alive clients through the kube-proxy', reports.kubeProxy)}\n` +
            `the rollout, pod by pod:\n${timeline.join('\n')}`,
        );
      } finally {
        await loads.endpoints.abandon();
        await loads.kubeProxy.abandon();
      }
    },
  );

  it('clients choosing one of the current endpoints per request: none failed, each update applied once', async () => {
    const report = reports.endpoints;
    expect(report, 'the rollout test did not finish').toBeDefined();
    expect(report!.failures).toEqual([]);
    expect(report!.firstTryFailures).toBe(0);
    await checkCounters(report!);
  });

  it('keep-alive clients through a kube-proxy: none failed, each update applied once', async () => {
    const report = reports.kubeProxy;
    expect(report, 'the rollout test did not finish').toBeDefined();
    // Exactly once holds whatever the failures: a retry with the same idempotency key is never applied twice.
    await checkCounters(report!);
    // A pooled connection stays with its pod through the shutdown delay: only the pod's `Connection: close` makes the
    // client give it up before the listeners close. One closed under the client fails the request it was sending
    // (UND_ERR_SOCKET); one still open once the listener closes answers 503.
    expect(report!.failures).toEqual([]);
    expect(report!.firstTryFailures).toBe(0);
  });
});
