import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { CHILD_KINDS, childKey, wantedChildren } from '../../../../operator/src/specs/children.ts';
import {
  AUTH_KEYS_FILE_KEY,
  buildConfigMap,
  CONFIG_FILE_KEY,
  ConfigRenderError,
  OPERATOR_OWNED_CONFIG_KEYS,
  renderRuntimeConfig,
} from '../../../../operator/src/specs/config-map.ts';
import { CONFIG_HASH_ANNOTATION, TEST_ONLY_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import { buildNetworkPolicy } from '../../../../operator/src/specs/network-policy.ts';
import type { EnvVar } from '../../../../operator/src/specs/objects.ts';
import { buildPodDisruptionBudget } from '../../../../operator/src/specs/pod-disruption-budget.ts';
import { buildPostgresService, buildPostgresStatefulSet } from '../../../../operator/src/specs/postgres.ts';
import {
  buildRuntimeDeployment,
  configHash,
  type ConfigHashInputs,
  operatorEnv,
} from '../../../../operator/src/specs/runtime-deployment.ts';
import { buildPostgresSecret, buildSigningKeySecret, buildTokenSecret } from '../../../../operator/src/specs/secret.ts';
import { buildServiceAccount } from '../../../../operator/src/specs/service-account.ts';
import { buildServices } from '../../../../operator/src/specs/service.ts';
import { clusterEndpoints, referencedSecrets } from '../../../../operator/src/specs/settings.ts';
import { clusterWatches } from '../../../../operator/src/controllers/cluster/watches.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import type { ClusterSpec } from '../../../../operator/src/api/v1alpha1/index.ts';
import { loadConfig, SETTINGS } from '../../../../runtime/src/config/config.ts';
import { cluster, NAMESPACE, OPERATOR_NAMESPACE, UID, unb64 } from './fixtures.ts';

const OWNER = {
  apiVersion: 'ratchet.dev/v1alpha1',
  kind: 'Cluster',
  name: 'demo',
  uid: UID,
  controller: true,
  blockOwnerDeletion: true,
};

function deployment(spec: Parameters<typeof cluster>[0] = {}, hash = 'h1') {
  return buildRuntimeDeployment(cluster(spec), { configHash: hash });
}

function runtimeContainer(spec: Parameters<typeof cluster>[0] = {}) {
  return deployment(spec).spec.template.spec.containers[0]!;
}

function envOf(spec: Parameters<typeof cluster>[0] = {}): Record<string, EnvVar> {
  return Object.fromEntries((runtimeContainer(spec).env ?? []).map((e) => [e.name, e]));
}

/** The pods' grace period and the shutdown delay they are told. */
function timing(spec: Parameters<typeof cluster>[0] = {}): { grace: number | undefined; delay: string | undefined } {
  const pod = deployment(spec).spec.template.spec;
  return {
    grace: pod.terminationGracePeriodSeconds,
    delay: pod.containers[0]!.env!.find((e) => e.name === 'RATCHET_SHUTDOWN_DELAY')?.value,
  };
}

describe('every child', () => {
  it('carries the controlling owner reference and the cluster labels, in the Cluster namespace', () => {
    const c = cluster({
      database: { bundled: {} },
      networkPolicy: { enabled: true },
      services: { ingress: { labels: { 'app.kubernetes.io/instance': 'spoofed', team: 'a' } } },
    });
    const children: KubeObject[] = [
      buildConfigMap(c, { toml: '', publicKeyPem: 'PEM' }),
      buildSigningKeySecret(c, 'PEM'),
      buildTokenSecret(c, 'jwt'),
      buildPostgresSecret(c, 'pw'),
      buildServiceAccount(c)!,
      buildRuntimeDeployment(c, { configHash: 'h' }),
      ...buildServices(c),
      buildPodDisruptionBudget(c),
      buildNetworkPolicy(c, OPERATOR_NAMESPACE)!,
      buildPostgresStatefulSet(c)!,
      buildPostgresService(c)!,
    ];
    for (const child of children) {
      expect(child.metadata.namespace, child.kind).toBe(NAMESPACE);
      expect(child.metadata.ownerReferences, `${child.kind} ${child.metadata.name}`).toEqual([OWNER]);
      expect(child.metadata.labels).toMatchObject({
        'app.kubernetes.io/name': 'ratchet',
        'app.kubernetes.io/instance': 'demo',
        'app.kubernetes.io/managed-by': 'ratchet-operator',
      });
    }
    const ingress = buildServices(c).find((s) => s.metadata.name === 'demo-ingress')!;
    expect(ingress.metadata.labels).toMatchObject({ team: 'a', 'app.kubernetes.io/instance': 'demo' });
  });

  it('refuses a Cluster without a uid (an owner reference without one is rejected by the API server)', () => {
    const c = cluster();
    delete c.metadata.uid;
    expect(() => buildPodDisruptionBudget(c)).toThrow(/uid/);
  });
});

describe('runtime Deployment', () => {
  it('has the operator-owned environment the runtime reads', () => {
    expect(runtimeContainer().env).toEqual([
      { name: 'RATCHET_CLUSTER_NAME', value: 'demo' },
      { name: 'RATCHET_NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: 'RATCHET_ADVERTISED_ADDRESS', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
      { name: 'RATCHET_SHUTDOWN_DELAY', value: '5s' },
      { name: 'RATCHET_DATABASE_URL', valueFrom: { secretKeyRef: { name: 'pg-dsn', key: 'uri' } } },
      { name: 'RATCHET_DATABASE_POOL_SIZE', value: '20' },
      { name: 'RATCHET_INGRESS_BIND', value: '0.0.0.0:8080' },
      { name: 'RATCHET_ADMIN_BIND', value: '0.0.0.0:9070' },
      { name: 'RATCHET_INTROSPECTION_BIND', value: '0.0.0.0:9071' },
      { name: 'RATCHET_OBSERVABILITY_BIND', value: '0.0.0.0:3100' },
      { name: 'RATCHET_METRICS_BIND', value: '0.0.0.0:5122' },
      { name: 'RATCHET_DATA_DIR', value: '/var/lib/ratchet' },
      { name: 'RATCHET_CONFIG', value: '/etc/ratchet/config/ratchet.toml' },
      { name: 'RATCHET_AUTH_KEYS_FILE', value: '/etc/ratchet/config/auth-keys.pem' },
    ]);
  });

  it('takes the DSN from the Secret of each database source', () => {
    const dsn = (database: ClusterSpec['database']) => envOf({ database })['RATCHET_DATABASE_URL']?.valueFrom;
    expect(dsn({ secretRef: { name: 'x', key: 'dsn' } })).toEqual({ secretKeyRef: { name: 'x', key: 'dsn' } });
    expect(dsn({ cnpg: { clusterName: 'pg' } })).toEqual({ secretKeyRef: { name: 'pg-app', key: 'uri' } });
    expect(dsn({ cnpg: { clusterName: 'pg', secretName: 'own' } })).toEqual({
      secretKeyRef: { name: 'own', key: 'uri' },
    });
    expect(dsn({ bundled: {} })).toEqual({ secretKeyRef: { name: 'demo-postgres', key: 'uri' } });
    expect(envOf({ database: { secretRef: { name: 'x' }, maxConnections: 7 } })['RATCHET_DATABASE_POOL_SIZE']).toEqual({
      name: 'RATCHET_DATABASE_POOL_SIZE',
      value: '7',
    });
  });

  it('merges user env after its own, and the operator-owned RATCHET_* keys win', () => {
    const env = runtimeContainer({
      pod: {
        env: [
          { name: 'RATCHET_CLUSTER_NAME', value: 'hijack' },
          { name: 'RATCHET_DATABASE_URL', value: 'postgres://elsewhere' },
          // One name for every pod would make them fight over leases; a fixed address would forward to one pod.
          { name: 'RATCHET_NODE_NAME', value: 'same-for-all' },
          { name: 'RATCHET_ADVERTISED_ADDRESS', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
          { name: 'RATCHET_SHUTDOWN_DELAY', value: '10m' },
          { name: 'RATCHET_LOG_LEVEL', value: 'debug' },
          { name: 'HTTP_PROXY', valueFrom: { secretKeyRef: { name: 'p', key: 'url' } } },
        ],
      },
    }).env!;
    expect(env.filter((e) => e.name === 'RATCHET_CLUSTER_NAME')).toEqual([
      { name: 'RATCHET_CLUSTER_NAME', value: 'demo' },
    ]);
    expect(env.filter((e) => e.name === 'RATCHET_DATABASE_URL')).toHaveLength(1);
    expect(env.find((e) => e.name === 'RATCHET_DATABASE_URL')?.value).toBeUndefined();
    expect(env.filter((e) => e.name.match(/^RATCHET_(NODE_NAME|ADVERTISED_ADDRESS|SHUTDOWN_DELAY)$/))).toEqual([
      { name: 'RATCHET_NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: 'RATCHET_ADVERTISED_ADDRESS', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
      { name: 'RATCHET_SHUTDOWN_DELAY', value: '5s' },
    ]);
    // User variables come last so they can refer to the operator's as $(RATCHET_…).
    expect(env.slice(-2)).toEqual([
      { name: 'RATCHET_LOG_LEVEL', value: 'debug' },
      { name: 'HTTP_PROXY', valueFrom: { secretKeyRef: { name: 'p', key: 'url' } } },
    ]);
  });

  it('has no keys file without auth, and TLS files when introspection TLS is set', () => {
    expect(envOf({ auth: { enabled: false } })['RATCHET_AUTH_KEYS_FILE']).toBeUndefined();
    const c = deployment({ tls: { introspection: { name: 'sql-tls' } } });
    const container = c.spec.template.spec.containers[0]!;
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'RATCHET_INTROSPECTION_TLS_CERT', value: '/etc/ratchet/tls/introspection/tls.crt' },
        { name: 'RATCHET_INTROSPECTION_TLS_KEY', value: '/etc/ratchet/tls/introspection/tls.key' },
      ]),
    );
    expect(container.volumeMounts).toContainEqual({
      name: 'introspection-tls',
      mountPath: '/etc/ratchet/tls/introspection',
      readOnly: true,
    });
    expect(c.spec.template.spec.volumes).toContainEqual({
      name: 'introspection-tls',
      secret: { secretName: 'sql-tls', defaultMode: 0o440 },
    });
  });

  it('names the five listener ports and probes the metrics listener', () => {
    const c = runtimeContainer();
    expect(c.ports).toEqual([
      { name: 'ingress', containerPort: 8080, protocol: 'TCP' },
      { name: 'admin', containerPort: 9070, protocol: 'TCP' },
      { name: 'introspection', containerPort: 9071, protocol: 'TCP' },
      { name: 'observability', containerPort: 3100, protocol: 'TCP' },
      { name: 'metrics', containerPort: 5122, protocol: 'TCP' },
    ]);
    expect(c.readinessProbe?.httpGet).toEqual({ path: '/ready', port: 5122 });
    expect(c.livenessProbe?.httpGet).toEqual({ path: '/health', port: 5122 });
    expect(c.startupProbe?.httpGet).toEqual({ path: '/health', port: 5122 });
    // The startup budget covers migrations before liveness may kill the pod.
    expect(c.startupProbe!.periodSeconds * c.startupProbe!.failureThreshold).toBeGreaterThanOrEqual(300);
  });

  it('sees a new pod ready within 2 s, and rides out a failover before pulling pods from the Services', () => {
    const c = runtimeContainer();
    expect(c.readinessProbe).toEqual({
      httpGet: { path: '/ready', port: 5122 },
      periodSeconds: 2,
      timeoutSeconds: 2,
      failureThreshold: 3,
    });
    // /ready fails on every pod while a crashed pod's partitions are between owners (~1-2 s once its leases lapse):
    // a pod leaves the Services only after more consecutive failing time than that.
    const failingBeforeUnready = (c.readinessProbe!.failureThreshold - 1) * c.readinessProbe!.periodSeconds;
    expect(failingBeforeUnready).toBeGreaterThanOrEqual(4);
    // Liveness stays generous: a minute of failed /health before a restart.
    expect(c.livenessProbe!.periodSeconds * c.livenessProbe!.failureThreshold).toBe(60);
  });

  it('runs non-root on a read-only root file system with emptyDirs for /tmp and the data directory', () => {
    const d = deployment();
    const pod = d.spec.template.spec;
    const c = pod.containers[0]!;
    expect(pod.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(pod.volumes).toEqual([
      { name: 'config', configMap: { name: 'demo-config' } },
      { name: 'tmp', emptyDir: {} },
      { name: 'data', emptyDir: {} },
    ]);
    expect(c.volumeMounts).toEqual([
      { name: 'config', mountPath: '/etc/ratchet/config', readOnly: true },
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'data', mountPath: '/var/lib/ratchet' },
    ]);
    expect(pod.automountServiceAccountToken).toBe(false);
  });

  it('rolls one pod at a time without losing capacity, keeps 3 revisions, selects by the first three labels', () => {
    const d = deployment();
    expect(d.metadata.name).toBe('demo');
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.revisionHistoryLimit).toBe(3);
    expect(d.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    expect(d.spec.selector).toEqual({
      matchLabels: {
        'app.kubernetes.io/name': 'ratchet',
        'app.kubernetes.io/instance': 'demo',
        'app.kubernetes.io/component': 'runtime',
      },
    });
    expect(d.spec.template.metadata.labels).toMatchObject(d.spec.selector.matchLabels);
    expect(deployment({ replicas: 3 }).spec.replicas).toBe(3);
  });

  it('applies pod overrides, and its own labels, annotations, volumes and container name win', () => {
    const d = deployment(
      {
        imagePullPolicy: 'Always',
        imagePullSecrets: [{ name: 'regcred' }],
        serviceAccount: { create: false, name: 'workload' },
        pod: {
          labels: { team: 'payments', 'app.kubernetes.io/component': 'spoofed' },
          annotations: { 'prometheus.io/scrape': 'true', [CONFIG_HASH_ANNOTATION]: 'spoofed' },
          resources: { requests: { cpu: '500m' } },
          nodeSelector: { pool: 'ratchet' },
          tolerations: [{ key: 'dedicated', operator: 'Exists' }],
          affinity: { podAntiAffinity: {} },
          topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone' }],
          priorityClassName: 'high',
          terminationGracePeriodSeconds: 90,
          sidecars: [
            { name: 'proxy', image: 'envoy' },
            { name: 'ratchet', image: 'evil' },
          ],
          extraVolumes: [
            { name: 'certs', secret: { secretName: 'c' } },
            { name: 'tmp', hostPath: { path: '/' } },
          ],
          extraVolumeMounts: [{ name: 'certs', mountPath: '/certs' }],
          envFrom: [{ configMapRef: { name: 'extra' } }],
          securityContext: { readOnlyRootFilesystem: false },
        },
      },
      'hash-1',
    );
    const t = d.spec.template;
    expect(t.metadata.labels).toMatchObject({ team: 'payments', 'app.kubernetes.io/component': 'runtime' });
    expect(t.metadata.annotations).toEqual({ 'prometheus.io/scrape': 'true', [CONFIG_HASH_ANNOTATION]: 'hash-1' });
    const pod = t.spec;
    expect(pod.serviceAccountName).toBe('workload');
    expect(pod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(pod.nodeSelector).toEqual({ pool: 'ratchet' });
    expect(pod.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists' }]);
    expect(pod.affinity).toEqual({ podAntiAffinity: {} });
    expect(pod.topologySpreadConstraints).toEqual([{ maxSkew: 1, topologyKey: 'zone' }]);
    expect(pod.priorityClassName).toBe('high');
    expect(pod.terminationGracePeriodSeconds).toBe(90);
    expect(pod.containers.map((c) => [c.name, c.image])).toEqual([
      ['ratchet', 'ghcr.io/example/ratchet:0.1.0'],
      ['proxy', 'envoy'],
    ]);
    expect(pod.volumes.filter((v) => v.name === 'tmp')).toEqual([{ name: 'tmp', emptyDir: {} }]);
    expect(pod.volumes).toContainEqual({ name: 'certs', secret: { secretName: 'c' } });
    const c = pod.containers[0]!;
    expect(c.imagePullPolicy).toBe('Always');
    expect(c.resources).toEqual({ requests: { cpu: '500m' } });
    expect(c.envFrom).toEqual([{ configMapRef: { name: 'extra' } }]);
    expect(c.volumeMounts).toContainEqual({ name: 'certs', mountPath: '/certs' });
    expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: false, capabilities: { drop: ['ALL'] } });
  });

  it('gives pods a grace period of shutdown delay + 30 s drain + 10 s by default', () => {
    expect(timing()).toEqual({ grace: 45, delay: '5s' });
    expect(timing({ pod: { shutdownDelaySeconds: 15 } })).toEqual({ grace: 55, delay: '15s' });
    expect(timing({ pod: { shutdownDelaySeconds: 0 } })).toEqual({ grace: 40, delay: '0s' });
  });

  it("keeps the user's grace period (pod or drainTimeout) and shortens the delay to leave 10 s to drain", () => {
    expect(timing({ pod: { terminationGracePeriodSeconds: 90 } })).toEqual({ grace: 90, delay: '5s' });
    // Shorter than delay + drain: the drain gets less, the delay is kept while 10 s remain after it.
    expect(timing({ pod: { terminationGracePeriodSeconds: 20 } })).toEqual({ grace: 20, delay: '5s' });
    expect(timing({ pod: { terminationGracePeriodSeconds: 12 } })).toEqual({ grace: 12, delay: '2s' });
    expect(timing({ pod: { terminationGracePeriodSeconds: 5 } })).toEqual({ grace: 5, delay: '0s' });
    expect(timing({ pod: { terminationGracePeriodSeconds: 0 } })).toEqual({ grace: 0, delay: '0s' });
    expect(timing({ pod: { terminationGracePeriodSeconds: 30, shutdownDelaySeconds: 30 } })).toEqual({
      grace: 30,
      delay: '20s',
    });
    expect(timing({ drainTimeout: '2m30s' })).toEqual({ grace: 150, delay: '5s' });
    expect(timing({ drainTimeout: '500ms' })).toEqual({ grace: 1, delay: '0s' });
    expect(timing({ drainTimeout: '2m30s', pod: { terminationGracePeriodSeconds: 60 } })).toEqual({
      grace: 60,
      delay: '5s',
    });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3600 }), fc.integer({ min: 0, max: 30 }), (grace, shutdownDelaySeconds) => {
        const t = timing({ pod: { terminationGracePeriodSeconds: grace, shutdownDelaySeconds } });
        const delay = Number(t.delay!.replace(/s$/, ''));
        expect(t.grace).toBe(grace);
        expect(delay).toBeLessThanOrEqual(shutdownDelaySeconds);
        expect(delay === shutdownDelaySeconds || delay === Math.max(0, grace - 10)).toBe(true);
        expect(delay === 0 || grace - delay >= 10).toBe(true);
      }),
    );
  });

  it('is deterministic', () => {
    const spec = { replicas: 2, pod: { labels: { a: 'b' } } };
    expect(deployment(spec, 'x')).toEqual(deployment(spec, 'x'));
  });
});

describe('config hash', () => {
  const base: ConfigHashInputs = {
    configMap: { 'ratchet.toml': 'a = 1\n', 'auth-keys.pem': 'PEM' },
    secrets: { 'pg-dsn/uri': 'cG9zdGdyZXM6Ly8=' },
  };

  it('does not depend on key order', () => {
    const entries = fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 16 })), {
      maxLength: 8,
    });
    fc.assert(
      fc.property(entries, entries, (a, b) => {
        const cm = Object.fromEntries(a);
        const sec = Object.fromEntries(b);
        const reversed = (o: Record<string, string>) => Object.fromEntries(Object.entries(o).reverse());
        expect(configHash({ configMap: cm, secrets: sec })).toBe(
          configHash({ configMap: reversed(cm), secrets: reversed(sec) }),
        );
      }),
    );
  });

  it('changes when any ConfigMap or Secret value changes, and only then', () => {
    const h = configHash(base);
    expect(configHash({ ...base })).toBe(h);
    expect(configHash({ ...base, configMap: { ...base.configMap, 'ratchet.toml': 'a = 2\n' } })).not.toBe(h);
    expect(configHash({ ...base, configMap: { ...base.configMap, 'auth-keys.pem': 'PEM2' } })).not.toBe(h);
    expect(configHash({ ...base, secrets: { 'pg-dsn/uri': 'b3RoZXI=' } })).not.toBe(h);
    expect(configHash({ ...base, secrets: { ...base.secrets, 'tls/tls.crt': 'Y2VydA==' } })).not.toBe(h);
    fc.assert(
      fc.property(fc.string(), fc.string(), (x, y) => {
        const hx = configHash({ ...base, secrets: { 'pg-dsn/uri': x } });
        const hy = configHash({ ...base, secrets: { 'pg-dsn/uri': y } });
        expect(hx === hy).toBe(x === y);
      }),
    );
  });

  it('lands on the pod template, so a new hash rolls the pods', () => {
    expect(deployment({}, 'one').spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION]).toBe('one');
    expect(deployment({}, 'two').spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION]).toBe('two');
  });
});

describe('runtime ConfigMap', () => {
  it('renders spec.config as TOML without the keys the operator owns', () => {
    const toml = renderRuntimeConfig({
      'cluster-name': 'other',
      'node-name': 'same-for-all',
      database: { url: 'postgres://x', 'pool-size': 3 },
      admin: { bind: '127.0.0.1:1' },
      auth: { 'keys-file': '/nope' },
      cluster: { 'advertised-address': '10.0.0.1', 'shutdown-delay': '1m', 'lease-timeout': '5s' },
      'database.url': 'flat form too',
      worker: { 'cleanup-interval': '1m' },
      invoker: { 'max-awaited-future-depth': 100, 'inactivity-timeout': '1m' },
      log: { level: 'debug' },
    });
    expect(parse(toml)).toEqual({
      cluster: { 'lease-timeout': '5s' },
      invoker: { 'inactivity-timeout': '1m', 'max-awaited-future-depth': 100 },
      log: { level: 'debug' },
      worker: { 'cleanup-interval': '1m' },
    });
    expect(parse(renderRuntimeConfig(undefined))).toEqual({});
    expect(renderRuntimeConfig({ log: { level: 'info' } })).toMatch(/^# Written by ratchet-operator/);
  });

  it('renders the same text whatever the key order, and round-trips through a TOML parser', () => {
    const key = fc.stringMatching(/^[a-z][a-z-]{0,8}$/);
    const value = fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean());
    const table = fc.dictionary(key, fc.oneof(value, fc.dictionary(key, value, { maxKeys: 4 })), { maxKeys: 6 });
    fc.assert(
      fc.property(table, (config) => {
        const reversed = Object.fromEntries(Object.entries(config).reverse());
        const toml = renderRuntimeConfig(config);
        expect(renderRuntimeConfig(reversed)).toBe(toml);
        const parsed = parse(toml);
        for (const owned of OPERATOR_OWNED_CONFIG_KEYS) {
          const [section, name] = owned.split('.');
          const found = name === undefined ? parsed[section!] : (parsed[section!] as Record<string, unknown>)?.[name];
          expect(found).toBeUndefined();
        }
      }),
    );
  });

  it('says why spec.config cannot be TOML', () => {
    expect(() => renderRuntimeConfig({ list: [1, null] })).toThrow(ConfigRenderError);
    expect(() => renderRuntimeConfig({ list: [1, null] })).toThrow(/spec.config cannot be written as TOML/);
  });

  it('holds ratchet.toml and, in managed mode only, the public key', () => {
    const cm = buildConfigMap(cluster(), { toml: 'x = 1\n', publicKeyPem: 'PUBLIC' });
    expect(cm.metadata.name).toBe('demo-config');
    expect(cm.data).toEqual({ [CONFIG_FILE_KEY]: 'x = 1\n', [AUTH_KEYS_FILE_KEY]: 'PUBLIC' });
    expect(buildConfigMap(cluster({ auth: { enabled: false } }), { toml: '' }).data).toEqual({ [CONFIG_FILE_KEY]: '' });
    expect(() => buildConfigMap(cluster(), { toml: '' })).toThrow(/public key/);
  });
});

describe('the runtime reads what the pods get', () => {
  it('knows every variable the operator sets, and the operator keeps their file keys out of ratchet.toml', () => {
    const names = operatorEnv(cluster({ tls: { introspection: { name: 't' } } }))
      .map((e) => e.name)
      .filter((name) => name !== 'RATCHET_CONFIG');
    const settings: Readonly<Record<string, string>> = SETTINGS;
    expect(names.filter((name) => settings[name] === undefined)).toEqual([]);
    expect(names.map((name) => settings[name]).filter((key) => !OPERATOR_OWNED_CONFIG_KEYS.has(key!))).toEqual([]);
  });

  it("loads the operator's environment and rendered file without complaint", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ratchet-cfg-'));
    try {
      const file = join(dir, 'ratchet.toml');
      await writeFile(
        file,
        renderRuntimeConfig({
          'cluster-name': 'ignored',
          cluster: { 'advertised-address': 'one-for-all', 'shutdown-delay': '10m', 'lease-timeout': '4s' },
          log: { level: 'debug' },
          invoker: { 'inactivity-timeout': '2m' },
        }),
      );
      // What the kubelet resolves: the DSN from its Secret, the pod's own name and IP from the downward API.
      const resolved: Record<string, string> = {
        'metadata.name': 'demo-7c9d8f6b5-x2k4q',
        'status.podIP': '10.244.1.7',
      };
      const env: Record<string, string> = {};
      for (const e of runtimeContainer({ tls: { introspection: { name: 't' } } }).env ?? []) {
        const field = e.valueFrom?.fieldRef?.fieldPath;
        env[e.name] = e.value ?? (field === undefined ? 'postgres://ratchet:pw@db:5432/ratchet' : resolved[field]!);
      }
      env['RATCHET_CONFIG'] = file;
      const config = loadConfig({ env, cwd: dir });
      expect(config.clusterName).toBe('demo');
      expect(config.nodeName).toBe('demo-7c9d8f6b5-x2k4q');
      expect(config.cluster.advertisedAddress).toBe('10.244.1.7');
      expect(config.cluster.shutdownDelayMs).toBe(5_000);
      expect(config.cluster.leaseTimeoutMs).toBe(4_000);
      expect(config.ingress.bind).toMatchObject({ host: '0.0.0.0', port: 8080 });
      expect(config.metrics.bind).toMatchObject({ host: '0.0.0.0', port: 5122 });
      expect(config.auth.keysFile).toBe('/etc/ratchet/config/auth-keys.pem');
      expect(config.dataDir).toBe('/var/lib/ratchet');
      // An unknown RATCHET_* variable is only a warning to the runtime: this is where a renamed setting shows.
      expect(config.warnings).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('Services', () => {
  it('makes one per enabled listener plus the metrics ClusterIP', () => {
    const services = buildServices(
      cluster({
        services: {
          observability: { enabled: false },
          ingress: {
            type: 'LoadBalancer',
            annotations: { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing' },
            loadBalancerSourceRanges: ['10.0.0.0/8'],
          },
        },
      }),
    );
    expect(services.map((s) => s.metadata.name)).toEqual([
      'demo-ingress',
      'demo-admin',
      'demo-introspection',
      'demo-metrics',
    ]);
    const [ingress, admin, introspection, metrics] = services;
    expect(ingress!.spec).toEqual({
      type: 'LoadBalancer',
      selector: {
        'app.kubernetes.io/name': 'ratchet',
        'app.kubernetes.io/instance': 'demo',
        'app.kubernetes.io/component': 'runtime',
      },
      ports: [{ name: 'ingress', port: 8080, targetPort: 'ingress', protocol: 'TCP', appProtocol: 'http' }],
      loadBalancerSourceRanges: ['10.0.0.0/8'],
    });
    expect(ingress!.metadata.annotations).toEqual({
      'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing',
    });
    expect(admin!.spec.type).toBe('ClusterIP');
    expect(admin!.spec.ports).toEqual([
      { name: 'admin', port: 9070, targetPort: 'admin', protocol: 'TCP', appProtocol: 'http' },
    ]);
    expect(introspection!.spec.ports[0]).toMatchObject({ port: 9071, appProtocol: 'postgresql' });
    expect(metrics!.spec).toMatchObject({ type: 'ClusterIP', ports: [{ name: 'metrics', port: 5122 }] });
  });

  it('publishes in-cluster endpoints of the enabled listeners', () => {
    expect(clusterEndpoints(cluster({ services: { observability: { enabled: false } } }))).toEqual({
      ingress: 'http://demo-ingress.apps.svc:8080',
      admin: 'http://demo-admin.apps.svc:9070',
      introspection: 'postgres://demo-introspection.apps.svc:9071',
    });
  });
});

describe('PodDisruptionBudget', () => {
  const maxUnavailable = (spec: Parameters<typeof cluster>[0]) =>
    buildPodDisruptionBudget(cluster(spec)).spec.maxUnavailable;

  it('allows one voluntary disruption by default, so a drain never waits forever on a single replica', () => {
    const pdb = buildPodDisruptionBudget(cluster());
    expect(pdb.apiVersion).toBe('policy/v1');
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(pdb.spec.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
    expect(pdb.spec.selector.matchLabels['app.kubernetes.io/component']).toBe('runtime');
    expect(maxUnavailable({ replicas: 3 })).toBe(1);
    expect(maxUnavailable({ replicas: 1, disruption: { maxUnavailable: 3 } })).toBe(1);
    // The user's 0 blocks every voluntary eviction: their choice, kept.
    expect(maxUnavailable({ disruption: { maxUnavailable: 0 } })).toBe(0);
  });

  it('always leaves a replica to take the partitions of the evicted ones', () => {
    expect(maxUnavailable({ replicas: 5, disruption: { maxUnavailable: 2 } })).toBe(2);
    expect(maxUnavailable({ replicas: 3, disruption: { maxUnavailable: 3 } })).toBe(2);
    expect(maxUnavailable({ replicas: 2, disruption: { maxUnavailable: 10 } })).toBe(1);
  });
});

describe('NetworkPolicy', () => {
  /** The runtime pods forward requests to a partition's owner on its pod IP. */
  const PEER_RULE = {
    ports: [
      { port: 8080, protocol: 'TCP' },
      { port: 9070, protocol: 'TCP' },
    ],
    from: [
      {
        podSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'ratchet',
            'app.kubernetes.io/instance': 'demo',
            'app.kubernetes.io/component': 'runtime',
          },
        },
      },
    ],
  };

  it('is off by default', () => {
    expect(buildNetworkPolicy(cluster(), OPERATOR_NAMESPACE)).toBeUndefined();
  });

  it('restricts ingress only, so egress (DNS, PostgreSQL, deployments) keeps working', () => {
    const np = buildNetworkPolicy(cluster({ networkPolicy: { enabled: true } }), OPERATOR_NAMESPACE)!;
    expect(np.metadata.name).toBe('demo-runtime');
    expect(np.spec.policyTypes).toEqual(['Ingress']);
    expect(np.spec).not.toHaveProperty('egress');
    const [peers, ...byListener] = [...np.spec.ingress].reverse();
    expect(peers).toEqual(PEER_RULE);
    const byPort = Object.fromEntries(byListener.map((r) => [r.ports[0]!.port, r]));
    const sameAndOperator = [
      { podSelector: {} },
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': OPERATOR_NAMESPACE } } },
    ];
    expect(byPort[8080]).toEqual({ ports: [{ port: 8080, protocol: 'TCP' }] });
    expect(byPort[9070]!.from).toEqual(sameAndOperator);
    expect(byPort[9071]!.from).toEqual(sameAndOperator);
    expect(byPort[3100]!.from).toEqual(sameAndOperator);
    expect(byPort[5122]).toEqual({ ports: [{ port: 5122, protocol: 'TCP' }] });
  });

  it('uses allowFrom peers, and an empty list closes the port instead of opening it', () => {
    const peer = { ipBlock: { cidr: '10.1.0.0/16' } };
    const np = buildNetworkPolicy(
      cluster({ networkPolicy: { enabled: true, allowFrom: { ingress: [peer], admin: [] } } }),
      NAMESPACE,
    )!;
    const ports = np.spec.ingress.map((r) => r.ports.map((p) => p.port));
    expect(ports).toEqual([[8080], [9071], [3100], [5122], [8080, 9070]]);
    // The replicas still reach each other's admin listener: the peer rule does not depend on allowFrom.
    expect(np.spec.ingress.at(-1)).toEqual(PEER_RULE);
    expect(np.spec.ingress[0]!.from).toEqual([peer]);
    // The operator runs in the Cluster's namespace here: one peer covers both.
    expect(np.spec.ingress[1]!.from).toEqual([{ podSelector: {} }]);
    expect(np.spec.ingress.every((r) => r.from === undefined || r.from.length > 0)).toBe(true);
  });
});

describe('bundled PostgreSQL', () => {
  const c = cluster({ database: { bundled: { storageSize: '5Gi', storageClassName: 'fast' } } });

  it('is marked test-only on every object', () => {
    const objects: KubeObject[] = [
      buildPostgresStatefulSet(c)!,
      buildPostgresService(c)!,
      buildPostgresSecret(c, 'pw'),
    ];
    for (const o of objects) {
      expect(o.metadata.annotations?.[TEST_ONLY_ANNOTATION], o.kind).toBe('true');
      expect(o.metadata.annotations?.['ratchet.dev/description'], o.kind).toMatch(/TEST CLUSTERS ONLY/);
      expect(o.metadata.labels?.['app.kubernetes.io/component']).toBe('postgres');
    }
    expect(buildPostgresStatefulSet(c)!.spec.template.metadata.annotations[TEST_ONLY_ANNOTATION]).toBe('true');
  });

  it('runs one postgres pod with a volume of the given size, ready by pg_isready', () => {
    const sts = buildPostgresStatefulSet(c)!;
    expect(sts.metadata.name).toBe('demo-postgres');
    expect(sts.spec.replicas).toBe(1);
    expect(sts.spec.serviceName).toBe('demo-postgres');
    expect(sts.spec.volumeClaimTemplates).toEqual([
      {
        metadata: {
          name: 'data',
          labels: {
            'app.kubernetes.io/name': 'ratchet',
            'app.kubernetes.io/instance': 'demo',
            'app.kubernetes.io/component': 'postgres',
            'app.kubernetes.io/managed-by': 'ratchet-operator',
          },
        },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '5Gi' } }, storageClassName: 'fast' },
      },
    ]);
    const pg = sts.spec.template.spec.containers[0]!;
    expect(pg.image).toBe('postgres:17-alpine');
    expect(pg.readinessProbe?.exec?.command[0]).toBe('pg_isready');
    expect(pg.env).toContainEqual({
      name: 'POSTGRES_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'demo-postgres', key: 'password' } },
    });
    // Its selector never matches the runtime pods.
    expect(sts.spec.selector.matchLabels['app.kubernetes.io/component']).toBe('postgres');
    expect(buildPostgresService(c)!.spec.ports).toEqual([
      { name: 'postgres', port: 5432, targetPort: 'postgres', protocol: 'TCP', appProtocol: 'postgresql' },
    ]);
  });

  it('keeps the generated password and a DSN for the runtime in its Secret', () => {
    const secret = buildPostgresSecret(c, 'pw123');
    expect(unb64(secret.data['password'])).toBe('pw123');
    expect(unb64(secret.data['uri'])).toBe('postgres://ratchet:pw123@demo-postgres.apps.svc:5432/ratchet');
  });

  it('is not built for other database sources', () => {
    expect(buildPostgresStatefulSet(cluster())).toBeUndefined();
    expect(buildPostgresService(cluster())).toBeUndefined();
  });
});

describe('ServiceAccount', () => {
  it('is created by default under the cluster name, with its annotations', () => {
    const sa = buildServiceAccount(
      cluster({ serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/r' } } }),
    )!;
    expect(sa.metadata.name).toBe('demo');
    expect(sa.metadata.annotations).toEqual({ 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/r' });
    expect(sa.automountServiceAccountToken).toBe(false);
    expect(deployment().spec.template.spec.serviceAccountName).toBe('demo');
  });

  it('is not created when create is false; the pods then use the named one or the default', () => {
    expect(buildServiceAccount(cluster({ serviceAccount: { create: false } }))).toBeUndefined();
    expect(deployment({ serviceAccount: { create: false } }).spec.template.spec.serviceAccountName).toBeUndefined();
  });
});

describe('wanted children and watches', () => {
  it('wants the listener Services that are enabled, the NetworkPolicy when on, the bundled database when chosen', () => {
    const plain = wantedChildren(cluster({ services: { introspection: { enabled: false } } }));
    expect(plain.has(childKey(CHILD_KINDS.service, 'demo-ingress'))).toBe(true);
    expect(plain.has(childKey(CHILD_KINDS.service, 'demo-introspection'))).toBe(false);
    expect(plain.has(childKey(CHILD_KINDS.networkPolicy, 'demo-runtime'))).toBe(false);
    expect(plain.has(childKey(CHILD_KINDS.statefulSet, 'demo-postgres'))).toBe(false);
    // Key material is never pruned, even when auth is off.
    expect(
      wantedChildren(cluster({ auth: { enabled: false } })).has(childKey(CHILD_KINDS.secret, 'demo-signing-key')),
    ).toBe(true);
    const full = wantedChildren(cluster({ networkPolicy: { enabled: true }, database: { bundled: {} } }));
    expect(full.has(childKey(CHILD_KINDS.networkPolicy, 'demo-runtime'))).toBe(true);
    expect(full.has(childKey(CHILD_KINDS.statefulSet, 'demo-postgres'))).toBe(true);
    expect(full.has(childKey(CHILD_KINDS.secret, 'demo-postgres'))).toBe(true);
  });

  it('maps a Secret to every Cluster of its namespace that reads it', () => {
    const a = cluster(
      {
        database: { cnpg: { clusterName: 'pg' } },
        tls: { introspection: { name: 'tls' } },
        kafka: { clusters: [{ name: 'k', bootstrapServers: ['b:9092'], propertiesFrom: { name: 'kafka-creds' } }] },
        auth: { signingKeySecret: 'my-key' },
      },
      'a',
    );
    const b = cluster({}, 'b');
    const other = { ...cluster({}, 'c'), metadata: { ...cluster({}, 'c').metadata, namespace: 'elsewhere' } };
    expect(referencedSecrets(a)).toEqual(['a-token', 'kafka-creds', 'my-key', 'pg-app', 'tls']);
    const secretWatch = clusterWatches.find((w) => w.kind === 'Secret')!;
    const secret = (name: string, owner?: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: NAMESPACE,
        ...(owner === undefined ? {} : { ownerReferences: [{ ...OWNER, name: owner }] }),
      },
    });
    const primaries = () => [a, b, other] as unknown as KubeObject[];
    expect(secretWatch.map(secret('kafka-creds'), primaries)).toEqual([{ namespace: NAMESPACE, name: 'a' }]);
    expect(secretWatch.map(secret('pg-dsn'), primaries)).toEqual([{ namespace: NAMESPACE, name: 'b' }]);
    expect(secretWatch.map(secret('unrelated'), primaries)).toEqual([]);
    // Owned and referenced at once: one key.
    expect(secretWatch.map(secret('b-token', 'b'), primaries)).toEqual([{ namespace: NAMESPACE, name: 'b' }]);
    const kinds = clusterWatches.map((w) => `${w.apiVersion}/${w.kind}`).sort();
    expect(kinds).toEqual([
      'apps/v1/Deployment',
      'apps/v1/StatefulSet',
      'networking.k8s.io/v1/NetworkPolicy',
      'policy/v1/PodDisruptionBudget',
      'v1/ConfigMap',
      'v1/Secret',
      'v1/Service',
      'v1/ServiceAccount',
    ]);
  });
});
