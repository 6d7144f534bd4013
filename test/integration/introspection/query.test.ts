import { tableFromIPC, type Table } from 'apache-arrow';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgIntrospectionQueries } from '../../../runtime/src/introspection/query.ts';
import { INTROSPECTION_TABLES } from '../../../runtime/src/introspection/tables.ts';
import { arrowTypeName } from '../../../runtime/src/introspection/column-types.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { cliStatements } from './cli-statements.ts';
import {
  LAB_SERVICES,
  playLab,
  queryRows,
  releaseLab,
  waitForStatus,
  type LabInvocations,
  type LabTarget,
} from './lab.ts';

/**
 * `POST /query` against a runtime whose services left invocations in every state (lab.ts): the introspection views
 * (restate's tables, columns and derived statuses), restate's JSON and Arrow renderings, the 35 statements of the
 * restate CLI, errors, and what the read-only role may not do.
 */

let db: TestDatabase;
let endpoint: SdkEndpoint;
let runtime: TestRuntime;
let target: LabTarget;
let lab: LabInvocations;
let deploymentId: string;

const TIMEOUT = '1500ms';
const ROW_LIMIT = 500;

interface Answer {
  status: number;
  contentType: string | null;
  body: Buffer;
}

async function query(sql: string, accept?: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${runtime.adminUrl}/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(accept === undefined ? {} : { accept }) },
    body: JSON.stringify(body ?? { query: sql }),
  });
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    body: Buffer.from(await res.arrayBuffer()),
  };
}

async function arrow(sql: string): Promise<Table> {
  const res = await query(sql, '*/*');
  expect(res.status, res.body.toString()).toBe(200);
  expect(res.contentType).toBe('application/vnd.apache.arrow.stream');
  return tableFromIPC(res.body);
}

async function error(sql: string): Promise<{ status: number; message: string }> {
  const res = await query(sql, 'application/json');
  expect(res.contentType).toBe('application/json');
  const body = JSON.parse(res.body.toString()) as { message: string };
  expect(Object.keys(body)).toEqual(['message']);
  return { status: res.status, message: body.message };
}

beforeAll(async () => {
  db = await createTestDatabase();
  endpoint = await startEndpoint({ services: LAB_SERVICES, transport: 'h2' });
  runtime = await startTestRuntime(db.url, {
    // The sleeping invocations suspend (instead of holding their stream) after a second.
    RATCHET_INVOKER_INACTIVITY_TIMEOUT: '1s',
    RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: TIMEOUT,
    RATCHET_INTROSPECTION_ROW_LIMIT: String(ROW_LIMIT),
  });
  ({ id: deploymentId } = await registerEndpoint(runtime, endpoint));
  target = { ingressUrl: runtime.ingressUrl, adminUrl: runtime.adminUrl };
  lab = await playLab(target);
  await waitForStatus(target, lab.sleeping, 'suspended');
  await waitForStatus(target, lab.workflow, 'suspended');
});

afterAll(async () => {
  if (target !== undefined) await releaseLab(target).catch(() => undefined);
  await runtime?.stop();
  await endpoint?.close();
  await db?.drop();
});

describe('introspection tables', () => {
  it('derive restate statuses and completion columns in sys_invocation', async () => {
    const rows = await queryRows(
      runtime.adminUrl,
      `SELECT id, target, target_service_ty, status, completion_result, completion_failure, idempotency_key, invoked_by
       FROM sys_invocation ORDER BY created_at`,
    );
    const byId = new Map(rows.map((r) => [r['id'], r]));
    expect(byId.get(lab.greeted)).toEqual({
      id: lab.greeted,
      target: 'Greeter/greet',
      target_service_ty: 'service',
      status: 'completed',
      completion_result: 'success',
      idempotency_key: 'idem-1',
      invoked_by: 'ingress',
    });
    expect(byId.get(lab.failed)).toMatchObject({
      status: 'completed',
      completion_result: 'failure',
      completion_failure: '[418] this is a terminal failure',
    });
    expect(byId.get(lab.sleeping)).toMatchObject({ target: 'Greeter/sleep', status: 'suspended' });
    expect(byId.get(lab.scheduled)).toMatchObject({ status: 'scheduled' });
    expect(byId.get(lab.inboxed)).toMatchObject({ target: 'Counter/k2/add', status: 'pending' });
    expect(byId.get(lab.holding)?.['target_service_ty']).toBe('virtual_object');
    expect(byId.get(lab.workflow)).toMatchObject({ target: 'Signup/u1/run', target_service_ty: 'workflow' });
    expect(byId.get(lab.paused)).toMatchObject({ target: 'Flaky/boom', status: 'paused' });
    // The raw statuses beside the derived ones.
    const raw = await queryRows(runtime.adminUrl, `SELECT id, status FROM sys_invocation_status`);
    const rawById = new Map(raw.map((r) => [r['id'], r['status']]));
    expect(rawById.get(lab.inboxed)).toBe('inboxed');
    expect(rawById.get(lab.paused)).toBe('paused');
  });

  it('keep the failure that paused an invocation in sys_invocation_state', async () => {
    const [state] = await queryRows(
      runtime.adminUrl,
      `SELECT in_flight, retry_count, last_failure, last_attempt_deployment_id, last_attempt_server
       FROM sys_invocation_state WHERE id = '${lab.paused}'`,
    );
    expect(state).toMatchObject({ in_flight: false, last_attempt_deployment_id: deploymentId });
    expect(state?.['last_failure']).toContain('boom');
    expect(state?.['last_attempt_server']).toMatch(/^restate-sdk-typescript\//);
  });

  it('decode journal entries: type, name, completion, sleep wake-up, promise name, raw bytes', async () => {
    const sleep = await queryRows(
      runtime.adminUrl,
      `SELECT index, entry_type, name, completed, sleep_wakeup_at, raw, raw_length, version
       FROM sys_journal WHERE id = '${lab.sleeping}' ORDER BY index`,
    );
    expect(sleep.map((r) => r['entry_type'])).toEqual(['Command: Input', 'Command: Sleep']);
    expect(sleep[0]).toMatchObject({ index: 0, name: '', version: 2 });
    expect(sleep[0]).not.toHaveProperty('completed');
    expect(sleep[1]).toMatchObject({ index: 1, name: 'nap', completed: false });
    const wakeUp = Date.parse(sleep[1]?.['sleep_wakeup_at'] as string);
    expect(wakeUp).toBeGreaterThan(Date.now() + 30 * 60 * 1000);
    expect(sleep[1]?.['raw']).toMatch(/^[0-9a-f]+$/);
    expect(sleep[1]?.['raw_length']).toBe((sleep[1]?.['raw'] as string).length / 2);

    const workflow = await queryRows(
      runtime.adminUrl,
      `SELECT entry_type, promise_name, completed FROM sys_journal
       WHERE id = '${lab.workflow}' AND entry_type = 'Command: GetPromise'`,
    );
    expect(workflow).toEqual([{ entry_type: 'Command: GetPromise', promise_name: 'approval', completed: false }]);

    // A completed ctx.run: the command and its notification.
    const run = await queryRows(
      runtime.adminUrl,
      `SELECT entry_type, name, completed FROM sys_journal WHERE id = '${lab.holding}' AND index IN (1, 2) ORDER BY index`,
    );
    expect(run).toEqual([
      { entry_type: 'Command: Run', name: 'post', completed: true },
      { entry_type: 'Notification: Run', completed: true },
    ]);
  });

  it('show state, inbox, the key lock, promises, services and deployments', async () => {
    const [count] = await queryRows(
      runtime.adminUrl,
      `SELECT * FROM state WHERE service_name = 'Counter' AND service_key = 'k1'`,
    );
    expect(count).toEqual({
      partition_key: expect.any(Number) as number,
      service_name: 'Counter',
      service_key: 'k1',
      key: 'count',
      key_length: 5,
      value_utf8: '7',
      value: '37',
      value_length: 1,
    });
    expect(await queryRows(runtime.adminUrl, `SELECT service_key, id FROM sys_inbox`)).toEqual([
      { service_key: 'k2', id: lab.inboxed },
    ]);
    expect(
      await queryRows(
        runtime.adminUrl,
        `SELECT service_name, service_key, invocation_id FROM sys_keyed_service_status ORDER BY service_name`,
      ),
    ).toEqual([
      { service_name: 'Counter', service_key: 'k2', invocation_id: lab.holding },
      { service_name: 'Signup', service_key: 'u1', invocation_id: lab.workflow },
    ]);
    expect(await queryRows(runtime.adminUrl, `SELECT service_key, key, completed FROM sys_promise`)).toEqual([
      { service_key: 'u1', key: 'approval', completed: false },
    ]);
    expect(
      await queryRows(runtime.adminUrl, `SELECT name, revision, public, ty FROM sys_service ORDER BY name`),
    ).toEqual([
      { name: 'Counter', revision: 1, public: true, ty: 'virtual_object' },
      { name: 'Flaky', revision: 1, public: true, ty: 'service' },
      { name: 'Greeter', revision: 1, public: true, ty: 'service' },
      { name: 'Signup', revision: 1, public: true, ty: 'workflow' },
    ]);
    const [deployment] = await queryRows(runtime.adminUrl, `SELECT * FROM sys_deployment`);
    expect(deployment).toMatchObject({ id: deploymentId, ty: 'http', endpoint: endpoint.url });
    expect([...(deployment?.['services'] as string[])].sort()).toEqual(['Counter', 'Flaky', 'Greeter', 'Signup']);
  });

  it('list every view with its columns in information_schema, and nothing else of Ratchet', async () => {
    const rows = await queryRows(
      runtime.adminUrl,
      `SELECT table_schema, table_name, count(*) AS columns FROM information_schema.columns
       WHERE table_schema NOT IN ('pg_catalog', 'information_schema') GROUP BY 1, 2 ORDER BY 2`,
    );
    expect(rows).toEqual(
      [...INTROSPECTION_TABLES]
        .sort((a, b) => (a.name < b.name ? -1 : 1))
        .map((t) => ({ table_schema: 'ratchet_sql', table_name: t.name, columns: t.columns.length })),
    );
  });
});

describe('renderings', () => {
  it('JSON: nulls omitted, u64 as bare numbers, ms timestamps, ISO durations, hex binary', async () => {
    const res = await query(
      `SELECT partition_key, id, created_at, completion_retention, restarted_from, trace_id FROM sys_invocation_status
       WHERE id = '${lab.greeted}'`,
      'application/json',
    );
    expect(res.status).toBe(200);
    expect(res.contentType).toBe('application/json');
    const text = res.body.toString();
    const pk = /"partition_key":(\d+)/.exec(text)?.[1];
    // The exact u64 digits: the id's first 11 base62 characters encode the same partition key.
    const [check] = await queryRows(
      runtime.adminUrl,
      `SELECT partition_key::text AS pk FROM sys_invocation_status WHERE id = '${lab.greeted}'`,
    );
    expect(pk).toBe(check?.['pk']);
    const row = (JSON.parse(text) as { rows: Record<string, unknown>[] }).rows[0];
    expect(row?.['created_at']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(row?.['completion_retention']).toMatch(/^PT\d+(\.\d{3})?S$/);
    expect(row).not.toHaveProperty('restarted_from');
    // The store is on by default: every invocation has a trace (invocation-traces.test.ts follows one).
    expect(row?.['trace_id']).toMatch(/^[0-9a-f]{32}$/);
  });

  it('Arrow: restate column types, values, and the CLI counters as Int64', async () => {
    const table = await arrow(`SELECT * FROM sys_invocation`);
    const spec = INTROSPECTION_TABLES.find((t) => t.name === 'sys_invocation')!;
    expect(table.schema.fields.map((f) => f.name)).toEqual(spec.columns.map((c) => c.name));
    const types = Object.fromEntries(table.schema.fields.map((f) => [f.name, String(f.type)]));
    expect(types).toMatchObject({
      id: 'LargeUtf8',
      created_at: 'Timestamp<MILLISECOND, +00:00>',
      completion_retention: 'Duration<MILLISECOND>',
      journal_size: 'Uint32',
      retry_count: 'Uint64',
      suspended_waiting_for_completions: 'List<Uint32>',
      status: 'LargeUtf8',
    });
    expect(table.schema.fields.find((f) => f.name === 'status')?.nullable).toBe(false);
    expect(table.numRows).toBe(9);

    const count = await arrow(`SELECT COUNT(*) FROM sys_invocation WHERE status != 'completed'`);
    expect(String(count.schema.fields[0]?.type)).toBe('Int64');
    expect(count.getChildAt(0)?.get(0)).toBe(6n);

    const state = await arrow(`SELECT partition_key, value FROM state WHERE service_key = 'k1'`);
    expect(state.schema.fields.map((f) => String(f.type))).toEqual(['Uint64', 'LargeBinary']);
    expect(Buffer.from(state.getChildAt(1)?.get(0) as Uint8Array).toString()).toBe('7');
  });

  it('names Arrow types in the table catalog as restate does', () => {
    expect(arrowTypeName('TimestampMs')).toBe('Timestamp(ms, "+00:00")');
    expect(arrowTypeName('List<LargeUtf8>')).toBe('List(LargeUtf8)');
  });
});

describe('the restate CLI statements', () => {
  it('all 35 run and answer in the format the CLI asks for', async () => {
    const statements = cliStatements({
      paused: lab.paused,
      sleeping: lab.sleeping,
      all: Object.values(lab),
      deploymentId,
    });
    expect(statements).toHaveLength(35);
    const answers = new Map<string, Record<string, unknown>[] | Table>();
    for (const s of statements) {
      if (s.accept === 'json') {
        const res = await query(s.sql, 'application/json');
        expect(res.status, `${s.name}: ${res.body.toString()}`).toBe(200);
        expect(res.contentType).toBe('application/json');
        answers.set(s.name, (JSON.parse(res.body.toString()) as { rows: Record<string, unknown>[] }).rows);
      } else {
        const res = await query(s.sql, '*/*');
        expect(res.status, `${s.name}: ${res.body.toString()}`).toBe(200);
        answers.set(s.name, tableFromIPC(res.body));
      }
    }
    const rows = (name: string): Record<string, unknown>[] => answers.get(name) as Record<string, unknown>[];
    const count = (name: string): unknown => (answers.get(name) as Table).getChildAt(0)?.get(0);

    // services status: pending per handler, then per-status counts with the oldest invocation.
    expect(rows('Q30')).toEqual([
      expect.objectContaining({
        target_service_name: 'Counter',
        target_handler_name: 'add',
        status: 'pending',
        num_invocations: 1,
        oldest_invocation: lab.inboxed,
      }),
    ]);
    expect(rows('Q31')).toContainEqual(
      expect.objectContaining({ target_handler_name: 'boom', status: 'paused', oldest_invocation: lab.paused }),
    );
    // Locked keys.
    expect(rows('Q33')).toContainEqual(
      expect.objectContaining({ service_name: 'Counter', service_key: 'k2', invocation_holding_lock: lab.holding }),
    );
    expect(rows('Q32')).toEqual([{ service_name: 'Counter', service_key: 'k2', num_pending: 1 }]);
    // invocations list / describe.
    expect(count('Q5')).toBe(6n);
    expect(count('Q8')).toBe(9n);
    expect(rows('Q6')).toHaveLength(6);
    expect(rows('Q11')).toEqual([{ id: lab.paused }]);
    expect(rows('Q12')).toEqual([
      expect.objectContaining({
        id: lab.paused,
        target: 'Flaky/boom',
        status: 'paused',
        pinned_deployment_exists: true,
      }),
    ]);
    expect(count('Q13')).toBe(1n);
    expect(count('Q14')).toBe(3n);
    expect(rows('Q15').at(-1)).toEqual(
      expect.objectContaining({
        index: 0,
        entry_type: 'Command: Input',
        version: 2,
        appended_at: expect.any(String) as string,
      }),
    );
    expect((answers.get('Q16') as Table).numRows).toBe(3);
    // state get: the value as hex.
    expect(rows('Q18')).toEqual([{ key: 'count', value: '37' }]);
    // rules and vqueues: none.
    expect(rows('Q19')).toEqual([]);
    expect(rows('Q20')).toEqual([]);
    // invocation commands look their targets up.
    expect(rows('Q21')).toEqual([{ id: lab.sleeping, target: 'Greeter/sleep' }]);
    expect(rows('Q23')).toEqual([{ id: lab.sleeping, target: 'Greeter/sleep' }]);
    expect(rows('Q24')).toEqual([{ id: lab.paused, target: 'Flaky/boom' }]);
    expect(rows('Q22')).toEqual([]);
    expect(rows('Q34')).toEqual([{ id: lab.sleeping, target: 'Greeter/sleep' }]);
    expect(count('Q27')).toBe(1n);
    expect(
      rows('Q35')
        .map((r) => r['handler'])
        .sort(),
    ).toEqual(['boom', 'hold', 'run', 'sleep']);
  });
});

describe('errors and security', () => {
  it('refuses bad SQL with 400 and PostgreSQL’s message', async () => {
    const unknownColumn = await error('select nope from sys_invocation');
    expect(unknownColumn.status).toBe(400);
    expect(unknownColumn.message).toMatch(/^column "nope" does not exist/);
    expect(await error('select * from nope')).toEqual({ status: 400, message: 'relation "nope" does not exist' });
    expect((await error('selec 1')).status).toBe(400);
  });

  it('answers a body without `query` like restate (422, text)', async () => {
    const res = await query('', 'application/json', { sql: 'select 1' });
    expect(res.status).toBe(422);
    expect(res.body.toString()).toBe(
      'Failed to deserialize the JSON body into the target type: missing field `query` at line 1 column 18',
    );
  });

  it('cannot write, nor read the raw tables', async () => {
    for (const sql of [
      `DELETE FROM sys_invocation`,
      `UPDATE state SET value = '\\x00'`,
      `CREATE TABLE ratchet_sql.x (a int)`,
      `SELECT * FROM ratchet.invocation`,
      `SELECT * FROM ratchet.meta`,
      `TABLE ratchet.state`,
    ]) {
      const res = await error(sql);
      expect(res.status, sql).toBe(400);
      expect(res.message, sql).toMatch(/read-only transaction|permission denied|cannot (delete|update)/);
    }
  });

  it('runs one statement per request: injected statements fail and change nothing', async () => {
    const before = await queryRows(runtime.adminUrl, `SELECT count(*) AS n FROM sys_invocation`);
    for (const sql of [
      `SELECT 1; DROP SCHEMA ratchet CASCADE`,
      `SELECT id FROM sys_invocation WHERE id = '' ; DELETE FROM ratchet.invocation; --'`,
      `SELECT 1; SET statement_timeout = 0`,
    ]) {
      const res = await error(sql);
      expect(res, sql).toEqual({ status: 400, message: 'cannot insert multiple commands into a prepared statement' });
    }
    expect(await queryRows(runtime.adminUrl, `SELECT count(*) AS n FROM sys_invocation`)).toEqual(before);
  });

  it('cancels a statement over the timeout, and a SET in one request does not reach the next', async () => {
    expect(await error(`SELECT pg_sleep(30)`)).toEqual({
      status: 400,
      message: 'canceling statement due to statement timeout',
    });
    // A session-level change inside a request is rolled back with it.
    await query(`SELECT set_config('statement_timeout', '0', false)`, 'application/json');
    await query(`SET statement_timeout = 0`, 'application/json');
    expect(await error(`SELECT pg_sleep(30)`)).toEqual({
      status: 400,
      message: 'canceling statement due to statement timeout',
    });
  });

  it('refuses results over the row limit instead of cutting them', async () => {
    const over = await error(`SELECT * FROM generate_series(1, ${ROW_LIMIT + 1})`);
    expect(over.status).toBe(400);
    expect(over.message).toContain(`more than ${ROW_LIMIT} rows`);
    const table = await arrow(`SELECT * FROM generate_series(1, ${ROW_LIMIT})`);
    expect(table.numRows).toBe(ROW_LIMIT);
  });

  it('answers 503 when the database cannot be reached', async () => {
    // A role URL pointing at a port nothing listens on.
    const url = new URL(db.url);
    url.port = '1';
    const queries = new PgIntrospectionQueries(
      { role: 'nobody', password: 'x', database: db.name, url: url.toString() },
      { statementTimeoutMs: 1000, rowLimit: 10, poolSize: 1 },
      pino({ level: 'silent' }),
    );
    try {
      await expect(queries.query('SELECT 1')).rejects.toMatchObject({ status: 503 });
    } finally {
      await queries.close();
    }
  });

  it('the role itself cannot log in to write elsewhere', async () => {
    const access = runtime.handle.introspection!;
    const client = new pg.Client({ connectionString: access.url });
    await client.connect();
    try {
      await client.query('SET default_transaction_read_only = off');
      await expect(client.query('CREATE TABLE public.x (a int)')).rejects.toThrow(/permission denied/);
      await expect(client.query('CREATE TEMP TABLE x (a int)')).rejects.toThrow(/permission denied/);
      await expect(client.query('SELECT * FROM ratchet.state')).rejects.toThrow(/permission denied/);
      await expect(client.query('DELETE FROM ratchet_sql.state')).rejects.toThrow(/cannot delete from view|permission/);
    } finally {
      await client.end();
    }
  });
});
