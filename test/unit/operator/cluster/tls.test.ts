import { describe, expect, it } from 'vitest';
import type { ClusterSpec } from '../../../../operator/src/api/v1alpha1/index.ts';
import { resolveAdminTarget } from '../../../../operator/src/controllers/shared/cluster-target.ts';
import { CONFIG_HASH_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import type { DeploymentObject } from '../../../../operator/src/specs/objects.ts';
import { NAMESPACE } from './fixtures.ts';
import { Harness, ref } from './harness.ts';

/*
 * spec.tls through the Cluster controller: Secrets waited for (never Stalled), renewals that restart nothing, renames
 * that roll the pods, https endpoints, and the TLS options of the operator's own admin API calls (trust and client
 * certificate). PEM contents are opaque here; the TLS handshake itself is tested in the admin client's transport tests.
 */

const PAIR = { 'tls.crt': 'SERVER-CERT-1', 'tls.key': 'SERVER-KEY-1' };
const DSN = { uri: 'postgres://ratchet:pw@db.example:5432/ratchet' };

function runtimeDeployment(h: Harness): DeploymentObject {
  return h.kube.peek(ref.deployment()) as DeploymentObject;
}

/** A Cluster with TLS, its DSN and TLS Secrets in place, pods ready and the admin API answering. */
async function readyWithTls(
  tls: NonNullable<ClusterSpec['tls']>,
  secrets: Record<string, Record<string, string>>,
): Promise<Harness> {
  const h = new Harness({ tls });
  h.putSecret('pg-dsn', DSN);
  for (const [name, data] of Object.entries(secrets)) h.putSecret(name, data);
  await h.reconcile();
  h.runtimePodsReady();
  h.advance(1000);
  await h.reconcile();
  expect(h.condition('Ready')).toMatchObject({ status: 'True' });
  return h;
}

describe('TLS Secrets', () => {
  it('are waited for, not Stalled: first the Secret, then each key; the pods are built once all are there', async () => {
    const h = new Harness({
      tls: { secretRef: { name: 'ratchet-tls' }, clientAuth: { caSecretRef: { name: 'clients-ca', key: 'bundle' } } },
    });
    h.putSecret('pg-dsn', DSN);
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({
      status: 'False',
      reason: 'TLSSecretNotFound',
      message: 'waiting for Secret ratchet-tls (spec.tls.secretRef) with tls.crt and tls.key',
    });
    expect(h.condition('Stalled')).toMatchObject({ status: 'False' });
    expect(h.kube.peek(ref.deployment())).toBeUndefined();

    h.putSecret('ratchet-tls', { 'tls.crt': 'CERT' });
    h.advance(1000);
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({
      reason: 'TLSSecretIncomplete',
      message: 'Secret ratchet-tls (spec.tls.secretRef) has no tls.key',
    });

    h.putSecret('ratchet-tls', PAIR);
    h.advance(1000);
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({
      reason: 'TLSSecretNotFound',
      message: 'waiting for Secret clients-ca (spec.tls.clientAuth.caSecretRef) with bundle',
    });
    expect(h.condition('Stalled')).toMatchObject({ status: 'False' });
    expect(h.kube.peek(ref.deployment())).toBeUndefined();

    h.putSecret('clients-ca', { bundle: 'CLIENT-CA' });
    h.advance(1000);
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({ reason: 'RolloutInProgress' });
    const volumes = runtimeDeployment(h).spec.template.spec.volumes ?? [];
    expect(volumes.filter((v) => v.secret !== undefined).map((v) => v.name)).toEqual(['tls', 'client-ca']);
  });
});

describe('certificate rotation', () => {
  it('a renewed certificate restarts nothing; another Secret name rolls the pods', async () => {
    const h = await readyWithTls({ secretRef: { name: 'ratchet-tls' } }, { 'ratchet-tls': PAIR });
    const template = structuredClone(runtimeDeployment(h).spec.template);
    const hash = h.status().configHash;
    expect(template.metadata.annotations[CONFIG_HASH_ANNOTATION]).toBe(hash);

    // cert-manager renews: same Secret, new key pair. The kubelet updates the mounted files; the runtime re-reads them.
    h.putSecret('ratchet-tls', { 'tls.crt': 'SERVER-CERT-2', 'tls.key': 'SERVER-KEY-2', 'ca.crt': 'CA' });
    const before = h.versions();
    h.advance(1000);
    await h.reconcile();
    expect(runtimeDeployment(h).spec.template).toEqual(template);
    expect(h.status().configHash).toBe(hash);
    const { [`Secret/${NAMESPACE}/ratchet-tls`]: _renewed, ...others } = h.versions();
    expect(others).toEqual(Object.fromEntries(Object.entries(before).filter(([k]) => !k.endsWith('/ratchet-tls'))));
    // The operator's own calls trust the new material at once.
    expect(h.admin.targets.at(-1)?.tls).toEqual({ ca: 'CA' });

    h.putSecret('ratchet-tls-v2', PAIR);
    h.editSpec((s) => {
      s.tls = { secretRef: { name: 'ratchet-tls-v2' } };
    });
    await h.reconcile();
    const rolled = runtimeDeployment(h).spec.template;
    expect(rolled).not.toEqual(template);
    expect(rolled.spec.volumes).toContainEqual({
      name: 'tls',
      secret: { secretName: 'ratchet-tls-v2', defaultMode: 0o440 },
    });
  });
});

describe('status endpoints and the operator as a client', () => {
  it('publishes https:// for listeners with TLS and calls the admin API over TLS, trusting ca.crt', async () => {
    const h = await readyWithTls(
      { secretRef: { name: 'ratchet-tls' } },
      { 'ratchet-tls': { ...PAIR, 'ca.crt': 'ISSUING-CA' } },
    );
    expect(h.status().endpoints).toEqual({
      ingress: 'https://demo-ingress.apps.svc:8080',
      admin: 'https://demo-admin.apps.svc:9070',
      introspection: 'postgres://demo-introspection.apps.svc:9071',
      observability: 'https://demo-observability.apps.svc:3100',
    });
    expect(h.admin.targets.at(-1)).toEqual({
      url: 'https://demo-admin.apps.svc:9070',
      token: h.secretText('demo-token', 'token'),
      tls: { ca: 'ISSUING-CA' },
    });
  });

  it("trusts the listener's certificate itself when its Secret has no ca.crt; a plain listener stays http", async () => {
    const h = await readyWithTls({ admin: { name: 'admin-tls' } }, { 'admin-tls': PAIR });
    expect(h.admin.targets.at(-1)).toMatchObject({
      url: 'https://demo-admin.apps.svc:9070',
      tls: { ca: 'SERVER-CERT-1' },
    });
    expect(h.status().endpoints).toMatchObject({
      ingress: 'http://demo-ingress.apps.svc:8080',
      admin: 'https://demo-admin.apps.svc:9070',
    });
  });

  it("presents the listener's own key pair under clientAuth, or operatorSecretRef's when given", async () => {
    const secrets = { 'ratchet-tls': { ...PAIR, 'ca.crt': 'CA' } };
    const own = await readyWithTls(
      { secretRef: { name: 'ratchet-tls' }, clientAuth: { caSecretRef: { name: 'ratchet-tls' } } },
      secrets,
    );
    expect(own.admin.targets.at(-1)?.tls).toEqual({ ca: 'CA', cert: 'SERVER-CERT-1', key: 'SERVER-KEY-1' });

    const given = await readyWithTls(
      {
        secretRef: { name: 'ratchet-tls' },
        clientAuth: { caSecretRef: { name: 'ratchet-tls' }, operatorSecretRef: { name: 'operator-client' } },
      },
      { ...secrets, 'operator-client': { 'tls.crt': 'OPERATOR-CERT', 'tls.key': 'OPERATOR-KEY' } },
    );
    expect(given.admin.targets.at(-1)?.tls).toEqual({ ca: 'CA', cert: 'OPERATOR-CERT', key: 'OPERATOR-KEY' });

    // clientAuth on the ingress only: the admin API is called without a client certificate.
    const ingressOnly = await readyWithTls(
      {
        secretRef: { name: 'ratchet-tls' },
        clientAuth: { caSecretRef: { name: 'ratchet-tls' }, listeners: ['ingress'] },
      },
      secrets,
    );
    expect(ingressOnly.admin.targets.at(-1)?.tls).toEqual({ ca: 'CA' });
  });

  it('gives the Deployment and Subscription controllers the same target, and waits with them for a missing Secret', async () => {
    const h = await readyWithTls(
      {
        secretRef: { name: 'ratchet-tls' },
        clientAuth: { caSecretRef: { name: 'ratchet-tls' }, operatorSecretRef: { name: 'operator-client' } },
      },
      {
        'ratchet-tls': { ...PAIR, 'ca.crt': 'CA' },
        'operator-client': { 'tls.crt': 'OPERATOR-CERT', 'tls.key': 'OPERATOR-KEY' },
      },
    );
    const resolved = await resolveAdminTarget(h.ctx, NAMESPACE, { clusterRef: { name: 'demo' } });
    expect(resolved).toMatchObject({
      ok: true,
      target: {
        url: 'https://demo-admin.apps.svc:9070',
        token: h.secretText('demo-token', 'token'),
        tls: { ca: 'CA', cert: 'OPERATOR-CERT', key: 'OPERATOR-KEY' },
      },
    });
    expect(resolved.ok && resolved.target).toEqual(h.admin.targets.at(-1));

    await h.kube.delete({ apiVersion: 'v1', kind: 'Secret', namespace: NAMESPACE, name: 'operator-client' });
    expect(await resolveAdminTarget(h.ctx, NAMESPACE, { clusterRef: { name: 'demo' } })).toMatchObject({
      ok: false,
      reason: 'ClusterNotReady',
      message:
        'TLS of the admin API of Cluster apps/demo: waiting for Secret operator-client ' +
        '(spec.tls.clientAuth.operatorSecretRef) with tls.crt and tls.key',
    });
    h.advance(1000);
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'TLSSecretNotFound' });
    expect(h.condition('AdminAPIReady')).toMatchObject({ status: 'False', reason: 'NoTLSSecret' });
    expect(h.condition('Stalled')).toMatchObject({ status: 'False' });
  });
});
