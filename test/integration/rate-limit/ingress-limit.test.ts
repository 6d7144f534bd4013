import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { startNode, waitForBalance, waitForService, type ClusterNode } from '../cluster/support.ts';
import { metricValue } from '../kafka/support.ts';

/**
 * The ingress limit is the cluster's, not each replica's: two runtime processes on one database share one budget
 * (3600 requests per hour = 1 a second, at most 20 at once). Requests one node forwards to the other count once.
 * Over the limit: 429 with Retry-After and a message naming the limit; health checks and the admin API are free.
 */

// A virtual object: each key's partition is fixed, so keys owned by the other node are forwarded to it.
const echo = restate.object({
  name: 'Echo',
  handlers: { say: async (_ctx: restate.ObjectContext, s: string) => s },
});

const PARTITIONS = 8;
const BURST = 20;

async function say(node: ClusterNode, i: number): Promise<Response> {
  return fetch(`${node.process.ingressUrl}/Echo/k${i}/say`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(`hello ${i}`),
  });
}

describe('the ingress limit, shared by the replicas of a cluster', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  const nodes: ClusterNode[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [echo], transport: 'h2' });
    const env = {
      RATCHET_PARTITIONS: String(PARTITIONS),
      RATCHET_INGRESS_RATE_LIMIT: '3600/h',
      RATCHET_INGRESS_RATE_BURST: String(BURST),
    };
    for (const name of ['node-a', 'node-b']) nodes.push(await startNode(db.url, name, env));
    await waitForBalance(
      nodes[0]!,
      nodes.map((n) => n.name),
      PARTITIONS,
    );
    await registerEndpoint(nodes[0]!.process, endpoint);
    for (const n of nodes) await waitForService(n, 'Echo');
  }, 120_000);

  afterAll(async () => {
    for (const n of nodes) await n.process.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('admits the burst once across both nodes, then refuses with 429 and Retry-After', async () => {
    const started = Date.now();
    const statuses: number[] = [];
    let refusal: Response | undefined;
    // Alternating between the nodes, each call for its own key: about half of what a node takes is for a partition
    // the other one owns and is forwarded to it (and must not be counted there again).
    for (let i = 0; i < 2 * BURST; i++) {
      const res = await say(nodes[i % 2]!, i);
      statuses.push(res.status);
      if (res.status === 429) refusal ??= res;
      else await res.text();
    }
    const seconds = (Date.now() - started) / 1000;
    const admitted = statuses.filter((s) => s === 200).length;
    const refused = statuses.filter((s) => s === 429).length;
    expect(admitted + refused).toBe(2 * BURST);
    // The burst, what refilled meanwhile (1/s), and at most one leased token per node left unused.
    expect(admitted).toBeGreaterThanOrEqual(BURST - 2);
    expect(admitted).toBeLessThanOrEqual(BURST + Math.ceil(seconds) + 2);
    expect(refusal).toBeDefined();
    expect(Number(refusal!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const body = (await refusal!.json()) as { message: string };
    expect(body.message).toMatch(/takes 3600 requests per hour \(at most 20 at once\) and that budget is used up/);
    const counted =
      (await metricValue(nodes[0]!.process.metricsUrl, 'ratchet_ingress_limit_requests_total', {})) +
      (await metricValue(nodes[1]!.process.metricsUrl, 'ratchet_ingress_limit_requests_total', {}));
    // Every request counted exactly once, forwarded or not (and some were).
    expect(counted).toBe(2 * BURST);
    const forwarded =
      (await metricValue(nodes[0]!.process.metricsUrl, 'ratchet_cluster_forwarded_requests_total', {
        result: 'forwarded',
      })) +
      (await metricValue(nodes[1]!.process.metricsUrl, 'ratchet_cluster_forwarded_requests_total', {
        result: 'forwarded',
      }));
    expect(forwarded).toBeGreaterThan(0);
  });

  it('does not count health checks, the admin API, or a client claiming to be a peer', async () => {
    const node = nodes[0]!;
    expect((await fetch(`${node.process.ingressUrl}/restate/health`)).status).toBe(200);
    expect((await fetch(`${node.process.adminUrl}/deployments`)).status).toBe(200);
    // A forged forwarding header is not a peer's proof: still counted (and refused while the budget is empty).
    const forged = await fetch(`${node.process.ingressUrl}/Echo/forged/say`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-ratchet-forwarded-by': 'node-b',
        'x-ratchet-forwarded-proof': '00'.repeat(32),
      },
      body: '"forged"',
    });
    expect([200, 429]).toContain(forged.status);
    await expect.poll(async () => (await say(node, 99)).status, { timeout: 10_000, interval: 500 }).toBe(200);
  });
});
