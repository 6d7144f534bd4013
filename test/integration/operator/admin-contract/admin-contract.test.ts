import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient } from '../../../../operator/src/admin-client/client.ts';
import { AdminApiError, type AdminClient } from '../../../../operator/src/admin-client/types.ts';
import { drainCountsSql, sqlDrainProbe } from '../../../../operator/src/controllers/deployment/drain.ts';
import { selectedTargets, type TargetName } from '../../../compat/targets.ts';
import { createTestDatabase, type TestDatabase } from '../../../support/postgres.ts';
import { startRestateServer, type RestateServer } from '../../../support/restate-server.ts';
import { waitFor } from '../../../support/wait.ts';
import { sdkHandler, serve, type TestServer } from '../../admin/harness.ts';
import { startTestRuntime, type TestRuntime } from '../../support/runtime.ts';

/*
 * The operator's admin client against real runtimes (operator.md §7 L3): Ratchet (in process, its own database) and
 * the real restate-server 1.7.12, with real SDK endpoints. What the Deployment and Subscription controllers rely on:
 * registration 201/200 with `force` explicit, rollback needing force, PATCH keeping the id, GET /services naming the
 * latest deployment, the drain SQL counting a pinned running invocation and a scheduled unpinned one, DELETE ?force,
 * and /kafka-clusters and /subscriptions create/list/delete with their validation errors (no broker needed); on
 * Ratchet also GET /subscriptions/{id}/status (not ready without a broker, 404 once deleted).
 *
 * Deliberate difference: on the same URI with a changed manifest and no force, Ratchet discovers again and answers
 * 409 META0004; restate skips discovery and answers 200 with the existing deployment.
 */

/** What the `wait` handler posted before blocking on its awakeable, by input key. */
const awakeables = new Map<string, string>();

const blocker = restate.service({
  name: 'Blocker',
  handlers: {
    /** A journaled step (restate pins the deployment on the first journaled command), then an awakeable. */
    wait: async (ctx: restate.Context, key: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('post', () => {
        awakeables.set(key, id);
      });
      return `got ${await promise}`;
    },
    echo: async (_ctx: restate.Context, s: string): Promise<string> => s,
  },
});

const switchV1 = restate.service({ name: 'Switch', handlers: { a: async (_ctx: restate.Context) => 'a' } });
const switchV2 = restate.service({
  name: 'Switch',
  handlers: { a: async (_ctx: restate.Context) => 'a', b: async (_ctx: restate.Context) => 'b' },
});

interface Runtime {
  readonly adminUrl: string;
  readonly ingressUrl: string;
  stop(): Promise<void>;
}

async function startTarget(name: TargetName): Promise<Runtime> {
  if (name === 'restate') {
    const server: RestateServer = await startRestateServer();
    return { adminUrl: server.adminUrl, ingressUrl: server.ingressUrl, stop: () => server.stop() };
  }
  const db: TestDatabase = await createTestDatabase();
  let runtime: TestRuntime;
  try {
    runtime = await startTestRuntime(db.url);
  } catch (err) {
    await db.drop();
    throw err;
  }
  return {
    adminUrl: runtime.adminUrl,
    ingressUrl: runtime.ingressUrl,
    async stop() {
      await runtime.stop();
      await db.drop();
    },
  };
}

async function send(ingressUrl: string, path: string, body: unknown): Promise<{ invocationId: string }> {
  const res = await fetch(`${ingressUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 202 && res.status !== 200) throw new Error(`${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as { invocationId: string };
}

async function adminError(p: Promise<unknown>): Promise<AdminApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AdminApiError) return err;
    throw err;
  }
  throw new Error('expected an AdminApiError');
}

/** A well-formed deployment id that is not registered: the given one with one character changed. */
function unknownId(id: string): string {
  const i = 8;
  const c = id[i] === 'A' ? 'B' : 'A';
  return `${id.slice(0, i)}${c}${id.slice(i + 1)}`;
}

describe.each(selectedTargets())('admin client against %s', (targetName) => {
  let runtime: Runtime;
  let admin: AdminClient;
  let v1: TestServer;
  let v2: TestServer;
  let switching: TestServer;
  let switchHandler = sdkHandler([switchV1]);
  const tag = `${targetName}-${process.pid}`;

  beforeAll(async () => {
    runtime = await startTarget(targetName);
    admin = createAdminClient({ url: runtime.adminUrl });
    v1 = await serve('h2', sdkHandler([blocker]));
    v2 = await serve('h2', sdkHandler([blocker]));
    switching = await serve('h2', (req, res) => switchHandler(req, res));
  });

  afterAll(async () => {
    await v1?.close();
    await v2?.close();
    await switching?.close();
    await runtime?.stop();
  });

  let id1: string;
  let id2: string;

  it('answers /version', async () => {
    const v = await admin.version();
    expect(v.min_admin_api_version).toBeLessThanOrEqual(v.max_admin_api_version);
    expect(typeof v.version).toBe('string');
  });

  it('registers with force false: 201 the first time, 200 with the same id after', async () => {
    const first = await admin.registerDeployment({ uri: v1.url, force: false });
    expect(first.created).toBe(true);
    expect(first.deployment.id).toMatch(/^dp_/);
    expect(first.deployment.services.map((s) => s.name)).toEqual(['Blocker']);
    id1 = first.deployment.id;

    const again = await admin.registerDeployment({ uri: v1.url, force: false });
    expect(again).toMatchObject({ created: false, deployment: { id: id1 } });

    const listed = await admin.listDeployments();
    expect(listed.map((d) => d.id)).toContain(id1);
    expect((await admin.getDeployment(id1))?.id).toBe(id1);
    expect(await admin.getDeployment(unknownId(id1))).toBeUndefined();
    expect((await admin.listServices()).find((s) => s.name === 'Blocker')?.deployment_id).toBe(id1);
  });

  it('a newer registration takes latest; re-registering the old URI without force leaves it not latest, force makes it latest (#178)', async () => {
    const second = await admin.registerDeployment({ uri: v2.url, force: false });
    expect(second.created).toBe(true);
    id2 = second.deployment.id;
    expect(id2).not.toBe(id1);
    const latest = async (): Promise<string | undefined> =>
      (await admin.listServices()).find((s) => s.name === 'Blocker')?.deployment_id;
    expect(await latest()).toBe(id2);

    const plain = await admin.registerDeployment({ uri: v1.url, force: false });
    expect(plain).toMatchObject({ created: false, deployment: { id: id1 } });
    expect(await latest()).toBe(id2);

    const forced = await admin.registerDeployment({ uri: v1.url, force: true });
    expect(forced.deployment.id).toBe(id1);
    expect(await latest()).toBe(id1);
  });

  it('same URI, changed manifest, no force: META0004 on Ratchet, 200 unchanged on restate', async () => {
    switchHandler = sdkHandler([switchV1]);
    const first = await admin.registerDeployment({ uri: switching.url, force: false });
    switchHandler = sdkHandler([switchV2]);
    if (targetName === 'ratchet') {
      const err = await adminError(admin.registerDeployment({ uri: switching.url, force: false }));
      expect(err).toMatchObject({ status: 409, code: 'META0004' });
      expect(err.message).toMatch(/^\[META0004\] /);
    } else {
      const again = await admin.registerDeployment({ uri: switching.url, force: false });
      expect(again).toMatchObject({ created: false, deployment: { id: first.deployment.id } });
    }
    const forced = await admin.registerDeployment({ uri: switching.url, force: true });
    expect(forced.deployment.id).toBe(first.deployment.id);
    expect(await admin.deleteDeployment(first.deployment.id, { force: true })).toBe(true);
  });

  it('PATCH with new headers keeps the deployment id', async () => {
    const updated = await admin.updateDeployment(id1, { additional_headers: { 'x-operator': 'ratchet' } });
    expect(updated.id).toBe(id1);
    expect((await admin.getDeployment(id1))?.additional_headers).toEqual({ 'x-operator': 'ratchet' });
    expect((await admin.listDeployments()).map((d) => d.id)).toEqual(expect.arrayContaining([id1, id2]));
  });

  it('the drain query counts a pinned running invocation, and a scheduled one only through a service it is latest for', async () => {
    // restate answers 500 "expecting a partition store" until its partition processors run.
    await waitFor(async () => {
      expect(await sqlDrainProbe(admin, { deploymentId: id1, latestForServices: ['Blocker'] })).toEqual({
        pinned: 0,
        unpinned: 0,
      });
    });

    const key = `pinned-${tag}`;
    await send(runtime.ingressUrl, '/Blocker/wait/send', key);
    await waitFor(async () => {
      expect(awakeables.has(key)).toBe(true);
      expect(await sqlDrainProbe(admin, { deploymentId: id1, latestForServices: [] })).toEqual({
        pinned: 1,
        unpinned: 0,
      });
    });
    expect(await sqlDrainProbe(admin, { deploymentId: id2, latestForServices: [] })).toEqual({
      pinned: 0,
      unpinned: 0,
    });

    // Scheduled for later: not pinned to anything yet; it will run on whichever deployment is latest then.
    await send(runtime.ingressUrl, '/Blocker/wait/send?delay=1h', `scheduled-${tag}`);
    await waitFor(async () => {
      expect(await sqlDrainProbe(admin, { deploymentId: id1, latestForServices: ['Blocker'] })).toEqual({
        pinned: 1,
        unpinned: 1,
      });
    });
    expect(await sqlDrainProbe(admin, { deploymentId: id2, latestForServices: [] })).toEqual({
      pinned: 0,
      unpinned: 0,
    });

    const res = await fetch(`${runtime.ingressUrl}/restate/awakeables/${awakeables.get(key)}/resolve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify('done'),
    });
    expect(res.status).toBeLessThan(300);
    await waitFor(async () => {
      expect(await sqlDrainProbe(admin, { deploymentId: id1, latestForServices: [] })).toEqual({
        pinned: 0,
        unpinned: 0,
      });
    });
  });

  it('query answers rows as JSON, and errors with the runtime message', async () => {
    const rows = await admin.query(drainCountsSql({ deploymentId: id2, latestForServices: ["O'Brien"] }));
    expect(rows).toHaveLength(1);
    const err = await adminError(admin.query('SELECT nope FROM no_such_table'));
    expect(err.status).toBeGreaterThanOrEqual(400);
    expect(err.message).not.toBe('');
  });

  it('DELETE without force is refused (501); with force it goes, and a second delete is false (404)', async () => {
    const err = await adminError(admin.deleteDeployment(id2, { force: false }));
    expect(err.status).toBe(501);
    expect(await admin.deleteDeployment(id2, { force: true })).toBe(true);
    expect(await admin.deleteDeployment(id2, { force: true })).toBe(false);
    expect(await admin.getDeployment(id2)).toBeUndefined();
  });

  it('kafka clusters and subscriptions: create, list, get, delete, and validation errors', async () => {
    const cluster = `k-${targetName}`;
    await admin.createKafkaCluster({ name: cluster, properties: { 'bootstrap.servers': '127.0.0.1:9' } });
    expect((await admin.listKafkaClusters()).find((c) => c.name === cluster)?.properties).toMatchObject({
      'bootstrap.servers': '127.0.0.1:9',
    });
    const noBrokers = await adminError(admin.createKafkaCluster({ name: 'no-brokers', properties: {} }));
    expect(noBrokers.status).toBe(400);
    await admin.updateKafkaCluster(cluster, { 'bootstrap.servers': '127.0.0.1:10' });

    const source = `kafka://${cluster}/orders`;
    const sink = 'service://Blocker/echo';
    const created = await admin.createSubscription({ source, sink, options: { 'auto.offset.reset': 'earliest' } });
    expect(created.id).toMatch(/^sub_/);
    expect(created).toMatchObject({
      source,
      sink,
      options: { 'auto.offset.reset': 'earliest', 'group.id': created.id },
    });
    expect((await admin.listSubscriptions()).map((s) => s.id)).toContain(created.id);
    expect(await admin.getSubscription(created.id)).toEqual(created);
    if (targetName === 'ratchet') {
      // Nothing listens on 127.0.0.1:10: no consumer joins, and the status says why.
      const status = await admin.subscriptionStatus(created.id);
      expect(status).toMatchObject({
        subscription_id: created.id,
        group_id: created.id,
        topic: 'orders',
        ready: false,
        assigned_partitions: [],
        lag: null,
      });
      expect(typeof status?.reason).toBe('string');
      expect(Array.isArray(status?.consumers)).toBe(true);
      expect(await adminError(admin.subscriptionStatus('not-a-subscription-id'))).toMatchObject({ status: 400 });
    }

    const unknownCluster = await adminError(admin.createSubscription({ source: 'kafka://nope/t', sink, options: {} }));
    expect(unknownCluster.status).toBe(400);
    expect(unknownCluster.message).toContain("Kafka cluster 'nope' not found");
    const unknownSink = await adminError(
      admin.createSubscription({ source, sink: 'service://Nope/handler', options: {} }),
    );
    expect(unknownSink).toMatchObject({ status: 400, code: 'META0009' });

    expect(await admin.deleteSubscription(created.id)).toBe(true);
    expect(await admin.getSubscription(created.id)).toBeUndefined();
    if (targetName === 'ratchet') expect(await admin.subscriptionStatus(created.id)).toBeUndefined();
    expect(await admin.deleteSubscription(created.id)).toBe(false);
    expect(await admin.deleteKafkaCluster(cluster)).toBe(true);
  });
});
