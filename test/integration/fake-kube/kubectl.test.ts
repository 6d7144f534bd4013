import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { waitFor } from '../../support/wait.ts';
import { GROUP, WIDGET_CRD, kubectl, startHarness, widget, type Harness } from './harness.ts';

/*
 * The real kubectl 1.32 against the fake: the user and GitOps path. `apply --server-side` of a CRD, a namespace and a
 * custom resource from one file; `get` with printer columns, short names and categories; `wait`; `patch`, `label`,
 * `scale`, `explain`; `delete`; and RBAC denials as kubectl prints them.
 */

let h: Harness;
const ref = { apiVersion: `${GROUP}/v1`, kind: 'Widget', namespace: 'demo', name: 'w1' };

function manifest(name: string, documents: object[]): string {
  const file = join(h.dir, name);
  writeFileSync(file, documents.map((d) => stringify(d)).join('---\n'));
  return file;
}

async function ok(args: string[]): Promise<string> {
  const result = await kubectl(h, args);
  expect(result, `kubectl ${args.join(' ')}`).toMatchObject({ code: 0 });
  return result.stdout;
}

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h.stop();
});

describe('fake-kube with kubectl', () => {
  it('applies a CRD and a namespace, then a custom resource, server-side, bumping generation only on spec changes', async () => {
    // As with a real cluster, kubectl cannot validate a custom resource whose CRD is in the same apply.
    const definitions = manifest('crd.yaml', [
      WIDGET_CRD,
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } },
    ]);
    expect(await ok(['apply', '--server-side', '-f', definitions])).toBe(
      'customresourcedefinition.apiextensions.k8s.io/widgets.example.com serverside-applied\nnamespace/demo serverside-applied\n',
    );
    const file = manifest('w1.yaml', [widget('w1', 'demo', { size: 1, image: 'img:1' })]);
    expect(await ok(['apply', '--server-side', '-f', file])).toBe('widget.example.com/w1 serverside-applied\n');
    expect(h.fake.get(ref)?.metadata).toMatchObject({
      generation: 1,
      managedFields: [expect.objectContaining({ manager: 'kubectl', operation: 'Apply' })],
    });
    // The list-map markers survive kubectl's YAML path (unlike client-node's model serialization).
    const crd = h.fake.get({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: `widgets.${GROUP}`,
    });
    expect(JSON.stringify(crd)).toContain('"x-kubernetes-list-map-keys":["type"]');

    await ok(['apply', '--server-side', '-f', file]);
    expect(h.fake.get(ref)?.metadata.generation).toBe(1);
    await ok([
      'apply',
      '--server-side',
      '-f',
      manifest('w1.yaml', [widget('w1', 'demo', { size: 2, image: 'img:1' })]),
    ]);
    expect(h.fake.get(ref)?.metadata.generation).toBe(2);
    await ok(['wait', '--for=condition=Established', `crd/widgets.${GROUP}`, '--timeout=10s']);
  });

  it('prints custom printer columns, finds the kind by short name and category, and shows wide columns', async () => {
    h.fake.update(ref, (o) => (o['status'] = { conditions: [{ type: 'Ready', status: 'False' }] }));
    const table = await ok(['get', 'widgets', '-n', 'demo']);
    expect(table).toMatch(/^NAME\s+READY\s+SIZE\s+AGE\nw1\s+False\s+2\s+\d+s\n$/);
    expect(await ok(['get', 'wd', '-n', 'demo', '-o', 'wide'])).toMatch(
      /^NAME\s+READY\s+SIZE\s+IMAGE\s+AGE\nw1\s+False\s+2\s+img:1\s+\d+s\n$/,
    );
    expect(await ok(['get', 'gadgets', '-A'])).toMatch(
      /^NAMESPACE\s+NAME\s+READY\s+SIZE\s+AGE\ndemo\s+w1\s+False\s+2\s+\d+s\n$/,
    );
    expect(await ok(['get', 'widget', 'w1', '-n', 'demo', '-o', 'jsonpath={.spec.size}'])).toBe('2');
    expect(await ok(['get', 'ns', 'demo', '-o', 'name'])).toBe('namespace/demo\n');
    const missing = await kubectl(h, ['get', 'sprockets']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`the server doesn't have a resource type "sprockets"`);
  });

  it('waits for a condition set while kubectl is watching, and times out when it never comes', async () => {
    const waiting = kubectl(h, ['wait', '--for=condition=Ready', 'widget/w1', '-n', 'demo', '--timeout=10s']);
    await waitFor(() => expect(h.fake.requests.some((r) => r.verb === 'watch' && r.resource === 'widgets')).toBe(true));
    h.fake.update(ref, (o) => (o['status'] = { conditions: [{ type: 'Ready', status: 'True' }] }));
    expect(await waiting).toMatchObject({ code: 0, stdout: 'widget.example.com/w1 condition met\n' });

    const timedOut = await kubectl(h, ['wait', '--for=condition=Synced', 'widget/w1', '-n', 'demo', '--timeout=1s']);
    expect(timedOut.code).toBe(1);
    expect(timedOut.stderr).toContain('timed out waiting for the condition on widgets/w1');
  });

  it('patches status, labels, scales and explains a custom resource', async () => {
    await ok([
      'patch',
      'widget',
      'w1',
      '-n',
      'demo',
      '--subresource=status',
      '--type=merge',
      '-p',
      '{"status":{"replicas":2,"selector":"app=w1"}}',
    ]);
    expect(h.fake.get(ref)?.['status']).toMatchObject({ replicas: 2, conditions: [{ type: 'Ready', status: 'True' }] });
    await ok(['label', 'widget', 'w1', '-n', 'demo', 'tier=web']);
    expect(await ok(['get', 'widgets', '-n', 'demo', '-l', 'tier in (web)', '-o', 'name'])).toBe(
      'widget.example.com/w1\n',
    );
    expect(await ok(['scale', 'widget', 'w1', '-n', 'demo', '--replicas=4'])).toBe('widget.example.com/w1 scaled\n');
    expect(h.fake.get(ref)?.['spec']).toMatchObject({ size: 4 });
    expect(await ok(['explain', 'widgets.spec.size'])).toContain('How many.');
  });

  it('deletes: at once without finalizers, and leaves a finalized object terminating with --wait=false', async () => {
    h.fake.put({
      ...widget('held', 'demo', {}),
      metadata: { name: 'held', namespace: 'demo', finalizers: ['example.com/cleanup'] },
    });
    expect(await ok(['delete', 'widget', 'held', '-n', 'demo', '--wait=false'])).toBe(
      'widget.example.com "held" deleted\n',
    );
    expect(h.fake.get({ ...ref, name: 'held' })?.metadata.deletionTimestamp).toBeDefined();

    expect(await ok(['delete', '-f', manifest('w1-delete.yaml', [widget('w1', 'demo', {})])])).toBe(
      'widget.example.com "w1" deleted\n',
    );
    expect(h.fake.get(ref)).toBeUndefined();
  });

  it('prints RBAC denials as kubectl users see them', async () => {
    const secured = await startHarness({ rbac: true });
    try {
      secured.fake.addUser('nobody');
      const asNobody = { ...secured, kubeconfig: secured.fake.writeKubeconfig(secured.dir, { user: 'nobody' }) };
      const denied = await kubectl(asNobody, ['get', 'configmaps', '-n', 'default']);
      expect(denied.code).toBe(1);
      expect(denied.stderr).toContain(
        'Error from server (Forbidden): configmaps is forbidden: User "nobody" cannot list resource "configmaps" in API group "" in the namespace "default"',
      );
    } finally {
      await secured.stop();
    }
  });
});
