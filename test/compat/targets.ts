import http from 'node:http';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { createTestDatabase } from '../support/postgres.ts';
import { startRestateServer } from '../support/restate-server.ts';
import { registerEndpoint } from '../support/registration.ts';
import { startEndpoint, type StartEndpointOptions } from '../support/sdk-endpoint.ts';
import { counterObject } from '../support/services/counter.ts';
import { fail, greeterService } from '../support/services/greeter.ts';

/**
 * Compatibility-test plumbing: the two targets (the real restate-server 1.7.12 and Ratchet), each with its own SDK
 * endpoint serving the same services, a raw HTTP client, and the normalization that makes two responses comparable.
 */

export type TargetName = 'restate' | 'ratchet';

export interface Target {
  readonly name: TargetName;
  /** Unique per target; scenarios put it into keys and inputs so nothing can be shared by accident. */
  readonly tag: string;
  readonly ingressUrl: string;
  readonly adminUrl: string;
  /** The target's own log output (restate-server's stdout+stderr; empty for the in-process Ratchet). */
  output(): string;
  stop(): Promise<void>;
}

/** `RATCHET_COMPAT_TARGETS=restate` (or `ratchet`) runs one side only; default both. */
export function selectedTargets(): TargetName[] {
  const raw = process.env['RATCHET_COMPAT_TARGETS'];
  if (raw === undefined || raw.trim() === '') return ['restate', 'ratchet'];
  const names = raw.split(',').map((s) => s.trim());
  for (const n of names) if (n !== 'restate' && n !== 'ratchet') throw new Error(`unknown compat target '${n}'`);
  return names as TargetName[];
}

// ------------------------------------------------------------------------------------------------------------------
// HTTP

export interface HttpRequest {
  readonly method: string;
  /** Sent verbatim (percent-encoding and query string included). */
  readonly path: string;
  readonly headers?: Record<string, string>;
  /** Raw body bytes/text; no content-type is added implicitly. */
  readonly body?: string;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  readonly elapsedMs: number;
}

export interface Exchange {
  readonly target: TargetName;
  readonly request: HttpRequest;
  readonly response: HttpResponse;
}

/** A plain HTTP/1.1 request with exactly the given headers (plus host/content-length), one connection per request. */
export function httpRequest(baseUrl: string, req: HttpRequest, timeoutMs = 30_000): Promise<HttpResponse> {
  const url = new URL(baseUrl);
  const body = req.body === undefined ? undefined : Buffer.from(req.body, 'utf8');
  const headers: Record<string, string> = { ...req.headers };
  if (body !== undefined) headers['content-length'] = String(body.length);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const r = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.path,
        headers,
        agent: false,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
            elapsedMs: performance.now() - started,
          }),
        );
      },
    );
    r.on('timeout', () => r.destroy(new Error(`${req.method} ${req.path} timed out after ${timeoutMs} ms`)));
    r.on('error', reject);
    r.end(body);
  });
}

export function describeExchange(x: Exchange): string {
  const reqHeaders = Object.entries(x.request.headers ?? {})
    .map(([k, v]) => `  ${k}: ${v}`)
    .join('\n');
  const resHeaders = Object.entries(x.response.headers)
    .filter(([k]) => k !== 'date')
    .map(([k, v]) => `  ${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)
    .join('\n');
  return [
    `[${x.target}] ${x.request.method} ${x.request.path}`,
    ...(reqHeaders === '' ? [] : [reqHeaders]),
    ...(x.request.body === undefined ? [] : [`  body: ${x.request.body}`]),
    `  -> ${x.response.status} (${x.response.elapsedMs.toFixed(0)} ms)`,
    resHeaders,
    `  body: ${x.response.text}`,
  ].join('\n');
}

// ------------------------------------------------------------------------------------------------------------------
// Normalization

export const INVOCATION_ID = /^inv_1[0-9A-Za-z]{33}$/;
/** `2026-11-21T20:44:19.539000000Z`: how restate renders times in ingress bodies. */
export const NANOS_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;

export interface Normalized {
  status: number;
  headers: {
    'x-restate-id': string | null;
    'x-restate-error-source': string | null;
    'content-type': string | null;
    vary: string | null;
    'access-control-allow-credentials': string | null;
  };
  body: unknown;
  /** Top-level key order of a JSON object body, as sent on the wire. */
  keyOrder?: string[];
}

function header(res: HttpResponse, name: string): string | null {
  const v = res.headers[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(', ') : v;
}

function normalizeValue(value: unknown, tag: string): unknown {
  if (typeof value === 'string') {
    if (INVOCATION_ID.test(value)) return '<invocation-id>';
    if (NANOS_TIMESTAMP.test(value)) return '<timestamp>';
    return value.split(tag).join('<tag>');
  }
  if (Array.isArray(value)) return value.map((v) => normalizeValue(v, tag));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalizeValue(v, tag)]));
  }
  return value;
}

/**
 * What is compared between targets: status, the headers that matter (ids reduced to their shape), and the body with
 * non-deterministic parts (ids, times, the per-target tag) replaced by placeholders. A non-JSON body stays text.
 */
export function normalize(x: Exchange, tag: string, body: (json: unknown) => unknown = (j) => j): Normalized {
  const res = x.response;
  const id = header(res, 'x-restate-id');
  let parsed: unknown;
  let isJson = false;
  if (res.text !== '') {
    try {
      parsed = JSON.parse(res.text);
      isJson = true;
    } catch {
      parsed = undefined;
    }
  }
  const out: Normalized = {
    status: res.status,
    headers: {
      'x-restate-id': id === null ? null : INVOCATION_ID.test(id) ? '<invocation-id>' : id,
      'x-restate-error-source': header(res, 'x-restate-error-source'),
      'content-type': header(res, 'content-type'),
      vary: header(res, 'vary'),
      'access-control-allow-credentials': header(res, 'access-control-allow-credentials'),
    },
    body: isJson ? normalizeValue(body(parsed), tag) : res.text.split(tag).join('<tag>'),
  };
  if (isJson && typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
    out.keyOrder = Object.keys(parsed);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------------------------
// Services (identical for both targets)

export const helper = restate.service({
  name: 'Helper',
  handlers: {
    exclaim: (_ctx: restate.Context, s: string) => Promise.resolve(`${s}!`),
  },
});

export const greeter = greeterService({
  handlers: {
    fail,
    /** Calls another service, then sleeps durably for 100 ms. */
    relay: async (ctx: restate.Context, name: string) => {
      const exclaimed = await ctx.serviceClient(helper).exclaim(name);
      await ctx.sleep(100);
      return `${exclaimed} (after 100 ms)`;
    },
  },
});

export const counter = counterObject({
  handlers: { whoami: restate.handlers.object.shared((ctx: restate.ObjectSharedContext) => Promise.resolve(ctx.key)) },
});

export const SERVICES = [greeter, helper, counter];
export const SERVICE_NAMES = ['Counter', 'Greeter', 'Helper'];

// ------------------------------------------------------------------------------------------------------------------
// Targets

/** restate-server propagates a new schema to its ingress asynchronously, sometimes slowly on a busy machine. */
const SERVICES_VISIBLE_TIMEOUT_MS = 30_000;

/** Closes what was started so far if a later step fails, and on stop. */
class Resources {
  private readonly closers: (() => Promise<unknown>)[] = [];
  add(close: () => Promise<unknown>): void {
    this.closers.push(close);
  }
  async closeAll(): Promise<void> {
    const errors: unknown[] = [];
    for (const close of this.closers.reverse()) {
      try {
        await close();
      } catch (err) {
        errors.push(err);
      }
    }
    this.closers.length = 0;
    if (errors.length > 0) throw new AggregateError(errors, 'stopping a compat target failed');
  }
}

export function startRestateTarget(): Promise<Target> {
  return startRestateTargetServing(SERVICES);
}

export function startRatchetTarget(): Promise<Target> {
  return startRatchetTargetServing(SERVICES);
}

// ------------------------------------------------------------------------------------------------------------------
// Targets serving a suite's own services

/** The services a suite registers on every target. */
export type ServiceSet = StartEndpointOptions['services'];

/** restate-server 1.7.12 with its own SDK endpoint serving `services`. */
export async function startRestateTargetServing(services: ServiceSet): Promise<Target> {
  const resources = new Resources();
  try {
    const endpoint = await startEndpoint({ services, transport: 'h2' });
    resources.add(() => endpoint.close());
    const server = await startRestateServer();
    resources.add(() => server.stop());
    try {
      await registerEndpoint(server, endpoint, { timeoutMs: SERVICES_VISIBLE_TIMEOUT_MS });
    } catch (err) {
      throw new Error(`${String(err)}\n--- restate-server output ---\n${server.output().slice(-20_000)}`, {
        cause: err,
      });
    }
    return {
      name: 'restate',
      tag: 'via-restate',
      ingressUrl: server.ingressUrl,
      adminUrl: server.adminUrl,
      output: () => server.output(),
      stop: () => resources.closeAll(),
    };
  } catch (err) {
    await resources.closeAll().catch(() => undefined);
    throw err;
  }
}

/** Ratchet (in-process, its own database) with its own SDK endpoint serving `services`. */
export async function startRatchetTargetServing(services: ServiceSet): Promise<Target> {
  // Imported lazily: the restate half of a suite runs even while Ratchet's runtime does not build.
  const { startTestRuntime } = await import('../integration/support/runtime.ts');
  const resources = new Resources();
  try {
    const db = await createTestDatabase();
    resources.add(() => db.drop());
    const endpoint = await startEndpoint({ services, transport: 'h2' });
    resources.add(() => endpoint.close());
    const runtime = await startTestRuntime(db.url);
    resources.add(() => runtime.stop());
    await registerEndpoint(runtime, endpoint, { timeoutMs: SERVICES_VISIBLE_TIMEOUT_MS });
    return {
      name: 'ratchet',
      tag: 'via-ratchet',
      ingressUrl: runtime.ingressUrl,
      adminUrl: runtime.adminUrl,
      output: () => '',
      stop: () => resources.closeAll(),
    };
  } catch (err) {
    await resources.closeAll().catch(() => undefined);
    throw err;
  }
}

// ------------------------------------------------------------------------------------------------------------------
// Scenario runs: one script played on every target at once, each step's exchange recorded

/** One target's run of a scenario: each step's exchange (a poll keeps its last), and what stopped it early. */
export class RecordedRun {
  readonly steps = new Map<string, Exchange>();
  /** What stopped the script early (a poll that timed out, a request that failed, a missing id). */
  error: Error | undefined = undefined;

  constructor(
    readonly target: Target,
    private readonly requestTimeoutMs = 20_000,
  ) {}

  get tag(): string {
    return this.target.tag;
  }

  /** Sends `request` to `baseUrl` and records the exchange as `step`. */
  protected async exchange(step: string, baseUrl: string, request: HttpRequest): Promise<Exchange> {
    const response = await httpRequest(baseUrl, request, this.requestTimeoutMs);
    const x: Exchange = { target: this.target.name, request, response };
    this.steps.set(step, x);
    return x;
  }
}

/** Every recorded step of a run, and what stopped it, for failure messages. */
export function dumpRun(run: RecordedRun): string {
  const steps = [...run.steps].map(([step, x]) => `# ${step}\n${describeExchange(x)}`);
  return [...steps, ...(run.error === undefined ? [] : [`# stopped: ${run.error.message}`])].join('\n\n');
}

/**
 * Plays `script` on every run at once (each run's steps in order). restate-server's run must get through it; a
 * Ratchet run that stops early keeps its error for the comparison to report.
 */
export async function playRuns<R extends RecordedRun>(
  runs: R[],
  script: (run: R) => Promise<void>,
): Promise<Map<TargetName, R>> {
  await Promise.all(
    runs.map(async (run) => {
      try {
        await script(run);
      } catch (err) {
        run.error = err instanceof Error ? err : new Error(String(err));
      }
    }),
  );
  const ref = runs.find((r) => r.target.name === 'restate');
  if (ref !== undefined && ref.error !== undefined) {
    throw new Error(`the restate-server run stopped early\n${dumpRun(ref)}`, { cause: ref.error });
  }
  return new Map(runs.map((r) => [r.target.name, r]));
}

export interface UseTargetsOptions {
  /** Runs before the targets stop (e.g. release handlers still waiting, whose streams would keep them busy). */
  readonly beforeStop?: () => void;
  /** More things to close with the targets (read when stopping: they may be created during the tests). */
  readonly alsoClose?: () => readonly Promise<unknown>[];
}

/**
 * The selected targets of one compat file: started before its tests (all or none), stopped after them, and
 * restate-server's recent output printed when a test fails.
 */
export function useTargets(
  start: (name: TargetName) => Promise<Target>,
  options: UseTargetsOptions = {},
): Map<TargetName, Target> {
  const targets = new Map<TargetName, Target>();

  async function stopAll(): Promise<void> {
    options.beforeStop?.();
    const stopping = [...targets.values()].map((t) => t.stop());
    targets.clear();
    const results = await Promise.allSettled([...stopping, ...(options.alsoClose?.() ?? [])]);
    const errors = results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => r.reason as unknown);
    if (errors.length > 0) throw new AggregateError(errors, 'stopping the compat targets failed');
  }

  beforeAll(async () => {
    const started = await Promise.allSettled(selectedTargets().map(start));
    for (const s of started) if (s.status === 'fulfilled') targets.set(s.value.name, s.value);
    const failed = started.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed.length > 0) {
      await stopAll();
      throw failed.length === 1 ? failed[0]!.reason : new AggregateError(failed.map((f) => f.reason as unknown));
    }
  });
  afterAll(stopAll);
  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => {
      const out = targets.get('restate')?.output();
      if (out !== undefined) console.error(`--- restate-server output (last 10 kB) ---\n${out.slice(-10_000)}`);
    });
  });
  return targets;
}
