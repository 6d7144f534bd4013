import { describe, expect, it } from 'vitest';
import { AdminApiError } from '../../../../operator/src/admin-client/types.ts';
import { FINALIZERS } from '../../../../operator/src/api/v1alpha1/index.ts';
import type { DeploymentObject } from '../../../../operator/src/controllers/shared/objects.ts';
import { CLUSTER, NS, TOKEN } from './harness.ts';
import { cond, dep, h, registered, status, useControllerHarness, V1, V2 } from './controller-fixture.ts';

/*
 * The Deployment reconciler against an in-memory cluster and a fake runtime (operator.md §7 L1): registration and
 * readiness, in-place header updates. Supersede and drain: controller-supersede.test.ts; failures, pause and deletion:
 * controller-deletion.test.ts.
 */

useControllerHarness();

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
    expect(cond('Registered')).toMatchObject({ status: 'True', reason: 'Registered' });
    expect(cond('Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
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
