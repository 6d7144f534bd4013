import { describe, expect, it } from 'vitest';
import { createDeploymentController } from '../../../../operator/src/controllers/deployment/controller.ts';
import { sqlDrainProbe } from '../../../../operator/src/controllers/deployment/drain.ts';
import type { DeploymentObject } from '../../../../operator/src/controllers/shared/objects.ts';
import { Harness, NS } from './harness.ts';
import { cond, draining, h, MINUTE, registered, status, useControllerHarness, V1, V2 } from './controller-fixture.ts';

/*
 * The Deployment reconciler against an in-memory cluster and a fake runtime (operator.md §7 L1): supersede → drain →
 * deregister, rollback, lost status.
 */

useControllerHarness();

describe('supersede, drain, deregister', () => {
  it('an endpoint change registers a new id; the old one drains while an invocation is pinned, then goes after the grace period', async () => {
    const v1 = await registered('greeter', V1);
    const pinned = h.admin.addInvocation('Greeter', { pinnedTo: v1 });

    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V2 } }));
    const result = await h.settle('greeter', 'Deployment');
    const v2 = status().deploymentId!;
    expect(v2).not.toBe(v1);
    expect(h.admin.latestOf('Greeter')).toBe(v2);
    expect(status().endpoint).toBe(V2);
    expect(status().superseded).toEqual([
      {
        deploymentId: v1,
        endpoint: V1,
        supersededAt: h.clock.now().toISOString(),
        state: 'Draining',
        pendingInvocations: 1,
      },
    ]);
    expect(status().drainingCount).toBe(1);
    expect(draining.get(`${NS}/greeter`)).toBe(1);
    expect(cond('Draining')).toMatchObject({ status: 'True', reason: 'Draining' });
    expect(cond('Ready')?.status).toBe('True');
    expect(result).toEqual({ requeueAfterMs: 15_000 });
    expect(h.events.reasons()).toEqual(['Registered', 'Superseded', 'Registered']);

    // Still pinned after a while: nothing is deleted.
    h.clock.advance(30 * MINUTE);
    await h.reconcile('greeter');
    expect(h.admin.deploymentIds()).toContain(v1);
    expect(h.admin.calls('deleteDeployment')).toHaveLength(0);

    h.admin.finish(pinned);
    await h.reconcile('greeter');
    const drainedAt = h.clock.now();
    expect(status().superseded?.[0]).toMatchObject({
      state: 'Drained',
      pendingInvocations: 0,
      drainedAt: drainedAt.toISOString(),
      removeAfter: new Date(drainedAt.getTime() + 5 * MINUTE).toISOString(),
    });
    expect(cond('Draining')).toMatchObject({ status: 'True', reason: 'Drained' });
    expect(h.admin.deploymentIds()).toContain(v1);

    h.clock.advance(5 * MINUTE);
    await h.reconcile('greeter');
    expect(h.admin.deploymentIds()).not.toContain(v1);
    // Unforced first (the runtime answers 501), then forced because our own count said nothing is pinned.
    expect(h.admin.calls('deleteDeployment').map((c) => c.args)).toEqual([
      [v1, { force: false }],
      [v1, { force: true }],
    ]);
    expect(status().superseded?.[0]?.state).toBe('Deregistered');
    expect(cond('Draining')?.status).toBe('False');

    expect(await h.reconcile('greeter')).toEqual({});
    expect(status().superseded).toEqual([]);
    expect(status().drainingCount).toBe(0);
    expect(draining.get(`${NS}/greeter`)).toBe(0);
    expect(h.events.reasons()).toEqual(['Registered', 'Superseded', 'Registered', 'Drained', 'Deregistered']);
  });

  it('queued invocations of a service it is still latest for keep a superseded version (#176); resumed work sends it back to Draining', async () => {
    const v1 = await registered('greeter', V1);
    h.admin.serve(V2, { Other: ['run'] });
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V2 } }));
    await h.settle('greeter', 'Deployment');
    // v2 does not serve Greeter: v1 stays its latest, and a queued invocation would run on v1.
    h.admin.addInvocation('Greeter');
    await h.reconcile('greeter');
    expect(status().superseded?.[0]).toMatchObject({ deploymentId: v1, state: 'Draining', pendingInvocations: 1 });
    h.admin.finishAll();
    h.clock.advance(MINUTE);
    await h.reconcile('greeter');
    // Still the latest of Greeter: not drained, whatever the invocations say.
    expect(status().superseded?.[0]).toMatchObject({ state: 'Draining', pendingInvocations: 0 });

    // Greeter moves to a third deployment: now v1 can drain.
    const v3uri = 'http://greeter-v3.default.svc:9080/';
    h.admin.serve(v3uri, { Greeter: ['greet'] });
    h.admin.registerDirectly({ uri: v3uri, force: false });
    await h.reconcile('greeter');
    expect(status().superseded?.[0]?.state).toBe('Drained');

    // A paused invocation pinned to v1 is resumed: v1 has work again.
    h.admin.addInvocation('Greeter', { pinnedTo: v1, status: 'paused' });
    await h.reconcile('greeter');
    expect(status().superseded?.[0]).toMatchObject({ state: 'Draining', pendingInvocations: 1 });
    expect(status().superseded?.[0]?.removeAfter).toBeUndefined();
    expect(h.events.reasons()).toContain('Draining');
  });

  it('rolling back to a superseded endpoint re-registers it with force so that it is the latest again (#174/#178)', async () => {
    const v1 = await registered('greeter', V1);
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V2 } }));
    await h.settle('greeter', 'Deployment');
    const v2 = status().deploymentId!;
    expect(h.admin.latestOf('Greeter')).toBe(v2);

    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V1 } }));
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment').at(-1)?.args[0]).toMatchObject({ uri: V1, force: true });
    expect(status().deploymentId).toBe(v1);
    expect(h.admin.latestOf('Greeter')).toBe(v1);
    expect(status().superseded?.map((e) => [e.deploymentId, e.state])).toEqual([[v2, 'Drained']]);
    expect(cond('Ready')?.status).toBe('True');
    expect(h.events.reasons()).toContain('Rollback');
  });

  it('a 200 "already registered" for a version that is not latest is forced, even without a superseded entry', async () => {
    // Someone registered V1 and then V2 directly; this resource asks for V1.
    h.admin.registerDirectly({ uri: V1, force: false });
    const v2 = h.admin.registerDirectly({ uri: V2, force: false }).deployment.id;
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment').map((c) => (c.args[0] as { force: boolean }).force)).toEqual([
      false,
      true,
    ]);
    expect(h.admin.latestOf('Greeter')).toBe(status().deploymentId);
    expect(h.admin.latestOf('Greeter')).not.toBe(v2);
    expect(cond('Ready')?.status).toBe('True');
  });

  it('is not Ready while another deployment is the latest, naming the services and who serves them', async () => {
    const v1 = await registered('greeter', V1);
    await registered('greeter-next', V2);
    const v2 = status('greeter-next').deploymentId!;
    await h.reconcile('greeter');
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'NotLatest' });
    expect(cond('Ready')?.message).toBe(
      `${v1} is registered but not the latest deployment of: Greeter (served by ${v2}, Deployment ${NS}/greeter-next)`,
    );
    expect(cond('Registered')?.status).toBe('True');
  });

  it('status lost: registering again answers 200 with the same id, which is adopted without force', async () => {
    const id = await registered('greeter', V1);
    h.wipeStatus('Deployment', 'greeter');
    await h.settle('greeter', 'Deployment');
    expect(status().deploymentId).toBe(id);
    expect(h.admin.calls('registerDeployment').map((c) => (c.args[0] as { force: boolean }).force)).toEqual([
      false,
      false,
    ]);
    expect(h.admin.deploymentIds()).toEqual([id]);
    expect(cond('Ready')?.status).toBe('True');
  });

  it('works with the SQL drain probe the controller uses by default', async () => {
    const controller = createDeploymentController({ reportDraining: () => undefined });
    expect(controller.watches.map((w) => w.kind)).toEqual(['Cluster', 'Secret']);
    const h2 = new Harness(controller);
    h2.cluster();
    h2.admin.serve(V1, { Greeter: ['greet'] });
    h2.admin.serve(V2, { Greeter: ['greet'] });
    h2.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    await h2.settle('greeter', 'Deployment');
    const v1 = h2.get<DeploymentObject>('Deployment', 'greeter')!.status!.deploymentId!;
    h2.admin.addInvocation('Greeter', { pinnedTo: v1 });
    h2.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V2 } }));
    await h2.settle('greeter', 'Deployment');
    expect(h2.get<DeploymentObject>('Deployment', 'greeter')!.status!.superseded?.[0]?.pendingInvocations).toBe(1);
    expect(h2.admin.calls('query')).not.toHaveLength(0);
    expect(await sqlDrainProbe(h2.admin, { deploymentId: v1, latestForServices: [] })).toEqual({
      pinned: 1,
      unpinned: 0,
    });
  });
});
