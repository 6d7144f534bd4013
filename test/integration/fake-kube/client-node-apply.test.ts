import { ApisApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { GROUP, WIDGET_CRD, expectStatus, widget, type Obj } from './harness.ts';
import { apply, custom, freshNamespace, h, objects, readWidget, useClientNodeHarness } from './client-node-fixture.ts';

/*
 * The fake API server driven by the real client-node 1.4.0: discovery, CRDs, server-side apply, generation. The other
 * writes (optimistic concurrency, patch types, subresources, selectors, errors): client-node-writes.test.ts.
 */

useClientNodeHarness();

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
});
