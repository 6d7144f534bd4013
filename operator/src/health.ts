import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { GROUP, KINDS } from './api/v1alpha1/index.ts';
import type { Kube } from './kube/port.ts';
import type { Condition, KubeObject } from './kube/types.ts';
import { operatorMetrics, type OperatorMetrics } from './telemetry/metrics.ts';

/*
 * The operator's HTTP endpoints: /healthz (the process answers), /readyz (CRDs installed and caches synced; the
 * same on leader and standby, so a standby is not restarted or taken out of rotation for being a standby), /metrics.
 */

/** The CRDs the operator cannot work without. */
export const REQUIRED_CRDS: readonly string[] = Object.values(KINDS).map((k) => `${k.plural}.${GROUP}`);

export interface Readiness {
  /** Why the operator is not ready; empty when it is. */
  problems(): string[];
}

export interface HealthServerOptions {
  readonly host: string;
  readonly port: number;
  readonly readiness: Readiness;
  readonly registry?: Registry;
  readonly log: Logger;
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const registry = options.registry ?? operatorMetrics.registry;
  const server = createServer((req, res) => {
    void handle(req, res, options, registry);
  });
  // Keep-alive probes must not hold the process open at shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: options.host, port: options.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  options.log.info({ host: options.host, port }, 'health endpoints listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  options: HealthServerOptions,
  registry: Registry,
): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  try {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'method not allowed\n');
    } else if (path === '/healthz' || path === '/livez') {
      send(res, 200, 'ok\n');
    } else if (path === '/readyz') {
      const problems = options.readiness.problems();
      send(
        res,
        problems.length === 0 ? 200 : 503,
        problems.length === 0 ? 'ok\n' : problems.map((p) => `${p}\n`).join(''),
      );
    } else if (path === '/metrics') {
      send(res, 200, await registry.metrics(), registry.contentType);
    } else {
      send(res, 404, 'not found\n');
    }
  } catch (err) {
    options.log.error({ err, path }, 'health endpoint failed');
    if (!res.headersSent) send(res, 500, 'internal error\n');
  }
}

function send(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export interface CrdPresenceOptions {
  readonly kube: Pick<Kube, 'get'>;
  readonly names?: readonly string[];
  /** Poll period while some are missing; default 5 s. */
  readonly intervalMs?: number;
  /** Poll period once all are present (a CRD may be deleted later); default 60 s. */
  readonly presentIntervalMs?: number;
  readonly metrics?: OperatorMetrics;
  readonly log: Logger;
}

/**
 * Polls for the CRDs instead of exiting when they are missing (restate-operator #166: a crash loop while Helm or Argo
 * CD is still applying them). Missing ones show in /readyz and as `ratchet_operator_crd_missing{crd}`.
 */
export class CrdPresence {
  private readonly names: readonly string[];
  private missingNames: string[];
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private polled = false;
  private readonly waiters = new Set<() => void>();
  private readonly metrics: OperatorMetrics;

  constructor(private readonly options: CrdPresenceOptions) {
    this.names = options.names ?? REQUIRED_CRDS;
    this.missingNames = [...this.names];
    this.metrics = options.metrics ?? operatorMetrics;
    for (const crd of this.names) this.metrics.crdMissing.set({ crd }, 1);
  }

  missing(): string[] {
    return [...this.missingNames];
  }

  /** Starts polling; the promise resolves when all are present, or false if stopped first. */
  waitUntilPresent(): Promise<boolean> {
    if (this.timer === undefined && !this.stopped) void this.poll();
    return new Promise((resolve) => {
      if (this.missingNames.length === 0) resolve(true);
      else if (this.stopped) resolve(false);
      else this.waiters.add(() => resolve(this.missingNames.length === 0));
    });
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wake();
  }

  private async poll(): Promise<void> {
    const missing: string[] = [];
    for (const name of this.names) {
      if (!(await this.present(name))) missing.push(name);
    }
    if (this.stopped) return;
    const before = this.missingNames.join(',');
    this.missingNames = missing;
    for (const crd of this.names) this.metrics.crdMissing.set({ crd }, missing.includes(crd) ? 1 : 0);
    // Log changes only (and the first answer): the poll repeats every few seconds.
    if (missing.join(',') !== before || !this.polled) {
      this.polled = true;
      if (missing.length > 0) this.options.log.warn({ missing }, 'waiting for CRDs to be installed');
      else this.options.log.info('all CRDs are installed');
    }
    if (missing.length === 0) this.wake();
    const delay =
      missing.length === 0 ? (this.options.presentIntervalMs ?? 60_000) : (this.options.intervalMs ?? 5_000);
    this.timer = setTimeout(() => void this.poll(), delay);
    this.timer.unref();
  }

  private async present(name: string): Promise<boolean> {
    try {
      const crd = await this.options.kube.get<KubeObject & { status?: { conditions?: Condition[] } }>({
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        name,
      });
      // Established=False: the API server has not started serving it yet (e.g. a name conflict).
      const established = crd?.status?.conditions?.find((c) => c.type === 'Established');
      return crd !== undefined && established?.status !== 'False';
    } catch (err) {
      this.options.log.warn({ err, crd: name }, 'could not check for a CRD');
      return false;
    }
  }

  private wake(): void {
    for (const w of this.waiters) w();
    this.waiters.clear();
  }
}
