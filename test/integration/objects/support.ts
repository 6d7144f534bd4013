import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { expect } from 'vitest';
import { WAIT_TIMEOUT_MS } from '../../support/wait.ts';

/** Helpers shared by the virtual object tests: read-only database views and awakeables handed to the test. */

export interface InvocationView {
  status: string;
  service_key: string | null;
  retry_count: number;
  last_failure_code: string | null;
  result_kind: string | null;
  failure_message: string | null;
  created_at: Date;
  scheduled_start_at: Date | null;
}

/** One client per test file; reads only. */
export class ObjectsDb {
  private constructor(private readonly client: pg.Client) {}

  static async connect(url: string): Promise<ObjectsDb> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return new ObjectsDb(client);
  }

  async row(id: string): Promise<InvocationView | undefined> {
    const res = await this.client.query<InvocationView>(
      `SELECT status, service_key, retry_count, last_failure_code, result_kind, failure_message, created_at,
              scheduled_start_at
         FROM ratchet.invocation WHERE id = $1`,
      [id],
    );
    return res.rows[0];
  }

  /** Status of each id, in the order given (`missing` for an unknown id). */
  async statuses(ids: readonly string[]): Promise<string[]> {
    const res = await this.client.query<{ id: string; status: string }>(
      'SELECT id, status FROM ratchet.invocation WHERE id = ANY($1)',
      [ids],
    );
    const byId = new Map(res.rows.map((r) => [r.id, r.status]));
    return ids.map((id) => byId.get(id) ?? 'missing');
  }

  /** Result kind of each id, in the order given (`null` while not completed). */
  async results(ids: readonly string[]): Promise<(string | null)[]> {
    const res = await this.client.query<{ id: string; result_kind: string | null }>(
      'SELECT id, result_kind FROM ratchet.invocation WHERE id = ANY($1)',
      [ids],
    );
    const byId = new Map(res.rows.map((r) => [r.id, r.result_kind]));
    return ids.map((id) => byId.get(id) ?? null);
  }

  async journalTypes(id: string): Promise<number[]> {
    const res = await this.client.query<{ entry_type: number }>(
      'SELECT entry_type FROM ratchet.journal WHERE invocation_id = $1 ORDER BY index',
      [id],
    );
    return res.rows.map((r) => r.entry_type);
  }

  async state(service: string, key: string): Promise<Record<string, unknown>> {
    const res = await this.client.query<{ key: Buffer; value: Buffer }>(
      'SELECT key, value FROM ratchet.state WHERE service_name = $1 AND service_key = $2 ORDER BY key',
      [service, key],
    );
    return Object.fromEntries(res.rows.map((r) => [r.key.toString('utf8'), JSON.parse(r.value.toString('utf8'))]));
  }

  /** The invocation holding the exclusive lock of a key, if any. */
  async lockHolder(service: string, key: string): Promise<string | undefined> {
    const res = await this.client.query<{ invocation_id: string }>(
      'SELECT invocation_id FROM ratchet.keyed_lock WHERE service_name = $1 AND service_key = $2',
      [service, key],
    );
    return res.rows[0]?.invocation_id;
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

/** Journal entry types, as stored (see the service protocol message catalogue). */
export const Entry = {
  Input: 0x0400,
  Output: 0x0401,
  GetLazyState: 0x0402,
  SetState: 0x0403,
  ClearState: 0x0404,
  ClearAllState: 0x0405,
  GetLazyStateKeys: 0x0406,
  GetEagerState: 0x0407,
  GetEagerStateKeys: 0x0408,
  Run: 0x0411,
  GetLazyStateCompletion: 0x8002,
  GetLazyStateKeysCompletion: 0x8006,
  RunCompletion: 0x8011,
  Signal: 0xfbff,
} as const;

/**
 * Awakeable ids handed from handlers to the test, by tag. A handler publishes inside `ctx.run`, so a replay does not
 * publish again; `count` tells how often the closure really ran.
 */
export class Awakeables {
  private readonly ids = new Map<string, string>();
  private readonly runs = new Map<string, number>();

  publish(tag: string, id: string): void {
    this.ids.set(tag, id);
    this.runs.set(tag, (this.runs.get(tag) ?? 0) + 1);
  }

  count(tag: string): number {
    return this.runs.get(tag) ?? 0;
  }

  has(tag: string): boolean {
    return this.ids.has(tag);
  }

  /** Waits until a handler published the awakeable for `tag`. */
  async get(tag: string): Promise<string> {
    await expect.poll(() => this.ids.get(tag), { timeout: WAIT_TIMEOUT_MS }).toBeDefined();
    return this.ids.get(tag)!;
  }
}

/** Awakeables are resolved by a handler: the runtime has no ingress route for them yet. */
export const resolver = restate.service({
  name: 'Resolver',
  handlers: {
    resolve: async (ctx: restate.Context, req: { id: string; value: string }): Promise<void> => {
      ctx.resolveAwakeable(req.id, req.value);
    },
  },
});
