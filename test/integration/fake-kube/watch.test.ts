import {
  CustomObjectsApi,
  Watch,
  makeInformer,
  type Informer,
  type KubernetesListObject,
  type ListWatch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../support/wait.ts';
import { GROUP, WIDGET_CRD, startHarness, widget, type Harness, type Obj } from './harness.ts';

/*
 * Watches and informers from client-node 1.4.0 against the fake: events, resume from a resourceVersion, 410 Gone and
 * the informer's re-list, disconnects, bookmarks, selector transitions and timeouts.
 */

let h: Harness;
let custom: CustomObjectsApi;
let namespaceCount = 0;

function freshNamespace(): string {
  const name = `watch-${++namespaceCount}`;
  h.fake.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

const path = (ns: string): string => `/apis/${GROUP}/v1/namespaces/${ns}/widgets`;
const ref = (ns: string, name: string): { apiVersion: string; kind: string; namespace: string; name: string } => ({
  apiVersion: `${GROUP}/v1`,
  kind: 'Widget',
  namespace: ns,
  name,
});

function widgetInformer(ns: string): Informer<Obj> & ListWatch<Obj> {
  const list = async (): Promise<KubernetesListObject<Obj>> =>
    (await custom.listNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
    })) as KubernetesListObject<Obj>;
  return makeInformer<Obj>(h.kc, path(ns), list) as Informer<Obj> & ListWatch<Obj>;
}

/** Records an informer's callbacks as `<event> <name>` lines, and its errors apart (AbortError from stop() aside). */
function record(informer: Informer<Obj>): { events: string[]; errors: unknown[] } {
  const events: string[] = [];
  const errors: unknown[] = [];
  for (const event of ['add', 'update', 'delete'] as const) {
    informer.on(event, (o) => events.push(`${event} ${o.metadata?.name ?? ''}`));
  }
  informer.on('error', (e: unknown) => {
    if ((e as Error | undefined)?.name !== 'AbortError') errors.push(e);
  });
  return { events, errors };
}

function listRequests(ns: string): number {
  return h.fake.requests.filter((r) => r.verb === 'list' && r.resource === 'widgets' && r.namespace === ns).length;
}

function watchRequests(ns: string): number {
  return h.fake.requests.filter((r) => r.verb === 'watch' && r.resource === 'widgets' && r.namespace === ns).length;
}

beforeAll(async () => {
  h = await startHarness({ bookmarkIntervalMs: 100 });
  custom = h.kc.makeApiClient(CustomObjectsApi);
  h.fake.put(WIDGET_CRD);
});

afterAll(async () => {
  await h.stop();
});

describe('fake-kube watches', () => {
  it('feeds an informer add, update and delete, after listing what existed', async () => {
    const ns = freshNamespace();
    h.fake.put(widget('a', ns, { size: 1 }));
    const informer = widgetInformer(ns);
    const { events, errors } = record(informer);
    await informer.start();
    expect(events).toEqual(['add a']);

    h.fake.put(widget('b', ns, { size: 1 }));
    h.fake.update(ref(ns, 'a'), (o) => (o['spec'] = { size: 2 }));
    h.fake.delete(ref(ns, 'a'));
    await waitFor(() => expect(events).toEqual(['add a', 'add b', 'update a', 'delete a']));
    expect(informer.list().map((o) => o.metadata?.name)).toEqual(['b']);
    expect(informer.get('b', ns)?.['spec']).toEqual({ size: 1 });
    await informer.stop();
    expect(errors).toEqual([]);
  });

  it('resumes a watch from a resourceVersion, and starts from the current state without one', async () => {
    const ns = freshNamespace();
    const a = h.fake.put(widget('a', ns, { size: 1 }));
    h.fake.update(ref(ns, 'a'), (o) => (o['spec'] = { size: 2 }));
    h.fake.put(widget('b', ns, {}));

    const watch = new Watch(h.kc);
    const resumed: string[] = [];
    const fromRv = await watch.watch(
      path(ns),
      { resourceVersion: a.metadata.resourceVersion },
      (type: string, o: Obj) => resumed.push(`${type} ${o.metadata?.name ?? ''} ${JSON.stringify(o['spec'])}`),
      () => undefined,
    );
    const fresh: string[] = [];
    const fromNow = await watch.watch(
      path(ns),
      {},
      (type: string, o: Obj) => fresh.push(`${type} ${o.metadata?.name ?? ''}`),
      () => undefined,
    );
    await waitFor(() => expect(resumed).toEqual(['MODIFIED a {"size":2}', 'ADDED b {}']));
    await waitFor(() => expect(fresh).toEqual(['ADDED a', 'ADDED b']));
    fromRv.abort();
    fromNow.abort();
  });

  it('answers a resourceVersion older than its history with one ERROR event carrying 410 Gone', async () => {
    const ns = freshNamespace();
    const a = h.fake.put(widget('a', ns, {}));
    h.fake.update(ref(ns, 'a'), (o) => (o['spec'] = { size: 2 }));
    h.fake.compactHistory();
    const events: { type: string; object: Obj }[] = [];
    const ended = new Promise<unknown>((resolve) => {
      void new Watch(h.kc).watch(
        path(ns),
        { resourceVersion: a.metadata.resourceVersion },
        (type: string, object: Obj) => events.push({ type, object }),
        resolve,
      );
    });
    expect(await ended).toBeNull();
    expect(events).toEqual([
      { type: 'ERROR', object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Gone' }) as unknown },
    ]);
  });

  it('makes an informer re-list after 410 Gone, reporting objects deleted while it was away', async () => {
    const ns = freshNamespace();
    h.fake.put(widget('a', ns, {}));
    h.fake.put(widget('b', ns, {}));
    const informer = widgetInformer(ns);
    const { events, errors } = record(informer);
    await informer.start();
    expect(listRequests(ns)).toBe(1);

    // While the informer is disconnected, b vanishes and the history that would tell it so is compacted away.
    expect(h.fake.disconnectWatches({ resource: 'widgets' })).toBeGreaterThanOrEqual(1);
    h.fake.delete(ref(ns, 'b'));
    h.fake.compactHistory();
    await waitFor(() => expect(events).toEqual(['add a', 'add b', 'delete b']));
    expect(listRequests(ns)).toBe(2);

    // expireNextWatch forces the same path without compaction.
    h.fake.expireNextWatch(`${GROUP}/v1`, 'Widget');
    h.fake.disconnectWatches({ resource: 'widgets' });
    await waitFor(() => expect(listRequests(ns)).toBe(3));
    h.fake.put(widget('c', ns, {}));
    await waitFor(() => expect(informer.get('c', ns)).toBeDefined());
    await informer.stop();
    expect(errors).toEqual([]);
  });

  it('lets an informer resume without re-listing after a clean disconnect, and stop with an error after a reset', async () => {
    const ns = freshNamespace();
    const informer = widgetInformer(ns);
    const { events, errors } = record(informer);
    await informer.start();
    const watchesBefore = watchRequests(ns);

    h.fake.disconnectWatches({ resource: 'widgets' });
    h.fake.put(widget('while-away', ns, {}));
    await waitFor(() => expect(events).toEqual(['add while-away']));
    expect(listRequests(ns)).toBe(1);
    expect(watchRequests(ns)).toBe(watchesBefore + 1);

    // A reset connection is not a clean end: client-node's informer reports it and stops, as the operator must handle.
    h.fake.disconnectWatches({ resource: 'widgets', abrupt: true });
    await waitFor(() => expect(errors).toHaveLength(1));
    h.fake.put(widget('after-reset', ns, {}));
    await informer.start();
    await waitFor(() => expect(events).toEqual(['add while-away', 'add after-reset']));
    await informer.stop();
  });

  it('sends bookmarks, turns selector transitions into ADDED/DELETED, and ends at timeoutSeconds', async () => {
    const ns = freshNamespace();
    const watch = new Watch(h.kc);
    const events: string[] = [];
    let bookmarkRv: string | undefined;
    const ended = new Promise<unknown>((resolve) => {
      void watch.watch(
        path(ns),
        { labelSelector: 'team=a', allowWatchBookmarks: true, timeoutSeconds: 2 },
        (type: string, o: Obj) => {
          if (type === 'BOOKMARK') bookmarkRv = o.metadata?.resourceVersion;
          else events.push(`${type} ${o.metadata?.name ?? ''}`);
        },
        resolve,
      );
    });
    const labelled = (team: string): Obj => ({
      ...widget('x', ns, {}),
      metadata: { name: 'x', namespace: ns, labels: { team } },
    });
    await waitFor(() => expect(watchRequests(ns)).toBe(1));
    h.fake.put(labelled('a'));
    h.fake.put(widget('other', ns, {}));
    h.fake.put(labelled('b'));
    h.fake.put(labelled('a'));
    h.fake.delete(ref(ns, 'x'));
    await waitFor(() => expect(events).toEqual(['ADDED x', 'DELETED x', 'ADDED x', 'DELETED x']));
    await waitFor(() => expect(bookmarkRv).toBe(h.fake.resourceVersion));
    expect(await ended).toBeNull();
  });
});
