import {
  ApisApi,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, WIDGET_CRD, expectStatus, startHarness, widget, type Harness, type Obj } from './harness.ts';

/*
 * The fake API server driven by the real client-node 1.4.0: discovery, CRDs, server-side apply, generation, the status
 * and scale subresources, optimistic concurrency, patch types, selectors and error Status objects.
 */

let h: Harness;
let objects: KubernetesObjectApi;
let core: CoreV1Api;
let apps: AppsV1Api;
let custom: CustomObjectsApi;
let namespaceCount = 0;

async function freshNamespace(): Promise<string> {
  const name = `ns-${++namespaceCount}`;
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

async function apply(object: Obj, manager: string, force = false): Promise<Obj> {
  return objects.patch<Obj>(object, undefined, undefined, manager, force, PatchStrategy.ServerSideApply);
}

function readWidget(namespace: string, name: string): Promise<Obj> {
  return custom.getNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace,
    plural: 'widgets',
    name,
  }) as Promise<Obj>;
}

function deployment(name: string): V1Deployment {
  return {
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            { name: 'main', image: 'main:1', env: [{ name: 'A', value: 'a' }] },
            { name: 'sidecar', image: 'sidecar:1' },
          ],
        },
      },
    },
  };
}

beforeAll(async () => {
  h = await startHarness();
  objects = KubernetesObjectApi.makeApiClient(h.kc);
  core = h.kc.makeApiClient(CoreV1Api);
  apps = h.kc.makeApiClient(AppsV1Api);
  custom = h.kc.makeApiClient(CustomObjectsApi);
  // Through the store: client-node would drop the wire-form `x-kubernetes-*` keys (see the first test).
  h.fake.put(WIDGET_CRD);
});

afterAll(async () => {
  await h.stop();
});

describe('fake-kube with client-node', () => {
  it('registers a CRD: Established, served in discovery under every served version', async () => {
    // client-node serializes CRDs through its models, which know the `x-kubernetes-*` keys only in snake case: the
    // wire-form key is silently dropped.
    const gizmos = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `gizmos.${GROUP}` },
      spec: {
        group: GROUP,
        scope: 'Cluster',
        names: { plural: 'gizmos', kind: 'Gizmo' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: {
                  spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                  status: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
                },
              },
            },
          },
        ],
      },
    };
    await objects.create(gizmos);
    const stored = h.fake.get({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: `gizmos.${GROUP}`,
    });
    const schema = JSON.stringify(stored?.['spec']);
    expect(schema).toContain('"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}');
    expect(schema).toContain('"spec":{"type":"object"}');

    const crd = await objects.read<
      Obj & { status: { conditions: { type: string; status: string }[]; acceptedNames: { kind: string } } }
    >({ ...WIDGET_CRD, metadata: { name: `widgets.${GROUP}` } });
    expect(crd.status.conditions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'Established', status: 'True' }),
        expect.objectContaining({ type: 'NamesAccepted', status: 'True' }),
      ]),
    );
    expect(crd.status.acceptedNames.kind).toBe('Widget');

    const groups = await h.kc.makeApiClient(ApisApi).getAPIVersions();
    const group = groups.groups.find((g) => g.name === GROUP);
    expect(group?.preferredVersion?.version).toBe('v1');
    expect(group?.versions.map((v) => v.version)).toEqual(['v1', 'v1beta1']);
    const resources = await custom.getAPIResources({ group: GROUP, version: 'v1' });
    expect(resources.resources.map((r) => r.name)).toEqual(['gizmos', 'widgets', 'widgets/status', 'widgets/scale']);
    expect(resources.resources[1]).toMatchObject({
      kind: 'Widget',
      namespaced: true,
      shortNames: ['wd'],
      categories: ['gadgets'],
    });

    const ns = await freshNamespace();
    await apply(widget('w', ns, { size: 1 }), 'test');
    const beta = (await custom.getNamespacedCustomObject({
      group: GROUP,
      version: 'v1beta1',
      namespace: ns,
      plural: 'widgets',
      name: 'w',
    })) as Obj;
    expect(beta.apiVersion).toBe(`${GROUP}/v1beta1`);
  });

  it('server-side apply creates at generation 1, is a no-op when unchanged, and bumps generation only on spec changes', async () => {
    const ns = await freshNamespace();
    const created = await apply(widget('w', ns, { size: 1 }), 'test');
    expect(created.metadata?.generation).toBe(1);
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date); // ObjectSerializer turns it into a Date

    const again = await apply(widget('w', ns, { size: 1 }), 'test');
    expect(again.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);

    const labelled = await apply(
      { ...widget('w', ns, { size: 1 }), metadata: { name: 'w', namespace: ns, labels: { a: 'b' } } },
      'test',
    );
    expect(labelled.metadata?.generation).toBe(1);
    expect(Number(labelled.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));

    const changed = await apply(widget('w', ns, { size: 2 }), 'test');
    expect(changed.metadata?.generation).toBe(2);
    // Dropping the label from the applied configuration removes it: this manager owned it.
    expect(changed.metadata?.labels).toBeUndefined();

    await custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        name: 'w',
        body: {
          status: { observedGeneration: 2, conditions: [{ type: 'Ready', status: 'True' }] },
          spec: { size: 99 },
        },
        fieldManager: 'controller',
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const afterStatus = await readWidget(ns, 'w');
    expect(afterStatus.metadata?.generation).toBe(2);
    expect(afterStatus['spec']).toEqual({ size: 2 });
    expect(afterStatus['status']).toEqual({ observedGeneration: 2, conditions: [{ type: 'Ready', status: 'True' }] });
    expect(afterStatus.metadata?.managedFields).toEqual([
      expect.objectContaining({ manager: 'test', operation: 'Apply', fieldsV1: { 'f:spec': { 'f:size': {} } } }),
      expect.objectContaining({ manager: 'controller', operation: 'Update', subresource: 'status' }),
    ]);

    // Writes to the resource itself ignore status.
    await custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        name: 'w',
        body: { status: { observedGeneration: 7 } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect((await readWidget(ns, 'w'))['status']).toMatchObject({ observedGeneration: 2 });
  });

  it('apply merges keyed lists by key and sets as unions, replaces atomic lists, and drops fields a manager stopped applying', async () => {
    const ns = await freshNamespace();
    await apply(
      widget('w', ns, { image: 'one', ports: [{ name: 'http', port: 80 }], tags: ['x'], args: ['1', '2'] }),
      'alice',
    );
    await apply(widget('w', ns, { ports: [{ name: 'admin', port: 9070 }], tags: ['y'] }), 'bob');
    expect((await readWidget(ns, 'w'))['spec']).toEqual({
      image: 'one',
      ports: [
        { name: 'http', port: 80 },
        { name: 'admin', port: 9070 },
      ],
      tags: ['x', 'y'],
      args: ['1', '2'],
    });

    await apply(widget('w', ns, { ports: [{ name: 'http', port: 8080 }], args: ['3'] }), 'alice');
    expect((await readWidget(ns, 'w'))['spec']).toEqual({
      ports: [
        { name: 'http', port: 8080 },
        { name: 'admin', port: 9070 },
      ],
      tags: ['y'],
      args: ['3'],
    });

    // Status conditions are a list-map keyed by type too, through /status.
    const status = (conditions: object[]): Obj => ({ ...widget('w', ns, {}), status: { conditions } });
    await custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        name: 'w',
        body: status([{ type: 'Ready', status: 'False' }]),
        fieldManager: 'ready-controller',
        force: true,
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    await custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        name: 'w',
        body: status([{ type: 'Synced', status: 'True' }]),
        fieldManager: 'sync-controller',
        force: true,
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    expect((await readWidget(ns, 'w'))['status']).toEqual({
      conditions: [
        { type: 'Ready', status: 'False' },
        { type: 'Synced', status: 'True' },
      ],
    });
  });

  it('apply reports conflicts with other managers and takes the field over when forced', async () => {
    const ns = await freshNamespace();
    await apply(widget('w', ns, { size: 1 }), 'alice');
    const status = await expectStatus(apply(widget('w', ns, { size: 2 }), 'bob'), 409, 'Conflict');
    expect(status.message).toBe('Apply failed with 1 conflict: conflict with "alice" using example.com/v1: .spec.size');
    expect(status.details?.['causes']).toEqual([
      expect.objectContaining({ reason: 'FieldManagerConflict', field: '.spec.size' }),
    ]);

    // The same value is shared ownership, not a conflict.
    await apply(widget('w', ns, { size: 1 }), 'carol');
    const forced = await apply(widget('w', ns, { size: 3 }), 'bob', true);
    expect(forced['spec']).toEqual({ size: 3 });
    const owners = (forced.metadata?.managedFields ?? []) as { manager: string; fieldsV1: object }[];
    expect(owners.map((o) => o.manager)).toEqual(['bob']);

    // A plain update takes ownership of what it changes, so a later apply conflicts with it.
    await custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        name: 'w',
        body: { spec: { size: 5 } },
        fieldManager: 'kubectl-edit',
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const again = await expectStatus(apply(widget('w', ns, { size: 4 }), 'bob'), 409, 'Conflict');
    expect(again.message).toContain('conflict with "kubectl-edit"');

    await expectStatus(
      objects.patch(
        widget('w', ns, { size: 4 }),
        undefined,
        undefined,
        undefined,
        undefined,
        PatchStrategy.ServerSideApply,
      ),
      400,
      'BadRequest',
    );
  });

  it('answers 409 Conflict to a PUT with a stale resourceVersion, as leader election relies on', async () => {
    const ns = await freshNamespace();
    const cm = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'c' }, data: { a: '1' } },
    });
    const updated = await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: 'c',
      body: { ...cm, data: { a: '2' } },
    });
    expect(Number(updated.metadata?.resourceVersion)).toBeGreaterThan(Number(cm.metadata?.resourceVersion));
    const stale = await expectStatus(
      core.replaceNamespacedConfigMap({ namespace: ns, name: 'c', body: { ...cm, data: { a: '3' } } }),
      409,
      'Conflict',
    );
    expect(stale.message).toBe(
      'Operation cannot be fulfilled on configmaps "c": the object has been modified; please apply your changes to the latest version and try again',
    );

    const leases = h.kc.makeApiClient(CoordinationV1Api);
    // client-node sends a Date in a MicroTime field as-is (three fractional digits), which the real server rejects.
    const badTime = await expectStatus(
      leases.createNamespacedLease({
        namespace: ns,
        body: { metadata: { name: 'leader' }, spec: { renewTime: new Date() } },
      }),
      400,
      'BadRequest',
    );
    expect(badTime.message).toMatch(
      /^Lease in version "v1" cannot be handled as a Lease: parsing time ".*" as "2006-01-02T15:04:05.000000Z07:00"/,
    );
    const microTime = (): Date => new Date().toISOString().replace(/Z$/, '000Z') as unknown as Date;
    const lease = await leases.createNamespacedLease({
      namespace: ns,
      body: {
        metadata: { name: 'leader' },
        spec: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: microTime(), renewTime: microTime() },
      },
    });
    const renewed = await leases.replaceNamespacedLease({
      namespace: ns,
      name: 'leader',
      body: { ...lease, spec: { ...lease.spec, renewTime: microTime() } },
    });
    expect(renewed.spec?.holderIdentity).toBe('a');
    const takeover = await expectStatus(
      leases.replaceNamespacedLease({
        namespace: ns,
        name: 'leader',
        body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } },
      }),
      409,
      'Conflict',
    );
    expect(takeover.message).toContain('leases.coordination.k8s.io "leader"');

    const again = await expectStatus(
      core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'c' } } }),
      409,
      'AlreadyExists',
    );
    expect(again.message).toBe('configmaps "c" already exists');

    // Custom resources refuse unconditional updates.
    await apply(widget('w', ns, { size: 1 }), 'test');
    const current = await readWidget(ns, 'w');
    const unconditional = { ...current, metadata: { name: 'w', namespace: ns } };
    await expectStatus(
      custom.replaceNamespacedCustomObject({
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        name: 'w',
        body: unconditional,
      }),
      422,
      'Invalid',
    );
  });

  it('answers Status errors for missing objects, missing namespaces, bad names, and unknown kinds', async () => {
    const ns = await freshNamespace();
    const missing = await expectStatus(core.readNamespacedConfigMap({ namespace: ns, name: 'nope' }), 404, 'NotFound');
    expect(missing.message).toBe('configmaps "nope" not found');
    expect(missing.details).toEqual({ name: 'nope', kind: 'configmaps' });

    const ghost = await expectStatus(
      core.createNamespacedConfigMap({ namespace: 'ghost', body: { metadata: { name: 'c' } } }),
      404,
      'NotFound',
    );
    expect(ghost.message).toBe('namespaces "ghost" not found');

    const invalid = await expectStatus(
      core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'Bad_Name' } } }),
      422,
      'Invalid',
    );
    expect(invalid.message).toContain('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value');

    const generated = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { generateName: 'gen-' } },
    });
    expect(generated.metadata?.name).toMatch(/^gen-[a-z0-9]{5}$/);

    const unknownResource = await fetch(`${h.fake.url}/apis/${GROUP}/v1/namespaces/${ns}/gizmos`, {
      headers: { Authorization: `Bearer ${h.fake.adminToken}` },
    });
    expect(unknownResource.status).toBe(404);
    expect(await unknownResource.json()).toMatchObject({
      kind: 'Status',
      reason: 'NotFound',
      message: 'the server could not find the requested resource',
    });
    const unknownGroup = await fetch(`${h.fake.url}/apis/nope.example.com/v1/things`);
    expect(unknownGroup.status).toBe(404);
    await unknownGroup.body?.cancel();
    await expect(objects.list('nope.example.com/v1', 'Thing', ns)).rejects.toThrow(
      /Failed to fetch resource metadata for nope.example.com\/v1\/Thing/,
    );
  });

  it('applies merge, strategic-merge (keyed lists merge by name) and JSON patches; strategic merge on a CR is 415', async () => {
    const ns = await freshNamespace();
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment('d') });
    const smp = await apps.patchNamespacedDeployment(
      {
        namespace: ns,
        name: 'd',
        body: {
          spec: {
            template: { spec: { containers: [{ name: 'main', image: 'main:2', env: [{ name: 'B', value: 'b' }] }] } },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    expect(smp.spec?.template.spec?.containers).toEqual([
      {
        name: 'main',
        image: 'main:2',
        env: [
          { name: 'A', value: 'a' },
          { name: 'B', value: 'b' },
        ],
      },
      { name: 'sidecar', image: 'sidecar:1' },
    ]);
    expect(smp.metadata?.generation).toBe(2);

    const merged = await apps.patchNamespacedDeployment(
      {
        namespace: ns,
        name: 'd',
        body: {
          metadata: { labels: { keep: 'yes', drop: 'x' } },
          spec: { template: { spec: { containers: [{ name: 'only', image: 'x' }] } } },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(merged.spec?.template.spec?.containers.map((c) => c.name)).toEqual(['only']);
    const unlabelled = await apps.patchNamespacedDeployment(
      { namespace: ns, name: 'd', body: { metadata: { labels: { drop: null } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(unlabelled.metadata?.labels).toEqual({ keep: 'yes' });

    const jsonPatched = await apps.patchNamespacedDeployment(
      {
        namespace: ns,
        name: 'd',
        body: [
          { op: 'test', path: '/spec/replicas', value: 1 },
          { op: 'replace', path: '/spec/replicas', value: 3 },
        ],
      },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    expect(jsonPatched.spec?.replicas).toBe(3);
    await expectStatus(
      apps.patchNamespacedDeployment(
        { namespace: ns, name: 'd', body: [{ op: 'test', path: '/spec/replicas', value: 1 }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      ),
      422,
      'Invalid',
    );

    await apply(widget('w', ns, { size: 1 }), 'test');
    await expectStatus(objects.patch(widget('w', ns, { size: 2 })), 415, 'UnsupportedMediaType');
  });

  it('splits status from spec on built-in kinds and serves /scale', async () => {
    const ns = await freshNamespace();
    await apps.createNamespacedDeployment({ namespace: ns, body: { ...deployment('d'), status: { replicas: 42 } } });
    const created = await apps.readNamespacedDeployment({ namespace: ns, name: 'd' });
    expect(created.status).toBeUndefined();

    const withStatus = await apps.replaceNamespacedDeploymentStatus({
      namespace: ns,
      name: 'd',
      body: {
        ...created,
        spec: { ...created.spec!, replicas: 9 },
        status: { replicas: 1, readyReplicas: 1, observedGeneration: 1 },
      },
    });
    expect(withStatus.spec?.replicas).toBe(1);
    expect(withStatus.status).toMatchObject({ replicas: 1, readyReplicas: 1 });
    expect(withStatus.metadata?.generation).toBe(1);

    const scale = await apps.readNamespacedDeploymentScale({ namespace: ns, name: 'd' });
    expect(scale).toMatchObject({ kind: 'Scale', spec: { replicas: 1 }, status: { replicas: 1, selector: 'app=d' } });
    await apps.patchNamespacedDeploymentScale(
      { namespace: ns, name: 'd', body: { spec: { replicas: 5 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const scaled = await apps.readNamespacedDeployment({ namespace: ns, name: 'd' });
    expect(scaled.spec?.replicas).toBe(5);
    expect(scaled.metadata?.generation).toBe(2);

    await apply(widget('w', ns, { size: 2 }), 'test');
    const widgetScale = (await custom.getNamespacedCustomObjectScale({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      name: 'w',
    })) as { spec: { replicas: number } };
    expect(widgetScale.spec.replicas).toBe(2);
  });

  it('filters lists by label selector (=, !=, in, notin, exists, !) and field selector', async () => {
    const ns = await freshNamespace();
    const labels: Record<string, Record<string, string>> = {
      a: { tier: 'web', env: 'prod' },
      b: { tier: 'db', env: 'prod' },
      c: { tier: 'web' },
      d: {},
    };
    for (const [name, l] of Object.entries(labels))
      await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: l } } });
    const names = async (labelSelector?: string, fieldSelector?: string): Promise<string[]> =>
      (
        await core.listNamespacedConfigMap({
          namespace: ns,
          ...(labelSelector !== undefined ? { labelSelector } : {}),
          ...(fieldSelector !== undefined ? { fieldSelector } : {}),
        })
      ).items.map((i) => i.metadata?.name ?? '');
    expect(await names('tier=web')).toEqual(['a', 'c']);
    expect(await names('tier!=web')).toEqual(['b', 'd']);
    expect(await names('tier in (web, db),env')).toEqual(['a', 'b']);
    expect(await names('tier notin (web)')).toEqual(['b', 'd']);
    expect(await names('!env')).toEqual(['c', 'd']);
    expect(await names(undefined, 'metadata.name=b')).toEqual(['b']);
    expect(await names(undefined, `metadata.namespace=${ns},metadata.name!=a`)).toEqual(['b', 'c', 'd']);
    const all = await core.listConfigMapForAllNamespaces({ labelSelector: 'tier=db', limit: 1 });
    expect(all.items.map((i) => i.metadata?.namespace)).toEqual([ns]);
  });

  it('merges Secret stringData into base64 data on every write, as the server does', async () => {
    const ns = await freshNamespace();
    const created = await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 's' }, data: { a: Buffer.from('old').toString('base64') }, stringData: { b: 'two' } },
    });
    expect(created.data).toEqual({ a: 'b2xk', b: 'dHdv' });
    expect(created.stringData).toBeUndefined();
    const patched = await core.patchNamespacedSecret(
      { namespace: ns, name: 's', body: { stringData: { a: 'new' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(Buffer.from(patched.data?.['a'] ?? '', 'base64').toString()).toBe('new');
  });
});
