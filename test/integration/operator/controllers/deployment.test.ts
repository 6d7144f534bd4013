import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminApiError } from '../../../../operator/src/admin-client/types.ts';
import {
  issueToken,
  parseSigningKey,
  generateSigningKeyPem,
} from '../../../../operator/src/controllers/cluster/material.ts';
import type { OperatorHandle } from '../../../../operator/src/operator.ts';
import { FakeAdmin } from '../../../support/operator/fake-admin.ts';
import {
  applyAsUser,
  completeRollouts,
  installOperator,
  startTestOperator,
} from '../../../support/operator/operator-env.ts';
import { kubectl, startHarness, type Harness } from '../../fake-kube/harness.ts';

/*
 * The real operator (client-node, informers, work queues, the three controllers, the real event recorder) as its own
 * service account against the fake API server with the generated RBAC; the runtime's admin API is the in-memory
 * FakeAdmin and apps/v1 Deployments are reported rolled out by a stand-in. What a user sees through kubectl: waits,
 * printer columns, events; and what must hold under faults of the API server and the admin API.
 */

const NS = 'apps';
const API = 'ratchet.dev/v1alpha1';
const V1 = 'http://greeter-v1.apps.svc:9080/';
const V2 = 'http://greeter-v2.apps.svc:9080/';
const V3 = 'http://greeter-v3.apps.svc:9080/';
const V4 = 'http://greeter-v4.apps.svc:9080/';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

let h: Harness;
let admin: FakeAdmin;
let operator: OperatorHandle;
let stopRollouts: () => void;
let keyPem: string;

function secret(name: string, data: Record<string, string>): object {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NS }, stringData: data };
}

function deployment(name: string, uri: string, extra: Record<string, unknown> = {}): object {
  return {
    apiVersion: API,
    kind: 'Deployment',
    metadata: { name, namespace: NS },
    spec: { clusterRef: { name: 'main' }, endpoint: { http: { uri } }, ...extra },
  };
}

function statusOf(kind: string, name: string): { deploymentId?: string; conditions?: Condition[] } {
  return h.fake.get({ apiVersion: API, kind, namespace: NS, name })?.['status'] ?? {};
}

function condition(kind: string, name: string, type: string): Condition | undefined {
  return statusOf(kind, name).conditions?.find((c) => c.type === type);
}

async function waitReady(resource: string, timeout = '30s'): Promise<void> {
  const res = await kubectl(h, ['wait', '-n', NS, '--for=condition=Ready', resource, `--timeout=${timeout}`], 60_000);
  expect(res.stderr, `${resource} did not become Ready`).toBe('');
  expect(res.code).toBe(0);
}

/** events.k8s.io Events about one object: reason → [how many Event objects, total occurrences]. */
function eventsAbout(kind: string, name: string): Map<string, { objects: number; occurrences: number }> {
  const out = new Map<string, { objects: number; occurrences: number }>();
  for (const e of h.fake.list('events.k8s.io/v1', 'Event', NS)) {
    const regarding = e['regarding'] as { kind?: string; name?: string } | undefined;
    if (regarding?.kind !== kind || regarding.name !== name) continue;
    const reason = e['reason'] as string;
    const count = (e['series'] as { count?: number } | undefined)?.count ?? 1;
    const seen = out.get(reason) ?? { objects: 0, occurrences: 0 };
    out.set(reason, { objects: seen.objects + 1, occurrences: seen.occurrences + count });
  }
  return out;
}

beforeAll(async () => {
  h = await startHarness({ rbac: true, namespaces: ['ratchet-system', NS] });
  await installOperator(h);
  stopRollouts = completeRollouts(h.fake);
  admin = new FakeAdmin();
  for (const uri of [V1, V2, V3, V4]) admin.serve(uri, { Greeter: ['greet'] });
  // Long resyncs: every convergence below must come from a watch event or a requeue, not from a periodic re-list.
  operator = await startTestOperator(h, { admin: admin.factory, env: { RATCHET_OPERATOR_RESYNC_PERIOD: '10m' } });

  // A Cluster with the user's own signing key and access token (spec.auth.tokenSecret), and a Kafka cluster.
  keyPem = await generateSigningKeyPem();
  const token = await issueToken(parseSigningKey(keyPem), 'main', new Date());
  await applyAsUser(h, [
    secret('main-db', { uri: 'postgres://ratchet:secret@db.apps.svc:5432/ratchet' }),
    secret('main-key', { 'private.pem': keyPem }),
    secret('admin-token', { token }),
    {
      apiVersion: API,
      kind: 'Cluster',
      metadata: { name: 'main', namespace: NS },
      spec: {
        image: 'ghcr.io/ratchet-dev/ratchet-runtime:dev',
        replicas: 1,
        database: { secretRef: { name: 'main-db' } },
        auth: { signingKeySecret: 'main-key', tokenSecret: 'admin-token' },
        kafka: { clusters: [{ name: 'events', bootstrapServers: ['kafka.apps.svc:9092'] }] },
      },
    },
  ]);
  await waitReady('clusters.ratchet.dev/main');
  expect(h.fake.get({ apiVersion: API, kind: 'Cluster', namespace: NS, name: 'main' })?.['status']).toMatchObject({
    tokenSecret: 'admin-token',
  });
}, 120_000);

afterAll(async () => {
  stopRollouts?.();
  await operator?.stop(5_000);
  await h?.stop();
});

describe('Deployment and Subscription controllers against the fake API server', () => {
  it('wakes a Deployment when the token Secret its Cluster names in spec.auth.tokenSecret changes', async () => {
    // The runtime refuses the token: a permanent-looking answer, so the Deployment stalls and is not requeued.
    let refusing = true;
    admin.failNext(
      (op) => refusing && op === 'registerDeployment',
      () => new AdminApiError(401, 'invalid bearer token'),
      1_000,
    );
    await applyAsUser(h, [deployment('greeter', V1)]);
    await expect
      .poll(() => condition('Deployment', 'greeter', 'Stalled'), { timeout: 20_000 })
      .toMatchObject({ status: 'True', reason: 'RegistrationRejected' });
    // The pass the finalizer's own watch event causes is refused too.
    await expect.poll(() => admin.calls('registerDeployment').length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    const attempts = admin.calls('registerDeployment').length;
    refusing = false;

    // The user rotates the token in their own Secret: only the Secret watch can tell the Deployment.
    const rotated = await issueToken(parseSigningKey(keyPem), 'main', new Date(Date.now() + 2_000));
    await applyAsUser(h, [secret('admin-token', { token: rotated })]);
    await waitReady('deployments.ratchet.dev/greeter');
    expect(admin.latestOf('Greeter')).toBe(statusOf('Deployment', 'greeter').deploymentId);
    expect(admin.calls('registerDeployment').length).toBeGreaterThan(attempts);
    expect(admin.calls('registerDeployment').at(-1)?.target?.token).toBe(rotated);
  });

  it('kubectl waits for a Subscription to be Ready and prints the columns of all three kinds', async () => {
    await applyAsUser(h, [
      {
        apiVersion: API,
        kind: 'Subscription',
        metadata: { name: 'orders', namespace: NS },
        spec: {
          clusterRef: { name: 'main' },
          source: { kafka: { cluster: 'events', topic: 'orders' } },
          sink: { service: { name: 'Greeter', handler: 'greet' } },
        },
      },
    ]);
    await waitReady('subscriptions.ratchet.dev/orders');
    expect(admin.subscriptionList()).toHaveLength(1);

    const id = statusOf('Deployment', 'greeter').deploymentId!;
    const rtd = await kubectl(h, ['get', 'rtd', '-n', NS]);
    expect(rtd.stdout).toMatch(/NAME\s+READY\s+ENDPOINT\s+DEPLOYMENT ID\s+DRAINING\s+AGE/);
    expect(rtd.stdout).toMatch(new RegExp(`greeter\\s+True\\s+${V1.replaceAll('.', '\\.')}\\s+${id}\\s`));
    const rts = await kubectl(h, ['get', 'rts', '-n', NS]);
    expect(rts.stdout).toMatch(/NAME\s+READY\s+SOURCE\s+SINK\s+ID\s+AGE/);
    expect(rts.stdout).toMatch(/orders\s+True\s+kafka:\/\/events\/orders\s+service:\/\/Greeter\/greet\s+sub_/);
    const rtc = await kubectl(h, ['get', 'rtc', '-n', NS]);
    expect(rtc.stdout).toMatch(/NAME\s+READY\s+REPLICAS\s+VERSION\s+AGE/);
    expect(rtc.stdout).toMatch(/main\s+True\s+1\s+\S+/);
    const all = await kubectl(h, ['get', 'ratchet', '-n', NS, '-o', 'name']);
    expect(all.stdout.split('\n').filter(Boolean).sort()).toEqual([
      'cluster.ratchet.dev/main',
      'deployment.ratchet.dev/greeter',
      'subscription.ratchet.dev/orders',
    ]);
  });

  it('records events on transitions only, not on every reconcile', async () => {
    const registered = admin.calls('listDeployments').length;
    const before = {
      deployment: eventsAbout('Deployment', 'greeter'),
      cluster: eventsAbout('Cluster', 'main'),
    };
    expect(before.deployment.get('Registered')?.objects).toBeGreaterThanOrEqual(1);
    // Metadata edits reconcile the Deployment (and a Cluster edit the Cluster) without changing anything.
    for (let i = 0; i < 3; i++) {
      for (const resource of ['rtd/greeter', 'rtc/main']) {
        const res = await kubectl(h, ['annotate', '-n', NS, resource, `touched=${i}`, '--overwrite']);
        expect(res.code, res.stderr).toBe(0);
      }
    }
    await expect.poll(() => admin.calls('listDeployments').length, { timeout: 10_000 }).toBeGreaterThan(registered + 2);
    await expect.poll(() => admin.calls('version').length, { timeout: 10_000 }).toBeGreaterThan(3);
    expect(eventsAbout('Deployment', 'greeter')).toEqual(before.deployment);
    expect(eventsAbout('Cluster', 'main')).toEqual(before.cluster);
  });

  it('converges after failed status writes, dropped watches and admin API errors', async () => {
    h.fake.failNext({
      match: (r) => r.group === 'ratchet.dev' && r.resource === 'deployments' && r.subresource === 'status',
      status: 500,
      count: 3,
    });
    admin.failNext('registerDeployment', () => new AdminApiError(503, 'unavailable'), 2);
    await applyAsUser(h, [deployment('faulty', V2)]);
    expect(h.fake.disconnectWatches({ resource: 'deployments', abrupt: true })).toBeGreaterThan(0);
    h.fake.failNext({ verb: 'watch', resource: 'deployments', status: 410 });
    await waitReady('deployments.ratchet.dev/faulty');
    const id = statusOf('Deployment', 'faulty').deploymentId!;
    expect(admin.deploymentById(id)?.uri).toBe(V2);
    // One registration for the endpoint, whatever was retried.
    expect(admin.deploymentIds().filter((d) => admin.deploymentById(d)?.uri === V2)).toEqual([id]);

    // A later spec change still arrives over the re-established watch.
    await applyAsUser(h, [deployment('faulty', V3)]);
    await expect.poll(() => statusOf('Deployment', 'faulty').deploymentId, { timeout: 20_000 }).not.toBe(id);
    await waitReady('deployments.ratchet.dev/faulty');
  });

  it('deletes a paused Deployment under the Drain policy: pausing never blocks the finalizer', async () => {
    await applyAsUser(h, [deployment('paused', V4, { retirement: { deletionPolicy: 'Drain' } })]);
    await waitReady('deployments.ratchet.dev/paused');
    const id = statusOf('Deployment', 'paused').deploymentId!;
    const res = await kubectl(h, ['annotate', '-n', NS, 'rtd/paused', 'ratchet.dev/reconcile=paused']);
    expect(res.code, res.stderr).toBe(0);
    await expect
      .poll(() => condition('Deployment', 'paused', 'Reconciling')?.reason, { timeout: 10_000 })
      .toBe('ReconciliationPaused');

    const del = await kubectl(h, ['delete', '-n', NS, 'rtd/paused', '--timeout=30s'], 45_000);
    expect(del.code, del.stderr).toBe(0);
    expect(h.fake.get({ apiVersion: API, kind: 'Deployment', namespace: NS, name: 'paused' })).toBeUndefined();
    expect(admin.deploymentIds()).not.toContain(id);
  });

  it("a Lambda Deployment a runtime refuses with 501 is Stalled with the runtime's message; a new runtime image registers it", async () => {
    const arn = 'arn:aws:lambda:eu-central-1:123456789012:function:greeter:1';
    const role = 'arn:aws:iam::123456789012:role/ratchet-invoker';
    admin.serve(arn, { Greeter: ['greet'] });
    let supported = false;
    admin.failNext(
      (op) => !supported && op === 'registerDeployment',
      () => new AdminApiError(501, 'Lambda deployments are not supported by this version of Ratchet'),
      1_000,
    );
    await applyAsUser(h, [
      {
        apiVersion: API,
        kind: 'Deployment',
        metadata: { name: 'lambda', namespace: NS },
        spec: { clusterRef: { name: 'main' }, endpoint: { lambda: { arn, assumeRoleArn: role } } },
      },
    ]);
    await expect
      .poll(() => condition('Deployment', 'lambda', 'Stalled'), { timeout: 20_000 })
      .toMatchObject({ status: 'True', reason: 'NotImplemented' });
    expect(condition('Deployment', 'lambda', 'Stalled')?.message).toContain(
      'admin API HTTP 501: Lambda deployments are not supported by this version of Ratchet',
    );
    expect(condition('Deployment', 'lambda', 'Ready')).toMatchObject({ status: 'False', reason: 'NotImplemented' });
    await expect.poll(() => eventsAbout('Deployment', 'lambda').get('NotImplemented')?.objects).toBe(1);

    // The runtime is upgraded to one that supports Lambda: the Cluster's change wakes the stalled Deployment.
    supported = true;
    const patch = JSON.stringify({ spec: { image: 'ghcr.io/ratchet-dev/ratchet-runtime:dev-lambda' } });
    const res = await kubectl(h, ['patch', '-n', NS, 'rtc/main', '--type=merge', '-p', patch]);
    expect(res.code, res.stderr).toBe(0);
    await waitReady('deployments.ratchet.dev/lambda', '60s');
    const id = statusOf('Deployment', 'lambda').deploymentId!;
    expect(admin.deploymentById(id)).toMatchObject({ arn, assume_role_arn: role });
    expect(condition('Deployment', 'lambda', 'Stalled')?.status).toBe('False');
  });
});
