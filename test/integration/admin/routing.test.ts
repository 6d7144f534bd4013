import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, registerDeployment, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * 503 "routing error": a runtime process that does not own an invocation's partition (another process holds its
 * lease) refuses to manage it instead of writing around the owner.
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

describe('invocation management on a process that does not own the partition', () => {
  let db: TestDatabase;
  let owner: TestRuntime;
  let other: TestRuntime;
  let endpoint: SdkEndpoint;

  beforeAll(async () => {
    db = await createTestDatabase();
    owner = await startTestRuntime(db.url, { RATCHET_NODE_NAME: 'owner-node' });
    other = await startTestRuntime(db.url, { RATCHET_NODE_NAME: 'other-node' });
    endpoint = await startEndpoint({ services: [slow], transport: 'h2' });
    expect((await registerDeployment(owner.adminUrl, endpoint.url)).status).toBe(201);
  });

  afterAll(async () => {
    await other?.stop();
    await owner?.stop();
    await endpoint?.close();
    await db?.drop();
  });

  it('answers 503 for operations that must write, and the owner still serves them', async () => {
    const sent = await call(owner.ingressUrl, '/Slow/nap/send');
    const napping = (sent.json as { invocationId: string }).invocationId;
    const done = (await call(owner.ingressUrl, '/Slow/quick')).headers.get('x-restate-id')!;

    const patch = (rt: TestRuntime, path: string) => fetch(`${rt.adminUrl}${path}`, { method: 'PATCH' });
    for (const op of ['cancel', 'kill', 'pause', 'resume']) {
      const res = await patch(other, `/invocations/${napping}/${op}`);
      expect({ op, status: res.status }).toEqual({ op, status: 503 });
      expect(((await res.json()) as { message: string }).message).toMatch(/not served by this node/);
    }
    for (const op of ['restart-as-new', 'purge-journal', 'purge']) {
      const res = await patch(other, `/invocations/${done}/${op}`);
      expect({ op, status: res.status }).toEqual({ op, status: 503 });
    }
    // Nothing was written by the refusals: the owner still finds both as they were.
    expect((await patch(owner, `/invocations/${done}/purge-journal`)).status).toBe(200);
    expect((await patch(owner, `/invocations/${napping}/kill`)).status).toBe(200);
  });
});
