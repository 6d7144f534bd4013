import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAB_SERVICES, queryRows, until, waitForStatus, type LabTarget } from '../integration/introspection/lab.ts';
import { startTestRuntime, type TestRuntime } from '../integration/support/runtime.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';
import { printed, restateCli, type RestateCli } from './support/restate-cli.ts';

/**
 * The real restate CLI 1.7.12 managing Ratchet: `deployments register|list|describe|remove`,
 * `services list|describe|config view|config patch`, and `invocations cancel|kill|purge|pause|resume|restart-as-new`
 * (which find their invocations with SQL first). Each command must exit 0, and its effect is checked where a user
 * would see it: the admin API and the introspection tables.
 */

let db: TestDatabase;
let endpoint: SdkEndpoint;
let runtime: TestRuntime;
let target: LabTarget;
let cli: RestateCli;
let deploymentId: string;

async function ok(...args: string[]): Promise<string> {
  const result = await cli.run(...args);
  expect(result.code, printed(result)).toBe(0);
  return `${result.stdout}\n${result.stderr}`;
}

async function adminJson(path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${runtime.adminUrl}${path}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

async function send(path: string, body: unknown): Promise<string> {
  const res = await fetch(`${runtime.ingressUrl}${path}/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { invocationId: string }).invocationId;
}

async function greet(name: string): Promise<string> {
  const res = await fetch(`${runtime.ingressUrl}/Greeter/greet`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(name),
  });
  expect(res.status).toBe(200);
  return res.headers.get('x-restate-id')!;
}

async function invocation(id: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await queryRows(
    runtime.adminUrl,
    `SELECT id, status, completion_result, completion_failure, restarted_from FROM sys_invocation WHERE id = '${id}'`,
  );
  return row;
}

/** A Greeter/sleep of an hour, suspended. */
async function sleeper(): Promise<string> {
  const id = await send('/Greeter/sleep', 60 * 60 * 1000);
  await waitForStatus(target, id, 'suspended');
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase();
  endpoint = await startEndpoint({ services: LAB_SERVICES, transport: 'h2' });
  runtime = await startTestRuntime(db.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '1s' });
  target = { ingressUrl: runtime.ingressUrl, adminUrl: runtime.adminUrl };
  cli = await restateCli(runtime.adminUrl, runtime.ingressUrl);
});

afterAll(async () => {
  await cli?.close();
  await runtime?.stop();
  await endpoint?.close();
  await db?.drop();
});

describe('restate CLI managing Ratchet', () => {
  it('deployments register, list and describe', async () => {
    const registered = await ok('-y', 'deployments', 'register', endpoint.url);
    const deployments = (await adminJson('/deployments'))['deployments'] as { id: string }[];
    expect(deployments).toHaveLength(1);
    deploymentId = deployments[0]!.id;
    expect(registered).toContain(deploymentId);
    for (const name of ['Greeter', 'Counter', 'Signup', 'Flaky']) expect(registered).toContain(name);

    const list = await ok('deployments', 'list');
    expect(list).toContain(deploymentId);
    expect(list).toContain(endpoint.url);
    const describe = await ok('deployments', 'describe', deploymentId);
    expect(describe).toContain(endpoint.url);
    expect(describe).toMatch(/Counter\s/);
  });

  it('services list, describe and config view / patch', async () => {
    const list = await ok('services', 'list');
    expect(list).toMatch(/Counter\s+1\s+virtual object/);
    expect(list).toMatch(/Signup\s+1\s+workflow/);
    expect(list).toContain(deploymentId);
    const describe = await ok('services', 'describe', 'Greeter');
    expect(describe).toMatch(/Name:\s+Greeter/);
    for (const handler of ['greet', 'sleep', 'fail']) expect(describe).toMatch(new RegExp(`\\b${handler}\\s`));

    const view = await ok('services', 'config', 'view', 'Greeter');
    expect(view).toMatch(/Public:\s+true/);
    await ok('-y', 'services', 'config', 'patch', 'Greeter', '--idempotency-retention', '3h');
    expect((await adminJson('/services/Greeter'))['idempotency_retention']).toBe('3h');
    expect(await ok('services', 'config', 'view', 'Greeter')).toMatch(/Idempotent requests retention:\s+3h/);
  });

  it('invocations cancel and kill end suspended invocations', async () => {
    const cancelled = await sleeper();
    const out = await ok('-y', 'invocations', 'cancel', cancelled);
    expect(out).toContain(cancelled);
    expect(out).toContain('Cancelled 1 invocations');
    await until('the cancellation', async () => {
      const row = await invocation(cancelled);
      return row?.['status'] === 'completed' ? row : undefined;
    });
    expect(await invocation(cancelled)).toMatchObject({ completion_result: 'failure' });
    expect((await invocation(cancelled))?.['completion_failure']).toMatch(/^\[409\]/);

    const killed = await sleeper();
    expect(await ok('-y', 'invocations', 'kill', killed)).toContain('Killed 1 invocations');
    await until('the kill', async () => ((await invocation(killed))?.['status'] === 'completed' ? true : undefined));

    // purge: the completed invocation is gone.
    expect(await ok('-y', 'invocations', 'purge', cancelled)).toContain('Purged 1 invocations');
    await until('the purge', async () => ((await invocation(cancelled)) === undefined ? true : undefined));
  });

  it('invocations pause and resume', async () => {
    const id = await sleeper();
    expect(await ok('-y', 'invocations', 'pause', id)).toContain('Paused 1 invocations');
    await waitForStatus(target, id, 'paused');
    expect(await ok('-y', 'invocations', 'resume', id)).toContain('Resumed 1 invocations');
    await waitForStatus(target, id, 'running', 'suspended');
    await ok('-y', 'invocations', 'kill', id);
  });

  it('invocations restart-as-new starts a completed invocation again', async () => {
    const id = await greet('again');
    const out = await ok('-y', 'invocations', 'restart-as-new', id);
    expect(out).toContain('Restarted 1 invocations');
    const newId = /inv_1[0-9A-Za-z]{33}/.exec(out.slice(out.indexOf('NEW ID')).replace(id, ''))?.[0];
    expect(newId).toBeDefined();
    await waitForStatus(target, newId!, 'completed');
    expect(await invocation(newId!)).toMatchObject({ restarted_from: id, completion_result: 'success' });
  });

  it('deployments remove (forced) removes the deployment and its services', async () => {
    const out = await ok('-y', 'deployments', 'remove', deploymentId, '--force');
    expect(out).toContain(deploymentId);
    expect((await adminJson('/deployments'))['deployments']).toEqual([]);
    expect((await adminJson('/services'))['services']).toEqual([]);
  });
});
