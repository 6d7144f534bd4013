import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LoadStats } from './load-stats.ts';
import { OBJECT_KEYS, workloadRequest, type Workload } from './workloads.ts';

/**
 * wrk (a C program: epoll, one request in flight per HTTP/1.1 keep-alive connection, a few threads) as the second load
 * generator. It runs as a child of the load-generator process, so its CPU time lands in that process's tree (as
 * reaped children) like autocannon's. Debian's package is 4.1.0; it takes whole seconds for its duration.
 */

/** Marks the line the `done()` hook prints: one JSON object, latencies in microseconds. */
const MARK = 'RATCHET_BENCH_WRK ';

/**
 * The Lua script of one workload. `noop` and `steps` send one fixed request (wrk formats it once per connection);
 * `add` cycles each thread through the object keys from requests formatted once in `init`. The `done()` hook reports
 * the counts and the percentiles of wrk's latency histogram (microsecond resolution) as JSON.
 */
export function wrkScript(workload: Workload): string {
  const first = workloadRequest(workload, 0);
  const lines = [
    'wrk.method = "POST"',
    `wrk.body = ${luaString(first.body)}`,
    'wrk.headers["Content-Type"] = "application/json"',
  ];
  if (workload === 'add') {
    const paths = Array.from({ length: OBJECT_KEYS }, (_, n) => luaString(workloadRequest(workload, n).path));
    lines.push(
      `local paths = { ${paths.join(', ')} }`,
      'local formatted = {}',
      'local n = 0',
      'init = function(args)',
      '  for i, path in ipairs(paths) do formatted[i] = wrk.format(nil, path) end',
      'end',
      'request = function()',
      '  n = n + 1',
      '  return formatted[(n - 1) % #formatted + 1]',
      'end',
    );
  }
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    `  io.write(string.format('${MARK}{"durationUs":%d,"requests":%d,"connect":%d,"read":%d,"write":%d,"status":%d,` +
      `"timeout":%d,"meanUs":%.3f,"maxUs":%d,"p50Us":%d,"p90Us":%d,"p99Us":%d}\\n',`,
    '    summary.duration, summary.requests, e.connect, e.read, e.write, e.status, e.timeout,',
    '    latency.mean, latency.max, latency:percentile(50), latency:percentile(90), latency:percentile(99)))',
    'end',
  );
  return `${lines.join('\n')}\n`;
}

function luaString(s: string): string {
  return `"${s.replace(/[\\"]/g, '\\$&').replace(/\n/g, '\\n')}"`;
}

interface WrkDone {
  durationUs: number;
  requests: number;
  connect: number;
  read: number;
  write: number;
  /** Responses with a status ≥ 400 (wrk counts nothing else as a status error). */
  status: number;
  timeout: number;
  meanUs: number;
  maxUs: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
}

/** The `done()` hook's report in wrk's output; throws with the output when there is none. */
export function parseWrkOutput(output: string): LoadStats {
  const line = output.split('\n').find((l) => l.startsWith(MARK));
  if (line === undefined) throw new Error(`wrk printed no result:\n${output.slice(-2000)}`);
  const d = JSON.parse(line.slice(MARK.length)) as WrkDone;
  const ok = Math.max(0, d.requests - d.status);
  const elapsedS = d.durationUs / 1e6;
  const ms = (us: number): number => us / 1000;
  return {
    ok,
    non2xx: d.status,
    errors: d.connect + d.read + d.write,
    timeouts: d.timeout,
    elapsedS,
    rps: elapsedS === 0 ? 0 : ok / elapsedS,
    // wrk's histogram holds every response's latency, failed ones too; runs with failures are flagged anyway.
    latencyMs: { mean: ms(d.meanUs), p50: ms(d.p50Us), p90: ms(d.p90Us), p99: ms(d.p99Us), max: ms(d.maxUs) },
    statusCodes: d.status > 0 ? { '4xx/5xx': d.status } : {},
  };
}

/** Threads: wrk needs at least one connection per thread; two threads (the machine's cores) from c=2 up. */
export function wrkThreads(connections: number): number {
  return Math.max(1, Math.min(2, connections));
}

let running: ReturnType<typeof spawn> | undefined;

/** One wrk run against `url`; resolves with what it measured once wrk has exited (and been reaped). */
export async function runWrk(
  url: string,
  workload: Workload,
  connections: number,
  durationS: number,
): Promise<LoadStats> {
  const dir = await mkdtemp(join(tmpdir(), 'ratchet-bench-wrk-'));
  try {
    const script = join(dir, `${workload}.lua`);
    await writeFile(script, wrkScript(workload));
    const path = workloadRequest(workload, 0).path;
    const args = [
      `-t${wrkThreads(connections)}`,
      `-c${connections}`,
      `-d${Math.max(1, Math.round(durationS))}s`,
      '--timeout',
      '30s',
      '-s',
      script,
      `${url}${path}`,
    ];
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      running = child;
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      child.once('error', reject);
      child.once('close', (code, signal) => {
        running = undefined;
        if (code === 0 || signal === 'SIGINT') resolve(out);
        else reject(new Error(`wrk exited with ${code ?? signal}:\n${out.slice(-2000)}`));
      });
    });
    return parseWrkOutput(output);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Ends the run in progress early: wrk prints its results on SIGINT. */
export function stopWrk(): void {
  running?.kill('SIGINT');
}

/**
 * Makes sure `wrk` is on the PATH: installs Debian's package with apt-get when it is missing (as root, or through
 * sudo when there is one); throws saying how to install it otherwise.
 */
export function ensureWrk(log: (line: string) => void): void {
  if (hasWrk()) return;
  const root = process.getuid?.() === 0;
  const sudo = root ? [] : ['sudo', '-n'];
  const apt = (...args: string[]): boolean => {
    const [cmd, ...rest] = [...sudo, 'apt-get', ...args];
    const result = spawnSync(cmd!, rest, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      timeout: 300_000,
    });
    return result.status === 0;
  };
  log("wrk is not installed: installing Debian's package (apt-get install -y wrk)");
  // A fresh machine may have no package lists yet.
  if (!apt('install', '-y', 'wrk') && !(apt('update') && apt('install', '-y', 'wrk'))) {
    throw new Error('wrk is not installed and apt-get could not install it; install it (apt-get install -y wrk)');
  }
  if (!hasWrk()) throw new Error('apt-get installed wrk, but it is not on the PATH');
}

function hasWrk(): boolean {
  // `wrk --version` exits 1 after printing its version; what matters is that it ran.
  return spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
}
