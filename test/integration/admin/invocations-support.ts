import http2 from 'node:http2';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { LOOPBACK } from '../../support/ports.ts';
import '../../support/polyfill.ts';

/**
 * Services and helpers of the invocation-management tests (integration and compat): handlers that hold an
 * invocation in each state the admin API distinguishes (running inside a ctx.run, suspended on an awakeable or a
 * sleep, inboxed behind a busy key, scheduled), test-side bookkeeping they report to, a reader of Ratchet's rows, a
 * raw admin client, and a deployment that only answers discovery.
 */

// --------------------------------------------------------------------------------------------------------------------
// Test-side bookkeeping the handlers report to (the endpoints run in the test process)

interface Gate {
  readonly promise: Promise<void>;
  open(): void;
}

/** Named gates a `hold` handler's ctx.run waits on; a gate opened before anyone waits lets the waiter through. */
export class Gates {
  private readonly gates = new Map<string, Gate>();
  private readonly entered = new Set<string>();

  private gate(key: string): Gate {
    let gate = this.gates.get(key);
    if (gate === undefined) {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = { promise, open };
      this.gates.set(key, gate);
    }
    return gate;
  }

  wait(key: string): Promise<void> {
    this.entered.add(key);
    return this.gate(key).promise;
  }

  /** A handler is (or was) waiting at gate `key`: its attempt is inside the ctx.run. */
  reached(key: string): boolean {
    return this.entered.has(key);
  }

  open(key: string): void {
    this.gate(key).open();
  }

  /** Lets every ctx.run still waiting finish, so no closure outlives the test file. */
  openAll(): void {
    for (const gate of this.gates.values()) gate.open();
  }
}

export const gates = new Gates();

/** How often each side effect ran, by `<key>:<step>`. */
export const sideEffects = new Map<string, number>();

function bump(key: string): number {
  const n = (sideEffects.get(key) ?? 0) + 1;
  sideEffects.set(key, n);
  return n;
}

export interface Posted {
  readonly awakeableId: string;
  readonly invocationId: string;
}

/** What a `wait` handler posts (inside a ctx.run) before it blocks on its awakeable, by its input key. */
export const posted = new Map<string, Posted>();

/** The invocation id of a `nap` that journaled its first ctx.run and is about to sleep, by its input key. */
export const napping = new Map<string, string>();

// --------------------------------------------------------------------------------------------------------------------
// Services

export interface Steps {
  a: number;
  b: number;
  on: string;
}

/**
 * A plain service whose handlers stop in each state worth managing. `label` names the deployment that serves it
 * (the same service registered twice, to see which deployment ran an invocation).
 */
export function boxService(name: string, label: string) {
  return restate.service({
    name,
    handlers: {
      echo: async (_ctx: restate.Context, s: string): Promise<string> => s,
      /** Running until the test opens gate `key`: the attempt stays open inside the ctx.run. */
      hold: async (ctx: restate.Context, key: string): Promise<string> => {
        await ctx.run('hold', () => gates.wait(key));
        return `${label} held ${key}`;
      },
      /** Posts an awakeable and waits for it (suspends, on h1 at once, on h2 after the inactivity timeout). */
      wait: async (ctx: restate.Context, key: string): Promise<string> => {
        const { id, promise } = ctx.awakeable<string>();
        const invocationId = ctx.request().id;
        await ctx.run('post', () => {
          posted.set(key, { awakeableId: id, invocationId });
        });
        return `${label} got ${await promise}`;
      },
      /** A ctx.run (journal entries 1 and 2), then an hour's sleep (entry 3, never completed while a test runs). */
      nap: async (ctx: restate.Context, key: string): Promise<string> => {
        const invocationId = ctx.request().id;
        await ctx.run('start', () => {
          napping.set(key, invocationId);
        });
        await ctx.sleep(60 * 60 * 1000);
        return `${label} rested`;
      },
      /** Two side effects, counted in `sideEffects` under `<key>:first` and `<key>:second`. */
      steps: async (ctx: restate.Context, key: string): Promise<Steps> => {
        const a = await ctx.run('first', () => bump(`${key}:first`));
        const b = await ctx.run('second', () => bump(`${key}:second`));
        return { a, b, on: label };
      },
    },
  });
}

export type BoxService = ReturnType<typeof boxService>;

/** Calls `<box>/wait` request-response: killing the parent must kill this callee too. */
export function parentService(box: string) {
  return restate.service({
    name: 'Parent',
    handlers: {
      callWait: async (ctx: restate.Context, key: string): Promise<string> =>
        ctx.serviceClient<BoxService>({ name: box }).wait(key),
    },
  });
}

/** A virtual object whose exclusive handler holds the key's lock until gate `gate` opens. */
export const locker = restate.object({
  name: 'Locker',
  handlers: {
    hold: async (ctx: restate.ObjectContext, gate: string): Promise<string> => {
      await ctx.run('hold', () => gates.wait(gate));
      return `locked ${ctx.key}`;
    },
  },
});

export const flow = restate.workflow({
  name: 'Flow',
  handlers: {
    run: async (_ctx: restate.WorkflowContext, x: string): Promise<string> => `flowed ${x}`,
  },
});

// --------------------------------------------------------------------------------------------------------------------
// HTTP

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** An admin request (PATCH unless told), `path` sent as given (query string included). */
export async function admin(adminUrl: string, path: string, method = 'PATCH'): Promise<Answer> {
  return answer(await fetch(`${adminUrl}${path}`, { method }));
}

export async function ingressGet(ingressUrl: string, path: string): Promise<Answer> {
  return answer(await fetch(`${ingressUrl}${path}`));
}

/** `POST <path>/send[?query]` with a JSON body; returns the invocation id of the 202. */
export async function sendTo(ingressUrl: string, path: string, body: unknown, query = ''): Promise<string> {
  const res = await answer(
    await fetch(`${ingressUrl}${path}/send${query}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
  const id = (res.json as { invocationId?: unknown } | undefined)?.invocationId;
  if (res.status !== 202 || typeof id !== 'string') throw new Error(`send ${path} answered ${res.status}: ${res.text}`);
  return id;
}

export async function resolveAwakeable(ingressUrl: string, awakeableId: string, value: unknown): Promise<number> {
  const res = await fetch(`${ingressUrl}/restate/awakeables/${awakeableId}/resolve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(value),
  });
  await res.arrayBuffer();
  return res.status;
}

/** Restate's admin error body for an invocation-management refusal, as Ratchet sends it (with `service_code`). */
export function refusal(message: string): Record<string, unknown> {
  return { message, restate_code: null, service_code: null };
}

// --------------------------------------------------------------------------------------------------------------------
// Ratchet's rows

export interface InvocationView {
  status: string;
  deployment_id: string | null;
  protocol_version: number | null;
  restarted_from: string | null;
  invoked_by: string;
  result_kind: string | null;
  output: Buffer | null;
  failure_code: number | null;
  failure_message: string | null;
  journal_length: number;
}

export interface JournalView {
  index: number;
  entry_type: number;
  completion_id: number | null;
  signal_idx: number | null;
}

/** Journal entry types as stored (the service protocol's message types). */
export const ENTRY = {
  Input: 0x0400,
  Output: 0x0401,
  Sleep: 0x040c,
  Call: 0x040d,
  Run: 0x0411,
  RunCompletion: 0x8011,
  Signal: 0xfbff,
} as const;

/** Reads only; one per test file. */
export class Rows {
  private constructor(private readonly client: pg.Client) {}

  static async connect(url: string): Promise<Rows> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return new Rows(client);
  }

  async invocation(id: string): Promise<InvocationView | undefined> {
    const res = await this.client.query<InvocationView>(
      `SELECT status, deployment_id, protocol_version, restarted_from, invoked_by, result_kind, output, failure_code,
              failure_message, journal_length
         FROM ratchet.invocation WHERE id = $1`,
      [id],
    );
    return res.rows[0];
  }

  async status(id: string): Promise<string | undefined> {
    return (await this.invocation(id))?.status;
  }

  async journal(id: string): Promise<JournalView[]> {
    const res = await this.client.query<JournalView>(
      `SELECT index, entry_type, completion_id, signal_idx FROM ratchet.journal WHERE invocation_id = $1 ORDER BY index`,
      [id],
    );
    return res.rows;
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

// --------------------------------------------------------------------------------------------------------------------
// A deployment that answers discovery only

export interface DiscoveryOnlyDeployment {
  readonly url: string;
  /** `/invoke/...` requests seen (a resume must never reach a deployment it was refused). */
  readonly invocations: number;
  close(): Promise<void>;
}

/**
 * An h2c deployment announcing `services` (one handler `run` each) with protocol versions `min`..`max`; it answers
 * any invocation request with 500.
 */
export async function startDiscoveryOnlyDeployment(
  services: string[],
  min: number,
  max: number,
): Promise<DiscoveryOnlyDeployment> {
  const manifest = {
    protocolMode: 'BIDI_STREAM',
    minProtocolVersion: min,
    maxProtocolVersion: max,
    services: services.map((name) => ({
      name,
      ty: 'SERVICE',
      handlers: [
        {
          name: 'run',
          input: { required: false, contentType: 'application/json' },
          output: { setContentTypeIfEmpty: false, contentType: 'application/json' },
        },
      ],
    })),
  };
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer();
  let invocations = 0;
  server.on('session', (s) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
  });
  server.on('stream', (stream, headers) => {
    if (String(headers[':path']).endsWith('/discover')) {
      stream.respond({ ':status': 200, 'content-type': 'application/vnd.restate.endpointmanifest.v4+json' });
      stream.end(JSON.stringify(manifest));
      return;
    }
    invocations += 1;
    stream.respond({ ':status': 500 });
    stream.end();
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://${LOOPBACK}:${port}/`,
    get invocations() {
      return invocations;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** restate-server 1.7.12's answers to invocation management, as the admin API must give them. */
export const RESTATE_INVOCATION_MESSAGES = {
  notFound: (id: string) => `The requested invocation '${id}' does not exist`,
  alreadyCompleted: (id: string) => `The invocation '${id}' was already completed.`,
  notCompleted: (id: string) => `The invocation '${id}' is not yet completed.`,
  stillRunning: (id: string) => `The invocation '${id}' is still running.`,
  notRunning: (id: string) => `The invocation '${id}' is not running, cannot be paused.`,
  completedCannotResume: (id: string) => `The invocation '${id}' is completed, cannot be resumed.`,
  deploymentCannotChange: (id: string) =>
    `The invocation '${id}' is still running or the deployment id is not pinned yet, deployment id cannot be changed.`,
  notStartedResume: (id: string) => `The invocation '${id}' is either inboxed or scheduled, cannot be resumed.`,
  notStartedRestart: (id: string) => `The invocation '${id}' cannot be restarted because it's not running yet.`,
  workflow: (id: string) =>
    `Restarting the invocation '${id}' is not supported. Restarting workflows is not supported, and restarting ` +
    'invocations created using the old service protocol.',
  inputGone: (id: string) =>
    `The invocation '${id}' cannot be restarted because the input is not available. This indicates that the journal ` +
    'was already purged, or not retained at all.',
  prefix: (id: string) =>
    `The prefix of the journal '${id}' up to 'from' (included) contains some Commands without respective Completions.`,
  unknownDeploymentOnResume: (id: string) =>
    `The given deployment was not found when trying to resume the invocation '${id}'.`,
  unknownDeploymentOnRestart: (id: string) =>
    `The given deployment was not found when trying to restart as new the invocation '${id}'.`,
  badDeployment: (reason: string) => `The query parameter 'deployment' is invalid. Reason: ${reason}`,
  incompatible: (id: string, version: number, dp: string, min: number, max: number) =>
    `The invocation '${id}' is running on protocol version '${version}', while the chosen deployment '${dp}' ` +
    `supports the range ${min}..=${max}.`,
  badInvocationId: "The request field 'invocation_id' is invalid. Reason: unrecognized codec version",
};
