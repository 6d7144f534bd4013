import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorHandle } from '../../../../operator/src/operator.ts';
import { CONFIG_HASH_ANNOTATION, SERVICE_ACCOUNT_HASH_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import { FakeAdmin } from '../../../support/operator/fake-admin.ts';
import {
  OPERATOR_NAMESPACE,
  applyAsUser,
  completeRollouts,
  installOperator,
  startTestOperator,
} from '../../../support/operator/operator-env.ts';
import { kubectl, startHarness, type Harness } from '../../fake-kube/harness.ts';

/*
 * Two replicas of the real operator against the fake API server (RBAC of the generated manifests), competing for the
 * Lease: one writes, the other takes over when it goes. Through the API server, not an in-memory model: a referenced
 * Secret's change rolls the runtime pods (config hash on the pod template), and deleting a Cluster lets the API
 * server's garbage collector remove everything it owns, leaving the user's Secrets alone.
 */

const NS = 'rollout';
const API = 'ratchet.dev/v1alpha1';
const LEASE_ENV = {
  RATCHET_OPERATOR_LEASE_DURATION: '3s',
  RATCHET_OPERATOR_RENEW_DEADLINE: '2s',
  RATCHET_OPERATOR_RETRY_PERIOD: '1s',
};

let h: Harness;
let stopRollouts: () => void;
const replicas = new Map<string, OperatorHandle>();

function dsn(host: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'main-db', namespace: NS },
    stringData: { uri: `postgres://ratchet:secret@${host}:5432/ratchet` },
  };
}

function cluster(replicaCount: number, extra: Record<string, unknown> = {}): object {
  return {
    apiVersion: API,
    kind: 'Cluster',
    metadata: { name: 'main', namespace: NS },
    spec: {
      image: 'ghcr.io/ratchet-dev/ratchet-runtime:dev',
      replicas: replicaCount,
      database: { secretRef: { name: 'main-db' } },
      ...extra,
    },
  };
}

interface PodTemplate {
  metadata?: { annotations?: Record<string, string> };
  spec: {
    serviceAccountName?: string;
    automountServiceAccountToken?: boolean;
    volumes?: { name: string; secret?: { secretName: string } }[];
  };
}

interface ClusterStatusView {
  conditions?: { type: string; status: string; reason: string; message: string }[];
  endpoints?: Record<string, string>;
}

function clusterStatus(): ClusterStatusView | undefined {
  return h.fake.get({ apiVersion: API, kind: 'Cluster', namespace: NS, name: 'main' })?.['status'] as
    ClusterStatusView | undefined;
}

function condition(type: string): { status: string; reason: string; message: string } | undefined {
  return clusterStatus()?.conditions?.find((c) => c.type === type);
}

/** A kubernetes.io/tls Secret as cert-manager writes it; `serial` stands for one issuance. */
function tlsSecret(name: string, serial: number): object {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: { name, namespace: NS },
    stringData: { 'tls.crt': `CERT-${serial}`, 'tls.key': `KEY-${serial}`, 'ca.crt': 'ISSUING-CA' },
  };
}

function podTemplate(): PodTemplate | undefined {
  const d = h.fake.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'main' });
  return (d?.['spec'] as { template: PodTemplate } | undefined)?.template;
}

function runtimeServiceAccount(): { annotations?: Record<string, string>; automount: boolean | undefined } | undefined {
  const sa = h.fake.get({ apiVersion: 'v1', kind: 'ServiceAccount', namespace: NS, name: 'main' });
  if (sa === undefined) return undefined;
  return {
    ...(sa.metadata.annotations === undefined ? {} : { annotations: sa.metadata.annotations }),
    automount: sa['automountServiceAccountToken'] as boolean | undefined,
  };
}

function runtimeDeployment(): { replicas?: number; hash?: string } | undefined {
  const d = h.fake.get({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'main' });
  if (d === undefined) return undefined;
  const spec = d['spec'] as { replicas?: number; template: { metadata?: { annotations?: Record<string, string> } } };
  return {
    ...(spec.replicas === undefined ? {} : { replicas: spec.replicas }),
    ...(spec.template.metadata?.annotations?.[CONFIG_HASH_ANNOTATION] === undefined
      ? {}
      : { hash: spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION] }),
  };
}

function leaders(): string[] {
  return [...replicas].filter(([, r]) => r.isLeading()).map(([name]) => name);
}

async function waitReady(timeout = '30s'): Promise<void> {
  const res = await kubectl(h, ['wait', '-n', NS, '--for=condition=Ready', 'rtc/main', `--timeout=${timeout}`], 60_000);
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
}

beforeAll(async () => {
  h = await startHarness({ rbac: true, namespaces: [OPERATOR_NAMESPACE, NS] });
  await installOperator(h);
  stopRollouts = completeRollouts(h.fake);
  const admin = new FakeAdmin();
  for (const name of ['operator-a', 'operator-b']) {
    replicas.set(name, await startTestOperator(h, { name, admin: admin.factory, env: LEASE_ENV }));
  }
}, 60_000);

afterAll(async () => {
  stopRollouts?.();
  for (const r of replicas.values()) await r.stop(5_000);
  await h?.stop();
});

describe('Cluster controller, two operator replicas, against the fake API server', () => {
  it('one replica holds the Lease and is the only writer', async () => {
    await expect.poll(leaders, { timeout: 15_000 }).toHaveLength(1);
    const [leader] = leaders();
    const lease = h.fake.get({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      namespace: OPERATOR_NAMESPACE,
      name: 'ratchet-operator-leader',
    });
    expect((lease?.['spec'] as { holderIdentity?: string }).holderIdentity).toBe(leader);

    await applyAsUser(h, [dsn('db-one.rollout.svc'), cluster(1)]);
    await waitReady();
    expect(leaders()).toEqual([leader]);
    // Every event comes from the leader: the standby's informers ran, its reconciles did not.
    const instances = new Set(h.fake.list('events.k8s.io/v1', 'Event', NS).map((e) => e['reportingInstance']));
    expect([...instances]).toEqual([leader]);
  });

  it('rolls the runtime pods when the referenced DSN Secret changes', async () => {
    const before = runtimeDeployment()?.hash;
    expect(before).toMatch(/\S/);
    await applyAsUser(h, [dsn('db-two.rollout.svc')]);
    await expect.poll(() => runtimeDeployment()?.hash, { timeout: 15_000 }).not.toBe(before);
    const status = () =>
      h.fake.get({ apiVersion: API, kind: 'Cluster', namespace: NS, name: 'main' })?.['status'] as
        { configHash?: string } | undefined;
    await expect.poll(() => status()?.configHash, { timeout: 15_000 }).toBe(runtimeDeployment()?.hash);
    await waitReady();
  });

  it('a standby takes over when the leader stops, and reconciles the next change', async () => {
    const [leader] = leaders();
    await replicas.get(leader!)!.stop(5_000);
    replicas.delete(leader!);
    await expect.poll(leaders, { timeout: 15_000 }).toHaveLength(1);

    await applyAsUser(h, [cluster(3)]);
    await expect.poll(() => runtimeDeployment()?.replicas, { timeout: 15_000 }).toBe(3);
    await waitReady();
  });

  it("keeps the runtime pods' ServiceAccount annotations (IRSA) in sync and rolls the pods when they change", async () => {
    const IRSA = 'eks.amazonaws.com/role-arn';
    const irsa = (role: string) => ({
      serviceAccount: { annotations: { [IRSA]: `arn:aws:iam::123456789012:role/${role}` } },
    });
    await applyAsUser(h, [cluster(3, irsa('ratchet-runtime'))]);
    await expect
      .poll(() => runtimeServiceAccount()?.annotations?.[IRSA], { timeout: 15_000 })
      .toBe('arn:aws:iam::123456789012:role/ratchet-runtime');
    expect(runtimeServiceAccount()?.automount).toBe(false);
    await expect
      .poll(() => podTemplate()?.metadata?.annotations?.[SERVICE_ACCOUNT_HASH_ANNOTATION], { timeout: 15_000 })
      .toMatch(/^[0-9a-f]{16}$/);
    const first = podTemplate()!;
    expect(first.spec).toMatchObject({ serviceAccountName: 'main', automountServiceAccountToken: false });
    await waitReady();

    // Another role: the ServiceAccount is updated in place and the pods roll, so that the webhook injects it.
    await applyAsUser(h, [cluster(3, irsa('ratchet-runtime-2'))]);
    await expect
      .poll(() => runtimeServiceAccount()?.annotations?.[IRSA], { timeout: 15_000 })
      .toBe('arn:aws:iam::123456789012:role/ratchet-runtime-2');
    await expect
      .poll(() => podTemplate()?.metadata?.annotations?.[SERVICE_ACCOUNT_HASH_ANNOTATION], { timeout: 15_000 })
      .not.toBe(first.metadata?.annotations?.[SERVICE_ACCOUNT_HASH_ANNOTATION]);
    await waitReady();

    // Gone from the spec: gone from the ServiceAccount (server-side apply drops what the operator no longer sets).
    await applyAsUser(h, [cluster(3)]);
    await expect.poll(() => runtimeServiceAccount()?.annotations?.[IRSA], { timeout: 15_000 }).toBeUndefined();
    await expect
      .poll(() => podTemplate()?.metadata?.annotations?.[SERVICE_ACCOUNT_HASH_ANNOTATION], { timeout: 15_000 })
      .toBeUndefined();
    await waitReady();
  });

  it('serves TLS from a kubernetes.io/tls Secret: waits for it, restarts nothing on renewal, rolls on a new name', async () => {
    const tls = (name: string, extra: Record<string, unknown> = {}) => ({ tls: { secretRef: { name } }, ...extra });
    const tlsVolume = () => podTemplate()?.spec.volumes?.find((v) => v.name === 'tls')?.secret?.secretName;
    await applyAsUser(h, [cluster(3, tls('main-tls'))]);
    await expect.poll(() => condition('Ready')?.reason, { timeout: 15_000 }).toBe('TLSSecretNotFound');
    expect(condition('Ready')?.message).toBe(
      'waiting for Secret main-tls (spec.tls.secretRef) with tls.crt and tls.key',
    );
    expect(condition('Stalled')?.status).toBe('False');
    expect(tlsVolume()).toBeUndefined();

    await applyAsUser(h, [tlsSecret('main-tls', 1)]);
    await expect.poll(tlsVolume, { timeout: 15_000 }).toBe('main-tls');
    await waitReady();
    expect(clusterStatus()?.endpoints).toMatchObject({
      ingress: 'https://main-ingress.rollout.svc:8080',
      admin: 'https://main-admin.rollout.svc:9070',
    });
    const template = structuredClone(podTemplate());

    // A renewal, then a change that touches no pod: once that shows, a pass after the renewal has run.
    await applyAsUser(h, [tlsSecret('main-tls', 2)]);
    const marker = { services: { ingress: { annotations: { 'example.com/after-renewal': 'seen' } } } };
    await applyAsUser(h, [cluster(3, tls('main-tls', marker))]);
    const ingressAnnotation = () =>
      h.fake.get({ apiVersion: 'v1', kind: 'Service', namespace: NS, name: 'main-ingress' })?.metadata.annotations?.[
        'example.com/after-renewal'
      ];
    await expect.poll(ingressAnnotation, { timeout: 15_000 }).toBe('seen');
    expect(podTemplate()).toEqual(template);

    await applyAsUser(h, [tlsSecret('main-tls-v2', 3), cluster(3, tls('main-tls-v2', marker))]);
    await expect.poll(tlsVolume, { timeout: 15_000 }).toBe('main-tls-v2');
    await waitReady();
  });

  it('deleting the Cluster garbage-collects what it owns and leaves the DSN Secret', async () => {
    const owned = (): string[] =>
      [
        ['apps/v1', 'Deployment'],
        ['v1', 'Service'],
        ['v1', 'ConfigMap'],
        ['v1', 'Secret'],
        ['v1', 'ServiceAccount'],
        ['policy/v1', 'PodDisruptionBudget'],
      ].flatMap(([apiVersion, kind]) =>
        h.fake
          .list(apiVersion!, kind!, NS)
          .filter((o) => (o.metadata.ownerReferences ?? []).some((r) => r.kind === 'Cluster'))
          .map((o) => `${kind}/${o.metadata.name}`),
      );
    expect(owned()).toEqual(
      expect.arrayContaining(['Deployment/main', 'ConfigMap/main-config', 'Secret/main-token', 'Service/main-admin']),
    );
    const del = await kubectl(h, ['delete', '-n', NS, 'rtc/main', '--timeout=30s'], 45_000);
    expect(del.code, del.stderr).toBe(0);
    await expect.poll(owned, { timeout: 15_000 }).toEqual([]);
    expect(h.fake.get({ apiVersion: 'v1', kind: 'Secret', namespace: NS, name: 'main-db' })).toBeDefined();
  });
});
