import { expect } from 'vitest';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { waitFor } from '../../support/wait.ts';

/** Several runtime processes on one database, as a Kubernetes Deployment runs them. */

export interface ClusterNode {
  readonly name: string;
  process: RuntimeProcess;
}

export interface NodeHealth {
  name: string;
  address: string;
  ingress_address: string;
  alive: boolean;
  leaving: boolean;
  last_heartbeat: string;
  leader_of: number[];
}

export interface ClusterHealthBody {
  cluster_name: string;
  metadata_cluster_health: { members: number[] } | null;
  nodes: NodeHealth[];
}

/** Fast failure detection for tests: leases run out after 1.5 s, heartbeats every 300 ms. */
export const CLUSTER_TEST_ENV: Readonly<Record<string, string>> = {
  RATCHET_CLUSTER_LEASE_TIMEOUT: '1500ms',
  RATCHET_CLUSTER_HEARTBEAT_INTERVAL: '300ms',
  RATCHET_CLUSTER_PARTITION_WAIT: '15s',
};

export async function startNode(
  databaseUrl: string,
  name: string,
  env: Record<string, string> = {},
  ports?: RuntimeProcess['ports'],
): Promise<ClusterNode> {
  const process = await startRuntimeProcess({
    databaseUrl,
    env: { RATCHET_NODE_NAME: name, ...CLUSTER_TEST_ENV, ...env },
    ...(ports === undefined ? {} : { ports }),
  });
  return { name, process };
}

export async function clusterHealth(node: ClusterNode): Promise<ClusterHealthBody> {
  const res = await fetch(`${node.process.adminUrl}/cluster-health`);
  expect(res.status).toBe(200);
  return (await res.json()) as ClusterHealthBody;
}

/** Owned partitions per live node, as `node` sees it. */
export async function ownership(node: ClusterNode): Promise<Map<string, number[]>> {
  const health = await clusterHealth(node);
  return new Map(health.nodes.filter((n) => n.alive).map((n) => [n.name, n.leader_of]));
}

/**
 * Waits until the live nodes named own every partition between them, each within ±1 of its fair share; returns the
 * time it took.
 */
export async function waitForBalance(
  observer: ClusterNode,
  names: readonly string[],
  partitions: number,
  timeoutMs = 30_000,
): Promise<number> {
  const started = Date.now();
  await waitFor(async () => {
    const owned = await ownership(observer);
    const all = names.flatMap((n) => owned.get(n) ?? []);
    expect(new Set(all).size).toBe(partitions);
    expect(all.length).toBe(partitions);
    const counts = names.map((n) => (owned.get(n) ?? []).length);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    for (const other of owned.keys()) expect(names).toContain(other);
  }, timeoutMs);
  return Date.now() - started;
}

/** Waits until every partition has a live owner among `names`; returns how long that took. */
export async function waitForOwners(
  observer: ClusterNode,
  names: readonly string[],
  partitions: number,
  timeoutMs = 30_000,
): Promise<number> {
  const started = Date.now();
  await waitFor(async () => {
    const owned = await ownership(observer);
    const all = names.flatMap((n) => owned.get(n) ?? []);
    expect(new Set(all).size).toBe(partitions);
  }, timeoutMs);
  return Date.now() - started;
}

/** Waits until the node's registry shows `service` (registrations reach other nodes by LISTEN/NOTIFY). */
export async function waitForService(node: ClusterNode, service: string): Promise<void> {
  await waitFor(async () => {
    const res = await fetch(`${node.process.adminUrl}/services/${service}`);
    expect(res.status).toBe(200);
  });
}

/** What a load run did, per object key: the answers it got (each acknowledged `add(1)` answers the new count). */
export interface LoadReport {
  acknowledged: Map<string, number[]>;
  /** Requests whose first try failed (status or connection), and requests in total. */
  firstTryFailures: number;
  requests: number;
  failures: string[];
}

/**
 * Clients calling `Counter/<key>/add(1)` through the nodes `targets()` returns, each request with its own idempotency
 * key, retried (same key, next node) until it is acknowledged — the way a careful client uses a Kubernetes Service.
 */
export class CounterLoad {
  private stopped = false;
  private readonly workers: Promise<void>[] = [];
  readonly report: LoadReport = { acknowledged: new Map(), firstTryFailures: 0, requests: 0, failures: [] };
  private seq = 0;

  constructor(
    private readonly targets: () => string[],
    private readonly keys: readonly string[],
    concurrency: number,
    private readonly tag: string,
  ) {
    for (let i = 0; i < concurrency; i++) this.workers.push(this.worker(i));
  }

  private async worker(w: number): Promise<void> {
    let turn = w;
    while (!this.stopped) {
      const key = this.keys[(this.seq++ * 7 + w) % this.keys.length]!;
      const idem = `${this.tag}-${w}-${this.seq}`;
      this.report.requests += 1;
      let first = true;
      for (;;) {
        const urls = this.targets();
        const url = urls[turn++ % Math.max(1, urls.length)];
        let problem: string | undefined;
        if (url === undefined) problem = 'no target';
        else {
          try {
            const res = await fetch(`${url}/Counter/${key}/add`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'idempotency-key': idem },
              body: '1',
              signal: AbortSignal.timeout(30_000),
            });
            const text = await res.text();
            if (res.status === 200) {
              const list = this.report.acknowledged.get(key) ?? [];
              list.push(Number(text));
              this.report.acknowledged.set(key, list);
              break;
            }
            problem = `${res.status} ${text}`;
          } catch (err) {
            problem = (err as Error).message;
          }
        }
        if (first) {
          this.report.firstTryFailures += 1;
          if (this.report.failures.length < 20) this.report.failures.push(`${url ?? '-'}: ${problem ?? ''}`);
        }
        first = false;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async stop(): Promise<LoadReport> {
    this.stopped = true;
    await Promise.all(this.workers);
    return this.report;
  }
}

/**
 * Checks what exactly-once means for the counters: per key, the acknowledged answers are exactly 1..n (no update lost,
 * none applied twice), and the counter now reads n.
 */
export async function checkCounters(ingressUrl: string, report: LoadReport): Promise<number> {
  let total = 0;
  for (const [key, answers] of report.acknowledged) {
    const sorted = [...answers].sort((a, b) => a - b);
    expect({ key, answers: sorted }).toEqual({ key, answers: sorted.map((_, i) => i + 1) });
    const res = await fetch(`${ingressUrl}/Counter/${key}/get`, { method: 'POST' });
    expect({ key, value: await res.text() }).toEqual({ key, value: String(sorted.length) });
    total += sorted.length;
  }
  return total;
}

/** Readiness as Kubernetes sees it (`/ready` on the metrics listener). */
export async function isReady(node: ClusterNode): Promise<boolean> {
  try {
    const res = await fetch(`${node.process.metricsUrl}/ready`, { signal: AbortSignal.timeout(1000) });
    return res.status === 200;
  } catch {
    return false;
  }
}
