import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import { onlyStatusChanged } from '../../../../operator/src/reconcile/manager.ts';

const base: KubeObject = {
  apiVersion: 'ratchet.dev/v1alpha1',
  kind: 'Deployment',
  metadata: {
    namespace: 'ns',
    name: 'd',
    generation: 3,
    resourceVersion: '10',
    labels: { a: '1' },
    annotations: { 'ratchet.dev/reconcile': 'active' },
    finalizers: ['ratchet.dev/deregister'],
  },
  spec: { uri: 'http://x' },
  status: { observedGeneration: 2 },
};

function changed(mutate: (o: KubeObject) => void): KubeObject {
  const copy = structuredClone(base);
  copy.metadata.resourceVersion = '11';
  mutate(copy);
  return copy;
}

describe('status-only churn of a primary object', () => {
  it('is a status, resourceVersion or managedFields change with everything a reconcile reads unchanged', () => {
    expect(
      onlyStatusChanged(
        base,
        changed((o) => (o['status'] = { observedGeneration: 3 })),
      ),
    ).toBe(true);
  });

  it.each([
    ['generation', (o: KubeObject) => (o.metadata.generation = 4)],
    ['a label', (o: KubeObject) => (o.metadata.labels = { a: '2' })],
    ['an annotation (pause)', (o: KubeObject) => (o.metadata.annotations = { 'ratchet.dev/reconcile': 'paused' })],
    ['finalizers', (o: KubeObject) => (o.metadata.finalizers = [])],
    ['deletionTimestamp', (o: KubeObject) => (o.metadata.deletionTimestamp = '2026-01-01T00:00:00Z')],
  ])('is not a change of %s', (_what, mutate) => {
    expect(onlyStatusChanged(base, changed(mutate))).toBe(false);
  });

  it('is never assumed for kinds without a generation', () => {
    const noGeneration = changed((o) => delete o.metadata.generation);
    expect(onlyStatusChanged(noGeneration, structuredClone(noGeneration))).toBe(false);
  });
});
