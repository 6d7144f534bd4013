import * as restate from '@restatedev/restate-sdk';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IntrospectionAccess } from '../../../runtime/src/introspection/access.ts';
import type { PgWireListener } from '../../../runtime/src/introspection/pgwire/listener.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { CLUSTER, connectClient, prepareIntrospection, psql, startListener } from './support.ts';

/**
 * Reading real invocations through port 9071 with real clients: psql and node-postgres (simple and extended
 * protocol, named prepared statements, portals fetched a few rows at a time).
 */

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: async (ctx: restate.Context, name: string): Promise<string> => {
      const stamp = await ctx.run('stamp', () => `hello ${name}`);
      return `${stamp}!`;
    },
  },
});

const counter = restate.object({
  name: 'Counter',
  handlers: {
    add: async (ctx: restate.ObjectContext, n: number): Promise<number> => {
      const total = ((await ctx.get<number>('total')) ?? 0) + n;
      ctx.set('total', total);
      return total;
    },
  },
});

let db: TestDatabase;
let runtime: TestRuntime;
let endpoint: SdkEndpoint;
let access: IntrospectionAccess;
let listener: PgWireListener;
const greetIds: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  runtime = await startTestRuntime(db.url, { RATCHET_INTROSPECTION_BIND: '127.0.0.1:0' });
  endpoint = await startEndpoint({ services: [greeter, counter], transport: 'h2' });
  await registerEndpoint(runtime, endpoint);
  for (const name of ['ada', 'grace', 'edsger']) {
    const res = await call(runtime.ingressUrl, '/Greeter/greet', name);
    expect(res.json).toBe(`hello ${name}!`);
    greetIds.push(res.headers.get('x-restate-id')!);
  }
  expect((await call(runtime.ingressUrl, '/Counter/alice/add', 5)).json).toBe(5);
  expect((await call(runtime.ingressUrl, '/Counter/alice/add', 7)).json).toBe(12);
  access = await prepareIntrospection(db.url);
  listener = await startListener(access);
});

afterAll(async () => {
  await listener?.stop();
  await endpoint?.close();
  await runtime?.stop();
  await db?.drop();
});

describe('node-postgres', () => {
  it('reads invocations, journals and state with simple queries', async () => {
    const client = await connectClient(listener);
    try {
      const invocations = await client.query<{ id: string; target: string; status: string }>(
        `SELECT id, target, status FROM sys_invocation WHERE target_service_name = 'Greeter' ORDER BY id`,
      );
      expect(invocations.rows).toEqual(
        [...greetIds].sort().map((id) => ({ id, target: 'Greeter/greet', status: 'completed' })),
      );

      const journal = await client.query<{ index: number; entry_type: string; name: string | null }>(
        `SELECT index, entry_type, name FROM sys_journal WHERE id = '${greetIds[0]}' ORDER BY index`,
      );
      expect(journal.rows.map((r) => r.entry_type)).toContain('Command: Run');
      expect(journal.rows.find((r) => r.entry_type === 'Command: Run')?.name).toBe('stamp');

      const state = await client.query<{ service_key: string; key: string; value_utf8: string }>(
        `SELECT service_key, key, value_utf8 FROM state WHERE service_name = 'Counter'`,
      );
      expect(state.rows).toEqual([{ service_key: 'alice', key: 'total', value_utf8: '12' }]);
    } finally {
      await client.end();
    }
  });

  it('runs parameterised queries and reuses named prepared statements', async () => {
    const client = await connectClient(listener);
    try {
      for (const id of greetIds) {
        const res = await client.query<{ id: string; status: string }>({
          name: 'invocation-by-id',
          text: 'SELECT id, status FROM sys_invocation WHERE id = $1',
          values: [id],
        });
        expect(res.rows).toEqual([{ id, status: 'completed' }]);
      }
      const none = await client.query('SELECT id FROM sys_invocation WHERE id = $1', ["x' OR '1'='1"]);
      expect(none.rows).toEqual([]);
      const typed = await client.query<{ n: number; s: string }>('SELECT $1::int4 + 1 AS n, $2::text AS s', [41, 'ok']);
      expect(typed.rows).toEqual([{ n: 42, s: 'ok' }]);
    } finally {
      await client.end();
    }
  });

  it('fetches a portal a few rows at a time', async () => {
    const client = await connectClient(listener);
    try {
      const fetch = client.query(new PortalFetch('SELECT g FROM generate_series(1, 7) g', 3));
      expect(await fetch.done).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
      // The session is still in a clean state afterwards.
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });
});

describe('psql', () => {
  it('reads invocations and state', async () => {
    const res = await psql(listener.address.port, [
      '-A',
      '-t',
      '-c',
      `SELECT target || ' ' || status FROM sys_invocation WHERE target_service_name = 'Greeter'`,
      '-c',
      `SELECT service_key || '=' || value_utf8 FROM state WHERE service_name = 'Counter'`,
    ]);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout.trim().split('\n')).toEqual([
      'Greeter/greet completed',
      'Greeter/greet completed',
      'Greeter/greet completed',
      'alice=12',
    ]);
  });

  it('lists and describes the introspection views (\\d)', async () => {
    const list = await psql(listener.address.port, ['-c', '\\dv']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/sys_invocation\b/);
    expect(list.stdout).toMatch(/sys_journal\b/);
    expect(list.stdout).toMatch(/\bstate\b/);
    const describe = await psql(listener.address.port, ['-c', '\\d sys_invocation']);
    expect(describe.code).toBe(0);
    expect(describe.stdout).toMatch(/\btarget_service_name\b/);
  });

  it('is refused with the wrong password or user', async () => {
    const wrongPassword = await psql(listener.address.port, ['-c', 'SELECT 1'], { PGPASSWORD: 'nope' });
    expect(wrongPassword.code).not.toBe(0);
    expect(wrongPassword.stderr).toContain(`password authentication failed for user "${CLUSTER}"`);
    const wrongUser = await psql(listener.address.port, ['-c', 'SELECT 1'], {}, 'postgres');
    expect(wrongUser.code).not.toBe(0);
    expect(wrongUser.stderr).toContain('password authentication failed for user "postgres"');
  });
});

/**
 * The extended protocol by hand on node-postgres' connection (how pg-cursor works): Parse, Bind a named portal,
 * Execute it `rows` at a time until it completes, then Sync. `done` resolves with the batches of the first column.
 */
class PortalFetch implements pg.Submittable {
  private readonly batches: unknown[][] = [];
  private current: unknown[] = [];
  private connection: pg.Connection | undefined;
  private settle!: (err: Error | undefined) => void;
  readonly done: Promise<unknown[][]>;

  constructor(
    private readonly text: string,
    private readonly rows: number,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.settle = (err) => (err === undefined ? resolve(this.batches) : reject(err));
    });
  }

  /** node-postgres writes it with writeUInt32BE; @types/pg declares it a string. */
  private get rowsField(): string {
    return this.rows as unknown as string;
  }

  submit(connection: pg.Connection): void {
    this.connection = connection;
    connection.parse({ name: 'fetch-stmt', text: this.text, types: [] }, true);
    connection.bind({ portal: 'fetch-portal', statement: 'fetch-stmt', values: [] }, true);
    connection.describe({ type: 'P', name: 'fetch-portal' }, true);
    connection.execute({ portal: 'fetch-portal', rows: this.rowsField }, true);
    connection.flush();
  }

  handleRowDescription(): void {}

  handleDataRow(msg: { fields: (string | null)[] }): void {
    this.current.push(Number(msg.fields[0]));
  }

  handlePortalSuspended(): void {
    this.batches.push(this.current);
    this.current = [];
    this.connection!.execute({ portal: 'fetch-portal', rows: this.rowsField }, true);
    this.connection!.flush();
  }

  handleCommandComplete(): void {
    if (this.current.length > 0) this.batches.push(this.current);
    this.current = [];
    this.connection!.close({ type: 'P', name: 'fetch-portal' }, true);
    this.connection!.close({ type: 'S', name: 'fetch-stmt' }, true);
    this.connection!.sync();
  }

  // node-postgres forgets the active query on an error: settle now, the ReadyForQuery after Sync goes nowhere.
  handleError(err: Error): void {
    this.connection?.sync();
    this.settle(err);
  }

  handleEmptyQuery(): void {}

  handleReadyForQuery(): void {
    this.settle(undefined);
  }
}
