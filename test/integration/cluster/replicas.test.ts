import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { partitionKeyForKey } from '../../../runtime/src/ids/partition-key.ts';
import { partitionFor } from '../../../runtime/src/storage/pg/leases.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { COUNT_STATE_KEY, counter } from '../../support/services/counter.ts';
import { waitFor } from '../../support/wait.ts';
import { call } from '../support/runtime.ts';
import { clusterHealth, startNode, waitForBalance, waitForService, type ClusterNode } from './support.ts';

/**
 * Three runtime processes on one PostgreSQL share the partitions (each within ±1 of its share), and every node serves
 * every request: ingress calls for keys of every partition, calls between objects whose partitions live on different
 * nodes, and admin operations on invocations another node owns.
 */

const fanout = restate.service({
  name: 'Fanout',
  handlers: {
    /** Calls Counter/add on several keys (their partitions are spread over the nodes) and sends one more. */
    spread: async (ctx: restate.Context, keys: string[]): Promise<number[]> => {
      const results: number[] = [];
      for (const key of keys) results.push(await ctx.objectClient(counter, key).add(1));
      ctx.objectSendClient(counter, `${keys[0]!}-sent`).add(10);
      return results;
    },
    nap: async (ctx: restate.Context): Promise<string> => {
      await ctx.sleep(60_000);
      return 'woke';
    },
    doze: async (ctx: restate.Context, ms: number): Promise<string> => {
      await ctx.sleep(ms);
      return `dozed ${ms}`;
    },
  },
});

const PARTITIONS = 12;

describe('three runtime processes on one database', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  const nodes: ClusterNode[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [counter, fanout], transport: 'h2' });
    const env = { RATCHET_PARTITIONS: String(PARTITIONS) };
    // One after the other: the first takes every partition, the next ones get their share handed over.
    for (const name of ['node-a', 'node-b', 'node-c']) nodes.push(await startNode(db.url, name, env));
  });

  afterAll(async () => {
    for (const n of nodes) await n.process.stop();
    await endpoint?.close();
    await db?.drop();
  });

  const output = (): string => nodes.map((n) => `--- ${n.name}\n${n.process.output()}`).join('\n');

  it('balances the partitions within ±1 and reports them in cluster health and SQL', async () => {
    const ms = await waitForBalance(
      nodes[0]!,
      nodes.map((n) => n.name),
      PARTITIONS,
    );
    console.log(`balanced ${PARTITIONS} partitions over 3 nodes in ${ms} ms after the last node started`);
    const health = await clusterHealth(nodes[1]!);
    expect(health.cluster_name).toBe('localcluster');
    expect(health.metadata_cluster_health?.members).toHaveLength(3);
    for (const n of health.nodes) {
      expect(n.alive).toBe(true);
      expect(n.address).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(n.leader_of.length).toBe(4);
    }
    // The same through SQL, on yet another node.
    const sql = async (query: string): Promise<unknown[]> => {
      const res = await fetch(`${nodes[2]!.process.adminUrl}/query`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ query }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { rows: unknown[] }).rows;
    };
    expect(await sql('SELECT name, alive, leaving, partitions FROM sys_node ORDER BY name')).toEqual(
      ['node-a', 'node-b', 'node-c'].map((name) => ({ name, alive: true, leaving: false, partitions: 4 })),
    );
    const leaders = (await sql('SELECT partition_id, leader FROM sys_partition ORDER BY partition_id')) as {
      partition_id: number;
      leader: string;
    }[];
    expect(leaders.map((r) => r.partition_id)).toEqual(Array.from({ length: PARTITIONS }, (_, i) => i));
    for (const r of leaders) {
      const owner = health.nodes.find((n) => n.name === r.leader);
      expect(owner?.leader_of).toContain(r.partition_id);
    }
  });

  it('serves calls for keys of every partition through every node', async () => {
    await registerEndpoint(nodes[0]!.process, endpoint);
    for (const n of nodes) await waitForService(n, 'Counter');
    // 48 keys cover all 12 partitions with high probability; every key is called through every node.
    const keys = Array.from({ length: 48 }, (_, i) => `key-${i}`);
    await Promise.all(
      keys.map(async (key) => {
        for (const [i, n] of nodes.entries()) {
          const r = await call(n.process.ingressUrl, `/Counter/${key}/add`, 1);
          expect({ key, node: n.name, status: r.status, body: r.text }).toEqual({
            key,
            node: n.name,
            status: 200,
            body: String(i + 1),
          });
        }
      }),
    );
    // The keys covered every partition, so every node served calls for partitions it owns and for others'.
    expect(new Set(keys.map((k) => partitionFor(partitionKeyForKey(k), PARTITIONS))).size).toBe(PARTITIONS);
    for (const n of nodes) {
      const metrics = await (await fetch(`${n.process.metricsUrl}/metrics`)).text();
      const forwarded = /ratchet_cluster_forwarded_requests_total\{listener="ingress",result="forwarded"\} (\d+)/.exec(
        metrics,
      );
      expect(Number(forwarded?.[1] ?? 0)).toBeGreaterThan(0);
      // Owned partitions, moves and recovery times are exported too.
      expect(metrics).toMatch(/^ratchet_cluster_owned_partitions 4$/m);
      expect(metrics).toMatch(/^ratchet_cluster_live_nodes 3$/m);
      expect(metrics).toMatch(/^ratchet_cluster_partition_moves_total\{kind="acquired"\} [1-9]/m);
      expect(metrics).toMatch(/^ratchet_cluster_partition_recovery_seconds_count [1-9]/m);
    }
  }, 120_000);

  it('runs calls between objects whose partitions are served by different nodes', async () => {
    const keys = ['x1', 'x2', 'x3', 'x4', 'x5', 'x6'];
    for (const [i, n] of nodes.entries()) {
      const r = await call(n.process.ingressUrl, '/Fanout/spread', keys);
      if (r.status !== 200) console.log(output());
      expect(r.status).toBe(200);
      expect(r.json).toEqual(keys.map(() => i + 1));
    }
    // The one-way sends arrived too.
    await waitFor(async () => {
      const r = await call(nodes[0]!.process.ingressUrl, `/Counter/x1-sent/get`);
      expect(r.text).toBe('30');
    });
  }, 60_000);

  it('manages an invocation through a node that does not own its partition', async () => {
    const sent = await call(nodes[0]!.process.ingressUrl, '/Fanout/nap/send');
    expect(sent.status).toBe(202);
    const id = (sent.json as { invocationId: string }).invocationId;
    for (const n of nodes) {
      const res = await fetch(`${n.process.adminUrl}/invocations/${id}/pause`, { method: 'PATCH' });
      expect([200, 202, 409]).toContain(res.status);
    }
    const killed = await fetch(`${nodes[2]!.process.adminUrl}/invocations/${id}/kill`, { method: 'PATCH' });
    expect(killed.status).toBe(200);
    const attach = await fetch(`${nodes[1]!.process.ingressUrl}/restate/invocation/${id}/output`);
    expect(attach.status).toBe(409);
    expect(await attach.text()).toMatch(/killed/);
    // State of a key another node owns, replaced through any node.
    for (const n of nodes) {
      const res = await fetch(`${n.process.adminUrl}/services/Counter/state`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ object_key: `state-${n.name}`, new_state: { [COUNT_STATE_KEY]: [0x35] } }),
      });
      expect(res.status).toBe(202);
    }
    for (const n of nodes) {
      await waitFor(async () => {
        const r = await call(nodes[(nodes.indexOf(n) + 1) % 3]!.process.ingressUrl, `/Counter/state-${n.name}/get`);
        expect(r.text).toBe('5');
      });
    }
  }, 60_000);

  it('keeps calls and attaches waiting for a result through a move of its partition', async () => {
    // An idempotency key whose invocation lands in a partition node-c owns; the call goes in through node-a.
    const health = await clusterHealth(nodes[0]!);
    const ofC = new Set(health.nodes.find((n) => n.name === 'node-c')!.leader_of);
    let key = '';
    for (let i = 0; key === ''; i++) {
      const id = InvocationId.forIdempotent('Fanout', undefined, 'doze', `move-${i}`);
      if (ofC.has(partitionFor(InvocationId.partitionKey(id), PARTITIONS))) key = `move-${i}`;
    }
    const calling = call(nodes[0]!.process.ingressUrl, '/Fanout/doze', 2500, { 'idempotency-key': key });
    const id = InvocationId.forIdempotent('Fanout', undefined, 'doze', key);
    await waitFor(async () => {
      const r = await fetch(`${nodes[1]!.process.adminUrl}/query`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ query: `SELECT status FROM sys_invocation WHERE id = '${id}'` }),
      });
      expect(((await r.json()) as { rows: { status: string }[] }).rows[0]?.status).toMatch(/running|suspended/);
    });
    const attaching = fetch(`${nodes[1]!.process.ingressUrl}/restate/invocation/${id}/attach`);
    // node-c leaves while both wait: its partitions move to node-a and node-b, and the sleep ends on one of them.
    const stopped = nodes[2]!.process.stop();
    const [called, attached] = await Promise.all([calling, attaching]);
    await stopped;
    expect({ status: called.status, body: called.text }).toEqual({ status: 200, body: '"dozed 2500"' });
    expect({ status: attached.status, body: await attached.text() }).toEqual({ status: 200, body: '"dozed 2500"' });
    nodes.pop();
    await waitForBalance(nodes[0]!, ['node-a', 'node-b'], PARTITIONS);
  }, 60_000);
});
