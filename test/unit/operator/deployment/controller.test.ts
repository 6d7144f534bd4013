import { beforeEach, describe, expect, it } from 'vitest';
import { AdminApiError } from '../../../../operator/src/admin-client/types.ts';
import { FINALIZERS } from '../../../../operator/src/api/v1alpha1/index.ts';
import { createDeploymentController } from '../../../../operator/src/controllers/deployment/controller.ts';
import { sqlDrainProbe } from '../../../../operator/src/controllers/deployment/drain.ts';
import type { ClusterObject, DeploymentObject } from '../../../../operator/src/controllers/shared/objects.ts';
import { KubeApiError } from '../../../../operator/src/kube/port.ts';
import { CLUSTER, Harness, NS, TOKEN, ref } from './harness.ts';

/*
 * The Deployment reconciler against an in-memory cluster and a fake runtime (operator.md §7 L1): registration and
 * readiness, in-place header updates, supersede → drain → deregister, rollback, every deletion policy and escape
 * hatch, pause, lost status, admin API failures.
 */

const V1 = 'http://greeter-v1.default.svc:9080/';
const V2 = 'http://greeter-v2.default.svc:9080/';
const MINUTE = 60_000;

let h: Harness;
let draining: Map<string, number>;

beforeEach(() => {
  draining = new Map();
  const controller = createDeploymentController({
    drainProbe: (admin, q) => h.admin.drainProbe(admin, q),
    reportDraining: (ns, name, count) => draining.set(`${ns}/${name}`, count),
  });
  h = new Harness(controller);
  h.cluster();
  h.admin.serve(V1, { Greeter: ['greet'] });
  h.admin.serve(V2, { Greeter: ['greet'] });
});

const dep = (name = 'greeter'): DeploymentObject => h.get<DeploymentObject>('Deployment', name)!;
const status = (name = 'greeter') => dep(name).status!;
const cond = (type: string, name = 'greeter') => h.condition('Deployment', name, type);

async function registered(name: string, uri: string): Promise<string> {
  h.deployment(name, { endpoint: { http: { uri } } });
  await h.settle(name, 'Deployment');
  return status(name).deploymentId!;
}

describe('registration', () => {
  it('registers with force false sent explicitly, records the id and services, and is Ready as the latest', async () => {
    h.deployment('greeter', {
      endpoint: { http: { uri: V1, useHttp11: true } },
      additionalHeaders: [{ name: 'x-team', value: 'payments' }],
      metadata: { owner: 'payments' },
    });
    const result = await h.settle('greeter', 'Deployment');

    expect(dep().metadata.finalizers).toEqual([FINALIZERS.deployment]);
    const [post] = h.admin.calls('registerDeployment');
    expect(post?.args[0]).toEqual({
      uri: V1,
      use_http_11: true,
      force: false,
      breaking: false,
      additional_headers: { 'x-team': 'payments' },
      metadata: { owner: 'payments' },
    });
    expect(h.admin.targets[0]).toEqual({ url: `http://${CLUSTER}-admin.${NS}.svc:9070`, token: TOKEN });
    const id = status().deploymentId!;
    expect(id).toMatch(/^dp_/);
    expect(status()).toMatchObject({
      observedGeneration: 1,
      endpoint: V1,
      services: [{ name: 'Greeter', revision: 1 }],
      protocol: { min: 5, max: 6 },
      drainingCount: 0,
    });
    expect(cond('Registered')).toMatchObject({ status: 'True', reason: 'Registered' });
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready', observedGeneration: 1 });
    expect(cond('Reconciling')).toMatchObject({ status: 'False' });
    expect(cond('Stalled')).toMatchObject({ status: 'False' });
    expect(h.events.reasons()).toEqual(['Registered']);
    expect(result).toEqual({});

    // A steady reconcile registers nothing and writes no status.
    const writes = h.kube.calls.filter((c) => c.verb === 'applyStatus').length;
    await h.reconcile('greeter');
    expect(h.admin.calls('registerDeployment')).toHaveLength(1);
    expect(h.kube.calls.filter((c) => c.verb === 'applyStatus')).toHaveLength(writes);
  });

  it('writes Ready Unknown and Reconciling True on first sight, before talking to the runtime', async () => {
    h.admin.unreachable = true;
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    await expect(h.reconcile('greeter')).rejects.toBeInstanceOf(AdminApiError);
    expect(status().observedGeneration).toBe(1);
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'AdminAPIError' });
    expect(cond('Reconciling')).toMatchObject({ status: 'True', reason: 'AdminAPIError' });
  });

  it('resolves a serviceRef to the in-cluster URL of the Service, with its path', async () => {
    const uri = `http://greeter.${NS}.svc:9080/api`;
    h.admin.serve(uri, { Greeter: ['greet'] });
    h.deployment('greeter', { endpoint: { http: { serviceRef: { name: 'greeter', port: 9080, path: '/api' } } } });
    await h.settle('greeter', 'Deployment');
    expect(status().endpoint).toBe(uri);
    expect(cond('Ready')?.status).toBe('True');
  });

  it('registers a Lambda ARN with the role to assume', async () => {
    const arn = 'arn:aws:lambda:eu-west-1:123456789012:function:greeter:7';
    h.admin.serve(arn, { Greeter: ['greet'] });
    h.deployment('greeter', {
      endpoint: { lambda: { arn, assumeRoleArn: 'arn:aws:iam::123456789012:role/invoker' } },
    });
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment')[0]?.args[0]).toMatchObject({
      arn,
      assume_role_arn: 'arn:aws:iam::123456789012:role/invoker',
      force: false,
    });
    expect(status().endpoint).toBe(arn);
  });

  it('waits for the Cluster: ClusterNotFound, then ClusterNotReady, then registers', async () => {
    h.deployment('other', { clusterRef: { name: 'later' }, endpoint: { http: { uri: V1 } } });
    expect(await h.settle('other', 'Deployment')).toEqual({ requeueAfterMs: 10_000 });
    expect(cond('Ready', 'other')).toMatchObject({ status: 'False', reason: 'ClusterNotFound' });
    expect(h.admin.requests).toHaveLength(0);

    h.cluster({ name: 'later', ready: false });
    await h.settle('other', 'Deployment');
    expect(cond('Ready', 'other')).toMatchObject({ status: 'False', reason: 'ClusterNotReady' });
    expect(h.admin.requests).toHaveLength(0);

    h.setClusterReady(true, 'later');
    await h.settle('other', 'Deployment');
    expect(cond('Ready', 'other')?.status).toBe('True');
    expect(h.admin.targets.at(-1)?.token).toBe('token-of-later');
  });

  it('reads header values from Secrets; a missing Secret is SecretNotFound naming it, and is retried', async () => {
    h.deployment('greeter', {
      endpoint: { http: { uri: V1 } },
      additionalHeaders: [
        { name: 'authorization', valueFrom: { secretKeyRef: { name: 'greeter-auth', key: 'header' } } },
      ],
    });
    expect(await h.settle('greeter', 'Deployment')).toEqual({ requeueAfterMs: 30_000 });
    expect(cond('Registered')).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(cond('Registered')?.message).toContain('Secret default/greeter-auth not found');
    expect(h.admin.calls('registerDeployment')).toHaveLength(0);

    h.secret('greeter-auth', { header: 'Bearer s3cret' });
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment')[0]?.args[0]).toMatchObject({
      additional_headers: { authorization: 'Bearer s3cret' },
    });
    expect(cond('Ready')?.status).toBe('True');
  });

  it('updates changed headers in place with PATCH, keeping the deployment id', async () => {
    h.secret('greeter-auth', { header: 'one' });
    h.deployment('greeter', {
      endpoint: { http: { uri: V1 } },
      additionalHeaders: [
        { name: 'authorization', valueFrom: { secretKeyRef: { name: 'greeter-auth', key: 'header' } } },
      ],
    });
    await h.settle('greeter', 'Deployment');
    const id = status().deploymentId;
    const hash = status().headersHash;

    h.secret('greeter-auth', { header: 'two' });
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment')).toHaveLength(1);
    expect(h.admin.calls('updateDeployment').map((c) => c.args)).toEqual([
      [id, { additional_headers: { authorization: 'two' }, use_http_11: false }],
    ]);
    expect(h.admin.deploymentById(id!)?.additional_headers).toEqual({ authorization: 'two' });
    expect(status().deploymentId).toBe(id);
    expect(status().headersHash).not.toBe(hash);
    expect(status().superseded ?? []).toEqual([]);
    expect(h.events.reasons()).toEqual(['Registered', 'Updated']);
  });

  it('applies a useHttp11 change in place with PATCH, keeping the deployment id', async () => {
    const id = await registered('greeter', V1);
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V1, useHttp11: true } }));
    await h.settle('greeter', 'Deployment');
    expect(h.admin.calls('registerDeployment')).toHaveLength(1);
    expect(h.admin.calls('updateDeployment').map((c) => c.args)).toEqual([
      [id, { additional_headers: {}, use_http_11: true }],
    ]);
    expect(h.admin.deploymentById(id)?.['use_http_11']).toBe(true);
    expect(status().deploymentId).toBe(id);
    expect(cond('Ready')?.status).toBe('True');

    // Back to h2c: the same, the other way.
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V1 } }));
    await h.settle('greeter', 'Deployment');
    expect(h.admin.deploymentById(id)?.['use_http_11']).toBe(false);
    expect(h.admin.calls('updateDeployment')).toHaveLength(2);
  });

  it('sends metadata with a registration only: a metadata-only change neither re-registers nor forces', async () => {
    h.deployment('greeter', { endpoint: { http: { uri: V1 } }, metadata: { team: 'a' } });
    await h.settle('greeter', 'Deployment');
    const id = status().deploymentId!;
    expect(h.admin.deploymentById(id)?.['metadata']).toEqual({ team: 'a' });

    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.metadata = { team: 'b' }));
    await h.settle('greeter', 'Deployment');
    // Re-registering the same endpoint with force would rewrite the schema under running invocations: not done.
    expect(h.admin.calls('registerDeployment')).toHaveLength(1);
    expect(h.admin.calls('updateDeployment')).toHaveLength(0);
    expect(status().deploymentId).toBe(id);
    expect(cond('Ready')?.status).toBe('True');

    // The next new registration carries it.
    h.editSpec<DeploymentObject>('Deployment', 'greeter', (s) => (s.endpoint = { http: { uri: V2 } }));
    await h.settle('greeter', 'Deployment');
    expect(h.admin.deploymentById(status().deploymentId!)?.['metadata']).toEqual({ team: 'b' });
  });

  it('a runtime that lost the deployment gets it registered again', async () => {
    const id = await registered('greeter', V1);
    h.admin.deleteDirectly(id);
    await h.settle('greeter', 'Deployment');
    expect(status().deploymentId).not.toBe(id);
    expect(cond('Ready')?.status).toBe('True');
    expect(h.events.reasons()).toContain('Recreated');
  });
});

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

  it('other 4xx answers are Stalled; 5xx and an unreachable runtime are thrown for the queue to back off', async () => {
    h.deployment('greeter', { endpoint: { http: { uri: V1 } } });
    h.admin.failNext('registerDeployment', () => new AdminApiError(400, 'bad uri', 'META0003'));
    await h.reconcile('greeter');
    expect(cond('Stalled')).toMatchObject({ status: 'True', reason: 'RegistrationRejected' });

    h.admin.failNext('registerDeployment', () => new AdminApiError(503, 'unavailable'));
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 503 });
    expect(cond('Ready')).toMatchObject({ status: 'False', reason: 'AdminAPIError' });
    expect(cond('Stalled')?.status).toBe('False');

    h.admin.stopServing(V1);
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 500, code: 'META0003' });

    h.admin.serve(V1, { Greeter: ['greet'] });
    h.admin.unreachable = true;
    await expect(h.reconcile('greeter')).rejects.toMatchObject({ status: 0 });
    h.admin.unreachable = false;
    await h.settle('greeter', 'Deployment');
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
