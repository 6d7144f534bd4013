import { beforeEach } from 'vitest';
import { createDeploymentController } from '../../../../operator/src/controllers/deployment/controller.ts';
import type { DeploymentObject } from '../../../../operator/src/controllers/shared/objects.ts';
import { Harness } from './harness.ts';

/*
 * What the Deployment reconciler's tests (controller-*.test.ts) share: a fresh harness per test, with a Cluster and
 * two versions of a Greeter deployment served by the fake runtime, and shorthands for the resource under test.
 */

export const V1 = 'http://greeter-v1.default.svc:9080/';
export const V2 = 'http://greeter-v2.default.svc:9080/';
export const MINUTE = 60_000;

/** The current test's harness and the draining counts the controller reported; replaced before each test. */
export let h: Harness;
export let draining: Map<string, number>;

/** Gives every test of the calling file a fresh harness (`h`, `draining`); call once at its top level. */
export function useControllerHarness(): void {
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
}

export const dep = (name = 'greeter'): DeploymentObject => h.get<DeploymentObject>('Deployment', name)!;
export const status = (name = 'greeter') => dep(name).status!;
export const cond = (type: string, name = 'greeter') => h.condition('Deployment', name, type);

export async function registered(name: string, uri: string): Promise<string> {
  h.deployment(name, { endpoint: { http: { uri } } });
  await h.settle(name, 'Deployment');
  return status(name).deploymentId!;
}
