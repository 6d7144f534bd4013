import { describe, expect, it } from 'vitest';
import { AdminApiError } from '../../../../operator/src/admin-client/types.ts';
import { FINALIZERS } from '../../../../operator/src/api/v1alpha1/index.ts';
import { createDeploymentController } from '../../../../operator/src/controllers/deployment/controller.ts';
import type { ClusterObject, DeploymentObject } from '../../../../operator/src/controllers/shared/objects.ts';
import { KubeApiError } from '../../../../operator/src/kube/port.ts';
import { CLUSTER, NS, ref } from './harness.ts';
import { cond, dep, h, MINUTE, registered, status, useControllerHarness, V1, V2 } from './controller-fixture.ts';

/*
 * The Deployment reconciler against an in-memory cluster and a fake runtime (operator.md §7 L1): admin API failures,
 * pause, every deletion policy and escape hatch, watches.
 */

useControllerHarness();

describe('failures', () => {
  it('META0004 (same URI, different manifest) without force is Stalled with the runtime message, until force is set', async () => {
    h.admin.serve(V1, { Greeter: ['greet'] });
    h.admin.registerDirectly({ uri: V1, force: false });
    h.admin.serve(V1, { Greeter: ['greet', 'farewell'] });
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    expect(await h.settle('greeter', 'Deployment')).toEqual({});
    expect(cond('Stalled')).toMatchObject({ status: 'True', reason: 'EndpointConflict' });
    expect(cond('Stalled')?.message).toContain('[META0004]');
    expect(cond('Stalled')?.message).toContain('spec.registration.force');
    expect(cond('Registered')).toMatchObject({ status: 'False', reason: 'EndpointConflict' });
    expect(cond('Ready')?.status).toBe('False');
    expect(h.events.events.filter((e) => e.type === 'Warning').map((e) => e.reason)).toEqual(['EndpointConflict']);

    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.registration = { force: true }));
    await h.settle('greeter', 'Deployment');
    expect(cond('Stalled')?.status).toBe('False');
    expect(cond('Ready')?.status).toBe('True');
  });

  it('other 4xx answers are Stalled; 5xx but 501, 408, 429 and an unreachable runtime are thrown for the queue to back off', async () => {
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    h.admin.failNext('registerDeployment', () => new AdminApiError(400, 'bad uri', 'META0003'));
    await h.reconcile('greeter');
    expect(cond('Stalled')).toMatchObject({ status: 'True', reason: 'RegistrationRejected' });

    for (const transient of [503, 502, 504, 408, 429]) {
      h.admin.failNext('registerDeployment', () => new AdminApiError(transient, 'not now'));
      await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: transient });
      expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'AdminAPIError' });
      expect(cond('Stalled')?.status).toBe('False');
    }

    h.admin.stopServing(V1);
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 500, code: 'META0003' });

    h.admin.serve(V1, { Greeter: ['greet'] });
    h.admin.unreachable = true;
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 0 });
    h.admin.unreachable = false;
    await h.settle('greeter', 'Deployment');
    expect(cond('Ready')?.status).toBe('True');
  });

  it("a 501 (a Lambda endpoint on a runtime without Lambda support) is Stalled with the runtime's message, not retried with backoff", async () => {
    const arn = 'arn:aws:lambda:eu-central-1:123456789012:function:greeter:1';
    const role = 'arn:aws:iam::123456789012:role/ratchet-invoker';
    h.admin.serve(arn, { Greeter: ['greet'] });
    const notSupported = () =>
      new AdminApiError(501, 'Lambda deployments are not supported by this version of Ratchet');
    h.admin.failNext('registerDeployment', notSupported, 2);
    h.deployment('greeter', { endpoint: { lambda: { arn, assumeRoleArn: role } } });

    expect(await h.reconcile('greeter')).toEqual({});
    expect(cond('Stalled')).toMatchObject({ status: 'True', reason: 'NotImplemented' });
    expect(cond('Stalled')?.message).toContain(
      `registering ${arn}: admin API HTTP 501: Lambda deployments are not supported by this version of Ratchet`,
    );
    expect(cond('Registered')).toMatchObject({ status: 'False', reason: 'NotImplemented' });
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'NotImplemented' });
    expect(cond('Reconciling')).toMatchObject({ status: 'False', reason: 'NotImplemented' });
    expect(status().deploymentId).toBeUndefined();

    // A later wake (the Cluster's runtime upgraded, the periodic resync) asks again: one more request, no new event.
    expect(await h.reconcile('greeter')).toEqual({});
    expect(h.admin.calls('registerDeployment')).toHaveLength(2);
    expect(h.events.events.filter((e) => e.type === 'Warning').map((e) => e.reason)).toEqual(['NotImplemented']);

    // The runtime supports it now: registered and Ready, Stalled cleared.
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment').at(-1)?.args[0]).toMatchObject({ arn, assume_role_arn: role });
    expect(cond('Stalled')?.status).toBe('False');
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(status().endpoint).toBe(arn);
  });

  it('a refused in-place update (PATCH 4xx or 501) is Stalled UpdateRejected; 5xx otherwise is thrown', async () => {
    const arn = 'arn:aws:lambda:eu-central-1:123456789012:function:greeter:live';
    h.admin.serve(arn, { Greeter: ['greet'] });
    h.deployment('greeter', { endpoint: { lambda: { arn } } });
    await h.settle('greeter', 'Deployment');
    const id = status().deploymentId!;
    expect(cond('Ready')?.status).toBe('True');

    const role = 'arn:aws:iam::123456789012:role/ratchet-invoker';
    h.editSpec<DeploymentObject>(
      'Deployment',
      'greeter',
      (s) => (s.endpoint = { lambda: { arn, assumeRoleArn: role } }),
    );
    h.admin.failNext('updateDeployment', () => new AdminApiError(503, 'unavailable'));
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 503 });
    expect(cond('Stalled')?.status).toBe('False');

    h.admin.failNext('updateDeployment', () => new AdminApiError(501, 'not implemented'), 2);
    expect(await h.reconcile('greeter')).toEqual({});
    expect(cond('Stalled')).toMatchObject({ status: 'True', reason: 'UpdateRejected' });
    expect(cond('Stalled')?.message).toBe(`updating ${id} in place: admin API HTTP 501: not implemented`);
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'UpdateRejected' });
    await h.reconcile('greeter');
    expect(h.events.events.filter((e) => e.type === 'Warning').map((e) => e.reason)).toEqual(['UpdateRejected']);

    h.admin.failNext('updateDeployment', () => new AdminApiError(400, 'bad role', 'META0003'));
    await h.reconcile('greeter');
    expect(cond('Stalled')?.message).toContain('HTTP 400 META0003: bad role');

    await h.settle('greeter', 'Deployment');
    expect(h.admin.deploymentById(id)?.assume_role_arn).toBe(role);
    expect(status().deploymentId).toBe(id);
    expect(cond('Stalled')?.status).toBe('False');
    expect(cond('Ready')?.status).toBe('True');
  });

  it('a conflict while adding the finalizer is retried shortly, and nothing is registered before it is in place', async () => {
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    h.kube.failNext((verb) => verb === 'setFinalizers', new KubeApiError(409, 'Conflict', 'modified'));
    expect(await h.reconcile('greeter')).toEqual({ requeueAfterMs: 1_000 });
    expect(h.admin.requests).toHaveLength(0);
    await h.settle('greeter', 'Deployment');
    expect(dep().metadata.finalizers).toEqual([FINALIZERS.deployment]);
  });
});

describe('pause', () => {
  it('a paused resource is not reconciled, says so, and resumes when the annotation goes', async () => {
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    h.pause('Deployment', 'greeter');
    expect(await h.reconcile('greeter')).toEqual({});
    expect(h.admin.requests).toHaveLength(0);
    expect(dep().metadata.finalizers ?? []).toEqual([]);
    expect(cond('Reconciling')).toMatchObject({ status: 'False', reason: 'ReconciliationPaused' });

    h.pause('Deployment', 'greeter', false);
    await h.settle('greeter', 'Deployment');
    expect(cond('Ready')?.status).toBe('True');
  });

  it('pausing does not block deletion', async () => {
    const id = await registered('greeter', V1);
    h.pause('Deployment', 'greeter');
    h.deleteAsUser('Deployment', 'greeter');
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.admin.deploymentIds()).not.toContain(id);
  });
});

describe('deletion', () => {
  it('Drain: waits for pinned invocations, naming versions and counts, then deregisters and releases', async () => {
    const id = await registered('greeter', V1);
    h.admin.addInvocation('Greeter', { pinnedTo: id });
    h.admin.addInvocation('Greeter'); // queued: will run on the latest, which is this one (#176)
    h.deleteAsUser('Deployment', 'greeter');
    expect(await h.reconcile('greeter')).toEqual({ requeueAfterMs: 15_000 });
    expect(h.get('Deployment', 'greeter')).toBeDefined();
    expect(h.admin.deploymentIds()).toContain(id);
    const message = `deletion waits until no unfinished invocation can run on ${id} (1 pinned, 1 not yet started or between attempts); no timeout (policy Drain)`;
    expect(cond('Draining')).toMatchObject({ status: 'True', reason: 'DeletionBlocked', message });
    expect(h.events.events.filter((e) => e.reason === 'DeletionBlocked')).toEqual([
      expect.objectContaining({ type: 'Warning', note: message }),
    ]);
    expect(status().deletionStartedAt).toBe(dep().metadata.deletionTimestamp);

    // The same block again: no new event.
    await h.reconcile('greeter');
    expect(h.events.reasons().filter((r) => r === 'DeletionBlocked')).toHaveLength(1);

    h.admin.finishAll();
    expect(h.admin.unfinishedCounts({ deploymentId: id, latestForServices: ['Greeter'] })).toEqual({
      pinned: 0,
      unpinned: 0,
    });
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.admin.deploymentIds()).toEqual([]);
    expect(h.events.reasons().at(-1)).toBe('Deregistered');
  });

  it('Drain: the latest deployment with no unfinished invocation is deleted at once (#172/#173)', async () => {
    const id = await registered('greeter', V1);
    expect(h.admin.latestOf('Greeter')).toBe(id);
    h.deleteAsUser('Deployment', 'greeter');
    expect(await h.reconcile('greeter')).toEqual({});
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.admin.deploymentIds()).toEqual([]);
  });

  it('Drain: superseded versions are deregistered with the current one', async () => {
    const v1 = await registered('greeter', V1);
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V2 } }));
    await h.settle('greeter', 'Deployment');
    const pinned = h.admin.addInvocation('Greeter', { pinnedTo: v1 });
    h.deleteAsUser('Deployment', 'greeter');
    await h.reconcile('greeter');
    // The idle current version goes; the pinned superseded one blocks.
    expect(h.admin.deploymentIds()).toEqual([v1]);
    expect(cond('Draining')?.message).toContain(`${v1} (1 pinned)`);
    h.admin.finish(pinned);
    await h.reconcile('greeter');
    expect(h.admin.deploymentIds()).toEqual([]);
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
  });

  it('Force: deregisters with force at once, pinned invocations or not', async () => {
    const id = await registered('greeter', V1);
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.retirement = { deletionPolicy: 'Force' }));
    await h.settle('greeter', 'Deployment');
    h.admin.addInvocation('Greeter', { pinnedTo: id });
    h.deleteAsUser('Deployment', 'greeter');
    await h.reconcile('greeter');
    expect(h.admin.calls('deleteDeployment').map((c) => c.args)).toEqual([[id, { force: true }]]);
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
  });

  it('Orphan: leaves everything registered', async () => {
    const id = await registered('greeter', V1);
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.retirement = { deletionPolicy: 'Orphan' }));
    await h.settle('greeter', 'Deployment');
    h.deleteAsUser('Deployment', 'greeter');
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.admin.deploymentIds()).toEqual([id]);
    expect(h.admin.calls('deleteDeployment')).toHaveLength(0);
    expect(h.events.reasons().at(-1)).toBe('Orphaned');
  });

  it('DrainThenForce: blocked until the drain timeout, then forced', async () => {
    const id = await registered('greeter', V1);
    h.editSpec<DeploymentObject>(
      'Deployment',
      'greeter',
      (s) => (s.retirement = { deletionPolicy: 'DrainThenForce', drainTimeout: '10m' }),
    );
    await h.settle('greeter', 'Deployment');
    h.admin.addInvocation('Greeter', { pinnedTo: id });
    h.deleteAsUser('Deployment', 'greeter');
    expect(await h.reconcile('greeter')).toEqual({ requeueAfterMs: 15_000 });
    expect(cond('Draining')?.message).toContain('; forced at ');
    h.clock.advance(9 * MINUTE + 55_000);
    expect(await h.reconcile('greeter')).toEqual({ requeueAfterMs: 5_000 });
    expect(h.admin.deploymentIds()).toEqual([id]);
    h.clock.advance(5_000);
    await h.reconcile('greeter');
    expect(h.admin.calls('deleteDeployment').map((c) => c.args)).toEqual([[id, { force: true }]]);
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.events.events.find((e) => e.reason === 'DrainTimeout')?.type).toBe('Warning');
  });

  it('a referenced Cluster that is gone releases the finalizer with a Warning', async () => {
    const id = await registered('greeter', V1);
    h.admin.addInvocation('Greeter', { pinnedTo: id });
    h.kube.deleteAsUser(ref('Cluster', CLUSTER));
    h.deleteAsUser('Deployment', 'greeter');
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.events.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'ClusterGone' });
  });

  it('an admin API unreachable for longer than the drain timeout releases the finalizer; before that it retries', async () => {
    await registered('greeter', V1);
    h.admin.unreachable = true;
    h.deleteAsUser('Deployment', 'greeter');
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 0 });
    expect(h.get('Deployment', 'greeter')).toBeDefined();
    expect(cond('Reconciling')?.message).toContain('the finalizer is released at');
    h.clock.advance(60 * MINUTE);
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.events.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'AdminAPIUnreachable' });
  });

  it('a deployment already gone from the runtime (404) counts as deregistered', async () => {
    const id = await registered('greeter', V1);
    h.deleteAsUser('Deployment', 'greeter');
    h.admin.failNext('deleteDeployment', () => new AdminApiError(404, 'not found'));
    h.admin.deleteDirectly(id);
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
  });

  it('never removes a registration another Deployment resource holds (same endpoint, same id)', async () => {
    const id = await registered('greeter', V1);
    await registered('greeter-copy', V1);
    expect(status('greeter-copy').deploymentId).toBe(id);
    h.deleteAsUser('Deployment', 'greeter');
    await h.reconcile('greeter');
    expect(h.get('Deployment', 'greeter')).toBeUndefined();
    expect(h.admin.deploymentIds()).toEqual([id]);
  });
});

describe('watches', () => {
  it("maps a Secret to the Deployments reading it, through the Cluster's own token Secret name when it has one", () => {
    const [, secretWatch] = createDeploymentController().watches;
    h.secret('greeter-auth', { header: 'x' });
    h.deployment('greeter', {
      endpoint: { http: { uri: V1 } },
      additionalHeaders: [
        { name: 'authorization', valueFrom: { secretKeyRef: { name: 'greeter-auth', key: 'header' } } },
      ],
    });
    const primaries = () => [dep()];
    const secret = (name: string) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NS } });
    const greeter = [{ namespace: NS, name: 'greeter' }];

    // Without the Cluster in the cache: the default token Secret.
    expect(secretWatch!.map(secret('greeter-auth'), primaries)).toEqual(greeter);
    expect(secretWatch!.map(secret(`${CLUSTER}-token`), primaries)).toEqual(greeter);

    // A Cluster that names its own token Secret.
    const cluster = structuredClone(h.get<ClusterObject>('Cluster', CLUSTER)!);
    cluster.spec.auth = { tokenSecret: 'admin-token', signingKeySecret: 'admin-key' };
    cluster.status = { tokenSecret: 'admin-token' };
    const cached = (_apiVersion: string, kind: string) => (kind === 'Cluster' ? [cluster] : []);
    expect(secretWatch!.map(secret('admin-token'), primaries, cached)).toEqual(greeter);
    expect(secretWatch!.map(secret(`${CLUSTER}-token`), primaries, cached)).toEqual([]);
    expect(secretWatch!.map(secret('greeter-auth'), primaries, cached)).toEqual(greeter);
    expect(
      secretWatch!.map(
        { ...secret('admin-token'), metadata: { name: 'admin-token', namespace: 'x' } },
        primaries,
        cached,
      ),
    ).toEqual([]);
  });
});
