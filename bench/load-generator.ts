import autocannon from 'autocannon';
import type { LoadStats } from './load-stats.ts';
import type { LoadGeneratorName } from './settings.ts';
import { runWrk, stopWrk } from './wrk.ts';
import { WORKLOADS, workloadRequest, type Workload } from './workloads.ts';

/**
 * The load generator: a child process (forked by `run.ts` with an IPC channel) that drives one runtime's ingress (or
 * the ingresses of a cluster's nodes) per request it gets, with autocannon in this process or with wrk as a child of
 * it, and answers with what it measured. It lives for the whole benchmark, so both runtimes are driven by the same
 * warmed-up process, and the CPU time of its process tree is the load generator's, whichever drove the run. It exits
 * when its parent disconnects (or dies).
 */

export interface LoadRequest {
  readonly type: 'run';
  readonly id: number;
  /**
   * Ingress base URL, without trailing slash; several (a cluster's nodes): autocannon gives connection i the URL
   * i mod n, so each connection stays with one ingress, as behind a connection-level load balancer.
   */
  readonly url: string | readonly string[];
  /** wrk takes one URL only, and whole seconds. */
  readonly generator: LoadGeneratorName;
  readonly workload: Workload;
  readonly connections: number;
  readonly durationS: number;
}

export interface LoadStop {
  readonly type: 'stop';
}

export type { LoadStats } from './load-stats.ts';

export type LoadReply =
  | { readonly type: 'result'; readonly id: number; readonly stats: LoadStats }
  | { readonly type: 'error'; readonly id: number; readonly message: string };

let current: autocannon.Instance | undefined;

/** The `q`-quantile of sorted values (nearest rank). */
function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? 0;
}

function runLoad(request: LoadRequest): Promise<LoadStats> {
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  let n = 0;
  const first = workloadRequest(request.workload, 0);
  const varies = request.workload === 'add';
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const instance = autocannon(
      {
        url: typeof request.url === 'string' ? request.url : [...request.url],
        connections: request.connections,
        duration: request.durationS,
        timeout: 30,
        requests: [
          {
            method: 'POST',
            path: first.path,
            headers: { 'content-type': 'application/json' },
            body: first.body,
            ...(varies
              ? {
                  setupRequest: (req: autocannon.Request) => ({
                    ...req,
                    path: workloadRequest(request.workload, n++).path,
                  }),
                }
              : {}),
          },
        ],
      },
      (err, result) => {
        current = undefined;
        if (err !== null) {
          reject(err);
          return;
        }
        const elapsedS = Number(process.hrtime.bigint() - started) / 1e9;
        const sorted = latencies.subarray(0, count).sort();
        let sum = 0;
        for (const v of sorted) sum += v;
        const statusCodes: Record<string, number> = {};
        for (const [code, { count: c }] of Object.entries(result.statusCodeStats)) {
          if (!code.startsWith('2')) statusCodes[code] = c;
        }
        resolve({
          ok: count,
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          elapsedS,
          rps: count / elapsedS,
          latencyMs: {
            mean: count === 0 ? 0 : sum / count,
            p50: quantile(sorted, 0.5),
            p90: quantile(sorted, 0.9),
            p99: quantile(sorted, 0.99),
            max: sorted.length === 0 ? 0 : (sorted[sorted.length - 1] ?? 0),
          },
          statusCodes,
        });
      },
    );
    current = instance;
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode < 200 || statusCode > 299) return;
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[count++] = responseTime;
    });
  });
}

function reply(message: LoadReply): void {
  process.send?.(message);
}

function isWorkload(value: unknown): value is Workload {
  return (WORKLOADS as readonly unknown[]).includes(value);
}

function main(): void {
  if (process.send === undefined) throw new Error('bench/load-generator.ts must be started by bench/run.ts (IPC)');
  process.on('message', (message: LoadRequest | LoadStop) => {
    if (message.type === 'stop') {
      current?.stop();
      stopWrk();
      return;
    }
    if (!isWorkload(message.workload)) {
      reply({ type: 'error', id: message.id, message: `unknown workload ${String(message.workload)}` });
      return;
    }
    const run =
      message.generator === 'wrk'
        ? typeof message.url === 'string'
          ? runWrk(message.url, message.workload, message.connections, message.durationS)
          : Promise.reject(new Error('wrk drives one ingress URL'))
        : runLoad(message);
    run.then(
      (stats) => reply({ type: 'result', id: message.id, stats }),
      (err: unknown) =>
        reply({ type: 'error', id: message.id, message: err instanceof Error ? err.message : String(err) }),
    );
  });
  process.once('disconnect', () => {
    current?.stop();
    stopWrk();
    process.exit(0);
  });
}

main();
