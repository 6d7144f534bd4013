import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LAB_SERVICES,
  playLab,
  releaseLab,
  waitForStatus,
  type LabInvocations,
  type LabTarget,
} from '../integration/introspection/lab.ts';
import { startTestRuntime, type TestRuntime } from '../integration/support/runtime.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { registerEndpoint } from '../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';
import { printed, restateCli, type CliResult, type RestateCli } from './support/restate-cli.ts';

/**
 * The real restate CLI 1.7.12 reading Ratchet through `POST /query`: `invocations list|describe`, `services status`,
 * `state get` and `sql`, each against the invocations of the lab scenario (every state at once).
 */

let db: TestDatabase;
let endpoint: SdkEndpoint;
let runtime: TestRuntime;
let target: LabTarget;
let lab: LabInvocations;
let cli: RestateCli;

/** Runs the CLI, expects exit 0, and returns all it printed (summaries such as `Showing 6/6` go to stderr). */
async function ok(...args: string[]): Promise<string> {
  const result: CliResult = await cli.run(...args);
  expect(result.code, printed(result)).toBe(0);
  return `${result.stdout}\n${result.stderr}`;
}

beforeAll(async () => {
  db = await createTestDatabase();
  endpoint = await startEndpoint({ services: LAB_SERVICES, transport: 'h2' });
  runtime = await startTestRuntime(db.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '1s' });
  await registerEndpoint(runtime, endpoint);
  target = { ingressUrl: runtime.ingressUrl, adminUrl: runtime.adminUrl };
  lab = await playLab(target);
  await waitForStatus(target, lab.sleeping, 'suspended');
  cli = await restateCli(runtime.adminUrl, runtime.ingressUrl);
});

afterAll(async () => {
  await cli?.close();
  if (target !== undefined) await releaseLab(target).catch(() => undefined);
  await runtime?.stop();
  await endpoint?.close();
  await db?.drop();
});

describe('restate CLI against Ratchet', () => {
  it('invocations list shows the active invocations with their status; --all adds the completed ones', async () => {
    const active = await ok('invocations', 'list');
    for (const id of [lab.sleeping, lab.scheduled, lab.holding, lab.inboxed, lab.workflow, lab.paused])
      expect(active).toContain(id);
    expect(active).not.toContain(lab.greeted);
    expect(active).toMatch(/Flaky\/boom\s+Status:\s+paused/);
    expect(active).toMatch(/Greeter\/sleep\s+Status:\s+suspended/);
    expect(active).toMatch(/Counter\/k2\/add\s+Status:\s+pending/);
    expect(active).toContain('Showing 6/6 invocations');

    const all = await ok('invocations', 'list', '--all');
    expect(all).toContain(lab.greeted);
    expect(all).toContain('completed with success');
    expect(all).toContain('Showing 9/9 invocations');
  });

  it('invocations describe shows the invocation and its journal', async () => {
    const out = await ok('invocations', 'describe', lab.sleeping);
    expect(out).toMatch(/Target:\s+Greeter\/sleep/);
    expect(out).toMatch(/Status:\s+suspended/);
    expect(out).toContain('#0');
    expect(out).toContain('Command: Input');
    expect(out).toContain('#1');
    expect(out).toContain('Command: Sleep');
  });

  it('services status counts invocations per handler and shows the locked key', async () => {
    const greeter = await ok('services', 'status', 'Greeter');
    expect(greeter).toMatch(/sleep\s/);
    expect(greeter).toContain(lab.sleeping);
    const counter = await ok('services', 'status', 'Counter');
    // `add` has one pending invocation (inboxed behind `hold`), and k2 is locked by `hold`.
    expect(counter).toMatch(/add\s+1\s/);
    expect(counter).toContain('k2');
    expect(counter).toContain(lab.holding);
  });

  it('state get prints the decoded state of a key', async () => {
    const out = await ok('state', 'get', 'Counter', 'k1');
    expect(out).toMatch(/count\s+7/);
  });

  it('sql prints the rows of an Arrow answer, and --json the rows as JSON', async () => {
    const table = await ok('sql', `select id, status from sys_invocation where id = '${lab.paused}'`);
    expect(table).toMatch(new RegExp(`${lab.paused}\\s+paused`));
    expect(table).toContain('1 rows.');
    const json = await ok('sql', '--json', `select id, target from sys_invocation_status where id = '${lab.sleeping}'`);
    expect(json).toContain(JSON.stringify([{ id: lab.sleeping, target: 'Greeter/sleep' }]));
  });

  it('sql prints every column type of the tables (lists, durations, binary, u64)', async () => {
    for (const table of ['sys_invocation', 'sys_journal', 'state', 'sys_deployment', 'sys_promise']) {
      const out = await ok('sql', `select * from ${table}`);
      expect(out, table).toMatch(/\d+ rows\./);
    }
    expect(await ok('sql', `select * from sys_deployment`)).toContain('Greeter');
  });

  it('sql reports a bad statement and exits non-zero', async () => {
    const result = await cli.run('sql', 'select nope from sys_invocation');
    expect(result.code, printed(result)).not.toBe(0);
    expect(result.stdout + result.stderr).toContain('column "nope" does not exist');
  });
});
