import { CoordinationV1Api, CoreV1Api, makeInformer, type V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../support/wait.ts';
import { expectStatus, startHarness, type Harness } from './harness.ts';

/*
 * Fault injection as operator tests use it: failing the next N matching requests, conflicts on lease renewal, failed
 * watches (with and without 410), and latency.
 */

let h: Harness;
let core: CoreV1Api;

beforeAll(async () => {
  h = await startHarness({ namespaces: ['faults'] });
  core = h.kc.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({ namespace: 'faults', body: { metadata: { name: 'c' } } });
});

afterEach(() => {
  h.fake.clearFaults();
});

afterAll(async () => {
  await h.stop();
});

describe('fake-kube fault injection', () => {
  it('fails the next N requests matching verb, resource and name, then recovers', async () => {
    h.fake.failNext({ verb: 'get', resource: 'configmaps', name: 'c', status: 503, count: 2 });
    await core.listNamespacedConfigMap({ namespace: 'faults' }); // not matched
    const first = await expectStatus(
      core.readNamespacedConfigMap({ namespace: 'faults', name: 'c' }),
      503,
      'ServiceUnavailable',
    );
    expect(first.message).toBe('fake-kube injected failure (503)');
    await expectStatus(core.readNamespacedConfigMap({ namespace: 'faults', name: 'c' }), 503, 'ServiceUnavailable');
    expect((await core.readNamespacedConfigMap({ namespace: 'faults', name: 'c' })).metadata?.name).toBe('c');
  });

  it('injects a 409 on a lease update, with the message a real conflict carries', async () => {
    const leases = h.kc.makeApiClient(CoordinationV1Api);
    const lease = await leases.createNamespacedLease({
      namespace: 'faults',
      body: { metadata: { name: 'l' }, spec: { holderIdentity: 'me' } },
    });
    h.fake.failNext({ verb: 'update', resource: 'leases', status: 409 });
    const status = await expectStatus(
      leases.replaceNamespacedLease({ namespace: 'faults', name: 'l', body: lease }),
      409,
      'Conflict',
    );
    expect(status.message).toContain('the object has been modified');
    await leases.replaceNamespacedLease({ namespace: 'faults', name: 'l', body: lease });
  });

  it('makes an informer re-list when its watch answers HTTP 410, and stop with an error on a 500', async () => {
    const list = (): ReturnType<CoreV1Api['listNamespacedConfigMap']> =>
      core.listNamespacedConfigMap({ namespace: 'faults' });
    const informer = makeInformer<V1ConfigMap>(h.kc, '/api/v1/namespaces/faults/configmaps', list);
    const errors: unknown[] = [];
    informer.on('error', (e: unknown) => {
      if ((e as Error | undefined)?.name !== 'AbortError') errors.push(e);
    });
    const lists = (): number => h.fake.requests.filter((r) => r.verb === 'list' && r.resource === 'configmaps').length;

    await informer.start();
    const before = lists();
    h.fake.failNext({ verb: 'watch', resource: 'configmaps', status: 410 });
    h.fake.disconnectWatches({ resource: 'configmaps' });
    await waitFor(() => expect(lists()).toBe(before + 1));
    await core.createNamespacedConfigMap({ namespace: 'faults', body: { metadata: { name: 'after-410' } } });
    await waitFor(() => expect(informer.get('after-410', 'faults')).toBeDefined());
    expect(errors).toEqual([]);

    h.fake.failNext({ verb: 'watch', resource: 'configmaps', status: 500 });
    h.fake.disconnectWatches({ resource: 'configmaps' });
    await waitFor(() => expect(errors).toEqual([expect.objectContaining({ statusCode: 500 })]));
    await informer.stop();
  });

  it('delays requests by a fixed or per-request latency', async () => {
    h.fake.setLatency((request) => (request.resource === 'configmaps' ? 300 : 0));
    const started = performance.now();
    await core.readNamespacedConfigMap({ namespace: 'faults', name: 'c' });
    const slow = performance.now() - started;
    expect(slow).toBeGreaterThanOrEqual(290);
    const quick = performance.now();
    await core.readNamespace({ name: 'faults' });
    expect(performance.now() - quick).toBeLessThan(slow);
  });
});
