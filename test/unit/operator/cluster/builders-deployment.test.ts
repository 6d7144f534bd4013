import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildConfigMap } from '../../../../operator/src/specs/config-map.ts';
import { CONFIG_HASH_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import { buildNetworkPolicy } from '../../../../operator/src/specs/network-policy.ts';
import type { EnvVar } from '../../../../operator/src/specs/objects.ts';
import { buildPodDisruptionBudget } from '../../../../operator/src/specs/pod-disruption-budget.ts';
import { buildPostgresService, buildPostgresStatefulSet } from '../../../../operator/src/specs/postgres.ts';
import { buildRuntimeDeployment } from '../../../../operator/src/specs/runtime-deployment.ts';
import { buildPostgresSecret, buildSigningKeySecret, buildTokenSecret } from '../../../../operator/src/specs/secret.ts';
import { buildServiceAccount } from '../../../../operator/src/specs/service-account.ts';
import { buildServices } from '../../../../operator/src/specs/service.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import type { ClusterSpec } from '../../../../operator/src/api/v1alpha1/index.ts';
import { cluster, NAMESPACE, OPERATOR_NAMESPACE, UID } from './fixtures.ts';

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

  it('mounts each TLS Secret as a whole directory and points the runtime at it (shared, per listener, client CA)', () => {
    const c = deployment({
      tls: {
        secretRef: { name: 'ratchet-tls' },
        admin: { name: 'admin-tls' },
        clientAuth: { caSecretRef: { name: 'ratchet-tls' }, listeners: ['admin', 'observability'] },
      },
      pod: {
        extraVolumes: [
          { name: 'tls', emptyDir: {} },
          { name: 'mine', emptyDir: {} },
        ],
      },
    });
    const pod = c.spec.template.spec;
    const tlsVolumes = pod.volumes?.filter((v) => v.secret !== undefined);
    // No subPath and no per-key projection of the key pairs: the kubelet swaps a renewed certificate's files in place.
    expect(tlsVolumes).toEqual([
      { name: 'tls', secret: { secretName: 'ratchet-tls', defaultMode: 0o440 } },
      { name: 'admin-tls', secret: { secretName: 'admin-tls', defaultMode: 0o440 } },
      {
        name: 'client-ca',
        secret: { secretName: 'ratchet-tls', defaultMode: 0o440, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
      },
    ]);
    // A user volume named like an operator one is dropped; others stay.
    expect(pod.volumes?.filter((v) => v.name === 'tls')).toHaveLength(1);
    expect(pod.volumes?.map((v) => v.name)).toContain('mine');
    const container = pod.containers[0]!;
    expect(container.volumeMounts?.filter((m) => m.mountPath.startsWith('/etc/ratchet/tls/'))).toEqual([
      { name: 'tls', mountPath: '/etc/ratchet/tls/shared', readOnly: true },
      { name: 'admin-tls', mountPath: '/etc/ratchet/tls/admin', readOnly: true },
      { name: 'client-ca', mountPath: '/etc/ratchet/tls/client-ca', readOnly: true },
    ]);
    expect(container.volumeMounts?.some((m) => 'subPath' in m)).toBe(false);
    expect(container.env?.filter((e) => /^RATCHET_(\w+_)?TLS_/.test(e.name))).toEqual([
      { name: 'RATCHET_TLS_CERT', value: '/etc/ratchet/tls/shared/tls.crt' },
      { name: 'RATCHET_TLS_KEY', value: '/etc/ratchet/tls/shared/tls.key' },
      { name: 'RATCHET_ADMIN_TLS_CERT', value: '/etc/ratchet/tls/admin/tls.crt' },
      { name: 'RATCHET_ADMIN_TLS_KEY', value: '/etc/ratchet/tls/admin/tls.key' },
      { name: 'RATCHET_ADMIN_TLS_CLIENT_CA', value: '/etc/ratchet/tls/client-ca/ca.crt' },
      { name: 'RATCHET_OBSERVABILITY_TLS_CLIENT_CA', value: '/etc/ratchet/tls/client-ca/ca.crt' },
    ]);
    // Client certificates on every HTTPS listener: one shared variable, and the CA from its own key.
    const everywhere = envOf({
      tls: { secretRef: { name: 'ratchet-tls' }, clientAuth: { caSecretRef: { name: 'clients', key: 'bundle.pem' } } },
    });
    expect(everywhere['RATCHET_TLS_CLIENT_CA']).toEqual({
      name: 'RATCHET_TLS_CLIENT_CA',
      value: '/etc/ratchet/tls/client-ca/ca.crt',
    });
    expect(Object.keys(everywhere).filter((n) => n.endsWith('_TLS_CLIENT_CA'))).toEqual(['RATCHET_TLS_CLIENT_CA']);
  });

  it('rolls the pods when a TLS Secret is renamed, not when its certificate is renewed', () => {
    // The certificate's bytes are not an input of the pod template at all: only the Secret's name is.
    const before = deployment({ tls: { secretRef: { name: 'ratchet-tls' } } });
    expect(deployment({ tls: { secretRef: { name: 'ratchet-tls' } } })).toEqual(before);
    const renamed = deployment({ tls: { secretRef: { name: 'ratchet-tls-v2' } } });
    expect(renamed.spec.template).not.toEqual(before.spec.template);
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
