import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../support/aws-recording-proxy.ts';
import { startFakeSts, type FakeSts, type IssuedCredentials, type StsCall } from '../../support/sts.ts';
import { waitFor } from '../../support/wait.ts';
import {
  adminCall,
  BASE_CREDENTIALS,
  ingressCall,
  registerFunction,
  startLambdaLab,
  stopLambdaLab,
  type LambdaLab,
} from './support.ts';

/**
 * The credentials Lambda invokes are signed with, end to end: a runtime process with static base credentials, the
 * STS double as its STS (`AWS_ENDPOINT_URL_STS`), and the recording proxy in front of serverless-offline checking
 * every invoke's SigV4 signature against the base key or the session credentials STS issued, refusing (as Lambda
 * does) what does not hold: a wrong key, a missing or wrong session token, expired credentials.
 *
 * Issued credentials live 8 s (STS answers whole seconds, so 7 to 8), so the runtime refreshes them after about 4 s.
 */

const CLUSTER = 'lambda-lab';
const ACCOUNT = '210987654321';
const role = (name: string): string => `arn:aws:iam::${ACCOUNT}:role/${name}`;
const ROLE_ALPHA = role('ratchet-alpha');
const ROLE_BETA = role('ratchet-beta');
const ROLE_PATCH_FROM = role('ratchet-patch-from');
const ROLE_PATCH_TO = role('ratchet-patch-to');
/** Trusts another cluster's external id. */
const ROLE_FOREIGN = role('other-cluster-invoker');
/** Not in the trust map at all. */
const ROLE_UNTRUSTED = role('untrusted');
const LIFETIME_SECONDS = 8;

/** A Restate SDK Lambda handler with one service: `<service>/echo` answers its input in one invoke. */
const echo = (service: string): string => `
import * as restate from '@restatedev/restate-sdk/lambda';
const svc = restate.service({ name: '${service}', handlers: { echo: async (ctx, input) => input } });
export const handler = restate.createEndpointHandler({ services: [svc] });
`;

const FUNCTIONS = {
  plain: echo('PlainEcho'),
  alpha: echo('AlphaEcho'),
  beta: echo('BetaEcho'),
  patched: echo('PatchedEcho'),
  denied: echo('DeniedEcho'),
};

/** Waits for the wall clock itself (credentials expire by it): the one wait here that is not for an event. */
function clockPasses(at: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
}

/** The event of one invoke as the proxy saw it (the body is restate's API-Gateway-like event). */
interface SeenEvent {
  functionName: string;
  path: string;
  headers: Record<string, string>;
}

describe('Lambda credentials: base chain, AssumeRole with the cluster as external id, caching and refresh', () => {
  const lab: Partial<LambdaLab> = {};
  let sts: FakeSts;
  const events: SeenEvent[] = [];

  const arn = (fn: keyof typeof FUNCTIONS): string => lab.lambda!.arn(fn);
  const invokesOf = (fn: keyof typeof FUNCTIONS): RecordedRequest[] =>
    lab.proxy!.invocations().filter((r) => r.functionName === arn(fn));
  const assumeCalls = (roleArn: string): StsCall[] =>
    sts.calls.filter((c) => c.action === 'AssumeRole' && c.roleArn === roleArn);
  /** The session credentials a request was signed with (undefined for the base key). */
  const sessionOf = (r: RecordedRequest): IssuedCredentials | undefined =>
    r.accessKeyId === undefined ? undefined : sts.issued(r.accessKeyId);

  async function call(service: string, input: string): Promise<void> {
    const res = await ingressCall(lab.runtime!.ingressUrl, `${service}/echo`, input);
    expect(res.status, `${res.text}\n${lab.runtime!.output().slice(-3000)}`).toBe(200);
    expect(JSON.parse(res.text)).toBe(input);
  }

  /** Every invoke of `fn` was signed with a valid signature by session credentials of `roleArn`. */
  function expectSignedByRole(requests: RecordedRequest[], roleArn: string): void {
    expect(requests.length).toBeGreaterThan(0);
    for (const r of requests) {
      const session = sessionOf(r);
      expect(session?.roleArn, r.accessKeyId).toBe(roleArn);
      expect(r.sessionToken).toBe(session!.sessionToken);
      expect(r.signature).toBe('valid');
      expect(r.answeredBy).toBe('target');
      expect(r.status).toBe(200);
    }
  }

  beforeAll(async () => {
    const trusted = { externalId: CLUSTER, allowedCallers: [BASE_CREDENTIALS.accessKeyId] };
    sts = await startFakeSts({
      callers: [BASE_CREDENTIALS],
      roles: {
        [ROLE_ALPHA]: trusted,
        [ROLE_BETA]: trusted,
        [ROLE_PATCH_FROM]: trusted,
        [ROLE_PATCH_TO]: trusted,
        [ROLE_FOREIGN]: { externalId: 'another-cluster', allowedCallers: [BASE_CREDENTIALS.accessKeyId] },
      },
      credentialLifetimeSeconds: LIFETIME_SECONDS,
      // The function's region: Ratchet calls STS there.
      region: 'eu-central-1',
    });
    Object.assign(
      lab,
      await startLambdaLab({
        functions: FUNCTIONS,
        sts,
        // Everything the runtime logs, so that the check for secrets in its output covers its debug lines too.
        env: { RATCHET_LOG_LEVEL: 'debug' },
        proxy: {
          verify: (id) =>
            sts.issued(id) ?? (id === BASE_CREDENTIALS.accessKeyId ? BASE_CREDENTIALS.secretAccessKey : undefined),
          enforce: true,
        },
      }),
    );
    lab.proxy!.respondWith((req) => {
      if (req.functionName !== undefined) {
        const event = JSON.parse(req.body.toString('utf8')) as { path: string; headers: Record<string, string> };
        events.push({ functionName: req.functionName, path: event.path, headers: event.headers });
      }
      return undefined;
    });
  }, 120_000);

  afterAll(async () => {
    await stopLambdaLab(lab);
    await sts?.stop();
  });

  it('invokes a function registered without a role with the base credentials, no STS call', async () => {
    const stsBefore = sts.calls.length;
    await registerFunction(lab.runtime!.adminUrl, { arn: arn('plain') });
    await call('PlainEcho', 'plain');
    const invokes = invokesOf('plain');
    expect(invokes.length).toBeGreaterThanOrEqual(2);
    for (const r of invokes) {
      expect(r.accessKeyId).toBe(BASE_CREDENTIALS.accessKeyId);
      expect(r.sessionToken).toBeUndefined();
      expect(r.signature).toBe('valid');
      expect(r.status).toBe(200);
    }
    expect(sts.calls.length).toBe(stsBefore);
  });

  it('assumes the role with ExternalId = cluster name, signed with the base key; discovery and invocations are signed with the assumed credentials', async () => {
    const id = await registerFunction(lab.runtime!.adminUrl, { arn: arn('alpha'), assume_role_arn: ROLE_ALPHA });
    const detail = await adminCall(lab.runtime!.adminUrl, 'GET', `/deployments/${id}`);
    expect(detail.json).toMatchObject({ id, arn: arn('alpha'), assume_role_arn: ROLE_ALPHA });
    await call('AlphaEcho', 'first');

    const calls = assumeCalls(ROLE_ALPHA);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      roleArn: ROLE_ALPHA,
      externalId: CLUSTER,
      roleSessionName: `ratchet-${CLUSTER}`,
      durationSeconds: 3600,
      callerAccessKeyId: BASE_CREDENTIALS.accessKeyId,
      region: 'eu-central-1',
      status: 200,
      outcome: 'issued',
    });
    const issued = calls[0]!.credentials!;
    const invokes = invokesOf('alpha');
    // Discovery, then the invocation.
    expect(invokes).toHaveLength(2);
    expect(events.filter((e) => e.functionName === arn('alpha')).map((e) => e.path)).toEqual([
      '/discover',
      '/invoke/AlphaEcho/echo',
    ]);
    for (const r of invokes) expect(r.accessKeyId).toBe(issued.accessKeyId);
    expectSignedByRole(invokes, ROLE_ALPHA);
  });

  it('caches the assumed credentials: many invocations, one AssumeRole', async () => {
    for (let i = 0; i < 10; i++) await call('AlphaEcho', `cached-${i}`);
    const [assumed] = assumeCalls(ROLE_ALPHA);
    const invokes = invokesOf('alpha');
    expect(invokes).toHaveLength(12);
    // Still within the first half of the credentials' lifetime (else a refresh would be due and this proves less).
    expect(invokes.at(-1)!.at.getTime()).toBeLessThan(
      (assumed!.at.getTime() + assumed!.credentials!.expiration.getTime()) / 2,
    );
    expect(assumeCalls(ROLE_ALPHA)).toHaveLength(1);
    expect(new Set(invokes.map((r) => r.accessKeyId))).toEqual(new Set([assumed!.credentials!.accessKeyId]));
    expectSignedByRole(invokes, ROLE_ALPHA);
  });

  it('refreshes the credentials once half their lifetime has passed, before they expire', async () => {
    const [assumed] = assumeCalls(ROLE_ALPHA);
    const first = assumed!.credentials!;
    // The runtime refreshes at expiry - min(5 min, lifetime / 2), the lifetime counted from when STS answered.
    const refreshAt = (assumed!.at.getTime() + first.expiration.getTime()) / 2;
    await clockPasses(refreshAt + 300);
    expect(Date.now()).toBeLessThan(first.expiration.getTime());
    const before = invokesOf('alpha').length;
    await call('AlphaEcho', 'refreshed');

    const calls = assumeCalls(ROLE_ALPHA);
    expect(calls).toHaveLength(2);
    const second = calls[1]!.credentials!;
    expect(second.accessKeyId).not.toBe(first.accessKeyId);
    expect(calls[1]).toMatchObject({ externalId: CLUSTER, callerAccessKeyId: BASE_CREDENTIALS.accessKeyId });
    const after = invokesOf('alpha').slice(before);
    expect(after).toHaveLength(1);
    expect(after[0]!.accessKeyId).toBe(second.accessKeyId);
    expectSignedByRole(after, ROLE_ALPHA);

    // Past the first credentials' expiry, invocations go on with the new ones.
    await clockPasses(first.expiration.getTime() + 100);
    await call('AlphaEcho', 'after-expiry');
    const last = invokesOf('alpha').at(-1)!;
    expect(sessionOf(last)?.roleArn).toBe(ROLE_ALPHA);
    expect(last.accessKeyId).not.toBe(first.accessKeyId);
    expectSignedByRole([last], ROLE_ALPHA);
  });

  it('assumes a different role per function, each function signed with its own role', async () => {
    const betaBefore = assumeCalls(ROLE_BETA).length;
    expect(betaBefore).toBe(0);
    await registerFunction(lab.runtime!.adminUrl, { arn: arn('beta'), assume_role_arn: ROLE_BETA });
    const alphaFrom = invokesOf('alpha').length;
    await call('BetaEcho', 'b');
    await call('AlphaEcho', 'a');
    await call('BetaEcho', 'b2');

    const betaCalls = assumeCalls(ROLE_BETA);
    expect(betaCalls.length).toBeGreaterThanOrEqual(1);
    for (const c of betaCalls) {
      expect(c).toMatchObject({ roleArn: ROLE_BETA, externalId: CLUSTER, outcome: 'issued' });
    }
    const betaInvokes = invokesOf('beta');
    expect(betaInvokes).toHaveLength(3);
    expectSignedByRole(betaInvokes, ROLE_BETA);
    expectSignedByRole(invokesOf('alpha').slice(alphaFrom), ROLE_ALPHA);
    const keys = (roleArn: string): Set<string> => new Set(assumeCalls(roleArn).map((c) => c.credentials!.accessKeyId));
    for (const k of keys(ROLE_BETA)) expect(keys(ROLE_ALPHA).has(k)).toBe(false);
  });

  it.each([
    ['a role whose trust policy requires another external id', ROLE_FOREIGN],
    ['a role that does not trust the caller', ROLE_UNTRUSTED],
  ])('refuses the registration with META0003 when STS denies %s', async (_what, roleArn) => {
    const res = await adminCall(lab.runtime!.adminUrl, 'POST', '/deployments', {
      arn: arn('denied'),
      assume_role_arn: roleArn,
    });
    expect(res.status, res.text).toBe(500);
    expect(res.json['restate_code']).toBe('META0003');
    const message = String(res.json['message']);
    expect(message.startsWith('[META0003] '), message).toBe(true);
    expect(message).toContain(arn('denied'));
    expect(message).toContain(`'${roleArn}'`);
    expect(message).toContain('AccessDenied');
    expect(message).toContain(`sts:ExternalId = '${CLUSTER}'`);
    const denied = assumeCalls(roleArn);
    expect(denied.length).toBeGreaterThanOrEqual(1);
    for (const c of denied) expect(c).toMatchObject({ externalId: CLUSTER, outcome: 'AccessDenied', status: 403 });
    // Nothing registered, and Lambda never called.
    const list = await adminCall(lab.runtime!.adminUrl, 'GET', '/deployments');
    const arns = (list.json['deployments'] as { arn?: string }[]).map((d) => d.arn);
    expect(arns).not.toContain(arn('denied'));
    expect(invokesOf('denied')).toHaveLength(0);
    const services = await adminCall(lab.runtime!.adminUrl, 'GET', '/services');
    expect((services.json['services'] as { name: string }[]).map((s) => s.name)).not.toContain('DeniedEcho');
  });

  it('PATCH changes the role in place; HTTP options are refused; new headers reach the next invoke', async () => {
    const admin = lab.runtime!.adminUrl;
    const id = await registerFunction(admin, { arn: arn('patched'), assume_role_arn: ROLE_PATCH_FROM });
    await call('PatchedEcho', 'from');
    expectSignedByRole(invokesOf('patched'), ROLE_PATCH_FROM);

    // The role, in place: the same deployment, re-discovered with the new role's credentials.
    const patchedFrom = invokesOf('patched').length;
    const changed = await adminCall(admin, 'PATCH', `/deployments/${id}`, { assume_role_arn: ROLE_PATCH_TO });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.json).toMatchObject({ id, arn: arn('patched'), assume_role_arn: ROLE_PATCH_TO });
    const detail = await adminCall(admin, 'GET', `/deployments/${id}`);
    expect(detail.json).toMatchObject({ id, arn: arn('patched'), assume_role_arn: ROLE_PATCH_TO });
    const list = await adminCall(admin, 'GET', '/deployments');
    expect((list.json['deployments'] as { arn?: string }[]).filter((d) => d.arn === arn('patched'))).toHaveLength(1);
    expect(assumeCalls(ROLE_PATCH_TO).length).toBeGreaterThanOrEqual(1);
    expect(assumeCalls(ROLE_PATCH_TO)[0]).toMatchObject({ externalId: CLUSTER, outcome: 'issued' });
    await call('PatchedEcho', 'to');
    const sinceRoleChange = invokesOf('patched').slice(patchedFrom);
    // The re-discovery and the invocation.
    expect(sinceRoleChange).toHaveLength(2);
    expectSignedByRole(sinceRoleChange, ROLE_PATCH_TO);

    // HTTP options on a Lambda deployment.
    const wrongType = await adminCall(admin, 'PATCH', `/deployments/${id}`, { uri: 'http://127.0.0.1:9080' });
    expect(wrongType.status, wrongType.text).toBe(400);
    expect(String(wrongType.json['message'])).toContain(
      'cannot update the deployment, as the deployment type is lambda while the update options are for type http',
    );

    // Additional headers: the re-discovery and the next invocation carry them; the role stays.
    const headersFrom = events.length;
    const withHeaders = await adminCall(admin, 'PATCH', `/deployments/${id}`, {
      additional_headers: { 'x-api-key': 'k' },
    });
    expect(withHeaders.status, withHeaders.text).toBe(200);
    expect(withHeaders.json).toMatchObject({ id, assume_role_arn: ROLE_PATCH_TO });
    await call('PatchedEcho', 'headers');
    const seen = events.slice(headersFrom).filter((e) => e.functionName === arn('patched'));
    expect(seen.map((e) => e.path)).toEqual(['/discover', '/invoke/PatchedEcho/echo']);
    for (const e of seen) {
      const lower = Object.fromEntries(Object.entries(e.headers).map(([k, v]) => [k.toLowerCase(), v]));
      expect(lower['x-api-key']).toBe('k');
    }
    expectSignedByRole(invokesOf('patched').slice(patchedFrom), ROLE_PATCH_TO);
  });

  it('never signed an invoke with expired or wrong credentials, and never printed a secret', async () => {
    const requests = lab.proxy!.requests;
    expect(requests.length).toBeGreaterThan(20);
    for (const r of requests) {
      expect(r.signature, `${r.functionName} ${r.accessKeyId}`).toBe('valid');
      expect(r.answeredBy).toBe('target');
      const session = sessionOf(r);
      if (session !== undefined) expect(r.at.getTime()).toBeLessThan(session.expiration.getTime());
    }
    // The runtime logged its AssumeRole calls (so that no secret in its output means something).
    const output = await waitFor(() => {
      const text = lab.runtime!.output();
      expect(text).toContain('assumed the role for Lambda invocations');
      return text;
    });
    expect(output).toContain(ROLE_ALPHA);
    const secrets = [BASE_CREDENTIALS.secretAccessKey];
    for (const c of sts.calls) {
      if (c.credentials !== undefined) secrets.push(c.credentials.secretAccessKey, c.credentials.sessionToken);
    }
    expect(secrets.length).toBeGreaterThan(8);
    for (const secret of secrets) expect(output.includes(secret), 'a secret in the runtime output').toBe(false);
  });
});
