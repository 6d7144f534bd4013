import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/runtime-process.ts';

/**
 * `npm run bench -- --quick`, as CI runs it: the harness starts Ratchet and restate-server, drives every workload at
 * c=1 and c=16 against both, prints the table and writes the JSON results. Only that it works is checked: these
 * machines are shared and noisy, so speed is never asserted here.
 */

const WORKLOADS = ['noop', 'steps', 'add'];
const CONCURRENCIES = [1, 16];
const RUNTIMES = ['ratchet', 'restate'];
const TIMEOUT_MS = 150_000;

interface Summary {
  workload: string;
  concurrency: number;
  runtime: string;
  requests: number;
  non2xx: number;
  errors: number;
  rps: number;
}

interface Run {
  workload: string;
  concurrency: number;
  runtime: string;
  stats: { ok: number };
}

interface Results {
  mode: string;
  machine: { cpus: number; cpuModel: string };
  settings: { protocolVersion: number };
  summaries: Summary[];
  runs: Run[];
  targets: { name: string; verdict: string }[];
}

const dirs: string[] = [];

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

function runQuickBench(resultsDir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // Own process group: if the test times out, SIGINT reaches npm, tsx and the harness, which stops what it started.
    const child = spawn('npm', ['run', '--silent', 'bench', '--', '--quick', '--results-dir', resultsDir], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGINT');
    }, TIMEOUT_MS - 20_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

it(
  'runs every workload against both runtimes, prints the table and writes the results',
  async () => {
    const resultsDir = await mkdtemp(join(tmpdir(), 'ratchet-bench-quick-'));
    dirs.push(resultsDir);

    const { code, stdout, stderr } = await runQuickBench(resultsDir);
    expect(code, `bench exited ${String(code)}; stderr:\n${stderr.slice(-6000)}`).toBe(0);

    expect(stdout).toMatch(/\| workload \|\s+c \| runtime \| req\/s \| p50 ms \| p99 ms \|/);
    expect(stdout).toContain('Ratchet ÷ restate-server');
    expect(stdout).toMatch(/^(PASS|MISS|n\/a) +noop c1 p50/m);

    const files = (await readdir(resultsDir)).filter((f) => f.endsWith('-quick.json'));
    expect(files).toHaveLength(1);
    const results = JSON.parse(await readFile(join(resultsDir, files[0]!), 'utf8')) as Results;
    expect(results.mode).toBe('quick');
    expect(results.machine.cpus).toBeGreaterThan(0);
    expect(results.settings.protocolVersion).toBe(6);

    for (const workload of WORKLOADS) {
      for (const concurrency of CONCURRENCIES) {
        for (const runtime of RUNTIMES) {
          const where = `${workload} c=${concurrency} ${runtime}`;
          const summary = results.summaries.find(
            (s) => s.workload === workload && s.concurrency === concurrency && s.runtime === runtime,
          );
          expect(summary, where).toBeDefined();
          expect(summary!.requests, where).toBeGreaterThan(0);
          expect(summary!.rps, where).toBeGreaterThan(0);
          // Every call answered 200: a failing runtime or service would otherwise be measured as a fast one.
          expect(summary!.non2xx + summary!.errors, where).toBe(0);
          const runs = results.runs.filter(
            (r) => r.workload === workload && r.concurrency === concurrency && r.runtime === runtime,
          );
          expect(runs.length, where).toBeGreaterThan(0);
          for (const run of runs) expect(run.stats.ok, where).toBeGreaterThan(0);
        }
      }
    }
  },
  TIMEOUT_MS,
);
