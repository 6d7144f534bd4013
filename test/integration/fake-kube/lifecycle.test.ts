import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeKubeChange } from '../../support/fake-kube/index.ts';
import { waitFor } from '../../support/wait.ts';
import { GROUP, WIDGET_CRD, expectStatus, startHarness, widget, type Harness, type Obj } from './harness.ts';

/*
 * Deletion through client-node: finalizers and deletionTimestamp, ownerReference garbage collection (background and
 * orphan), namespace termination, CRD removal; and a test-side "kubelet" reacting to changes through the store hook.
 */

let h: Harness;
let core: CoreV1Api;
let custom: CustomObjectsApi;
let namespaceCount = 0;

function freshNamespace(): string {
  const name = `life-${++namespaceCount}`;
  h.fake.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

const widgetRef = (
  ns: string,
  name: string,
): { apiVersion: string; kind: string; namespace: string; name: string } => ({
  apiVersion: `${GROUP}/v1`,
  kind: 'Widget',
  namespace: ns,
  name,
});
const cmRef = (ns: string, name: string): { apiVersion: string; kind: string; namespace: string; name: string } => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  namespace: ns,
  name,
});

/** A ConfigMap owned by `owner` (controller, blockOwnerDeletion), as an operator creates its children. */
interface Owner {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: { readonly name?: string; readonly uid?: string };
}

function ownedConfigMap(ns: string, name: string, ...owners: Owner[]): Obj {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: ns,
      ownerReferences: owners.map((o, i) => ({
        apiVersion: o.apiVersion ?? '',
        kind: o.kind ?? '',
        name: o.metadata?.name ?? '',
        uid: o.metadata?.uid ?? '',
        controller: i === 0,
        blockOwnerDeletion: true,
      })),
    },
  };
}

beforeAll(async () => {
  h = await startHarness();
  core = h.kc.makeApiClient(CoreV1Api);
  custom = h.kc.makeApiClient(CustomObjectsApi);
  h.fake.put(WIDGET_CRD);
});

afterAll(async () => {
  expect(h.fake.listenerErrors).toEqual([]);
  await h.stop();
});

describe('fake-kube deletion and garbage collection', () => {
  it('holds a finalized object with deletionTimestamp, deletes it once the finalizers are gone, then collects its children', async () => {
    const ns = freshNamespace();
    const owner = h.fake.put({
      ...widget('w', ns, { size: 1 }),
      metadata: { name: 'w', namespace: ns, finalizers: ['example.com/cleanup'] },
    });
    h.fake.put(ownedConfigMap(ns, 'child', owner));

    const deleting = (await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      name: 'w',
      propagationPolicy: 'Background',
    })) as Obj;
    expect(deleting.metadata?.deletionTimestamp).toBeDefined();
    const held = h.fake.get(widgetRef(ns, 'w'));
    expect(held?.metadata).toMatchObject({ deletionGracePeriodSeconds: 0, finalizers: ['example.com/cleanup'] });
    expect(h.fake.get(cmRef(ns, 'child'))).toBeDefined();

    const patchWidget = (body: object): Promise<unknown> =>
      custom.patchNamespacedCustomObject(
        { group: GROUP, version: 'v1', namespace: ns, plural: 'widgets', name: 'w', body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const refused = await expectStatus(
      patchWidget({ metadata: { finalizers: ['example.com/cleanup', 'example.com/late'] } }),
      422,
      'Invalid',
    );
    expect(refused.message).toContain('no new finalizers can be added if the object is being deleted');

    await patchWidget({ metadata: { finalizers: null } });
    await expectStatus(
      custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: ns, plural: 'widgets', name: 'w' }),
      404,
      'NotFound',
    );
    await waitFor(() => expect(h.fake.get(cmRef(ns, 'child'))).toBeUndefined());
  });

  it('orphans dependents on propagationPolicy Orphan, and keeps a dependent that still has another owner', async () => {
    const ns = freshNamespace();
    const first = h.fake.put(widget('first', ns, {}));
    const second = h.fake.put(widget('second', ns, {}));
    h.fake.put(ownedConfigMap(ns, 'orphan', first));
    h.fake.put(ownedConfigMap(ns, 'shared', first, second));

    await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      name: 'first',
      propagationPolicy: 'Orphan',
    });
    expect(h.fake.get(cmRef(ns, 'orphan'))?.metadata.ownerReferences).toBeUndefined();
    expect(h.fake.get(cmRef(ns, 'shared'))?.metadata.ownerReferences?.map((r) => r.name)).toEqual(['second']);

    const dependent = h.fake.put(ownedConfigMap(ns, 'dependent', second));
    await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      name: 'second',
      body: { propagationPolicy: 'Foreground' },
    });
    await waitFor(() => expect(h.fake.get(cmRef(ns, 'shared'))).toBeUndefined());
    await waitFor(() => expect(h.fake.get(cmRef(ns, 'dependent'))).toBeUndefined());
    expect(h.fake.get(cmRef(ns, 'orphan'))?.metadata.uid).toBeDefined();
    expect(dependent.metadata.uid).toBeDefined();

    // An owner reference to an object that does not exist is collected too.
    h.fake.put({
      ...ownedConfigMap(ns, 'dangling', {
        ...widget('ghost', ns, {}),
        metadata: { name: 'ghost', uid: 'no-such-uid' },
      }),
    });
    await waitFor(() => expect(h.fake.get(cmRef(ns, 'dangling'))).toBeUndefined());
  });

  it('terminates a namespace: refuses new content, deletes what it holds, and goes once finalizers are released', async () => {
    const ns = freshNamespace();
    h.fake.put({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'plain', namespace: ns } });
    h.fake.put({
      ...widget('held', ns, {}),
      metadata: { name: 'held', namespace: ns, finalizers: ['example.com/cleanup'] },
    });

    const terminating = await core.deleteNamespace({ name: ns });
    expect(terminating).toBeDefined();
    const namespace = await core.readNamespace({ name: ns });
    expect(namespace.status?.phase).toBe('Terminating');
    const refused = await expectStatus(
      core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'late' } } }),
      403,
      'Forbidden',
    );
    expect(refused.message).toBe(
      `configmaps "late" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`,
    );

    await waitFor(() => expect(h.fake.get(cmRef(ns, 'plain'))).toBeUndefined());
    await waitFor(() => expect(h.fake.get(widgetRef(ns, 'held'))?.metadata.deletionTimestamp).toBeDefined());
    expect(h.fake.get({ apiVersion: 'v1', kind: 'Namespace', name: ns })).toBeDefined();

    h.fake.update(widgetRef(ns, 'held'), (o) => delete o.metadata.finalizers);
    await waitFor(() => expect(h.fake.get({ apiVersion: 'v1', kind: 'Namespace', name: ns })).toBeUndefined());
  });

  it('removes a CRD only after its custom resources are gone, then stops serving the kind', async () => {
    const ns = freshNamespace();
    const crd: Obj = JSON.parse(
      JSON.stringify(WIDGET_CRD)
        .replaceAll('widget', 'doohickey')
        .replaceAll('Widget', 'Doohickey')
        .replaceAll('"wd"', '"dh"'),
    ) as Obj;
    h.fake.put(crd);
    const doohickey = {
      apiVersion: `${GROUP}/v1`,
      kind: 'Doohickey',
      metadata: { name: 'd', namespace: ns, finalizers: ['example.com/cleanup'] },
    };
    h.fake.put(doohickey);

    h.fake.put({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'unrelated', namespace: ns } });
    const crdRef = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: `doohickeys.${GROUP}`,
    };
    h.fake.delete(crdRef);
    await waitFor(() =>
      expect(h.fake.get({ ...doohickey, name: 'd', namespace: ns })?.metadata.deletionTimestamp).toBeDefined(),
    );
    const status = h.fake.get(crdRef)?.['status'] as { conditions: { type: string; status: string }[] };
    expect(status.conditions).toContainEqual(expect.objectContaining({ type: 'Terminating', status: 'True' }));
    await expectStatus(
      custom.createNamespacedCustomObject({
        group: GROUP,
        version: 'v1',
        namespace: ns,
        plural: 'doohickeys',
        body: { ...doohickey, metadata: { name: 'new' } },
      }),
      405,
      'MethodNotAllowed',
    );

    h.fake.update({ ...doohickey, name: 'd', namespace: ns }, (o) => delete o.metadata.finalizers);
    await waitFor(() => expect(h.fake.get(crdRef)).toBeUndefined());
    const gone = await fetch(`${h.fake.url}/apis/${GROUP}/v1/namespaces/${ns}/doohickeys`);
    expect(gone.status).toBe(404);
    await gone.body?.cancel();
    expect(h.fake.get(cmRef(ns, 'unrelated'))).toBeDefined();
  });

  it('lets a test-side kubelet write workload status from the change hook', async () => {
    const ns = freshNamespace();
    const kubelet = async (change: FakeKubeChange): Promise<void> => {
      const { object } = change;
      const spec = object['spec'] as { replicas?: number };
      const status = (object['status'] ?? {}) as { observedGeneration?: number };
      if (change.type === 'DELETED' || status.observedGeneration === object.metadata.generation) return;
      h.fake.update(
        { apiVersion: 'apps/v1', kind: 'StatefulSet', namespace: ns, name: object.metadata.name ?? '' },
        (o) => {
          const replicas = spec.replicas ?? 1;
          o['status'] = {
            observedGeneration: object.metadata.generation,
            replicas,
            readyReplicas: replicas,
            availableReplicas: replicas,
          };
        },
      );
    };
    const stopKubelet = h.fake.watchEvents(kubelet, { apiVersion: 'apps/v1', kind: 'StatefulSet' });

    const apps = h.kc.makeApiClient(AppsV1Api);
    const sts: V1StatefulSet = {
      metadata: { name: 'db' },
      spec: {
        replicas: 2,
        serviceName: 'db',
        selector: { matchLabels: { app: 'db' } },
        template: { metadata: { labels: { app: 'db' } }, spec: { containers: [{ name: 'db', image: 'db:1' }] } },
      },
    };
    await apps.createNamespacedStatefulSet({ namespace: ns, body: sts });
    await waitFor(async () =>
      expect((await apps.readNamespacedStatefulSet({ namespace: ns, name: 'db' })).status).toMatchObject({
        readyReplicas: 2,
        observedGeneration: 1,
      }),
    );

    await apps.patchNamespacedStatefulSet(
      { namespace: ns, name: 'db', body: { spec: { replicas: 3 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await waitFor(async () =>
      expect((await apps.readNamespacedStatefulSet({ namespace: ns, name: 'db' })).status).toMatchObject({
        readyReplicas: 3,
        observedGeneration: 2,
      }),
    );
    stopKubelet();
  });
});
