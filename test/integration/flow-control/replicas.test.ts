import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { partitionKeyForKey } from '../../../runtime/src/ids/partition-key.ts';
import { partitionFor } from '../../../runtime/src/storage/pg/leases.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call } from '../support/runtime.ts';
import { ownership, startNode, waitForBalance, waitForService, type ClusterNode } from '../cluster/support.ts';

/**
 * Flow control with two runtime processes on one database: a scope's invocations all live on its partition, so the
 * node that owns it counts them whichever node took the request (ingress on either node, or a call from a handler
 * running on the other node); a rule written through one node is applied by the other.
 */

let running = 0;
let peak = 0;
const seen: string[] = [];

const worker = restate.service({
  name: 'Worker',
  handlers: {
    run: async (ctx: restate.Context, tag: string): Promise<string> => {
      running++;
      peak = Math.max(peak, running);
      seen.push(tag);
      await new Promise((r) => setTimeout(r, 200));
      running--;
      return `${tag}@${ctx.request().scope ?? '-'}`;
    },
  },
});

const dispatcher = restate.service({
  name: 'Dispatcher',
  handlers: {
    send: async (ctx: restate.Context, tags: string[]): Promise<void> => {
      for (const tag of tags) {
        ctx
          .scope('multi')
          .serviceSendClient(worker)
          .run(tag, restate.rpc.sendOpts({ limitKey: 'k' }));
      }
    },
  },
});

const PARTITIONS = 8;
const ENV = { RATCHET_PARTITIONS: String(PARTITIONS), RATCHET_EXPERIMENTAL_ENABLE_VQUEUES: 'true' };

describe('flow control with two runtime processes', () => {
  let db: TestDatabase;
  let client: pg.Client;
  let endpoint: SdkEndpoint;
  const nodes: ClusterNode[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    endpoint = await startEndpoint({ services: [worker, dispatcher], transport: 'h2' });
    nodes.push(await startNode(db.url, 'flow-a', ENV));
    nodes.push(await startNode(db.url, 'flow-b', ENV));
    await waitForBalance(nodes[0]!, ['flow-a', 'flow-b'], PARTITIONS);
    await registerEndpoint(nodes[0]!.process, endpoint);
    await waitForService(nodes[1]!, 'Worker');
  });

  afterAll(async () => {
    for (const n of nodes) await n.process.stop();
    await endpoint?.close();
    await client?.end();
    await db?.drop();
  });

  it('holds one limit for a scope whichever node takes the requests', async () => {
    // The rule is written through the node that does not own the scope's partition.
    const partition = partitionFor(partitionKeyForKey('multi'), PARTITIONS);
    const owned = await ownership(nodes[0]!);
    const writer = (owned.get('flow-a') ?? []).includes(partition) ? nodes[1]! : nodes[0]!;
    const rules = await fetch(`${writer.process.adminUrl}/limits/rules`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ pattern: 'multi/*', limits: { concurrency: 1 } }]),
    });
    expect(rules.status).toBe(200);
    // Rule books are re-read within a second.
    await new Promise((r) => setTimeout(r, 1_500));

    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const node = nodes[i % 2]!;
      const res = await call(node.process.ingressUrl, '/restate/scope/multi/send/Worker/run', `ingress${i}`, {
        'x-restate-limit-key': 'k',
      });
      expect(res.status, res.text).toBe(202);
      const id = (res.json as { invocationId: string }).invocationId;
      expect(partitionFor(InvocationId.partitionKey(InvocationId.parse(id)), PARTITIONS)).toBe(partition);
      ids.push(id);
    }
    // And from handlers: the dispatcher's sends reach the scope's owner through the outbox when it runs elsewhere.
    for (const node of nodes) {
      const res = await call(node.process.ingressUrl, '/Dispatcher/send', [`sdk-${node.name}-0`, `sdk-${node.name}-1`]);
      expect(res.status, res.text).toBe(200);
    }
    await expect
      .poll(
        async () =>
          Number(
            (
              await client.query<{ n: string }>(
                `SELECT count(*) AS n FROM ratchet.invocation WHERE scope = 'multi' AND status = 'completed'`,
              )
            ).rows[0]!.n,
          ),
        { timeout: 30_000, interval: 200 },
      )
      .toBe(8);
    expect(peak).toBe(1);
    expect(seen.slice(0, 4)).toEqual(['ingress0', 'ingress1', 'ingress2', 'ingress3']);
    expect(seen).toHaveLength(8);
  });
});
