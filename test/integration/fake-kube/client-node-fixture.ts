import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  type V1Deployment,
} from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import { GROUP, WIDGET_CRD, startHarness, type Harness, type Obj } from './harness.ts';

/*
 * What the client-node tests of the fake API server (client-node-*.test.ts) share: one fake per test file with the
 * Widget CRD in place, the client-node APIs on it, and shorthands.
 */

/** The file's fake API server and client-node APIs on it; set in `beforeAll`. */
export let h: Harness;
export let objects: KubernetesObjectApi;
export let core: CoreV1Api;
export let apps: AppsV1Api;
export let custom: CustomObjectsApi;
let namespaceCount = 0;

/** Starts the fake API server for the calling test file and stops it after; call once at its top level. */
export function useClientNodeHarness(): void {
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
}

export async function freshNamespace(): Promise<string> {
  const name = `ns-${++namespaceCount}`;
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

export async function apply(object: Obj, manager: string, force = false): Promise<Obj> {
  return objects.patch<Obj>(object, undefined, undefined, manager, force, PatchStrategy.ServerSideApply);
}

export function readWidget(namespace: string, name: string): Promise<Obj> {
  return custom.getNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace,
    plural: 'widgets',
    name,
  }) as Promise<Obj>;
}

export function deployment(name: string): V1Deployment {
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
