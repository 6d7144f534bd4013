import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRecordingProxy, type RecordingProxy } from '../support/aws-recording-proxy.ts';
import { LOCAL_ACCOUNT, startLocalLambda, type LocalLambda } from '../support/lambda.ts';
import { createTestDatabase } from '../support/postgres.ts';
import { startRestateServer } from '../support/restate-server.ts';
import { startRuntimeProcess } from '../support/runtime-process.ts';
import { parseAuthorization, startFakeSts, type FakeSts } from '../support/sts.ts';
import { waitFor } from '../support/wait.ts';
import { httpRequest, INVOCATION_ID, selectedTargets, type HttpRequest, type TargetName } from './targets.ts';

/**
 * Lambda deployments, restate-server 1.7.12 vs Ratchet. One serverless-offline serves two Restate SDK Lambda
 * functions; each target has its own recording proxy in front of it (`AWS_ENDPOINT_URL_LAMBDA`) and its own fake STS
 * (`AWS_ENDPOINT_URL_STS`, which restate's AWS SDK honours too), static credentials in the standard AWS environment,
 * and the same cluster name. The same scenario runs on both: ARN refusals, an unknown function, registration and the
 * deployment views, the Lambda requests as the proxy saw them (URL, signing, restate's event, the journal frames in
 * the event body), ingress results, and a deployment with `assume_role_arn`.
 *
 * Set up to be comparable: restate-server runs with `experimental-enable-protocol-v7` (without it, it negotiates V6
 * where Ratchet negotiates V7) and with `aws-assume-role-external-id` = the cluster name (without it restate sends no
 * ExternalId; Ratchet always sends the cluster name, specification 4.7).
 *
 * Differences, asserted as such below:
 * - META0003 text: restate's is "[META0003] [META0003] error when calling '<arn>': lambda service returned error: …"
 *   followed by the Rust SDK's debug output; Ratchet's names AWS's error once and hints at the fix. Common: the
 *   code, "error when calling '<arn>'" and "ResourceNotFoundException: Function not found: <arn>".
 * - restate retries a failing discovery (several invokes with backoff before answering); Ratchet invokes once.
 * - An ARN whose account id is not 12 digits: Ratchet refuses it (400, as AWS would); restate invokes Lambda with it.
 * - Registering the same ARN again: restate answers from its schema; Ratchet discovers again (the same deliberate
 *   difference as for HTTP deployments, see registration.compat.test.ts).
 * - Ratchet's invocation events carry a `traceparent` header; restate's (no tracing configured) do not.
 * - The AWS SDKs differ (Rust vs JavaScript): Ratchet's Invoke also sends `x-amz-invocation-type: RequestResponse`
 *   (restate relies on it being Lambda's default) and `x-amz-content-sha256`.
 * - AssumeRole: restate's RoleSessionName is `restate-<unix seconds>`, it sends no DurationSeconds, and it calls STS
 *   once per Lambda client (discovery does not cache, the invoker does); Ratchet's is `ratchet-<cluster>`,
 *   DurationSeconds 3600, and one call cached per role for discovery and invocations.
 *
 * Not comparable here: real AWS (IAM policies on lambda:InvokeFunction, resolving aliases and `$LATEST` to versions,
 * the 6 MB payload limit, throttling, cold starts, cross-region calls); the credential chain beyond environment
 * variables (IRSA web identity, EKS pod identity, ECS/EC2 metadata: nothing on the test machine serves them);
 * refreshing assumed credentials before they expire (STS's minimum lifetime is 15 minutes and restate's refresh is
 * internal to its SDK); Lambda function errors and AWS refusals during invocations (each side's retry and error
 * wording is covered by its own tests).
 */

const REGION = 'eu-central-1';
/** restate-server's cluster name in the generated config; Ratchet is given the same. */
const CLUSTER = 'ratchet-compat';
const BASE = { accessKeyId: 'AKIDCOMPATLAMBDA01', secretAccessKey: 'compat-lambda-secret' };
const ROLE_ARN = `arn:aws:iam::${LOCAL_ACCOUNT}:role/restate-invoker`;

const SERVICES = `
import * as restate from '@restatedev/restate-sdk/lambda';
const greeter = restate.service({
  name: 'LambdaGreeter',
  handlers: {
    greet: async (ctx, name) => {
      const upper = await ctx.run('upper', () => String(name).toUpperCase());
      await ctx.sleep(200);
      return 'Hello ' + upper;
    },
  },
});
const counter = restate.object({
  name: 'LambdaCounter',
  handlers: {
    add: async (ctx, n) => {
      const value = ((await ctx.get('value')) ?? 0) + n;
      ctx.set('value', value);
      return value;
    },
    get: restate.handlers.object.shared(async (ctx) => (await ctx.get('value')) ?? 0),
  },
});
export const handler = restate.createEndpointHandler({ services: [greeter, counter] });
`;

const ASSUMED = `
import * as restate from '@restatedev/restate-sdk/lambda';
const assumed = restate.service({
  name: 'AssumedGreeter',
  handlers: { greet: async (_ctx, name) => 'Hi ' + name },
});
export const handler = restate.createEndpointHandler({ services: [assumed] });
`;

// --------------------------------------------------------------------------------------------------------------------
// Targets

/** A Lambda Invoke request as one target's proxy received it. */
interface CapturedInvoke {
  /** The URL path as received (still percent-encoded). */
  readonly path: string;
  readonly query: string;
  readonly functionName: string;
  readonly headers: Record<string, string>;
  readonly accessKeyId: string | undefined;
  readonly sessionToken: string | undefined;
  /** The Invoke payload: restate's API-Gateway-like event. */
  readonly event: Record<string, unknown>;
}

interface LambdaTarget {
  readonly name: TargetName;
  readonly adminUrl: string;
  readonly ingressUrl: string;
  readonly proxy: RecordingProxy;
  readonly sts: FakeSts;
  readonly invokes: CapturedInvoke[];
  output(): string;
  stop(): Promise<void>;
}

const names = selectedTargets();
const targets = new Map<TargetName, LambdaTarget>();
const lab: { lambda?: LocalLambda } = {};

function lambda(): LocalLambda {
  return lab.lambda!;
}

function awsEnv(proxy: RecordingProxy, sts: FakeSts): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_LAMBDA: proxy.url,
    AWS_ENDPOINT_URL_STS: sts.url,
    AWS_ACCESS_KEY_ID: BASE.accessKeyId,
    AWS_SECRET_ACCESS_KEY: BASE.secretAccessKey,
    AWS_REGION: REGION,
    // No shared config or instance metadata on the test machine: only the environment's credentials.
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

async function startTarget(name: TargetName, local: LocalLambda): Promise<LambdaTarget> {
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async (): Promise<void> => {
    const errors: unknown[] = [];
    for (const close of closers.reverse()) await close().catch((err: unknown) => errors.push(err));
    closers.length = 0;
    if (errors.length > 0) throw new AggregateError(errors, `stopping the ${name} target failed`);
  };
  try {
    // The role's trust policy requires the cluster name as external id: both must send it.
    const sts = await startFakeSts({ callers: [BASE], roles: { [ROLE_ARN]: { externalId: CLUSTER } }, region: REGION });
    closers.push(() => sts.stop());
    const invokes: CapturedInvoke[] = [];
    const proxy = await startRecordingProxy({
      target: local.url,
      region: REGION,
      // Base credentials, or ones this target's STS issued; anything else is refused as Lambda would.
      verify: (key) => (key === BASE.accessKeyId ? BASE.secretAccessKey : sts.issued(key)),
      enforce: true,
      // Sees every request before it is forwarded: keeps what the recording leaves out (headers, payload).
      respond: (req) => {
        if (req.functionName === undefined) return undefined;
        const headers = Object.fromEntries(
          Object.entries(req.headers).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : [])),
        );
        const auth = parseAuthorization(Object.entries(headers).flat());
        invokes.push({
          path: req.path,
          query: req.query.toString(),
          functionName: req.functionName,
          headers,
          accessKeyId: auth.ok ? auth.authorization.accessKeyId : undefined,
          sessionToken: auth.ok ? auth.authorization.sessionToken : undefined,
          event: JSON.parse(req.body.toString('utf8')) as Record<string, unknown>,
        });
        return undefined;
      },
    });
    closers.push(() => proxy.stop());
    const env = awsEnv(proxy, sts);
    if (name === 'restate') {
      const server = await startRestateServer({
        env,
        enableProtocolV7: true,
        config: { 'aws-assume-role-external-id': CLUSTER },
      });
      closers.push(() => server.stop());
      return {
        name,
        adminUrl: server.adminUrl,
        ingressUrl: server.ingressUrl,
        proxy,
        sts,
        invokes,
        output: () => server.output(),
        stop: closeAll,
      };
    }
    const db = await createTestDatabase();
    closers.push(() => db.drop());
    const runtime = await startRuntimeProcess({ databaseUrl: db.url, env: { ...env, RATCHET_CLUSTER_NAME: CLUSTER } });
    closers.push(() => runtime.stop());
    return {
      name,
      adminUrl: runtime.adminUrl,
      ingressUrl: runtime.ingressUrl,
      proxy,
      sts,
      invokes,
      output: () => runtime.output(),
      stop: closeAll,
    };
  } catch (err) {
    await closeAll().catch(() => undefined);
    throw err;
  }
}

beforeAll(async () => {
  lab.lambda = await startLocalLambda({
    functions: { services: SERVICES, assumed: ASSUMED },
    qualifiers: { services: 'live', assumed: '3' },
    region: REGION,
  });
  const started = await Promise.allSettled(names.map((n) => startTarget(n, lambda())));
  for (const s of started) if (s.status === 'fulfilled') targets.set(s.value.name, s.value);
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}, 120_000);

afterAll(async () => {
  const results = await Promise.allSettled([...targets.values()].map((t) => t.stop()));
  await lab.lambda?.stop();
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
});

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    for (const t of targets.values()) {
      console.error(`--- ${t.name} output (last 10 kB) ---\n${t.output().slice(-10_000)}`);
    }
  });
});

// --------------------------------------------------------------------------------------------------------------------
// Comparison

const DEPLOYMENT_ID = /^dp_1[0-9A-Za-z]{22}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;

function normalizeJson(value: unknown): unknown {
  if (typeof value === 'string') {
    if (DEPLOYMENT_ID.test(value)) return '<deployment-id>';
    if (TIMESTAMP.test(value)) return '<timestamp>';
    if (INVOCATION_ID.test(value)) return '<invocation-id>';
    return value;
  }
  if (Array.isArray(value)) {
    const items = value.map(normalizeJson);
    // restate lists services and deployments in hash order: compare them sorted by name (or arn).
    for (const key of ['name', 'arn']) {
      const sortKey = (i: unknown): string | undefined =>
        typeof i === 'object' && i !== null ? ((i as Record<string, unknown>)[key] as string | undefined) : undefined;
      if (items.length > 0 && items.every((i) => typeof sortKey(i) === 'string')) {
        return [...items].sort((a, b) => sortKey(a)!.localeCompare(sortKey(b)!));
      }
    }
    return items;
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        // Ratchet mirrors restate_code as service_code (the specification's name); restate has only the former.
        .filter(([k]) => k !== 'service_code')
        .map(([k, v]) => [k, normalizeJson(v)]),
    );
  }
  return value;
}

interface Answer {
  status: number;
  contentType: string | undefined;
  /** The JSON body normalized, as text (so key order counts). */
  json: string;
  body: Record<string, unknown>;
  text: string;
}

async function send(baseUrl: string, request: HttpRequest): Promise<Answer> {
  const res = await httpRequest(baseUrl, request);
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(res.text) as Record<string, unknown>;
  } catch {
    // not JSON: compared as text
  }
  return {
    status: res.status,
    contentType: res.headers['content-type'],
    json: JSON.stringify(normalizeJson(body)),
    body,
    text: res.text,
  };
}

function post(path: string, body: unknown): HttpRequest {
  return { method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

function get(path: string): HttpRequest {
  return { method: 'GET', path };
}

/** The same request to every target's admin API, one after the other. */
async function onAdmins(request: HttpRequest | ((t: LambdaTarget) => HttpRequest)): Promise<Map<TargetName, Answer>> {
  const out = new Map<TargetName, Answer>();
  for (const t of targets.values()) {
    out.set(t.name, await send(t.adminUrl, typeof request === 'function' ? request(t) : request));
  }
  return out;
}

function describeAnswers(answers: Map<TargetName, Answer>): string {
  return [...answers].map(([n, a]) => `[${n}] ${a.status} ${a.text.slice(0, 3000)}`).join('\n');
}

/** Every target answered `status`; with both, the same content type and normalized JSON. */
function expectAgree(answers: Map<TargetName, Answer>, status: number): Answer[] {
  const list = [...answers.values()];
  for (const a of list) expect(a.status, describeAnswers(answers)).toBe(status);
  const [a, b] = list;
  if (a !== undefined && b !== undefined) {
    expect(b.contentType, describeAnswers(answers)).toBe(a.contentType);
    expect(b.json, describeAnswers(answers)).toBe(a.json);
  }
  return list;
}

/** With both targets, `of(ratchet)` equals `of(restate)`; returns every target's value. */
function agree<T>(of: (t: LambdaTarget) => T, what: string): Map<TargetName, T> {
  const values = new Map([...targets.values()].map((t) => [t.name, of(t)]));
  const restate = values.get('restate');
  const ratchet = values.get('ratchet');
  if (restate !== undefined && ratchet !== undefined) expect(ratchet, what).toEqual(restate);
  return values;
}

function invokesOf(t: LambdaTarget, arn: string, eventPath?: string): CapturedInvoke[] {
  return t.invokes.filter((c) => c.functionName === arn && (eventPath === undefined || c.event['path'] === eventPath));
}

/**
 * What must agree about one event: its keys in order, path, method, base64 flag, and its headers sorted by name with
 * ids reduced to their shape (Ratchet's `traceparent` left out: a listed difference).
 */
function eventShape(event: Record<string, unknown>): Record<string, unknown> {
  const headers = event['headers'] as Record<string, string>;
  return {
    keys: Object.keys(event),
    path: event['path'],
    httpMethod: event['httpMethod'],
    isBase64Encoded: event['isBase64Encoded'],
    headers: Object.fromEntries(
      Object.entries(headers)
        .filter(([k]) => k !== 'traceparent')
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, INVOCATION_ID.test(v) ? '<invocation-id>' : v]),
    ),
  };
}

interface Frame {
  type: number;
  flags: number;
  bytes: Buffer;
}

/** The service-protocol frames of an event's base64 body (8-byte header: u16 type, u16 flags, u32 length). */
function frames(event: Record<string, unknown>): Frame[] {
  const body = event['body'];
  expect(typeof body).toBe('string');
  expect(body).toMatch(/^[A-Za-z0-9+/]*={0,2}$/);
  const bytes = Buffer.from(body as string, 'base64');
  const out: Frame[] = [];
  for (let at = 0; at < bytes.length;) {
    expect(bytes.length - at).toBeGreaterThanOrEqual(8);
    const length = bytes.readUInt32BE(at + 4);
    out.push({
      type: bytes.readUInt16BE(at),
      flags: bytes.readUInt16BE(at + 2),
      bytes: bytes.subarray(at, at + 8 + length),
    });
    at += 8 + length;
  }
  return out;
}

const START_MESSAGE = 0x0000;
const INPUT_COMMAND = 0x0400;

async function waitForServices(t: LambdaTarget, services: string[]): Promise<void> {
  await waitFor(async () => {
    const health = await fetch(`${t.ingressUrl}/restate/health`);
    const listed = health.ok ? ((await health.json()) as { services?: unknown }).services : undefined;
    const missing = services.filter((s) => !(Array.isArray(listed) && listed.includes(s)));
    if (missing.length > 0) throw new Error(`${t.name}'s ingress does not list ${missing.join(', ')} yet`);
  }, 30_000);
}

async function onIngresses(path: string, body: unknown): Promise<Map<TargetName, Answer>> {
  const out = new Map<TargetName, Answer>();
  await Promise.all(
    [...targets.values()].map(async (t) => out.set(t.name, await send(t.ingressUrl, post(path, body)))),
  );
  return out;
}

// --------------------------------------------------------------------------------------------------------------------
// Scenario (in order: later steps build on earlier registrations)

describe.sequential('Lambda deployments, restate-server 1.7.12 vs Ratchet', () => {
  const ids = new Map<TargetName, string>();

  it('refuses unqualified and malformed function ARNs with the same status and message, without calling Lambda', async () => {
    const refused = [
      `arn:aws:lambda:${REGION}:${LOCAL_ACCOUNT}:function:${lambda().functionName('services')}`,
      `arn:aws:lambda:${REGION}:${LOCAL_ACCOUNT}:function:f:`,
      'nope',
      `xrn:aws:lambda:${REGION}:${LOCAL_ACCOUNT}:function:f:1`,
      `arn:aws:s3:${REGION}:${LOCAL_ACCOUNT}:function:f:1`,
      `arn:aws:lambda:${REGION}:${LOCAL_ACCOUNT}:layer:f:1`,
      `arn::lambda:${REGION}:${LOCAL_ACCOUNT}:function:f:1`,
      // Several faults at once: the message of the first check restate makes.
      `arn:aws:s3:${REGION}:${LOCAL_ACCOUNT}:layer:f:1`,
      `arn:aws:s3:${REGION}:${LOCAL_ACCOUNT}:layer:f`,
      `arn::lambda::${LOCAL_ACCOUNT}:function:f:`,
      `xrn:aws:s3:${REGION}:${LOCAL_ACCOUNT}:function:f:1`,
    ];
    for (const arn of refused) {
      const [answer] = expectAgree(await onAdmins(post('/deployments', { arn })), 400);
      expect(answer!.body).toMatchObject({ restate_code: null });
      expect(String(answer!.body['message'])).toMatch(/^The request field 'arn' is invalid\. Reason: /);
    }
    const [unqualified] = expectAgree(await onAdmins(post('/deployments', { arn: refused[0] })), 400);
    expect(unqualified!.body['message']).toBe(
      "The request field 'arn' is invalid. Reason: A qualified ARN needs a version or alias suffix. If you want to " +
        "use the unpublished version, provide $LATEST and make sure your shell doesn't treat it as a variable",
    );
    for (const t of targets.values()) expect(t.invokes, t.name).toEqual([]);

    // Listed difference: an account id that is not 12 digits. Ratchet refuses it as AWS would; restate invokes Lambda.
    const badAccount = `arn:aws:lambda:${REGION}:12345:function:f:1`;
    const answers = await onAdmins(post('/deployments', { arn: badAccount }));
    const ratchet = answers.get('ratchet');
    if (ratchet !== undefined) {
      expect(ratchet.status).toBe(400);
      expect(ratchet.body['message']).toBe(
        "The request field 'arn' is invalid. Reason: the account ID '12345' is not an AWS account ID (12 digits)",
      );
    }
    const restate = answers.get('restate');
    if (restate !== undefined) {
      expect(restate.status).toBe(500);
      expect(restate.body['restate_code']).toBe('META0003');
      expect(String(restate.body['message'])).toContain(`ResourceNotFoundException: Function not found: ${badAccount}`);
    }
  });

  it('an unknown function: both 500 META0003 naming the function and ResourceNotFoundException', async () => {
    const missing = `arn:aws:lambda:${REGION}:${LOCAL_ACCOUNT}:function:${lambda().functionName('missing')}:1`;
    const answers = await onAdmins(post('/deployments', { arn: missing }));
    for (const [name, a] of answers) {
      expect(a.status, `${name}: ${a.text}`).toBe(500);
      expect(a.contentType).toBe('application/json');
      expect(a.body['restate_code']).toBe('META0003');
      expect(Object.keys(normalizeJson(a.body) as object)).toEqual(['message', 'restate_code']);
      // Only what both texts share: restate repeats the code and appends the Rust SDK's debug output.
      const message = String(a.body['message']);
      expect(message).toMatch(/^\[META0003\] /);
      expect(message).toContain(`error when calling '${missing}': `);
      expect(message).toContain(`ResourceNotFoundException: Function not found: ${missing}`);
    }
    if (answers.has('restate')) expect(answers.get('restate')!.body['message']).toMatch(/^\[META0003\] \[META0003\] /);
    // Listed difference: restate retries the discovery with backoff before answering; Ratchet invokes once.
    for (const t of targets.values()) {
      const discoveries = invokesOf(t, missing, '/discover');
      if (t.name === 'restate') expect(discoveries.length).toBeGreaterThan(1);
      else expect(discoveries).toHaveLength(1);
    }
  });

  it('registers the qualified ARN: 201, then 200 with the same id', async () => {
    const arn = lambda().arn('services');
    const created = await onAdmins(post('/deployments', { arn }));
    expectAgree(created, 201);
    for (const [name, a] of created) {
      expect(a.body['id'], name).toMatch(DEPLOYMENT_ID);
      expect(Object.keys(a.body)).toEqual([
        'id',
        'services',
        'min_protocol_version',
        'max_protocol_version',
        'sdk_version',
      ]);
      ids.set(name, String(a.body['id']));
    }
    const again = await onAdmins(post('/deployments', { arn }));
    expectAgree(again, 200);
    for (const [name, a] of again) expect(a.body['id'], name).toBe(ids.get(name));
    // Listed difference: restate answers a re-registration from its schema; Ratchet discovers again.
    for (const t of targets.values()) {
      expect(invokesOf(t, arn, '/discover'), t.name).toHaveLength(t.name === 'restate' ? 1 : 2);
    }
    for (const t of targets.values()) await waitForServices(t, ['LambdaGreeter', 'LambdaCounter']);
  });

  it('lists and details the Lambda deployment and its services in the same shapes', async () => {
    const [list] = expectAgree(await onAdmins(get('/deployments')), 200);
    const deployments = list!.body['deployments'] as Record<string, unknown>[];
    expect(deployments).toHaveLength(1);
    expect(Object.keys(deployments[0]!)).toEqual([
      'id',
      'arn',
      'created_at',
      'min_protocol_version',
      'max_protocol_version',
      'sdk_version',
      'services',
    ]);
    expect(deployments[0]).toMatchObject({ arn: lambda().arn('services') });
    const [detail] = expectAgree(await onAdmins((t) => get(`/deployments/${ids.get(t.name)}`)), 200);
    expect(detail!.body).toMatchObject({ arn: lambda().arn('services'), min_protocol_version: 5 });
    expect(detail!.body).not.toHaveProperty('uri');
    expect(detail!.body).not.toHaveProperty('assume_role_arn');
    expectAgree(await onAdmins(get('/services')), 200);
    expectAgree(await onAdmins(get('/services/LambdaCounter')), 200);
  });

  it('Invoke requests: the function by its qualified ARN in the URL, SigV4 with the environment key', () => {
    const arn = lambda().arn('services');
    agree((t) => {
      const invokes = invokesOf(t, arn);
      expect(invokes.length, t.name).toBeGreaterThan(0);
      // Every request of this target (all functions so far) was signed with the environment's key, and it held.
      expect(t.proxy.requests.every((r) => r.accessKeyId === BASE.accessKeyId && r.signature === 'valid')).toBe(true);
      expect(t.proxy.requests.every((r) => r.sessionToken === undefined)).toBe(true);
      const first = invokes[0]!;
      return {
        path: first.path,
        query: first.query,
        contentType: first.headers['content-type'],
        sdkRequest: first.headers['amz-sdk-request'],
        logType: first.headers['x-amz-log-type'],
        clientContext: first.headers['x-amz-client-context'],
        accessKeyId: first.accessKeyId,
      };
    }, 'the Invoke request');
    for (const t of targets.values()) {
      const first = invokesOf(t, arn)[0]!;
      expect(first.path).toBe(`/2015-03-31/functions/${encodeURIComponent(arn)}/invocations`);
      expect(first.query).toBe('');
      // Neither lets its AWS SDK retry: the runtime's own retry policy decides.
      expect(first.headers['amz-sdk-request']).toBe('attempt=1; max=1');
      // Listed difference (SDKs): Ratchet names the invocation type; restate leaves Lambda's default.
      expect(first.headers['x-amz-invocation-type']).toBe(t.name === 'ratchet' ? 'RequestResponse' : undefined);
    }
  });

  it('the discovery event: same keys, path, method, headers and an empty base64 body', () => {
    const [shape] = [
      ...agree((t) => {
        const discovery = invokesOf(t, lambda().arn('services'), '/discover')[0]!;
        expect(discovery.event['body']).toBe('');
        return eventShape(discovery.event);
      }, 'the discovery event').values(),
    ];
    expect(shape).toEqual({
      keys: ['path', 'httpMethod', 'headers', 'body', 'isBase64Encoded'],
      path: '/discover',
      httpMethod: 'GET',
      isBase64Encoded: true,
      headers: {
        accept: [1, 2, 3, 4].map((v) => `application/vnd.restate.endpointmanifest.v${v}+json`).join(', '),
        'x-restate-cluster-name': CLUSTER,
      },
    });
  });

  it('ctx.run + sleep: the same result; both suspend and invoke the function again with the same journal frames', async () => {
    const arn = lambda().arn('services');
    const before = new Map([...targets.values()].map((t) => [t.name, t.invokes.length]));
    const [greeted] = expectAgree(await onIngresses('/LambdaGreeter/greet', 'lambda'), 200);
    expect(greeted!.text).toBe('"Hello LAMBDA"');

    const shapes = agree((t) => {
      const invokes = t.invokes.slice(before.get(t.name)).filter((c) => c.functionName === arn);
      // At least the first invoke (runs `upper`, suspends) and the one after the timer; all for one invocation.
      expect(invokes.length, t.name).toBeGreaterThanOrEqual(2);
      const invocationIds = new Set(
        invokes.map((c) => (c.event['headers'] as Record<string, string>)['x-restate-invocation-id']),
      );
      expect(invocationIds.size).toBe(1);
      expect([...invocationIds][0]).toMatch(INVOCATION_ID);
      return invokes.map((c) => {
        const f = frames(c.event);
        expect(f[0]?.type).toBe(START_MESSAGE);
        return { event: eventShape(c.event), frames: f.map(({ type, flags }) => ({ type, flags })) };
      });
    }, 'the invoke events of LambdaGreeter/greet and the types of their journal frames');
    const shape = [...shapes.values()][0]!;
    expect(shape[0]!.event).toEqual({
      keys: ['path', 'httpMethod', 'headers', 'body', 'isBase64Encoded'],
      path: '/invoke/LambdaGreeter/greet',
      httpMethod: 'POST',
      isBase64Encoded: true,
      headers: {
        accept: 'application/vnd.restate.invocation.v7',
        'content-type': 'application/vnd.restate.invocation.v7',
        'x-restate-cluster-name': CLUSTER,
        'x-restate-invocation-id': '<invocation-id>',
      },
    });
    // The input command the SDK replays is byte for byte the same on both.
    agree((t) => {
      const first = t.invokes.slice(before.get(t.name)).find((c) => c.functionName === arn)!;
      return frames(first.event)
        .find((f) => f.type === INPUT_COMMAND)
        ?.bytes.toString('base64');
    }, 'the InputCommand frame');
    // Listed difference: Ratchet's events carry W3C trace context; restate's (no tracing configured) do not.
    for (const t of targets.values()) {
      const headers = t.invokes.slice(before.get(t.name)).find((c) => c.functionName === arn)!.event['headers'];
      if (t.name === 'ratchet') expect(headers).toHaveProperty('traceparent');
      else expect(headers).not.toHaveProperty('traceparent');
    }
  });

  it('a virtual object keeps its state between invocations, with the key in the event', async () => {
    const arn = lambda().arn('services');
    const before = new Map([...targets.values()].map((t) => [t.name, t.invokes.length]));
    for (const [n, total] of [
      [2, '2'],
      [3, '5'],
    ] as const) {
      const [added] = expectAgree(await onIngresses('/LambdaCounter/c1/add', n), 200);
      expect(added!.text).toBe(total);
    }
    const [got] = expectAgree(await onIngresses('/LambdaCounter/c1/get', null), 200);
    expect(got!.text).toBe('5');
    const shapes = agree(
      (t) =>
        t.invokes
          .slice(before.get(t.name))
          .filter((c) => c.functionName === arn)
          .map((c) => ({
            event: eventShape(c.event),
            frames: frames(c.event).map(({ type, flags }) => ({ type, flags })),
          })),
      'the invoke events of LambdaCounter',
    );
    const shape = [...shapes.values()][0]!;
    expect(shape.map((s) => s.event['path'])).toEqual([
      '/invoke/LambdaCounter/add',
      '/invoke/LambdaCounter/add',
      '/invoke/LambdaCounter/get',
    ]);
    for (const s of shape) expect(s.event['headers']).toMatchObject({ 'x-restate-service-key': 'c1' });
  });

  it('assume_role_arn: AssumeRole with the base key and the cluster name as ExternalId, Lambda with the session', async () => {
    const arn = lambda().arn('assumed');
    const answers = await onAdmins(post('/deployments', { arn, assume_role_arn: ROLE_ARN }));
    expectAgree(answers, 201);
    for (const t of targets.values()) await waitForServices(t, ['AssumedGreeter']);
    const [greeted] = expectAgree(await onIngresses('/AssumedGreeter/greet', 'x'), 200);
    expect(greeted!.text).toBe('"Hi x"');
    // restate's deployment views show no trace of the role either.
    expectAgree(await onAdmins(get('/deployments')), 200);
    expectAgree(await onAdmins((t) => get(`/deployments/${String(answers.get(t.name)!.body['id'])}`)), 200);

    agree((t) => {
      expect(t.sts.calls.length, t.name).toBeGreaterThan(0);
      for (const call of t.sts.calls) {
        expect(call).toMatchObject({
          action: 'AssumeRole',
          roleArn: ROLE_ARN,
          externalId: CLUSTER,
          callerAccessKeyId: BASE.accessKeyId,
          region: REGION,
          outcome: 'issued',
        });
      }
      const invokes = invokesOf(t, arn);
      expect(invokes.map((c) => c.event['path'])).toEqual(['/discover', '/invoke/AssumedGreeter/greet']);
      // Each Invoke is signed with credentials this STS issued (the proxy checked signature and session token).
      for (const c of invokes) {
        const issued = t.sts.issued(c.accessKeyId ?? '');
        expect(issued?.roleArn).toBe(ROLE_ARN);
        expect(c.sessionToken).toBe(issued?.sessionToken);
      }
      const recorded = t.proxy.requests.filter((r) => r.functionName === arn);
      expect(recorded.map((r) => r.signature)).toEqual(['valid', 'valid']);
      return { externalIds: [...new Set(t.sts.calls.map((c) => c.externalId))] };
    }, 'the AssumeRole calls');

    // Listed differences: session name, duration, and how often STS is called.
    for (const t of targets.values()) {
      const calls = t.sts.calls;
      if (t.name === 'restate') {
        for (const c of calls) expect(c.roleSessionName).toMatch(/^restate-\d{10}$/);
        for (const c of calls) expect(c.durationSeconds).toBeUndefined();
        // Discovery builds an uncached client; the invoker caches its own: one AssumeRole each.
        expect(calls).toHaveLength(2);
      } else {
        for (const c of calls) expect(c.roleSessionName).toBe(`ratchet-${CLUSTER}`);
        for (const c of calls) expect(c.durationSeconds).toBe(3600);
        expect(calls).toHaveLength(1);
      }
    }
  });
});
