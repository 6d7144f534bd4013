import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ClientNodeEventRecorder,
  toKubeApiError,
  type ClientNodeKube,
} from '../../../../operator/src/kube/client-node.ts';
import { KubeApiError } from '../../../../operator/src/kube/port.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import { startTestCluster, widget, WIDGET_API, type TestCluster, type Widget } from './support.ts';

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

async function rejection(promise: Promise<unknown>): Promise<KubeApiError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof KubeApiError) return err;
    throw err;
  }
  throw new Error('expected a KubeApiError');
}

describe('ClientNodeKube against the fake API server', () => {
  let cluster: TestCluster;
  let kube: ClientNodeKube;

  beforeAll(async () => {
    cluster = await startTestCluster();
    kube = cluster.client();
  });
  afterAll(async () => {
    await cluster.close();
  });

  it('applies (create, then change), keeps status apart and returns plain JSON with string timestamps', async () => {
    const ref = { apiVersion: WIDGET_API, kind: 'Widget', namespace: 'a', name: 'w1' };
    expect(await kube.get(ref)).toBeUndefined();

    const created = await kube.apply<Widget>(widget('a', 'w1', 1, { tier: 'gold' }), { fieldManager: 'test' });
    expect(created.metadata.generation).toBe(1);
    expect(typeof created.metadata.creationTimestamp).toBe('string');
    expect(created.spec).toEqual({ size: 1 });

    const changed = await kube.apply<Widget>(widget('a', 'w1', 2, { tier: 'gold' }), { fieldManager: 'test' });
    expect(changed.metadata.generation).toBe(2);

    const withStatus = await kube.applyStatus<Widget>(
      {
        apiVersion: WIDGET_API,
        kind: 'Widget',
        metadata: { namespace: 'a', name: 'w1' },
        status: { observedGeneration: 2 },
      },
      { fieldManager: 'test' },
    );
    expect(withStatus.status).toEqual({ observedGeneration: 2 });
    expect(withStatus.metadata.generation).toBe(2);

    const read = await kube.get<Widget>(ref);
    expect(read).toMatchObject({
      apiVersion: WIDGET_API,
      kind: 'Widget',
      spec: { size: 2 },
      status: { observedGeneration: 2 },
    });
    // Plain JSON: what JSON.parse gives, no Date objects anywhere.
    expect(JSON.parse(JSON.stringify(read))).toEqual(read);
    const managers = (read?.metadata as { managedFields?: { manager: string }[] }).managedFields?.map((m) => m.manager);
    expect(managers).toContain('test');
  });

  it('takes over fields of another manager only with force', async () => {
    await kube.apply(widget('a', 'contested', 1), { fieldManager: 'first' });
    const conflict = await rejection(kube.apply(widget('a', 'contested', 5), { fieldManager: 'second', force: false }));
    expect(conflict.code).toBe(409);
    const forced = await kube.apply<Widget>(widget('a', 'contested', 5), { fieldManager: 'second' });
    expect(forced.spec?.size).toBe(5);
  });

  it('lists one namespace, all namespaces, and by label; typed list items get apiVersion and kind', async () => {
    await kube.apply(widget('a', 'l1', 1, { app: 'x' }), { fieldManager: 'test' });
    await kube.apply(widget('b', 'l2', 1, { app: 'x' }), { fieldManager: 'test' });
    await kube.apply(widget('b', 'l3', 1, { app: 'y' }), { fieldManager: 'test' });
    const names = (items: KubeObject[]): string[] =>
      items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort();
    expect(names(await kube.list(WIDGET_API, 'Widget', { labelSelector: 'app=x' }))).toEqual(['a/l1', 'b/l2']);
    expect(names(await kube.list(WIDGET_API, 'Widget', { namespace: 'b' }))).toEqual(['b/l2', 'b/l3']);

    await kube.apply(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'a', name: 'cm' }, data: { k: 'v' } },
      { fieldManager: 'test' },
    );
    const configMaps = await kube.list('v1', 'ConfigMap', { namespace: 'a' });
    expect(configMaps.map((c) => [c.apiVersion, c.kind, c.metadata.name])).toEqual([['v1', 'ConfigMap', 'cm']]);
  });

  it('setFinalizers is guarded by resourceVersion; the last one going deletes a deleted object', async () => {
    const ref = { apiVersion: WIDGET_API, kind: 'Widget', namespace: 'a', name: 'fin' };
    const created = await kube.apply(widget('a', 'fin'), { fieldManager: 'test' });
    const withFinalizer = await kube.setFinalizers(
      ref,
      ['test.ratchet.dev/cleanup'],
      created.metadata.resourceVersion ?? '',
    );
    expect(withFinalizer?.metadata.finalizers).toEqual(['test.ratchet.dev/cleanup']);

    const stale = await rejection(kube.setFinalizers(ref, [], created.metadata.resourceVersion ?? ''));
    expect(stale.code).toBe(409);
    expect(KubeApiError.isConflict(stale)).toBe(true);

    expect(await kube.delete(ref)).toBe(true);
    const deleting = await kube.get(ref);
    expect(deleting?.metadata.deletionTimestamp).toEqual(expect.any(String));

    expect(await kube.setFinalizers(ref, [], deleting?.metadata.resourceVersion ?? '')).toBeUndefined();
    expect(await kube.get(ref)).toBeUndefined();
    expect(await kube.delete(ref)).toBe(false);
    expect(await kube.setFinalizers(ref, [], '1')).toBeUndefined();
  });

  it('deletes with a propagation policy', async () => {
    const ref = { apiVersion: WIDGET_API, kind: 'Widget', namespace: 'a', name: 'gone' };
    await kube.apply(widget('a', 'gone'), { fieldManager: 'test' });
    expect(await kube.delete(ref, { propagationPolicy: 'Foreground' })).toBe(true);
    expect(await kube.get(ref)).toBeUndefined();
  });

  it('create and replace: 409 when the object exists or the resourceVersion is stale', async () => {
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { namespace: 'ops', name: 'l' },
      spec: { holderIdentity: 'x' },
    };
    const created = await kube.create(lease);
    expect((await rejection(kube.create(lease))).reason).toBe('AlreadyExists');
    const replaced = await kube.replace({ ...created, spec: { holderIdentity: 'y' } });
    expect(replaced['spec']).toEqual({ holderIdentity: 'y' });
    const stale = await rejection(kube.replace({ ...created, spec: { holderIdentity: 'z' } }));
    expect(stale.code).toBe(409);
  });

  it('maps API errors to KubeApiError with code, reason and message', async () => {
    cluster.fake.failNext({ verb: 'get', resource: 'widgets', status: 500, message: 'etcd is down' });
    const failed = await rejection(kube.get({ apiVersion: WIDGET_API, kind: 'Widget', namespace: 'a', name: 'x' }));
    expect([failed.code, failed.reason, failed.message]).toEqual([500, 'InternalError', 'etcd is down']);

    const unknownKind = await rejection(
      kube.get({ apiVersion: WIDGET_API, kind: 'Gadget', namespace: 'a', name: 'x' }),
    );
    expect(unknownKind.code).toBe(404);
    expect(unknownKind.message).toContain('Gadget');
    const unknownGroup = await rejection(kube.list('nothing.example/v1', 'Thing'));
    expect(unknownGroup.code).toBe(404);

    // The generated clients throw ApiException; toKubeApiError gives the same shape.
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const apiError = await core.readNamespacedConfigMap({ namespace: 'a', name: 'missing' }).catch(toKubeApiError);
    expect(apiError).toBeInstanceOf(KubeApiError);
    expect(apiError).toMatchObject({ code: 404, reason: 'NotFound' });
  });

  it('sees kinds whose CRD is installed after the first lookup', async () => {
    const ref = { apiVersion: 'late.ratchet.dev/v1', kind: 'Late', namespace: 'a', name: 'x' };
    expect((await rejection(kube.get(ref))).code).toBe(404);
    const crd: KubeObject = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'lates.late.ratchet.dev' },
      spec: {
        group: 'late.ratchet.dev',
        scope: 'Namespaced',
        names: { kind: 'Late', plural: 'lates', singular: 'late' },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object' } } }],
      },
    };
    cluster.fake.put(crd);
    expect(await kube.get(ref)).toBeUndefined();
  });

  it('records events.k8s.io/v1 Events and counts repeats in series instead of creating new ones', async () => {
    const regarding = await kube.apply(widget('b', 'evented'), { fieldManager: 'test' });
    let now = new Date('2026-03-01T10:00:00.123Z');
    const recorder = new ClientNodeEventRecorder(kube, { reportingInstance: 'operator-0', now: () => now });

    await recorder.record(regarding, 'Normal', 'Registered', 'registered as dp_1');
    now = new Date('2026-03-01T10:01:00Z');
    await recorder.record(regarding, 'Normal', 'Registered', 'registered as dp_1');
    await recorder.record(regarding, 'Normal', 'Registered', 'registered as dp_1');
    await recorder.record(regarding, 'Warning', 'DrainBlocked', '3 invocations pending', 'Drain');

    const events = await kube.list('events.k8s.io/v1', 'Event', { namespace: 'b' });
    expect(events).toHaveLength(2);
    const registered = events.find((e) => e['reason'] === 'Registered');
    expect(registered).toMatchObject({
      type: 'Normal',
      note: 'registered as dp_1',
      action: 'Registered',
      reportingController: 'ratchet.dev/operator',
      reportingInstance: 'operator-0',
      eventTime: '2026-03-01T10:00:00.123000Z',
      regarding: {
        apiVersion: WIDGET_API,
        kind: 'Widget',
        namespace: 'b',
        name: 'evented',
        uid: regarding.metadata.uid,
      },
      series: { count: 3, lastObservedTime: '2026-03-01T10:01:00.000000Z' },
    });
    expect(registered?.['eventTime']).toMatch(MICRO_TIME);
    expect(events.find((e) => e['reason'] === 'DrainBlocked')).toMatchObject({ type: 'Warning', action: 'Drain' });

    // Past the window, a repeat starts a new Event.
    now = new Date('2026-03-01T10:10:00Z');
    await recorder.record(regarding, 'Normal', 'Registered', 'registered as dp_1');
    expect(await kube.list('events.k8s.io/v1', 'Event', { namespace: 'b' })).toHaveLength(3);
  });

  it('a failing event write does not fail the caller', async () => {
    const regarding = await kube.apply(widget('b', 'quiet'), { fieldManager: 'test' });
    const recorder = new ClientNodeEventRecorder(kube, { reportingInstance: 'operator-0' });
    cluster.fake.failNext({ verb: 'create', resource: 'events', status: 403 });
    await expect(recorder.record(regarding, 'Normal', 'Created', 'x')).resolves.toBeUndefined();
  });
});
