import { describe, expect, it } from 'vitest';
import { CHILD_KINDS, childKey, wantedChildren } from '../../../../operator/src/specs/children.ts';
import { SERVICE_ACCOUNT_HASH_ANNOTATION, TEST_ONLY_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import { buildNetworkPolicy } from '../../../../operator/src/specs/network-policy.ts';
import { buildPodDisruptionBudget } from '../../../../operator/src/specs/pod-disruption-budget.ts';
import { buildPostgresService, buildPostgresStatefulSet } from '../../../../operator/src/specs/postgres.ts';
import { buildRuntimeDeployment } from '../../../../operator/src/specs/runtime-deployment.ts';
import { buildPostgresSecret } from '../../../../operator/src/specs/secret.ts';
import { buildServiceAccount } from '../../../../operator/src/specs/service-account.ts';
import { buildServices } from '../../../../operator/src/specs/service.ts';
import { clusterEndpoints, referencedSecrets } from '../../../../operator/src/specs/settings.ts';
import { clusterWatches } from '../../../../operator/src/controllers/cluster/watches.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
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

  it('says https for the listeners serving TLS, to clients and to meshes (appProtocol)', () => {
    const tls = cluster({ tls: { admin: { name: 'admin-tls' }, observability: { name: 'obs-tls' } } });
    expect(clusterEndpoints(tls)).toEqual({
      ingress: 'http://demo-ingress.apps.svc:8080',
      admin: 'https://demo-admin.apps.svc:9070',
      introspection: 'postgres://demo-introspection.apps.svc:9071',
      observability: 'https://demo-observability.apps.svc:3100',
    });
    const all = cluster({ tls: { secretRef: { name: 'tls' } } });
    expect(Object.values(clusterEndpoints(all)).filter((url) => url.startsWith('https://'))).toHaveLength(3);
    const protocols = Object.fromEntries(
      buildServices(all).map((s) => [s.metadata.name, s.spec.ports[0]!.appProtocol]),
    );
    expect(protocols).toEqual({
      'demo-ingress': 'https',
      'demo-admin': 'https',
      'demo-introspection': 'postgresql',
      'demo-observability': 'https',
      'demo-metrics': 'http',
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

  it('rolls the pods when its annotations change: identity webhooks (IRSA) read them only at pod creation', () => {
    const hashOf = (spec: Parameters<typeof cluster>[0]) =>
      deployment(spec).spec.template.metadata.annotations[SERVICE_ACCOUNT_HASH_ANNOTATION];
    const role = (name: string) => ({ annotations: { 'eks.amazonaws.com/role-arn': `arn:aws:iam::1:role/${name}` } });
    const one = hashOf({ serviceAccount: role('one') });
    expect(one).toMatch(/^[0-9a-f]{16}$/);
    expect(hashOf({ serviceAccount: role('one') })).toBe(one);
    expect(hashOf({ serviceAccount: role('two') })).not.toBe(one);
    // Without annotations (and for a ServiceAccount the operator does not create) the template is as before.
    expect(hashOf({})).toBeUndefined();
    expect(hashOf({ serviceAccount: { annotations: {} } })).toBeUndefined();
    expect(hashOf({ serviceAccount: { create: false, name: 'mine', ...role('one') } })).toBeUndefined();
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
    const withTls = cluster({
      tls: {
        secretRef: { name: 'tls' },
        admin: { name: 'admin-tls' },
        clientAuth: { caSecretRef: { name: 'client-ca' }, operatorSecretRef: { name: 'operator-cert' } },
      },
    });
    expect(referencedSecrets(withTls)).toEqual(
      expect.arrayContaining(['tls', 'admin-tls', 'client-ca', 'operator-cert']),
    );
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
