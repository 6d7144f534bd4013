import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureOutput, exitStatus, terminate, trackChild, type ExitStatus } from '../../../support/child-process.ts';
import { startFakeKube, type FakeKube } from '../../../support/fake-kube/index.ts';
import { freePort, loopbackUrl } from '../../../support/ports.ts';
import { REPO_ROOT } from '../../../support/runtime-process.ts';
import { waitFor } from '../../../support/wait.ts';

interface OperatorProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<ExitStatus>;
  readonly output: () => string;
}

/**
 * The compiled operator as its image runs it (`node dist/operator/main.js`, built by `scripts/build.mjs`): the
 * operator itself is the child, so signals reach it directly.
 */
function startOperator(env: Record<string, string>): OperatorProcess {
  const child = spawn(process.execPath, ['--enable-source-maps', 'dist/operator/main.js'], {
    cwd: REPO_ROOT,
    env: { ...process.env, RATCHET_OPERATOR_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  return { child, exited: exitStatus(child), output: captureOutput(child) };
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

describe('the operator process (the compiled bundle) against the fake API server', () => {
  let fake: FakeKube;
  let dir: string;
  let kubeconfig: string;
  const started: OperatorProcess[] = [];

  beforeAll(async () => {
    execFileSync(process.execPath, ['scripts/build.mjs', 'operator'], { cwd: REPO_ROOT, stdio: 'ignore' });
    fake = await startFakeKube({ namespaces: ['ops'] });
    dir = mkdtempSync(join(tmpdir(), 'ratchet-operator-process-'));
    kubeconfig = fake.writeKubeconfig(dir);
  });
  afterAll(async () => {
    for (const p of started) await terminate(p.child, p.exited, 5_000);
    await fake.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('waits for the CRDs without exiting, becomes ready and leader, and on SIGTERM releases the Lease and exits 0', async () => {
    const port = await freePort();
    const url = loopbackUrl(port);
    const operator = startOperator({
      KUBECONFIG: kubeconfig,
      RATCHET_OPERATOR_NAMESPACE: 'ops',
      RATCHET_OPERATOR_HEALTH_BIND: `127.0.0.1:${port}`,
      POD_NAME: 'operator-0',
    });
    started.push(operator);

    await waitFor(async () => {
      expect(operator.child.exitCode).toBeNull();
      const ready = await get(`${url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.body).toContain('CRD clusters.ratchet.dev is not installed');
      expect(ready.body).toContain('CRD subscriptions.ratchet.dev is not installed');
    }, 30_000);
    expect((await get(`${url}/healthz`)).status).toBe(200);
    expect((await get(`${url}/metrics`)).body).toContain(
      'ratchet_operator_crd_missing{crd="deployments.ratchet.dev"} 1',
    );

    fake.loadYaml(readFileSync(join(REPO_ROOT, 'crds/all.yaml'), 'utf8'));
    await waitFor(async () => expect(await get(`${url}/readyz`)).toEqual({ status: 200, body: 'ok\n' }), 30_000);
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      namespace: 'ops',
      name: 'ratchet-operator-leader',
    };
    await waitFor(() => expect(fake.get(lease)?.['spec']).toMatchObject({ holderIdentity: 'operator-0' }));
    await waitFor(async () => expect((await get(`${url}/metrics`)).body).toMatch(/^ratchet_operator_leader 1$/m));

    operator.child.kill('SIGTERM');
    expect(await operator.exited).toEqual({ code: 0, signal: null });
    expect(fake.get(lease)?.['spec']).toMatchObject({ holderIdentity: null });
    const lines = operator
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string });
    expect(lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining(['became leader', 'shutting down', 'released the leader lease', 'stopped']),
    );
  });

  it('refuses a bad setting at startup, naming the variable', async () => {
    const operator = startOperator({ KUBECONFIG: kubeconfig, RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES: 'many' });
    started.push(operator);
    expect((await operator.exited).code).toBe(1);
    expect(operator.output()).toContain('RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES');
  });
});
