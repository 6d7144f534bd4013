import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { REQUEUE_MS } from '../../../../operator/src/controllers/cluster/index.ts';
import { KubeApiError } from '../../../../operator/src/kube/port.ts';
import { CONFIG_HASH_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import type { DeploymentObject } from '../../../../operator/src/specs/objects.ts';
import { TokenVerifier } from '../../../../runtime/src/auth/verifier.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { NAMESPACE } from './fixtures.ts';
import { Harness, observabilityStatus, ref, START } from './harness.ts';

function runtimeDeployment(h: Harness): DeploymentObject {
  return h.kube.peek(ref.deployment()) as DeploymentObject;
}

function podHash(h: Harness): string | undefined {
  return runtimeDeployment(h).spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION];
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

describe('a new Cluster', () => {
  it('waits for its DSN Secret, then rolls out, then reports Ready with the runtime version', async () => {
    const h = new Harness();
    let result = await h.reconcile();

    expect(h.status().observedGeneration).toBe(1);
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'DatabaseNotReady' });
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(h.condition('DatabaseReady')?.message).toContain('pg-dsn');
    expect(h.condition('Reconciling')).toMatchObject({ status: 'True' });
    expect(h.condition('Stalled')).toMatchObject({ status: 'False' });
    expect(result.requeueAfterMs).toBe(REQUEUE_MS.notReady);
    // What does not depend on the database exists already; the pods wait, since their DSN Secret would be missing.
    expect(h.kube.peek(ref.service('demo-ingress'))).toBeDefined();
    expect(h.kube.peek(ref.service('demo-admin'))).toBeDefined();
    expect(h.kube.peek(ref.service('demo-metrics'))).toBeDefined();
    expect(h.kube.peek(ref.secret('demo-signing-key'))).toBeDefined();
    expect(h.kube.peek(ref.secret('demo-token'))).toBeDefined();
    expect(h.kube.peek(ref.deployment())).toBeUndefined();
    expect(h.kube.peek(ref.configMap())).toBeUndefined();

    h.putSecret('pg-dsn', { uri: 'postgres://ratchet:pw@db.example:5432/ratchet' });
    h.advance(1000);
    result = await h.reconcile();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'True' });
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'RolloutInProgress' });
    expect(h.condition('AdminAPIReady')).toMatchObject({ status: 'False', reason: 'NoReadyPods' });
    expect(runtimeDeployment(h).spec.template.spec.containers[0]!.image).toBe('ghcr.io/example/ratchet:0.1.0');
    expect(h.admin.calls).toEqual([]);

    h.runtimePodsReady();
    h.advance(1000);
    result = await h.reconcile();
    expect(h.condition('AdminAPIReady')).toMatchObject({ status: 'True', reason: 'Reachable' });
    expect(h.condition('Ready')).toMatchObject({ status: 'True', reason: 'ClusterReady', observedGeneration: 1 });
    expect(h.condition('Reconciling')).toMatchObject({ status: 'False' });
    expect(h.status()).toMatchObject({
      replicas: 1,
      readyReplicas: 1,
      updatedReplicas: 1,
      version: '0.1.0',
      adminApiVersions: { min: 1, max: 3 },
      tokenSecret: 'demo-token',
      configHash: podHash(h),
      endpoints: {
        ingress: 'http://demo-ingress.apps.svc:8080',
        admin: 'http://demo-admin.apps.svc:9070',
        introspection: 'postgres://demo-introspection.apps.svc:9071',
        observability: 'http://demo-observability.apps.svc:3100',
      },
    });
    expect(h.admin.targets.at(-1)).toEqual({
      url: 'http://demo-admin.apps.svc:9070',
      token: h.secretText('demo-token', 'token'),
    });
    expect(result.requeueAfterMs).toBe(REQUEUE_MS.ready);
    expect(h.events.reasons()).toEqual(['SigningKeyCreated', 'TokenIssued', 'Ready']);
  });

  it('writes Ready=Unknown at once on first sight, before anything else can fail', async () => {
    const h = new Harness();
    h.kube.failNext((verb, r) => verb === 'get' && r.kind === 'Secret', new KubeApiError(500, 'InternalError', 'boom'));
    await expect(h.reconcile()).rejects.toThrow('boom');
    expect(h.status().observedGeneration).toBe(1);
    expect(h.condition('Ready')).toMatchObject({ status: 'Unknown' });
    expect(h.condition('Reconciling')).toMatchObject({ status: 'True' });
  });

  it('does nothing for a Cluster that is gone or going', async () => {
    const h = new Harness();
    h.kube.deleteAsUser(ref.cluster());
    expect(await h.reconcile()).toEqual({});
    expect(h.kube.calls.map((c) => c.verb)).toEqual(['get']);

    const going = new Harness({}, 'going');
    const c = going.kube.peek(ref.cluster('going'))!;
    going.kube.update({ ...c, metadata: { ...c.metadata, finalizers: ['example.com/hold'] } });
    going.kube.deleteAsUser(ref.cluster('going'));
    expect(await going.reconcile()).toEqual({});
    expect(going.kube.calls.map((call) => call.verb)).toEqual(['get']);
  });
});

describe('the access token', () => {
  it('verifies with the public key in the ConfigMap: aud = cluster name, role full, no expiry', async () => {
    const h = await Harness.ready();
    const token = h.secretText('demo-token', 'token')!;
    const pem = h.configMapData()['auth-keys.pem']!;
    const { payload } = await jwtVerify(token, createPublicKey(pem), { audience: 'demo' });
    expect(payload).toEqual({
      role: 'full',
      aud: 'demo',
      iss: 'ratchet-operator',
      sub: 'operator',
      iat: START.getTime() / 1000,
    });
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'EdDSA', typ: 'JWT' });
    expect(h.secretText('demo-signing-key', 'private.pem')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(runtimeDeployment(h).spec.template.spec.containers[0]!.env).toContainEqual({
      name: 'RATCHET_AUTH_KEYS_FILE',
      value: '/etc/ratchet/config/auth-keys.pem',
    });
  });

  it("is accepted by the runtime's own verifier reading the ConfigMap's keys file", async () => {
    const h = await Harness.ready();
    const dir = await mkdtemp(join(tmpdir(), 'ratchet-op-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'auth-keys.pem');
    await writeFile(file, h.configMapData()['auth-keys.pem']!);
    const verifier = await TokenVerifier.start({ keysFile: file, clusterName: 'demo', logger: silentLogger() });
    cleanups.push(() => Promise.resolve(verifier.stop()));
    await expect(verifier.verify(h.secretText('demo-token', 'token')!)).resolves.toMatchObject({ role: 'full' });
  });

  it('never regenerates the signing key; a lost token is issued again with the same key', async () => {
    const h = await Harness.ready();
    const key = h.secretText('demo-signing-key', 'private.pem');
    const publicKey = h.configMapData()['auth-keys.pem'];
    for (let i = 0; i < 3; i++) {
      h.advance(60_000);
      await h.reconcile();
    }
    h.kube.deleteAsUser(ref.secret('demo-token'));
    await h.reconcile();
    expect(h.secretText('demo-signing-key', 'private.pem')).toBe(key);
    expect(h.configMapData()['auth-keys.pem']).toBe(publicKey);
    const token = h.secretText('demo-token', 'token')!;
    await expect(jwtVerify(token, createPublicKey(publicKey!), { audience: 'demo' })).resolves.toBeDefined();
    expect(h.events.reasons().filter((r) => r === 'SigningKeyCreated')).toHaveLength(1);
  });

  it('is issued again when the user replaces the signing key to rotate it, and the pods roll', async () => {
    const h = await Harness.ready();
    const oldToken = h.secretText('demo-token', 'token');
    const oldHash = podHash(h);
    const { privateKey } = generateKeyPairSync('ed25519');
    h.putSecret('demo-signing-key', { 'private.pem': privateKey.export({ type: 'pkcs8', format: 'pem' }) as string });
    await h.reconcile();
    const token = h.secretText('demo-token', 'token')!;
    expect(token).not.toBe(oldToken);
    await expect(jwtVerify(token, createPublicKey(privateKey), { audience: 'demo' })).resolves.toBeDefined();
    expect(h.configMapData()['auth-keys.pem']).toBe(
      createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }),
    );
    expect(podHash(h)).not.toBe(oldHash);
    expect(h.events.reasons()).toContain('TokenReissued');
  });

  it("stalls with a clear message on a user's unusable signing key, and recovers once it is fixed", async () => {
    const h = new Harness({ auth: { signingKeySecret: 'my-key' } });
    h.putSecret('pg-dsn', { uri: 'postgres://x@db/x' });
    await h.reconcile();
    // Missing: waited for, not stalled (GitOps may create it a moment later).
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'SigningKeySecretNotFound' });
    expect(h.condition('Stalled')).toMatchObject({ status: 'False' });
    expect(h.kube.peek(ref.secret('demo-signing-key'))).toBeUndefined();

    h.putSecret('my-key', { 'private.pem': 'not a key' });
    const result = await h.reconcile();
    expect(h.condition('Stalled')).toMatchObject({ status: 'True', reason: 'InvalidSigningKey' });
    expect(h.condition('Stalled')?.message).toMatch(/Secret my-key key 'private.pem'.*not a PEM private key/);
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'InvalidSigningKey' });
    expect(h.condition('Reconciling')).toMatchObject({ status: 'False', reason: 'Stalled' });
    expect(result.requeueAfterMs).toBe(REQUEUE_MS.stalled);
    expect(h.kube.peek(ref.deployment())).toBeUndefined();
    expect(h.events.reasons()).toContain('Stalled');

    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    h.putSecret('my-key', { 'private.pem': privateKey.export({ type: 'pkcs8', format: 'pem' }) as string });
    await h.reconcile();
    expect(h.condition('Stalled')).toMatchObject({ status: 'False' });
    const token = h.secretText('demo-token', 'token')!;
    expect(decodeProtectedHeader(token).alg).toBe('ES256');
    await expect(jwtVerify(token, createPublicKey(privateKey), { audience: 'demo' })).resolves.toBeDefined();
    // The user's Secret is read, never written.
    expect(h.kube.calls.filter((c) => c.verb === 'apply' && c.ref.name === 'my-key')).toEqual([]);
  });

  it("stalls on a user's token the signing key does not verify", async () => {
    const h = new Harness({ auth: { tokenSecret: 'my-token' } });
    h.putSecret('pg-dsn', { uri: 'postgres://x@db/x' });
    h.putSecret('my-token', { token: 'eyJhbGciOiJFZERTQSJ9.e30.c2ln' });
    await h.reconcile();
    expect(h.condition('Stalled')).toMatchObject({ status: 'True', reason: 'InvalidToken' });
    expect(h.condition('Stalled')?.message).toContain('my-token');
    expect(h.kube.peek(ref.secret('demo-token'))).toBeUndefined();
  });

  it('is not made when auth is off: no keys file, and the admin API is called without a token', async () => {
    const h = await Harness.ready({ auth: { enabled: false } });
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
    expect(h.kube.peek(ref.secret('demo-token'))).toBeUndefined();
    expect(h.configMapData()).not.toHaveProperty('auth-keys.pem');
    const env = runtimeDeployment(h).spec.template.spec.containers[0]!.env!.map((e) => e.name);
    expect(env).not.toContain('RATCHET_AUTH_KEYS_FILE');
    expect(h.admin.targets.at(-1)).toEqual({ url: 'http://demo-admin.apps.svc:9070' });
    expect(h.status().tokenSecret).toBeUndefined();
  });
});

describe('changes', () => {
  it('rolls the pods when the config or the DSN changes, and only then', async () => {
    const h = await Harness.ready();
    const first = podHash(h);
    await h.reconcile();
    expect(podHash(h)).toBe(first);

    h.editSpec((s) => {
      s.config = { log: { level: 'debug' } };
    });
    await h.reconcile();
    const second = podHash(h);
    expect(second).not.toBe(first);
    expect(h.configMapData()['ratchet.toml']).toContain('level = "debug"');
    expect(h.status().configHash).toBe(second);
    expect(h.status().observedGeneration).toBe(2);

    h.putSecret('pg-dsn', { uri: 'postgres://ratchet:rotated@db.example:5432/ratchet' });
    await h.reconcile();
    expect(podHash(h)).not.toBe(second);
  });

  it('publishes the observability endpoint only while the listener answers, asking with the access token', async () => {
    const h = new Harness();
    h.putSecret('pg-dsn', { uri: 'postgres://ratchet:pw@db.example:5432/ratchet' });
    await h.reconcile();
    h.runtimePodsReady();
    h.advance(1000);
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
    expect(h.status().endpoints?.observability).toBe('http://demo-observability.apps.svc:3100');
    expect(observabilityStatus.authorization.at(-1)).toBe(`Bearer ${h.secretText('demo-token', 'token')}`);
    // The store switched off: nothing answers on 3100 (here: a 404 from whatever listens).
    observabilityStatus.code = 404;
    try {
      h.advance(1000);
      await h.reconcile();
      expect(h.status().endpoints).not.toHaveProperty('observability');
      expect(h.status().endpoints?.admin).toBe('http://demo-admin.apps.svc:9070');
    } finally {
      observabilityStatus.code = 200;
    }
    h.advance(1000);
    await h.reconcile();
    expect(h.status().endpoints?.observability).toBe('http://demo-observability.apps.svc:3100');
  });

  it('passes spec.observability to the pods as RATCHET_OBSERVABILITY_* (store, retention, size, level)', async () => {
    const h = new Harness({ observability: { store: false, retention: '3d', maxSize: '2 GiB', logLevel: 'debug' } });
    h.putSecret('pg-dsn', { uri: 'postgres://ratchet:pw@db.example:5432/ratchet' });
    await h.reconcile();
    const env = new Map(
      (runtimeDeployment(h).spec.template.spec.containers[0]!.env ?? []).map((e) => [e.name, e.value]),
    );
    expect(env.get('RATCHET_OBSERVABILITY_STORE')).toBe('off');
    expect(env.get('RATCHET_OBSERVABILITY_RETENTION')).toBe('3d');
    expect(env.get('RATCHET_OBSERVABILITY_MAX_SIZE')).toBe('2 GiB');
    expect(env.get('RATCHET_OBSERVABILITY_LOG_LEVEL')).toBe('debug');
    const plain = new Harness();
    plain.putSecret('pg-dsn', { uri: 'postgres://ratchet:pw@db.example:5432/ratchet' });
    await plain.reconcile();
    const names = (runtimeDeployment(plain).spec.template.spec.containers[0]!.env ?? []).map((e) => e.name);
    expect(names.filter((n) => n.startsWith('RATCHET_OBSERVABILITY_') && n !== 'RATCHET_OBSERVABILITY_BIND')).toEqual(
      [],
    );
  });

  it('deletes the Service of a disabled listener, and a NetworkPolicy turned off', async () => {
    const h = await Harness.ready({ networkPolicy: { enabled: true } });
    expect(h.kube.peek(ref.networkPolicy('demo-runtime'))).toBeDefined();
    // A user's object with the Cluster's labels but no owner reference is left alone.
    h.kube.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name: 'demo-extra',
        namespace: NAMESPACE,
        labels: { 'app.kubernetes.io/instance': 'demo', 'app.kubernetes.io/managed-by': 'ratchet-operator' },
      },
      spec: {},
    });
    h.editSpec((s) => {
      s.services = { observability: { enabled: false } };
      s.networkPolicy = { enabled: false };
    });
    await h.reconcile();
    expect(h.kube.peek(ref.service('demo-observability'))).toBeUndefined();
    expect(h.kube.peek(ref.networkPolicy('demo-runtime'))).toBeUndefined();
    expect(h.kube.peek(ref.service('demo-ingress'))).toBeDefined();
    expect(h.kube.peek(ref.service('demo-extra'))).toBeDefined();
    expect(h.status().endpoints).not.toHaveProperty('observability');
  });

  it('changes nothing while paused, and says so', async () => {
    const h = await Harness.ready();
    h.annotate({ 'ratchet.dev/reconcile': 'paused' });
    h.editSpec((s) => {
      s.replicas = 3;
      s.services = { ingress: { enabled: false } };
    });
    const before = h.versions();
    h.kube.calls.length = 0;
    const result = await h.reconcile();
    expect(result).toEqual({});
    expect(h.kube.calls.map((c) => c.verb)).toEqual(['get', 'applyStatus']);
    expect(h.condition('Reconciling')).toMatchObject({ status: 'False', reason: 'ReconciliationPaused' });
    const after = h.versions();
    for (const [k, v] of Object.entries(before)) if (!k.startsWith('Cluster/')) expect(after[k], k).toBe(v);
    expect(runtimeDeployment(h).spec.replicas).toBe(1);

    // A second paused pass has nothing to write.
    h.kube.calls.length = 0;
    await h.reconcile();
    expect(h.kube.calls.map((c) => c.verb)).toEqual(['get']);

    h.annotate({ 'ratchet.dev/reconcile': 'active' });
    await h.reconcile();
    expect(runtimeDeployment(h).spec.replicas).toBe(3);
    expect(h.kube.peek(ref.service('demo-ingress'))).toBeUndefined();
  });

  it('reports an unreachable admin API as AdminAPIReady=False and Ready=False, once as an event', async () => {
    const h = await Harness.ready();
    h.admin.reachable = false;
    const result = await h.reconcile();
    expect(h.condition('AdminAPIReady')).toMatchObject({ status: 'False', reason: 'Unreachable' });
    expect(h.condition('AdminAPIReady')?.message).toMatch(/demo-admin\.apps\.svc:9070.*ECONNREFUSED/);
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'AdminAPINotReady' });
    expect(h.condition('Ready')?.message).toContain('ECONNREFUSED');
    expect(result.requeueAfterMs).toBe(REQUEUE_MS.notReady);
    // The version last seen stays.
    expect(h.status().version).toBe('0.1.0');
    await h.reconcile();
    expect(h.events.reasons().filter((r) => r === 'NotReady')).toHaveLength(1);

    h.admin.reachable = true;
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
    expect(h.events.reasons().filter((r) => r === 'Ready')).toHaveLength(2);
  });

  it('tells a refused token apart from an unreachable runtime', async () => {
    const h = await Harness.ready();
    h.admin.requiredToken = 'another';
    await h.reconcile();
    expect(h.condition('AdminAPIReady')).toMatchObject({ status: 'False', reason: 'Unauthorized' });
  });

  it('waits for the rollout of a new template before Ready', async () => {
    const h = await Harness.ready();
    h.editSpec((s) => {
      s.replicas = 2;
    });
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'RolloutInProgress' });
    expect(h.events.reasons()).toContain('RolloutStarted');
    expect(h.events.reasons()).not.toContain('NotReady');
    h.runtimePodsReady();
    await h.reconcile();
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
    expect(h.status().readyReplicas).toBe(2);
  });

  it('stalls on a spec.config that is not TOML', async () => {
    const h = await Harness.ready();
    const hash = podHash(h);
    h.editSpec((s) => {
      s.config = { broken: [1, null] };
    });
    await h.reconcile();
    expect(h.condition('Stalled')).toMatchObject({ status: 'True', reason: 'InvalidConfig' });
    // Running pods are left as they are.
    expect(podHash(h)).toBe(hash);
  });
});

describe('a pass with nothing to do', () => {
  it('writes nothing and records no event', async () => {
    const h = await Harness.ready({
      networkPolicy: { enabled: true },
      kafka: { clusters: [{ name: 'events', bootstrapServers: ['kafka:9092'] }] },
    });
    await h.reconcile();
    const before = h.versions();
    const events = h.events.events.length;
    const adminWrites = h.admin.calls.filter((c) => !c.startsWith('version') && !c.startsWith('list')).length;
    h.kube.calls.length = 0;
    h.advance(60_000);
    await h.reconcile();
    expect(h.versions()).toEqual(before);
    expect(h.kube.calls.filter((c) => c.verb === 'applyStatus' || c.verb === 'delete')).toEqual([]);
    expect(h.events.events.length).toBe(events);
    expect(h.admin.calls.filter((c) => !c.startsWith('version') && !c.startsWith('list')).length).toBe(adminWrites);
  });
});

describe('database sources', () => {
  it('CloudNativePG: reads <cluster>-app and waits for the CNPG Cluster to be ready', async () => {
    const h = new Harness({ database: { cnpg: { clusterName: 'pg' } } });
    h.kube.create({
      apiVersion: 'postgresql.cnpg.io/v1',
      kind: 'Cluster',
      metadata: { name: 'pg', namespace: NAMESPACE },
      status: { conditions: [{ type: 'Ready', status: 'False', reason: 'x', message: 'Setting up primary' }] },
    });
    await h.reconcile();
    expect(h.condition('DatabaseReady')?.message).toContain('pg-app');

    h.putSecret('pg-app', { uri: 'postgres://app:pw@pg-rw:5432/app' });
    await h.reconcile();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'False', reason: 'CNPGClusterNotReady' });
    expect(h.condition('DatabaseReady')?.message).toContain('Setting up primary');
    // The DSN exists, so the pods may start and retry their connection.
    expect(runtimeDeployment(h).spec.template.spec.containers[0]!.env).toContainEqual({
      name: 'RATCHET_DATABASE_URL',
      valueFrom: { secretKeyRef: { name: 'pg-app', key: 'uri' } },
    });

    h.kube.setStatus(
      { apiVersion: 'postgresql.cnpg.io/v1', kind: 'Cluster', namespace: NAMESPACE, name: 'pg' },
      { conditions: [{ type: 'Ready', status: 'True', reason: 'x', message: '' }] },
    );
    await h.reconcile();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'True' });
  });

  it('bundled: creates credentials once, the StatefulSet and its Service; ready when its pod is', async () => {
    const h = new Harness({ database: { bundled: {} } });
    await h.reconcile();
    const password = h.secretText('demo-postgres', 'password');
    expect(password).toMatch(/^[0-9a-f]{48}$/);
    expect(h.secretText('demo-postgres', 'uri')).toBe(
      `postgres://ratchet:${password}@demo-postgres.apps.svc:5432/ratchet`,
    );
    expect(h.kube.peek(ref.statefulSet('demo-postgres'))).toBeDefined();
    expect(h.kube.peek(ref.service('demo-postgres'))).toBeDefined();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'False', reason: 'BundledPostgresNotReady' });

    h.kube.setStatus(ref.statefulSet('demo-postgres'), { replicas: 1, readyReplicas: 1 });
    await h.reconcile();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'True', reason: 'BundledPostgresReady' });
    expect(h.secretText('demo-postgres', 'password')).toBe(password);

    h.putSecret('external', { uri: 'postgres://x@db/x' });
    h.editSpec((s) => {
      s.database = { secretRef: { name: 'external' } };
    });
    await h.reconcile();
    expect(h.kube.peek(ref.statefulSet('demo-postgres'))).toBeUndefined();
    expect(h.kube.peek(ref.service('demo-postgres'))).toBeUndefined();
    expect(h.kube.peek(ref.secret('demo-postgres'))).toBeUndefined();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'True' });
  });

  it('announces a lost database once', async () => {
    const h = await Harness.ready();
    h.kube.deleteAsUser(ref.secret('pg-dsn'));
    await h.reconcile();
    await h.reconcile();
    expect(h.condition('DatabaseReady')).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(h.events.reasons().filter((r) => r === 'DatabaseNotReady')).toHaveLength(1);
    // Running pods keep their template.
    expect(runtimeDeployment(h)).toBeDefined();
  });
});

describe('Kafka clusters', () => {
  const spec = {
    kafka: {
      clusters: [
        {
          name: 'events',
          bootstrapServers: ['k1:9092', 'k2:9092'],
          properties: { 'security.protocol': 'SASL_SSL' },
          propertiesFrom: { name: 'kafka-creds' },
        },
      ],
    },
  };

  it('creates, updates (spec and Secret changes) and deletes what the operator created, never others', async () => {
    const h = new Harness(spec);
    h.putSecret('pg-dsn', { uri: 'postgres://x@db/x' });
    h.putSecret('kafka-creds', { 'sasl.password': 'one' });
    h.admin.kafka.set('theirs', { 'bootstrap.servers': 'other:9092' });
    await h.reconcile();
    h.runtimePodsReady();
    await h.reconcile();
    expect(h.admin.kafka.get('events')).toEqual({
      'security.protocol': 'SASL_SSL',
      'sasl.password': 'one',
      'bootstrap.servers': 'k1:9092,k2:9092',
    });
    expect(h.condition('KafkaClustersSynced')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });

    // The admin API shows the password as ***: only the remembered digest reveals the change.
    h.putSecret('kafka-creds', { 'sasl.password': 'two' });
    await h.reconcile();
    expect(h.admin.kafka.get('events')?.['sasl.password']).toBe('two');

    h.editSpec((s) => {
      s.kafka!.clusters[0]!.bootstrapServers = ['k3:9092'];
    });
    await h.reconcile();
    expect(h.admin.kafka.get('events')?.['bootstrap.servers']).toBe('k3:9092');

    h.editSpec((s) => {
      delete s.kafka;
    });
    await h.reconcile();
    expect(h.admin.kafka.has('events')).toBe(false);
    expect(h.admin.kafka.has('theirs')).toBe(true);
    expect(h.condition('KafkaClustersSynced')).toBeUndefined();
    expect(h.events.events.filter((e) => e.reason === 'KafkaClusterSynced').map((e) => e.note)).toEqual([
      'created Kafka cluster events',
      'updated Kafka cluster events',
      'updated Kafka cluster events',
      'deleted Kafka cluster events',
    ]);
  });

  it('reports a missing propertiesFrom Secret and an admin refusal', async () => {
    const h = new Harness({
      kafka: {
        clusters: [...spec.kafka.clusters, { name: 'clash', bootstrapServers: ['k:9092'] }],
      },
    });
    h.putSecret('pg-dsn', { uri: 'postgres://x@db/x' });
    h.admin.kafka.set('clash', { 'bootstrap.servers': 'k:9092' });
    await h.reconcile();
    expect(h.condition('KafkaClustersSynced')).toMatchObject({ status: 'False', reason: 'WaitingForAdminAPI' });
    h.runtimePodsReady();
    await h.reconcile();
    expect(h.condition('KafkaClustersSynced')).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(h.condition('KafkaClustersSynced')?.message).toContain('kafka-creds');
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'KafkaClustersNotSynced' });
    // An existing cluster of a listed name is adopted (updated to the spec), not refused.
    expect(h.admin.calls).toContain('updateKafkaCluster clash');

    h.putSecret('kafka-creds', { 'sasl.password': 'x' });
    await h.reconcile();
    expect(h.condition('KafkaClustersSynced')).toMatchObject({ status: 'True' });
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
  });
});
