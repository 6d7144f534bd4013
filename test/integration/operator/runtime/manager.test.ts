import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminClientFactory } from '../../../../operator/src/admin-client/types.ts';
import { CrdPresence, REQUIRED_CRDS, startHealthServer } from '../../../../operator/src/health.ts';
import { ClientNodeEventRecorder, type ClientNodeKube } from '../../../../operator/src/kube/client-node.ts';
import { KubeApiError } from '../../../../operator/src/kube/port.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import { defaultServiceUrl, Manager } from '../../../../operator/src/reconcile/manager.ts';
import { keyString, ownerOf, type Controller, type ObjectKey } from '../../../../operator/src/reconcile/types.ts';
import { silentLogger } from '../../../../operator/src/telemetry/logger.ts';
import { createOperatorMetrics } from '../../../../operator/src/telemetry/metrics.ts';
import { waitFor } from '../../../support/wait.ts';
import { capturedLogger, startTestCluster, widget, WIDGET_API, type TestCluster, type Widget } from './support.ts';

const noAdmin: AdminClientFactory = () => {
  throw new Error('no admin API in these tests');
};

/**
 * A controller of Widgets: owns a ConfigMap holding the size, writes status; size 99 polls with requeueAfter, a
 * `fail` label makes that many first passes throw.
 */
function widgetController(): Controller & { passes: Map<string, number>; gone: string[] } {
  const passes = new Map<string, number>();
  const gone: string[] = [];
  return {
    name: 'widget',
    apiVersion: WIDGET_API,
    kind: 'Widget',
    passes,
    gone,
    watches: [{ apiVersion: 'v1', kind: 'ConfigMap', map: ownerOf(WIDGET_API, 'Widget') }],
    async reconcile(key: ObjectKey, ctx) {
      const n = (passes.get(keyString(key)) ?? 0) + 1;
      passes.set(keyString(key), n);
      const w = await ctx.kube.get<Widget>({ apiVersion: WIDGET_API, kind: 'Widget', ...key });
      if (w === undefined) {
        gone.push(keyString(key));
        return {};
      }
      if (n <= Number(w.metadata.labels?.['fail'] ?? 0)) throw new Error(`pass ${n} fails on purpose`);
      await ctx.kube.apply(
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            namespace: key.namespace,
            name: `${key.name}-cm`,
            ownerReferences: [
              { apiVersion: WIDGET_API, kind: 'Widget', name: key.name, uid: w.metadata.uid ?? '', controller: true },
            ],
          },
          data: { size: String(w.spec?.size ?? 0) },
        },
        { fieldManager: 'widget-controller' },
      );
      await ctx.kube.applyStatus(
        {
          apiVersion: WIDGET_API,
          kind: 'Widget',
          metadata: { namespace: key.namespace, name: key.name },
          status: { observedGeneration: w.metadata.generation, seen: ctx.serviceUrl(key.namespace, key.name, 9070) },
        },
        { fieldManager: 'widget-controller' },
      );
      return w.spec?.size === 99 ? { requeueAfterMs: 100 } : {};
    },
  };
}

describe('manager with a Widget controller against the fake API server', () => {
  let cluster: TestCluster;
  let kube: ClientNodeKube;
  let manager: Manager;
  let controller: ReturnType<typeof widgetController>;
  const metrics = createOperatorMetrics();
  const logs = capturedLogger();

  beforeAll(async () => {
    cluster = await startTestCluster();
    kube = cluster.client();
    controller = widgetController();
    manager = new Manager({
      controllers: [controller],
      kube,
      events: new ClientNodeEventRecorder(kube, { reportingInstance: 'test' }),
      admin: noAdmin,
      operatorNamespace: 'ops',
      sources: (apiVersion, kind, namespace) => kube.listWatchSource(apiVersion, kind, namespace),
      watchNamespaces: ['a', 'b'],
      // One at a time, so keys are processed in the order their events arrived (see the status-only test).
      maxConcurrentReconciles: 1,
      serviceUrl: (namespace, service, port) => `http://127.0.0.1:${port}/${namespace}/${service}`,
      log: logs.log,
      metrics,
    });
    manager.start();
    await manager.synced();
    manager.setLeading(true);
  });
  afterAll(async () => {
    await manager.stop(5_000);
    await cluster.close();
  });

  const passes = (ns: string, name: string): number => controller.passes.get(`${ns}/${name}`) ?? 0;
  const getWidget = (ns: string, name: string) =>
    kube.get<Widget>({ apiVersion: WIDGET_API, kind: 'Widget', namespace: ns, name });

  it('reconciles a new object: owned child, status with observedGeneration, the injected service URL', async () => {
    await kube.apply(widget('a', 'w1', 3), { fieldManager: 'user' });
    await waitFor(async () =>
      expect((await getWidget('a', 'w1'))?.status).toEqual({
        observedGeneration: 1,
        seen: 'http://127.0.0.1:9070/a/w1',
      }),
    );
    const cm = await kube.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'a', name: 'w1-cm' });
    expect(cm?.['data']).toEqual({ size: '3' });

    const line = logs.lines().find((l) => l['msg'] === 'reconciled' && l['key'] === 'a/w1');
    expect(line).toMatchObject({
      controller: 'widget',
      result: 'success',
      durationMs: expect.any(Number) as unknown,
      level: 'info',
    });
  });

  it('ignores status-only changes of the primary kind, but not spec, label or deletion changes', async () => {
    await kube.apply(widget('a', 'quiet', 1), { fieldManager: 'user' });
    await kube.apply(widget('a', 'marker', 1), { fieldManager: 'user' });
    await waitFor(async () => expect((await getWidget('a', 'marker'))?.status?.observedGeneration).toBe(1));
    await waitFor(() => expect(manager.cache(WIDGET_API, 'Widget').get('a', 'marker')?.['status']).toBeDefined());
    const before = passes('a', 'quiet');

    // Status written by someone else, then a spec change of another object: events arrive in this order and the
    // queue runs one key at a time in arrival order, so once `marker` has run again, `quiet` would have too.
    await kube.applyStatus(
      { apiVersion: WIDGET_API, kind: 'Widget', metadata: { namespace: 'a', name: 'quiet' }, status: { seen: 'x' } },
      { fieldManager: 'someone-else' },
    );
    await kube.apply(widget('a', 'marker', 2), { fieldManager: 'user' });
    await waitFor(async () => expect((await getWidget('a', 'marker'))?.status?.observedGeneration).toBe(2));
    expect(passes('a', 'quiet')).toBe(before);

    await kube.apply(widget('a', 'quiet', 1, { touched: 'yes' }), { fieldManager: 'user' });
    await waitFor(() => expect(passes('a', 'quiet')).toBeGreaterThan(before));
  });

  it('maps changes of an owned child back to its owner, which repairs it', async () => {
    await kube.apply(widget('b', 'owner', 4), { fieldManager: 'user' });
    const cmRef = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'b', name: 'owner-cm' };
    await waitFor(async () => expect((await kube.get(cmRef))?.['data']).toEqual({ size: '4' }));
    cluster.fake.update(cmRef, (cm) => {
      cm['data'] = { size: 'tampered' };
    });
    await waitFor(async () => expect((await kube.get(cmRef))?.['data']).toEqual({ size: '4' }));
  });

  it('retries a failing reconcile with backoff until it succeeds, one log line per pass', async () => {
    await kube.apply(widget('a', 'flaky', 1, { fail: '2' }), { fieldManager: 'user' });
    await waitFor(async () => expect((await getWidget('a', 'flaky'))?.status?.observedGeneration).toBe(1));
    // (A fourth pass may follow: the ConfigMap the third one created maps back to its owner.)
    const lines = logs.lines().filter((l) => l['key'] === 'a/flaky');
    expect(lines.slice(0, 3).map((l) => l['result'])).toEqual(['error', 'error', 'success']);
    expect(lines[0]).toMatchObject({ level: 'warn', retryInMs: 5, err: { message: 'pass 1 fails on purpose' } });
    expect(lines[1]).toMatchObject({ retryInMs: 10 });
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/ratchet_operator_reconcile_errors_total\{controller="widget"\} [2-9]/);
    expect(text).toMatch(/ratchet_operator_reconcile_total\{controller="widget",result="error"\} [2-9]/);
    expect(text).toMatch(/ratchet_operator_reconcile_time_seconds_count\{controller="widget"\} \d+/);
  });

  it('honours requeueAfter', async () => {
    await kube.apply(widget('b', 'poller', 99), { fieldManager: 'user' });
    await waitFor(() => expect(passes('b', 'poller')).toBeGreaterThanOrEqual(4));
    expect(await metrics.reconcileTotal.get()).toMatchObject({
      values: expect.arrayContaining([
        expect.objectContaining({ labels: { controller: 'widget', result: 'requeue_after' } }),
      ]) as unknown,
    });
    await kube.apply(widget('b', 'poller', 1), { fieldManager: 'user' });
  });

  it('reconciles a deleted object once more (to clean up) and watches only its namespaces', async () => {
    await kube.apply(widget('b', 'doomed'), { fieldManager: 'user' });
    await waitFor(async () => expect((await getWidget('b', 'doomed'))?.status).toBeDefined());
    await kube.delete({ apiVersion: WIDGET_API, kind: 'Widget', namespace: 'b', name: 'doomed' });
    await waitFor(() => expect(controller.gone).toContain('b/doomed'));

    await kube.apply(widget('c', 'outside'), { fieldManager: 'user' });
    await kube.apply(widget('a', 'inside'), { fieldManager: 'user' });
    await waitFor(() => expect(manager.cache(WIDGET_API, 'Widget').get('a', 'inside')).toBeDefined());
    expect(
      manager
        .cache(WIDGET_API, 'Widget')
        .list()
        .every((w) => w.metadata.namespace !== 'c'),
    ).toBe(true);
  });
});

describe('service URLs', () => {
  it('default to the in-cluster DNS name of the Service', () => {
    expect(defaultServiceUrl()('ns', 'ratchet', 9070)).toBe('http://ratchet.ns.svc.cluster.local:9070');
    expect(defaultServiceUrl('corp.example')('ns', 'ratchet', 9071, 'https')).toBe(
      'https://ratchet.ns.svc.corp.example:9071',
    );
  });
});

describe('health endpoints', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startTestCluster();
  });
  afterAll(async () => {
    await cluster.close();
  });

  it('/readyz waits for the CRDs (polling, not exiting) and synced caches; /healthz and /metrics answer throughout', async () => {
    const kube = cluster.client();
    const metrics = createOperatorMetrics();
    const crds = new CrdPresence({ kube, log: silentLogger(), metrics, intervalMs: 50 });
    const manager = new Manager({
      controllers: [
        {
          name: 'noop',
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Cluster',
          watches: [],
          reconcile: () => Promise.resolve({}),
        },
      ],
      kube,
      events: new ClientNodeEventRecorder(kube, { reportingInstance: 'test' }),
      admin: noAdmin,
      operatorNamespace: 'ops',
      sources: (apiVersion, kind, namespace) => kube.listWatchSource(apiVersion, kind, namespace),
      log: silentLogger(),
      metrics,
      informerBackoff: { initialMs: 50, maxMs: 100 },
    });
    const health = await startHealthServer({
      host: '127.0.0.1',
      port: 0,
      registry: metrics.registry,
      log: silentLogger(),
      readiness: {
        problems: () => [
          ...crds.missing().map((crd) => `CRD ${crd} is not installed`),
          ...manager.unsynced().map((informer) => `informer ${informer} has not synced`),
        ],
      },
    });
    const get = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${health.port}${path}`);
      return { status: res.status, body: await res.text() };
    };
    try {
      const present = crds.waitUntilPresent();
      await waitFor(async () => {
        const ready = await get('/readyz');
        expect(ready.status).toBe(503);
        for (const crd of REQUIRED_CRDS) expect(ready.body).toContain(`CRD ${crd} is not installed`);
      });
      expect((await get('/healthz')).status).toBe(200);
      expect((await get('/metrics')).body).toContain('ratchet_operator_crd_missing{crd="deployments.ratchet.dev"} 1');

      cluster.fake.loadYaml(readFileSync('crds/all.yaml', 'utf8'));
      expect(await present).toBe(true);
      expect((await get('/readyz')).body).toBe('informer ratchet.dev/v1alpha1 Cluster has not synced\n');
      manager.start();
      await manager.synced();
      expect(await get('/readyz')).toEqual({ status: 200, body: 'ok\n' });
      const text = (await get('/metrics')).body;
      expect(text).toContain('ratchet_operator_crd_missing{crd="clusters.ratchet.dev"} 0');
      expect(text).toContain('# HELP ratchet_operator_workqueue_depth');
      expect((await get('/nope')).status).toBe(404);
    } finally {
      crds.stop();
      await manager.stop(1_000);
      await health.close();
    }
  });

  it('the Kube port reports a missing CRD kind as a 404 KubeApiError (what CrdPresence and informers retry on)', async () => {
    const kube = cluster.client();
    const err: unknown = await kube.list('absent.ratchet.dev/v1', 'Absent').catch((e: unknown) => e);
    expect(KubeApiError.isNotFound(err)).toBe(true);
  });
});

export type { KubeObject };
