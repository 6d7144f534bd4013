import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorHandle } from '../../operator/src/operator.ts';
import { kubectl, startHarness, type Harness } from '../integration/fake-kube/harness.ts';
import { startKubelet, type Kubelet } from '../support/operator/kubelet.ts';
import { applyAsUser, installOperator, startTestOperator } from '../support/operator/operator-env.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { REPO_ROOT } from '../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';

/*
 * End to end on one machine (operator.md §3.4 D): the fake Kubernetes API server with RBAC from the generated
 * manifests, the real operator (real client-node, informers, leader election) running as the operator's service
 * account, a process-backed kubelet that runs real Ratchet runtime processes for the runtime pods, the real kubectl
 * as the user, and real SDK services. A Cluster becomes Ready, a Deployment registers a service that is then invoked
 * through the ingress with the cluster's token, a new endpoint supersedes it, and the old registration is removed
 * only once the invocation pinned to it has finished.
 */

const NS = 'shop';
const CLUSTER = 'main';

/** Awakeable ids of `hold` invocations, by the key the test passes. */
const held = new Map<string, string>();

function greeter(version: string) {
  return restate.service({
    name: 'Greeter',
    handlers: {
      greet: async (_ctx: restate.Context, name: string) => `${version}: hello ${name}`,
      hold: async (ctx: restate.Context, key: string) => {
        const { id, promise } = ctx.awakeable<string>();
        await ctx.run('record', () => {
          held.set(key, id);
        });
        return `${version} released with ${await promise}`;
      },
    },
  });
}

describe('operator end to end: fake API server, process-backed kubelet, real runtimes', () => {
  let db: TestDatabase;
  let h: Harness;
  let kubelet: Kubelet;
  let operator: OperatorHandle;
  let v1: SdkEndpoint;
  let v2: SdkEndpoint;
  let token = '';

  const apply = (objects: object[]): Promise<void> => applyAsUser(h, objects);

  async function waitReady(resource: string, timeout = '180s'): Promise<void> {
    const res = await kubectl(
      h,
      ['wait', '-n', NS, '--for=condition=Ready', resource, `--timeout=${timeout}`],
      200_000,
    );
    expect(res.stderr, `${resource} did not become Ready\n${diagnostics()}`).toBe('');
    expect(res.code).toBe(0);
  }

  function diagnostics(): string {
    const objects = h.fake
      .list('ratchet.dev/v1alpha1', 'Cluster', NS)
      .concat(h.fake.list('ratchet.dev/v1alpha1', 'Deployment', NS));
    const pods = kubelet.pods().map((p) => `${p.name} ready=${p.ready}\n${p.output.slice(-3000)}`);
    return `${JSON.stringify(
      objects.map((o) => ({ name: o.metadata.name, status: o['status'] })),
      null,
      1,
    )}\n${pods.join('\n')}`;
  }

  function url(service: string, port: number): string {
    const u = kubelet.serviceUrl(NS, service, port);
    expect(u).not.toBe('http://127.0.0.1:9');
    return u;
  }

  async function ingress(path: string, body: unknown, auth = true): Promise<Response> {
    return fetch(`${url(`${CLUSTER}-ingress`, 8080)}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
  }

  function deploymentStatus(): Record<string, unknown> {
    return (h.fake.get({ apiVersion: 'ratchet.dev/v1alpha1', kind: 'Deployment', namespace: NS, name: 'greeter' })?.[
      'status'
    ] ?? {}) as Record<string, unknown>;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await startHarness({ rbac: true, namespaces: ['ratchet-system', NS] });

    // The user installs the CRDs and the operator's RBAC exactly as documented.
    await installOperator(h);

    kubelet = await startKubelet({ kubeconfigPath: h.kubeconfig, namespaces: [NS] });
    operator = await startTestOperator(h, {
      name: 'ratchet-operator-e2e',
      serviceUrl: (namespace, service, port, scheme) => kubelet.serviceUrl(namespace, service, port, scheme),
    });

    v1 = await startEndpoint({ services: [greeter('v1')], transport: 'h2' });
    v2 = await startEndpoint({ services: [greeter('v2')], transport: 'h2' });
  });

  afterAll(async () => {
    await operator?.stop(5_000);
    await kubelet?.stop();
    await v1?.close();
    await v2?.close();
    await h?.stop();
    await db?.drop();
  });

  it('brings a Cluster to Ready with real runtime pods, healthz/readyz answering', { timeout: 240_000 }, async () => {
    const health = `http://127.0.0.1:${operator.health.port}`;
    expect((await fetch(`${health}/healthz`)).status).toBe(200);
    await expect.poll(async () => (await fetch(`${health}/readyz`)).status, { timeout: 30_000 }).toBe(200);

    await apply([
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'main-db', namespace: NS }, stringData: { uri: db.url } },
      {
        apiVersion: 'ratchet.dev/v1alpha1',
        kind: 'Cluster',
        metadata: { name: CLUSTER, namespace: NS },
        spec: {
          image: 'ghcr.io/ratchet-dev/ratchet-runtime:dev',
          replicas: 1,
          database: { secretRef: { name: 'main-db' } },
        },
      },
    ]);
    await waitReady(`clusters.ratchet.dev/${CLUSTER}`, '60s');

    const cluster = h.fake.get({ apiVersion: 'ratchet.dev/v1alpha1', kind: 'Cluster', namespace: NS, name: CLUSTER })!;
    const status = cluster['status'] as { observedGeneration: number; version: string; readyReplicas: number };
    expect(status.observedGeneration).toBe(cluster.metadata.generation);
    expect(status.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(status.readyReplicas).toBe(1);
    expect(kubelet.pods().filter((p) => p.ready)).toHaveLength(1);

    const secret = h.fake.get({ apiVersion: 'v1', kind: 'Secret', namespace: NS, name: `${CLUSTER}-token` })!;
    token = Buffer.from((secret['data'] as Record<string, string>)['token']!, 'base64').toString('utf8');
    expect(token.split('.')).toHaveLength(3);
    // Managed mode: the runtime the operator provisioned refuses requests without the cluster's token.
    const admin = url(`${CLUSTER}-admin`, 9070);
    expect((await fetch(`${admin}/deployments`)).status).toBe(401);
    expect((await fetch(`${admin}/deployments`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // The observability Service answers (the store is on by default), so its endpoint is published, and it asks for the
    // same token.
    const published = (): string | undefined =>
      (
        h.fake.get({ apiVersion: 'ratchet.dev/v1alpha1', kind: 'Cluster', namespace: NS, name: CLUSTER })![
          'status'
        ] as {
          endpoints?: Record<string, string>;
        }
      ).endpoints?.['observability'];
    await expect.poll(published, { timeout: 30_000 }).toBe(`http://${CLUSTER}-observability.${NS}.svc:3100`);
    const logs = url(`${CLUSTER}-observability`, 3100);
    expect((await fetch(`${logs}/loki/api/v1/labels`)).status).toBe(401);
    const labels = await fetch(`${logs}/loki/api/v1/labels`, { headers: { authorization: `Bearer ${token}` } });
    expect(labels.status).toBe(200);
  });

  it(
    'registers a service from a Deployment resource and the service is invoked through the ingress',
    { timeout: 240_000 },
    async () => {
      await apply([
        {
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Deployment',
          metadata: { name: 'greeter', namespace: NS },
          spec: {
            clusterRef: { name: CLUSTER },
            endpoint: { http: { uri: v1.url } },
            retirement: { gracePeriod: '1s' },
          },
        },
      ]);
      await waitReady('deployments.ratchet.dev/greeter');
      expect(deploymentStatus()['deploymentId']).toMatch(/^dp_/);

      const res = await ingress('/Greeter/greet', 'Ada');
      expect(res.status).toBe(200);
      expect(await res.json()).toBe('v1: hello Ada');
      expect((await ingress('/Greeter/greet', 'Ada', false)).status).toBe(401);
    },
  );

  it(
    'supersedes the registration with a new endpoint and removes the old one only once drained',
    { timeout: 240_000 },
    async () => {
      const oldId = deploymentStatus()['deploymentId'] as string;
      // An invocation that starts on v1 is pinned to it and keeps it from being removed.
      const sent = await ingress('/Greeter/hold/send', 'pinned');
      expect(sent.status).toBe(202);
      const { invocationId } = (await sent.json()) as { invocationId: string };
      await expect.poll(() => held.get('pinned'), { timeout: 30_000 }).toBeDefined();

      await apply([
        {
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Deployment',
          metadata: { name: 'greeter', namespace: NS },
          spec: {
            clusterRef: { name: CLUSTER },
            endpoint: { http: { uri: v2.url } },
            retirement: { gracePeriod: '1s' },
          },
        },
      ]);
      await expect.poll(() => deploymentStatus()['deploymentId'], { timeout: 60_000 }).not.toBe(oldId);
      await waitReady('deployments.ratchet.dev/greeter');
      const newRes = await ingress('/Greeter/greet', 'Bo');
      expect(await newRes.json()).toBe('v2: hello Bo');

      const admin = url(`${CLUSTER}-admin`, 9070);
      const auth = { authorization: `Bearer ${token}` };
      await expect
        .poll(
          () => {
            const superseded = (deploymentStatus()['superseded'] ?? []) as {
              deploymentId: string;
              state: string;
              pendingInvocations: number;
            }[];
            return superseded.find((s) => s.deploymentId === oldId);
          },
          { timeout: 60_000 },
        )
        .toMatchObject({ state: 'Draining', pendingInvocations: 1 });
      // Well past the grace period the old registration is still there: the pinned invocation has not finished.
      await new Promise((r) => setTimeout(r, 3_000));
      expect((await fetch(`${admin}/deployments/${oldId}`, { headers: auth })).status).toBe(200);

      const resolved = await fetch(
        `${url(`${CLUSTER}-ingress`, 8080)}/restate/awakeables/${held.get('pinned')!}/resolve`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...auth },
          body: JSON.stringify('done'),
        },
      );
      expect(resolved.status).toBe(202);
      const output = await fetch(`${url(`${CLUSTER}-ingress`, 8080)}/restate/invocation/${invocationId}/attach`, {
        headers: auth,
      });
      expect(await output.json()).toBe('v1 released with done');

      await expect
        .poll(async () => (await fetch(`${admin}/deployments/${oldId}`, { headers: auth })).status, { timeout: 90_000 })
        .toBe(404);
      const latest = await fetch(`${admin}/services/Greeter`, { headers: auth });
      expect(((await latest.json()) as { deployment_id: string }).deployment_id).toBe(
        deploymentStatus()['deploymentId'],
      );
    },
  );

  it(
    'accepts the samples with kubectl apply --server-side and reconciles each of them',
    { timeout: 120_000 },
    async () => {
      // The CloudNativePG sample needs CloudNativePG's CRD, as on a real cluster with CloudNativePG installed.
      const cnpgCrd = {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'clusters.postgresql.cnpg.io' },
        spec: {
          group: 'postgresql.cnpg.io',
          scope: 'Namespaced',
          names: { kind: 'Cluster', plural: 'clusters', singular: 'cluster', listKind: 'ClusterList' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          ],
        },
      };
      h.fake.put(cnpgCrd);
      const res = await kubectl(h, ['apply', '--server-side', '-f', join(REPO_ROOT, 'operator/samples')]);
      expect(res.code, res.stderr).toBe(0);
      const samples = 'ratchet-demo';
      const kinds = ['Cluster', 'Deployment', 'Subscription'];
      const all = () => kinds.flatMap((k) => h.fake.list('ratchet.dev/v1alpha1', k, samples));
      expect(all().length).toBeGreaterThanOrEqual(7);
      // Every sample gets a status for its generation at once, with a Ready condition (kstatus, Argo CD, Flux).
      await expect
        .poll(
          () =>
            all()
              .filter((o) => {
                const status = o['status'] as
                  { observedGeneration?: number; conditions?: { type: string }[] } | undefined;
                return (
                  status?.observedGeneration !== o.metadata.generation ||
                  !status?.conditions?.some((c) => c.type === 'Ready')
                );
              })
              .map((o) => `${o.kind}/${o.metadata.name}`),
          { timeout: 60_000 },
        )
        .toEqual([]);
      // The bundled-PostgreSQL sample gets its test-only database next to the runtime Deployment.
      const bundled = h.fake
        .list('ratchet.dev/v1alpha1', 'Cluster', samples)
        .find((c) => (c['spec'] as { database: { bundled?: unknown } }).database.bundled !== undefined)!;
      await expect
        .poll(() => h.fake.list('apps/v1', 'StatefulSet', samples).map((s) => s.metadata.name), { timeout: 30_000 })
        .toContain(`${bundled.metadata.name}-postgres`);
      const table = await kubectl(h, ['get', 'clusters.ratchet.dev', '-n', samples]);
      expect(table.stdout).toMatch(/NAME\s+READY\s+REPLICAS\s+VERSION\s+AGE/);
      // Nothing runs the sample pods here, so Deployments wait for their Cluster, saying so.
      const waiting = h.fake.list('ratchet.dev/v1alpha1', 'Deployment', samples)[0]!;
      const ready = (
        waiting['status'] as { conditions: { type: string; status: string; reason: string }[] }
      ).conditions.find((c) => c.type === 'Ready');
      expect(ready).toMatchObject({ status: 'False' });
      const del = await kubectl(h, ['delete', 'namespace', samples, '--timeout=60s'], 90_000);
      expect(del.code, del.stderr).toBe(0);
    },
  );

  it('deletes the Deployment through its finalizer, then the Cluster and its pods', { timeout: 240_000 }, async () => {
    const id = deploymentStatus()['deploymentId'] as string;
    const res = await kubectl(h, ['delete', '-n', NS, 'deployments.ratchet.dev/greeter', '--timeout=60s'], 90_000);
    expect(res.code, res.stderr).toBe(0);
    const admin = url(`${CLUSTER}-admin`, 9070);
    expect((await fetch(`${admin}/deployments/${id}`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(
      404,
    );

    const del = await kubectl(h, ['delete', '-n', NS, `clusters.ratchet.dev/${CLUSTER}`, '--timeout=60s'], 90_000);
    expect(del.code, del.stderr).toBe(0);
    expect(h.fake.list('apps/v1', 'Deployment', NS)).toHaveLength(0);
    await expect.poll(() => kubelet.pods().length, { timeout: 30_000 }).toBe(0);
  });
});
