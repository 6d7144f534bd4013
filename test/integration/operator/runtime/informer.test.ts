import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ClientNodeKube } from '../../../../operator/src/kube/client-node.ts';
import { Informer } from '../../../../operator/src/reconcile/informer.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { waitFor } from '../../../support/wait.ts';
import { startTestCluster, widget, WIDGET_API, type TestCluster } from './support.ts';

describe('informer over client-node Watch against the fake API server', () => {
  let cluster: TestCluster;
  let kube: ClientNodeKube;
  const informers: Informer[] = [];

  beforeAll(async () => {
    cluster = await startTestCluster();
    kube = cluster.client();
  });
  afterEach(() => {
    for (const i of informers.splice(0)) i.stop();
    cluster.fake.clearFaults();
  });
  afterAll(async () => {
    await cluster.close();
  });

  function start(namespace: string, resyncPeriodMs = 0) {
    const informer = new Informer(kube.listWatchSource(WIDGET_API, 'Widget', namespace), {
      resyncPeriodMs,
      log: silentLogger(),
      backoff: { initialMs: 50, maxMs: 200 },
    });
    informers.push(informer);
    const events: string[] = [];
    informer.subscribe({
      add: (o) => events.push(`add ${o.metadata.name}`),
      update: (_old, o) => events.push(`update ${o.metadata.name}`),
      delete: (o) => events.push(`delete ${o.metadata.name}`),
      resync: (o) => events.push(`resync ${o.metadata.name}`),
    });
    informer.start();
    return { informer, events };
  }

  const names = (informer: Informer): string[] =>
    informer
      .list()
      .map((o) => o.metadata.name)
      .sort();

  it('lists, syncs and follows adds, updates and deletes of its namespace only', async () => {
    await kube.apply(widget('a', 'first'), { fieldManager: 'test' });
    const { informer, events } = start('a');
    await informer.synced;
    expect(names(informer)).toEqual(['first']);

    await kube.apply(widget('a', 'second'), { fieldManager: 'test' });
    await kube.apply(widget('b', 'elsewhere'), { fieldManager: 'test' });
    await kube.apply(widget('a', 'first', 7), { fieldManager: 'test' });
    await kube.delete({ apiVersion: WIDGET_API, kind: 'Widget', namespace: 'a', name: 'second' });
    await waitFor(() => expect(events).toEqual(['add first', 'add second', 'update first', 'delete second']));
    expect(informer.get('a', 'first')?.['spec']).toEqual({ size: 7 });
    await kube.delete({ apiVersion: WIDGET_API, kind: 'Widget', namespace: 'a', name: 'first' });
    await waitFor(() => expect(names(informer)).toEqual([]));
  });

  it('restarts after the watch breaks and its re-watch and re-list fail, and catches up on what happened meanwhile', async () => {
    await kube.apply(widget('c', 'kept'), { fieldManager: 'test' });
    await kube.apply(widget('c', 'removed'), { fieldManager: 'test' });
    const { informer } = start('c');
    await informer.synced;
    await waitFor(() => expect(cluster.fake.openWatches).toBeGreaterThan(0));

    cluster.fake.failNext({ verb: 'list', resource: 'widgets', status: 500, count: 2 });
    cluster.fake.failNext({ verb: 'watch', resource: 'widgets', status: 503, count: 1 });
    expect(cluster.fake.disconnectWatches({ resource: 'widgets', abrupt: true })).toBeGreaterThan(0);
    await kube.apply(widget('c', 'kept', 3), { fieldManager: 'test' });
    await kube.delete({ apiVersion: WIDGET_API, kind: 'Widget', namespace: 'c', name: 'removed' });
    await kube.apply(widget('c', 'added'), { fieldManager: 'test' });

    await waitFor(() => {
      expect(names(informer)).toEqual(['added', 'kept']);
      expect(informer.get('c', 'kept')?.['spec']).toEqual({ size: 3 });
    });
    // And it is watching again: a later change arrives without another re-list.
    await kube.apply(widget('c', 'later'), { fieldManager: 'test' });
    await waitFor(() => expect(informer.get('c', 'later')).toBeDefined());
  });

  it('re-lists when the watch answers 410 Gone', async () => {
    const { informer, events } = start('a');
    await informer.synced;
    await waitFor(() => expect(cluster.fake.openWatches).toBeGreaterThan(0));
    cluster.fake.expireNextWatch(WIDGET_API, 'Widget');
    cluster.fake.disconnectWatches({ resource: 'widgets' });
    await kube.apply(widget('a', 'after-gone'), { fieldManager: 'test' });
    await waitFor(() => expect(events).toContain('add after-gone'));
    const lists = cluster.fake.requests.filter(
      (r) => r.verb === 'list' && r.resource === 'widgets' && r.namespace === 'a',
    );
    expect(lists.length).toBeGreaterThanOrEqual(2);
  });

  it('re-lists every resync period and reports every object', async () => {
    await kube.apply(widget('d', 'r1'), { fieldManager: 'test' });
    await kube.apply(widget('d', 'r2'), { fieldManager: 'test' });
    const { informer, events } = start('d', 300);
    await informer.synced;
    await waitFor(() => expect(events.filter((e) => e.startsWith('resync')).length).toBeGreaterThanOrEqual(4));
    expect(new Set(events.filter((e) => e.startsWith('resync')))).toEqual(new Set(['resync r1', 'resync r2']));
  });
});
