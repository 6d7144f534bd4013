import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { partitionFor } from '../../../runtime/src/storage/pg/leases.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * Invocation management through any node: a node that does not own an invocation's partition sends the request to the
 * owner, which acts on it. A partition without a live owner makes requests wait, then answers 503 saying why.
 */
const slow = restate.service({
  name: 'Slow',
  handlers: {
    nap: async (ctx: restate.Context) => {
      await ctx.sleep(60_000);
      return 'woke';
    },
    quick: async () => 'done',
  },
});

const PARTITIONS = 4;

describe('invocation management on a process that does not own the partition', () => {
  let db: TestDatabase;
  let a: TestRuntime;
  let b: TestRuntime;
  let endpoint: SdkEndpoint;
  const env = {
    RATCHET_PARTITIONS: String(PARTITIONS),
    RATCHET_CLUSTER_LEASE_TIMEOUT: '1s',
    RATCHET_CLUSTER_HEARTBEAT_INTERVAL: '200ms',
    RATCHET_CLUSTER_PARTITION_WAIT: '600ms',
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await startTestRuntime(db.url, { ...env, RATCHET_NODE_NAME: 'node-a' });
    b = await startTestRuntime(db.url, { ...env, RATCHET_NODE_NAME: 'node-b' });
    endpoint = await startEndpoint({ services: [slow], transport: 'h2' });
    await registerEndpoint(a, endpoint);
    await waitFor(() => {
      expect(a.handle.engine.servedPartitions()).toHaveLength(2);
      expect(b.handle.engine.servedPartitions()).toHaveLength(2);
    });
    await waitFor(async () => expect((await fetch(`${b.adminUrl}/services/Slow`)).status).toBe(200));
  });

  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  /** The runtime that does not serve the partition of `id`. */
  const notOwning = (id: string): TestRuntime => {
    const p = partitionFor(InvocationId.partitionKey(id as InvocationId), PARTITIONS);
    return a.handle.engine.serves(p) ? b : a;
  };

  it('performs every management operation through the node that does not own the partition', async () => {
    const sent = await call(a.ingressUrl, '/Slow/nap/send');
    const napping = (sent.json as { invocationId: string }).invocationId;
    const done = (await call(b.ingressUrl, '/Slow/quick')).headers.get('x-restate-id')!;
    const patch = (rt: TestRuntime, path: string) => fetch(`${rt.adminUrl}${path}`, { method: 'PATCH' });

    expect((await patch(notOwning(napping), `/invocations/${napping}/pause`)).status).toBe(202);
    expect((await patch(notOwning(napping), `/invocations/${napping}/resume`)).status).toBe(200);
    expect((await patch(notOwning(napping), `/invocations/${napping}/cancel`)).status).toBe(202);
    const restarted = await patch(notOwning(done), `/invocations/${done}/restart-as-new`);
    expect(restarted.status).toBe(200);
    const newId = ((await restarted.json()) as { new_invocation_id: string }).new_invocation_id;
    expect(newId).toMatch(/^inv_/);
    expect((await patch(notOwning(done), `/invocations/${done}/purge-journal`)).status).toBe(200);
    expect((await patch(notOwning(done), `/invocations/${done}/purge`)).status).toBe(200);
    // The owner acted: the purged invocation is gone for everyone.
    expect((await patch(a, `/invocations/${done}/purge`)).status).toBe(404);
    expect((await patch(b, `/invocations/${done}/purge`)).status).toBe(404);
  });

  it('answers 503 naming the partition when it has no live owner, after waiting for one', async () => {
    const sent = await call(a.ingressUrl, '/Slow/nap/send');
    const id = (sent.json as { invocationId: string }).invocationId;
    const p = partitionFor(InvocationId.partitionKey(id as InvocationId), PARTITIONS);
    // A lease held by a node that is not registered (as if it stopped heartbeating but its lease had not run out):
    // the node holding it loses it at its next renewal, and nobody may take it for an hour.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(
        `UPDATE ratchet.partition_lease SET owner = 'ghost', epoch = epoch + 1, expires_at = now() + interval '1 hour'
         WHERE partition_id = $1`,
        [p],
      );
      await waitFor(() => expect(a.handle.engine.serves(p) || b.handle.engine.serves(p)).toBe(false));
      const started = Date.now();
      const res = await fetch(`${a.adminUrl}/invocations/${id}/kill`, { method: 'PATCH' });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { message: string }).message).toMatch(
        new RegExp(`partition ${p} has no reachable owner \\(waited 600 ms`),
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);
      const ingress = await call(b.ingressUrl, `/restate/awakeables/${'sign_1' + 'x'.repeat(10)}/resolve`, 'x');
      expect(ingress.status).toBeLessThan(500);
      // Readiness follows: a partition without an owner for longer than the wait makes the node not ready.
      await waitFor(() => expect(a.handle.cluster.ready()).toBe(false));
      // The lease is released again: a node takes it, serves it, and the request succeeds.
      await client.query(`UPDATE ratchet.partition_lease SET owner = NULL, expires_at = NULL WHERE partition_id = $1`, [
        p,
      ]);
      await waitFor(() => expect(a.handle.engine.serves(p) || b.handle.engine.serves(p)).toBe(true));
      await waitFor(() => expect(a.handle.cluster.ready()).toBe(true));
      expect((await fetch(`${b.adminUrl}/invocations/${id}/kill`, { method: 'PATCH' })).status).toBe(200);
    } finally {
      await client.end();
    }
  });
});
