import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { loadConfig } from '../../../operator/src/config.ts';
import { startOperator, type OperatorHandle, type OperatorOptions } from '../../../operator/src/operator.ts';
import { createLogger } from '../../../operator/src/telemetry/logger.ts';
import { kubeConfigFor, kubectl, type Harness } from '../../integration/fake-kube/harness.ts';
import type { FakeKube, KubeObject } from '../fake-kube/index.ts';
import { REPO_ROOT } from '../runtime-process.ts';

/*
 * The operator as a user installs it, against the fake API server: the generated CRDs and RBAC applied with the real
 * kubectl, the operator's service account, and the real operator (client-node, informers, leader election, the three
 * controllers) running as that account. Shared by the end-to-end test and the controller integration tests.
 */

export const OPERATOR_NAMESPACE = 'ratchet-system';
export const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NAMESPACE}:ratchet-operator`;

/** `kubectl apply --server-side` of the CRDs and `operator/deploy/rbac.yaml`, and the operator's service account. */
export async function installOperator(h: Harness): Promise<void> {
  for (const file of ['crds/all.yaml', 'operator/deploy/rbac.yaml']) {
    const res = await kubectl(h, ['apply', '--server-side', '-f', join(REPO_ROOT, file)]);
    expect(res.code, res.stderr).toBe(0);
  }
  h.fake.addServiceAccount(OPERATOR_NAMESPACE, 'ratchet-operator');
}

export interface TestOperatorOptions {
  /** POD_NAME: the Lease holder identity and the events' reporting instance. */
  readonly name?: string;
  /** More RATCHET_OPERATOR_* variables (they override the defaults here). */
  readonly env?: Readonly<Record<string, string>>;
  readonly serviceUrl?: OperatorOptions['serviceUrl'];
  readonly admin?: OperatorOptions['admin'];
}

/** One operator replica as the operator's service account (RBAC of the generated manifests applies). */
export function startTestOperator(h: Harness, options: TestOperatorOptions = {}): Promise<OperatorHandle> {
  return startOperator({
    config: loadConfig({
      env: {
        RATCHET_OPERATOR_NAMESPACE: OPERATOR_NAMESPACE,
        RATCHET_OPERATOR_HEALTH_BIND: '127.0.0.1:0',
        RATCHET_OPERATOR_RESYNC_PERIOD: '30s',
        POD_NAME: options.name ?? 'ratchet-operator-test',
        ...options.env,
      },
    }),
    kubeConfig: kubeConfigFor(h.fake, h.dir, OPERATOR_USER),
    log: createLogger(process.env['RATCHET_TEST_LOG_LEVEL'] === undefined ? 'silent' : 'debug'),
    ...(options.serviceUrl === undefined ? {} : { serviceUrl: options.serviceUrl }),
    ...(options.admin === undefined ? {} : { admin: options.admin }),
  });
}

/** `kubectl apply --server-side` of `objects` as a user (its own field manager), asserting it succeeded. */
export async function applyAsUser(h: Harness, objects: readonly object[], fieldManager = 'e2e-user'): Promise<void> {
  const file = join(h.dir, `apply-${Date.now()}-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, objects.map((o) => stringify(o)).join('---\n'));
  const res = await kubectl(h, ['apply', '--server-side', `--field-manager=${fieldManager}`, '-f', file]);
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
}

/**
 * Stands in for the apps/v1 Deployment controller and the kubelet where no pod needs to run (the admin API is faked):
 * every apps/v1 Deployment is reported rolled out and ready at its current generation. Returns the unsubscribe.
 */
export function completeRollouts(fake: FakeKube): () => void {
  const rollOut = (object: KubeObject): void => {
    const generation = object.metadata.generation ?? 1;
    const replicas = (object['spec'] as { replicas?: number } | undefined)?.replicas ?? 1;
    const status = object['status'] as { observedGeneration?: number; readyReplicas?: number } | undefined;
    if (status?.observedGeneration === generation && status.readyReplicas === replicas) return;
    const ref = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      namespace: object.metadata.namespace ?? 'default',
      name: object.metadata.name ?? '',
    };
    try {
      fake.update(ref, (o) => {
        o['status'] = {
          observedGeneration: o.metadata.generation ?? 1,
          replicas,
          readyReplicas: replicas,
          updatedReplicas: replicas,
          availableReplicas: replicas,
        };
      });
    } catch {
      // Deleted meanwhile (garbage collection of a deleted Cluster): nothing to report.
    }
  };
  return fake.watchEvents(
    (change) => {
      if (change.type !== 'DELETED') rollOut(change.object);
    },
    { apiVersion: 'apps/v1', kind: 'Deployment' },
  );
}
