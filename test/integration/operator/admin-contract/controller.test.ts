import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient } from '../../../../operator/src/admin-client/client.ts';
import type { AdminClient } from '../../../../operator/src/admin-client/types.ts';
import { API_VERSION } from '../../../../operator/src/api/v1alpha1/index.ts';
import { createDeploymentController } from '../../../../operator/src/controllers/deployment/controller.ts';
import type { ClusterObject, DeploymentObject } from '../../../../operator/src/controllers/shared/objects.ts';
import type { Condition, ObjectRef } from '../../../../operator/src/kube/types.ts';
import type { ReconcileContext } from '../../../../operator/src/reconcile/types.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { selectedTargets, type TargetName } from '../../../compat/targets.ts';
import { MemoryEvents, MemoryKube } from '../../../support/operator/memory-kube.ts';
import { createTestDatabase } from '../../../support/postgres.ts';
import { startRestateServer } from '../../../support/restate-server.ts';
import { waitFor } from '../../../support/wait.ts';
import { sdkHandler, serve, type TestServer } from '../../admin/harness.ts';
import { startTestRuntime } from '../../support/runtime.ts';

/*
 * The Deployment controller with the real admin client and the default SQL drain probe, against real runtimes
 * (Ratchet and restate-server 1.7.12) and real SDK endpoints; Kubernetes is in memory. One story: register → Ready;
 * new endpoint with an invocation pinned to the old one → the old one drains; roll back while it is still registered
 * → forced back to latest; the invocation finishes → the superseded version is deregistered; delete under Drain with
 * a pinned invocation → blocked, naming it → released once it finishes.
 */

const awakeables = new Map<string, string>();

const blocker = restate.service({
  name: 'Blocker',
  handlers: {
    wait: async (ctx: restate.Context, key: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('post', () => {
        awakeables.set(key, id);
      });
      return `got ${await promise}`;
    },
  },
});

const NS = 'default';
const DEP: ObjectRef = { apiVersion: API_VERSION, kind: 'Deployment', namespace: NS, name: 'blocker' };

describe.each(selectedTargets())('Deployment controller against %s', (targetName: TargetName) => {
  let stopRuntime: () => Promise<void>;
  let adminUrl: string;
  let ingressUrl: string;
  let admin: AdminClient;
  let v1: TestServer;
  let v2: TestServer;
  const kube = new MemoryKube();
  const events = new MemoryEvents();
  const controller = createDeploymentController({ reportDraining: () => undefined });
  let ctx: ReconcileContext;

  beforeAll(async () => {
    if (targetName === 'restate') {
      const server = await startRestateServer();
      ({ adminUrl, ingressUrl } = server);
      stopRuntime = () => server.stop();
    } else {
      const db = await createTestDatabase();
      const runtime = await startTestRuntime(db.url);
      ({ adminUrl, ingressUrl } = runtime);
      stopRuntime = async () => {
        await runtime.stop();
        await db.drop();
      };
    }
    admin = createAdminClient({ url: adminUrl });
    v1 = await serve('h2', sdkHandler([blocker]));
    v2 = await serve('h2', sdkHandler([blocker]));
    ctx = {
      kube,
      events,
      admin: createAdminClient,
      now: () => new Date(),
      log: silentLogger(),
      serviceUrl: (_ns, service) => (service === 'main-admin' ? adminUrl : 'http://127.0.0.1:9'),
      operatorNamespace: 'ratchet-system',
    };
    kube.create<ClusterObject>({
      apiVersion: API_VERSION,
      kind: 'Cluster',
      metadata: { name: 'main', namespace: NS },
      spec: { image: 'ratchet:test', database: { bundled: {} }, auth: { enabled: false } },
    });
    const ready: Condition = {
      type: 'AdminAPIReady',
      status: 'True',
      lastTransitionTime: new Date().toISOString(),
      reason: 'Answering',
      message: '',
    };
    kube.setStatus({ apiVersion: API_VERSION, kind: 'Cluster', namespace: NS, name: 'main' }, { conditions: [ready] });
  });

  afterAll(async () => {
    await v1?.close();
    await v2?.close();
    await stopRuntime?.();
  });

  const reconcile = () => controller.reconcile({ namespace: NS, name: 'blocker' }, ctx);
  const dep = (): DeploymentObject | undefined => kube.peek<DeploymentObject>(DEP);
  const ready = () => dep()?.status?.conditions?.find((c) => c.type === 'Ready');
  const setUri = (uri: string): void => {
    const obj = structuredClone(dep()!);
    obj.spec.endpoint = { http: { uri } };
    kube.update(obj);
  };

  async function block(key: string): Promise<void> {
    const res = await fetch(`${ingressUrl}/Blocker/wait/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(key),
    });
    expect(res.status).toBe(202);
    await waitFor(() => expect(awakeables.has(key)).toBe(true));
  }

  async function release(key: string): Promise<void> {
    const res = await fetch(`${ingressUrl}/restate/awakeables/${awakeables.get(key)}/resolve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify('done'),
    });
    expect(res.status).toBeLessThan(300);
  }

  let id1: string;
  let id2: string;

  it('registers and becomes Ready as the latest deployment', async () => {
    kube.create<DeploymentObject>({
      apiVersion: API_VERSION,
      kind: 'Deployment',
      metadata: { name: 'blocker', namespace: NS },
      spec: { clusterRef: { name: 'main' }, endpoint: { http: { uri: v1.url } }, retirement: { gracePeriod: '0s' } },
    });
    await waitFor(async () => {
      await reconcile();
      expect(ready()?.status).toBe('True');
    });
    id1 = dep()!.status!.deploymentId!;
    expect((await admin.listServices()).find((s) => s.name === 'Blocker')?.deployment_id).toBe(id1);
  });

  it('a new endpoint supersedes the old one, which drains while an invocation is pinned to it', async () => {
    await block(`a-${targetName}`);
    setUri(v2.url);
    await waitFor(async () => {
      await reconcile();
      expect(dep()?.status?.superseded?.[0]).toMatchObject({
        deploymentId: id1,
        state: 'Draining',
        pendingInvocations: 1,
      });
    });
    id2 = dep()!.status!.deploymentId!;
    expect(id2).not.toBe(id1);
    expect(ready()?.status).toBe('True');
    expect(await admin.getDeployment(id1)).toBeDefined();
  });

  it('rolling back to the old endpoint forces it to be latest again', async () => {
    setUri(v1.url);
    await waitFor(async () => {
      await reconcile();
      expect(dep()?.status?.deploymentId).toBe(id1);
      expect(ready()?.status).toBe('True');
    });
    expect((await admin.listServices()).find((s) => s.name === 'Blocker')?.deployment_id).toBe(id1);
    // v2 had nothing pinned and grace is 0: it is gone already, or goes on the next pass.
    await waitFor(async () => {
      await reconcile();
      expect(await admin.getDeployment(id2)).toBeUndefined();
    });
    expect(events.reasons()).toEqual(expect.arrayContaining(['Rollback', 'Drained', 'Deregistered']));
  });

  it('deletion under Drain waits for the pinned invocation, naming it, then deregisters and releases', async () => {
    kube.deleteAsUser(DEP);
    await reconcile();
    expect(dep()).toBeDefined();
    const draining = dep()?.status?.conditions?.find((c) => c.type === 'Draining');
    expect(draining).toMatchObject({ status: 'True', reason: 'DeletionBlocked' });
    expect(draining?.message).toContain(`${id1} (1 pinned)`);

    await release(`a-${targetName}`);
    await waitFor(async () => {
      await reconcile();
      expect(dep()).toBeUndefined();
    });
    expect(await admin.getDeployment(id1)).toBeUndefined();
  });
});
