import {
  CoordinationV1Api,
  KubeConfig,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, WIDGET_CRD, expectStatus, kubeConfigFor, startHarness, widget, type Harness } from './harness.ts';

/*
 * RBAC enforcement (`rbac: true`) from RBAC manifests loaded as YAML, checked with client-node as a service account, a
 * user and a group member: allowed calls pass, others answer the real 403 message.
 */

const RBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widget-operator}
rules:
- apiGroups: [example.com]
  resources: [widgets]
  verbs: [get, list, watch, patch]
- apiGroups: [example.com]
  resources: [widgets/status]
  verbs: [get, patch, update]
- apiGroups: [example.com]
  resources: [widgets/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: widget-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widget-operator}
subjects:
- {kind: ServiceAccount, name: operator, namespace: ops}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leader-election, namespace: ops}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [widget-operator]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader-election, namespace: ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader-election}
subjects:
- {kind: ServiceAccount, name: operator}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widget-viewer}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {example.com/aggregate-to-view: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widget-view-rules
  labels: {example.com/aggregate-to-view: "true"}
rules:
- apiGroups: [example.com]
  resources: [widgets]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: widget-viewers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widget-viewer}
subjects:
- {kind: Group, name: viewers, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: patch-only, namespace: team}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [patch, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: patch-only, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: patch-only}
subjects:
- {kind: User, name: patcher, apiGroup: rbac.authorization.k8s.io}
`;

const OPERATOR = 'system:serviceaccount:ops:operator';
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ rbac: true, namespaces: ['ops', 'team'] });
  h.fake.put(WIDGET_CRD);
  expect(h.fake.loadYaml(RBAC).map((o) => `${o.kind}/${o.metadata.name ?? ''}`)).toHaveLength(9);
  h.fake.put(widget('w', 'team', { size: 1 }));
  h.fake.addServiceAccount('ops', 'operator');
  h.fake.addUser('alice', ['viewers']);
  h.fake.addUser('patcher');
});

afterAll(async () => {
  await h.stop();
});

describe('fake-kube RBAC', () => {
  it('lets the operator service account do what its ClusterRole grants and nothing else', async () => {
    const kc = kubeConfigFor(h.fake, h.dir, OPERATOR);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);

    const list = (await custom.listClusterCustomObject({ group: GROUP, version: 'v1', plural: 'widgets' })) as {
      items: unknown[];
    };
    expect(list.items).toHaveLength(1);
    await custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: 'v1',
        namespace: 'team',
        plural: 'widgets',
        name: 'w',
        body: { status: { observedGeneration: 1 } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await core.createNamespacedConfigMap({ namespace: 'team', body: { metadata: { name: 'child' } } });

    const secrets = await expectStatus(core.listNamespacedSecret({ namespace: 'team' }), 403, 'Forbidden');
    expect(secrets.message).toBe(
      `secrets is forbidden: User "${OPERATOR}" cannot list resource "secrets" in API group "" in the namespace "team"`,
    );
    expect(secrets.details).toEqual({ kind: 'secrets' });

    const deletion = await expectStatus(
      custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: 'v1',
        namespace: 'team',
        plural: 'widgets',
        name: 'w',
      }),
      403,
      'Forbidden',
    );
    expect(deletion.message).toBe(
      `widgets.example.com "w" is forbidden: User "${OPERATOR}" cannot delete resource "widgets" in API group "example.com" in the namespace "team"`,
    );
    expect(deletion.details).toEqual({ name: 'w', group: GROUP, kind: 'widgets' });

    const namespaces = await expectStatus(core.listNamespace(), 403, 'Forbidden');
    expect(namespaces.message).toBe(
      `namespaces is forbidden: User "${OPERATOR}" cannot list resource "namespaces" in API group "" at the cluster scope`,
    );
  });

  it('honours resourceNames and namespace-scoped Roles for leader election', async () => {
    const leases = kubeConfigFor(h.fake, h.dir, OPERATOR).makeApiClient(CoordinationV1Api);
    const lease = await leases.createNamespacedLease({
      namespace: 'ops',
      body: { metadata: { name: 'widget-operator' }, spec: { holderIdentity: 'me' } },
    });
    await leases.replaceNamespacedLease({
      namespace: 'ops',
      name: 'widget-operator',
      body: { ...lease, spec: { holderIdentity: 'me', leaseDurationSeconds: 15 } },
    });
    const other = await expectStatus(
      leases.readNamespacedLease({ namespace: 'ops', name: 'someone-else' }),
      403,
      'Forbidden',
    );
    expect(other.message).toBe(
      `leases.coordination.k8s.io "someone-else" is forbidden: User "${OPERATOR}" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "ops"`,
    );
    await expectStatus(
      leases.createNamespacedLease({ namespace: 'team', body: { metadata: { name: 'widget-operator' } } }),
      403,
      'Forbidden',
    );
  });

  it('resolves group subjects through aggregated ClusterRoles and names subresources in denials', async () => {
    const custom = kubeConfigFor(h.fake, h.dir, 'alice').makeApiClient(CustomObjectsApi);
    await custom.getNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: 'team',
      plural: 'widgets',
      name: 'w',
    });
    const status = await expectStatus(
      custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: 'v1', namespace: 'team', plural: 'widgets', name: 'w', body: { status: {} } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
      403,
      'Forbidden',
    );
    expect(status.message).toBe(
      `widgets.example.com "w" is forbidden: User "alice" cannot patch resource "widgets/status" in API group "example.com" in the namespace "team"`,
    );
  });

  it('requires create as well as patch for a server-side apply that creates the object', async () => {
    const objects = KubernetesObjectApi.makeApiClient(kubeConfigFor(h.fake, h.dir, 'patcher'));
    const cm = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'applied', namespace: 'team' },
      data: { a: '1' },
    };
    const denied = await expectStatus(
      objects.patch(cm, undefined, undefined, 'patcher', true, PatchStrategy.ServerSideApply),
      403,
      'Forbidden',
    );
    expect(denied.message).toBe(
      `configmaps "applied" is forbidden: User "patcher" cannot create resource "configmaps" in API group "" in the namespace "team"`,
    );
    h.fake.put(cm);
    const applied = await objects.patch(
      { ...cm, data: { a: '2' } },
      undefined,
      undefined,
      'patcher',
      true,
      PatchStrategy.ServerSideApply,
    );
    expect((applied as unknown as { data: Record<string, string> }).data).toEqual({ a: '2' });
  });

  it('answers 401 to requests without a known token, over HTTPS', async () => {
    expect(h.fake.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const as = (user: { name: string; token?: string }): KubernetesObjectApi => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [
          {
            name: 'fake',
            server: h.fake.url,
            caData: Buffer.from(h.fake.caCertificate).toString('base64'),
            skipTLSVerify: false,
          },
        ],
        users: [user],
        contexts: [{ name: 'fake', cluster: 'fake', user: user.name }],
        currentContext: 'fake',
      });
      return KubernetesObjectApi.makeApiClient(kc);
    };
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'applied', namespace: 'team' } };
    const unknown = await expectStatus(as({ name: 'x', token: 'nope' }).read(cm), 401, 'Unauthorized');
    expect(unknown.message).toBe('Unauthorized');
    await expectStatus(as({ name: 'anonymous' }).read(cm), 401, 'Unauthorized');
    const admin = await as({ name: 'admin', token: h.fake.adminToken }).read(cm);
    expect(admin.metadata?.uid).toBeDefined();
  });
});
