import { CoordinationV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { GROUP, expectStatus, widget } from './harness.ts';
import {
  apply,
  apps,
  core,
  custom,
  deployment,
  freshNamespace,
  h,
  objects,
  readWidget,
  useClientNodeHarness,
} from './client-node-fixture.ts';

/*
 * The fake API server driven by the real client-node 1.4.0: optimistic concurrency, error Status objects, patch types,
 * the status and scale subresources, selectors, Secret stringData. Discovery, CRDs and server-side apply:
 * client-node-apply.test.ts.
 */

useClientNodeHarness();

describe('fake-kube with client-node', () => {
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
