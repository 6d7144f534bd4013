import { access } from 'node:fs/promises';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { registerEndpoint } from '../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';
import { REPO_ROOT } from '../support/runtime-process.ts';
import {
  START_TIMEOUT_MS,
  isRunning,
  postmasterPid,
  removeDataDir,
  spawnRuntime,
  stopAllRuntimes,
  tempDataDir,
  type RuntimeChild,
} from './support/runtime-child.ts';

/**
 * The README's `npm start`: no RATCHET_DATABASE_URL, so the runtime starts its own PostgreSQL under RATCHET_DATA_DIR,
 * keeps the data across restarts, stops it on Ctrl-C, and cleans up after a runtime that was killed.
 */

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: async (ctx: restate.Context, name: string) => ctx.run('make greeting', () => `Hello ${name}!`),
  },
});

const dataDirs: string[] = [];
let endpoint: SdkEndpoint;

beforeAll(async () => {
  endpoint = await startEndpoint({ services: [greeter], transport: 'h2' });
});

afterEach(async () => {
  await stopAllRuntimes();
});

afterAll(async () => {
  await stopAllRuntimes();
  for (const dir of dataDirs) await removeDataDir(dir);
  await endpoint?.close();
});

async function newDataDir(): Promise<string> {
  const dir = await tempDataDir();
  dataDirs.push(dir);
  return dir;
}

async function startDevRuntime(dataDir: string): Promise<{ runtime: RuntimeChild; startMs: number }> {
  const runtime = await spawnRuntime({ env: { RATCHET_DATA_DIR: dataDir } });
  const startMs = await runtime.ready(START_TIMEOUT_MS);
  return { runtime, startMs };
}

async function greet(runtime: RuntimeChild, name: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${runtime.ingressUrl}/Greeter/greet`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(name),
  });
  return { status: res.status, body: await res.json() };
}

async function deploymentIds(runtime: RuntimeChild): Promise<string[]> {
  const res = await fetch(`${runtime.adminUrl}/deployments`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { deployments: { id: string }[] }).deployments.map((d) => d.id);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

describe('dev mode (embedded PostgreSQL)', () => {
  it('starts PostgreSQL, serves, stops it on SIGINT, and keeps the data for the next start', async () => {
    const dataDir = await newDataDir();
    const first = await startDevRuntime(dataDir);
    expect(first.startMs).toBeLessThan(START_TIMEOUT_MS);
    expect(first.runtime.output()).toContain('embedded PostgreSQL started');

    const metrics = await fetch(`${first.runtime.metricsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('ratchet_engine_invocations_accepted_total');

    const { id: deploymentId } = await registerEndpoint(first.runtime, endpoint);
    expect(await greet(first.runtime, 'Alice')).toEqual({ status: 200, body: 'Hello Alice!' });

    const pgPid = await postmasterPid(dataDir);
    expect(pgPid).toBeDefined();
    expect(await isRunning(pgPid!)).toBe(true);

    first.runtime.child.kill('SIGINT');
    expect(await first.runtime.exit()).toEqual({ code: 0, signal: null });
    // The runtime exits only after its PostgreSQL did, so there is nothing to wait for.
    expect(await isRunning(pgPid!)).toBe(false);
    expect(await exists(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false); // a clean shutdown removes it
    expect(await exists(join(dataDir, 'ratchet.pid'))).toBe(false);
    expect(first.runtime.output()).toContain('"msg":"stopped"');

    const second = await startDevRuntime(dataDir);
    expect(second.startMs).toBeLessThan(START_TIMEOUT_MS);
    expect(await deploymentIds(second.runtime)).toEqual([deploymentId]);
    expect(await greet(second.runtime, 'Bob')).toEqual({ status: 200, body: 'Hello Bob!' });
    const secondPgPid = await postmasterPid(dataDir);
    second.runtime.child.kill('SIGTERM');
    expect(await second.runtime.exit()).toEqual({ code: 0, signal: null });
    expect(await isRunning(secondPgPid!)).toBe(false);
  });

  it('runs as the README starts it: npm start builds the bundle (dist/runtime) and runs it, SIGTERM stops it', async () => {
    const dataDir = await newDataDir();
    const runtime = await spawnRuntime({ env: { RATCHET_DATA_DIR: dataDir }, command: ['npm', 'start'] });
    await runtime.ready(START_TIMEOUT_MS);
    await registerEndpoint(runtime, endpoint);
    expect(await greet(runtime, 'Carol')).toEqual({ status: 200, body: 'Hello Carol!' });
    // The compiled bundle, not the TypeScript sources, with its migrations beside it.
    expect(await exists(join(REPO_ROOT, 'dist', 'runtime', 'main.js'))).toBe(true);
    expect(await exists(join(REPO_ROOT, 'dist', 'runtime', 'migrations', '0001_init.sql'))).toBe(true);
    const pgPid = await postmasterPid(dataDir);
    runtime.child.kill('SIGTERM');
    expect((await runtime.exit()).code).toBe(0);
    expect(await isRunning(pgPid!)).toBe(false);
    expect(runtime.output()).toContain('"msg":"stopped"');
  });

  it('stops the PostgreSQL a SIGKILLed runtime left running, then starts on the same data', async () => {
    const dataDir = await newDataDir();
    const first = await startDevRuntime(dataDir);
    const { id: deploymentId } = await registerEndpoint(first.runtime, endpoint);
    expect(await greet(first.runtime, 'Carol')).toEqual({ status: 200, body: 'Hello Carol!' });
    const orphanPid = (await postmasterPid(dataDir))!;

    first.runtime.child.kill('SIGKILL');
    expect(await first.runtime.exit()).toEqual({ code: null, signal: 'SIGKILL' });
    // Its own process group kept it out of the kill: it is an orphan now, still holding the data directory.
    expect(await isRunning(orphanPid)).toBe(true);

    const second = await startDevRuntime(dataDir);
    expect(second.startMs).toBeLessThan(START_TIMEOUT_MS);
    expect(second.runtime.output()).toContain('stopping the PostgreSQL left running by an earlier runtime');
    expect(await isRunning(orphanPid)).toBe(false);
    const newPgPid = await postmasterPid(dataDir);
    expect(newPgPid).not.toBe(orphanPid);
    expect(await isRunning(newPgPid!)).toBe(true);

    expect(await deploymentIds(second.runtime)).toEqual([deploymentId]);
    expect(await greet(second.runtime, 'Dave')).toEqual({ status: 200, body: 'Hello Dave!' });
    second.runtime.child.kill('SIGINT');
    expect(await second.runtime.exit()).toEqual({ code: 0, signal: null });
    expect(await isRunning(newPgPid!)).toBe(false);
  });

  it('refuses a second runtime on a data directory in use (RT0005) and leaves the first one running', async () => {
    const dataDir = await newDataDir();
    const first = await startDevRuntime(dataDir);
    const pgPid = (await postmasterPid(dataDir))!;

    const second = await spawnRuntime({ env: { RATCHET_DATA_DIR: dataDir } });
    expect(await second.exit()).toEqual({ code: 1, signal: null });
    expect(second.output()).toContain('[RT0005]');
    expect(second.output()).toContain(`held by pid ${first.runtime.pid}`);

    // The loser touched neither the lock, nor the first runtime's PostgreSQL.
    expect(await isRunning(pgPid)).toBe(true);
    expect(await postmasterPid(dataDir)).toBe(pgPid);
    await registerEndpoint(first.runtime, endpoint);
    expect(await greet(first.runtime, 'Erin')).toEqual({ status: 200, body: 'Hello Erin!' });
    first.runtime.child.kill('SIGINT');
    expect(await first.runtime.exit()).toEqual({ code: 0, signal: null });
    expect(await isRunning(pgPid)).toBe(false);
  });
});
