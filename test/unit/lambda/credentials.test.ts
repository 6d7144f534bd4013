import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AssumeRoleError,
  LambdaCredentials,
  roleSessionName,
  type AwsCredentialIdentityProvider,
} from '../../../runtime/src/lambda/credentials.ts';
import { freePort, loopbackUrl } from '../../support/ports.ts';
import { startFakeSts, type FakeSts, type StsCall } from '../../support/sts.ts';

// LambdaCredentials against the STS double on loopback: what AssumeRole is called with, caching per role, refresh
// before expiry (with an injected clock), one STS call shared by concurrent callers, and STS's refusals as
// AssumeRoleError. STSClient takes its endpoint from the environment (AWS_ENDPOINT_URL_STS), as it does in the
// runtime process, so the variable is set for this file and restored afterwards.

const REGION = 'eu-central-1';
const CLUSTER = 'unit-cluster';
const BASE = { accessKeyId: 'AKIAUNITTESTBASE0001', secretAccessKey: 'unit-test-base-secret' };
const ROLE = 'arn:aws:iam::210987654321:role/ratchet-invoker';
const OTHER_ROLE = 'arn:aws:iam::210987654321:role/other-invoker';
const FOREIGN_ROLE = 'arn:aws:iam::210987654321:role/foreign';
const UNKNOWN_ROLE = 'arn:aws:iam::210987654321:role/unknown';
const FIVE_MINUTES = 5 * 60_000;

const silent = pino({ level: 'silent' });
const base: AwsCredentialIdentityProvider = () => Promise.resolve({ ...BASE });

let sts: FakeSts;
let shortSts: FakeSts;
const savedEndpoint = process.env['AWS_ENDPOINT_URL_STS'];
const opened: LambdaCredentials[] = [];

/** A clock the test moves by hand; it starts at the real time (STS dates its expirations by the real clock). */
function manualClock(): { now: () => number; set: (t: number) => void } {
  let t = Date.now();
  return { now: () => t, set: (next) => void (t = next) };
}

function credentials(options: { now?: () => number; clusterName?: string; stsUrl?: string } = {}): LambdaCredentials {
  process.env['AWS_ENDPOINT_URL_STS'] = options.stsUrl ?? sts.url;
  const c = new LambdaCredentials({
    clusterName: options.clusterName ?? CLUSTER,
    logger: silent,
    base,
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  opened.push(c);
  return c;
}

function assumeCalls(double: FakeSts, roleArn: string): StsCall[] {
  return double.calls.filter((c) => c.action === 'AssumeRole' && c.roleArn === roleArn);
}

beforeAll(async () => {
  const roles = {
    [ROLE]: { externalId: CLUSTER, allowedCallers: [BASE.accessKeyId] },
    [OTHER_ROLE]: { externalId: CLUSTER },
    [FOREIGN_ROLE]: { externalId: 'another-cluster' },
  };
  sts = await startFakeSts({ callers: [BASE], roles, region: REGION });
  shortSts = await startFakeSts({ callers: [BASE], roles, region: REGION, credentialLifetimeSeconds: 60 });
});

afterEach(() => {
  for (const c of opened.splice(0)) c.close();
  // The STS client reads the endpoint when a client is made; each test sets it again.
  if (savedEndpoint === undefined) delete process.env['AWS_ENDPOINT_URL_STS'];
  else process.env['AWS_ENDPOINT_URL_STS'] = savedEndpoint;
});

afterAll(async () => {
  await sts.stop();
  await shortSts.stop();
});

describe('roleSessionName', () => {
  it('is ratchet-<cluster>, reduced to what STS accepts', () => {
    expect(roleSessionName('prod')).toBe('ratchet-prod');
    expect(roleSessionName('lambda-lab')).toBe('ratchet-lambda-lab');
    expect(roleSessionName('a_b+c=d,e.f@g-h')).toBe('ratchet-a_b+c=d,e.f@g-h');
    expect(roleSessionName('my cluster/eu:1 ü')).toBe('ratchet-my-cluster-eu-1--');
    const long = roleSessionName('c'.repeat(100));
    expect(long).toHaveLength(64);
    expect(long).toBe(`ratchet-${'c'.repeat(56)}`);
    for (const name of [roleSessionName('x'), long, roleSessionName('ü/ö')]) {
      expect(name).toMatch(/^[\w+=,.@-]{2,64}$/);
    }
  });
});

describe('LambdaCredentials', () => {
  it('signs without a role with the base credentials', async () => {
    const c = credentials();
    expect(c.base).toBe(base);
    expect(c.provider(undefined, REGION)).toBe(base);
    expect(await c.provider(undefined, REGION)()).toEqual(BASE);
  });

  it('assumes the role with the cluster name as external id, signed with the base credentials', async () => {
    const c = credentials();
    const before = sts.calls.length;
    const got = await c.provider(ROLE, REGION)();
    const calls = sts.calls.slice(before);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      action: 'AssumeRole',
      roleArn: ROLE,
      externalId: CLUSTER,
      roleSessionName: `ratchet-${CLUSTER}`,
      durationSeconds: 3600,
      callerAccessKeyId: BASE.accessKeyId,
      region: REGION,
      status: 200,
      outcome: 'issued',
    });
    const issued = calls[0]!.credentials!;
    expect(got).toEqual({
      accessKeyId: issued.accessKeyId,
      secretAccessKey: issued.secretAccessKey,
      sessionToken: issued.sessionToken,
      expiration: issued.expiration,
    });
    expect(got.accessKeyId).toMatch(/^ASIA/);
  });

  it('sends the sanitised session name STS accepts for any cluster name', async () => {
    const c = credentials({ clusterName: 'team a/prod' });
    await expect(c.assumed(OTHER_ROLE, REGION)).rejects.toBeInstanceOf(AssumeRoleError);
    // The external id is the cluster name as is (STS refuses its space: the trust policy could never name it),
    // while the session name was made acceptable.
    const call = sts.calls.at(-1)!;
    expect(call.roleSessionName).toBe('ratchet-team-a-prod');
    expect(call.externalId).toBe('team a/prod');
    expect(call.outcome).toBe('ValidationError');
    expect(call.message).not.toContain('roleSessionName');
  });

  it('caches the credentials per role', async () => {
    const c = credentials();
    const before = { role: assumeCalls(sts, ROLE).length, other: assumeCalls(sts, OTHER_ROLE).length };
    const first = await c.assumed(ROLE, REGION);
    for (let i = 0; i < 5; i++) expect(await c.assumed(ROLE, REGION)).toBe(first);
    const other = await c.assumed(OTHER_ROLE, REGION);
    expect(other.accessKeyId).not.toBe(first.accessKeyId);
    expect(await c.provider(OTHER_ROLE, REGION)()).toBe(other);
    expect(await c.provider(ROLE, REGION)()).toBe(first);
    expect(assumeCalls(sts, ROLE).length - before.role).toBe(1);
    expect(assumeCalls(sts, OTHER_ROLE).length - before.other).toBe(1);
    // Another instance (another process) has its own cache.
    const fresh = await credentials().assumed(ROLE, REGION);
    expect(fresh.accessKeyId).not.toBe(first.accessKeyId);
  });

  it('refreshes five minutes before expiry', async () => {
    const clock = manualClock();
    const c = credentials({ now: clock.now });
    const before = assumeCalls(sts, ROLE).length;
    const first = await c.assumed(ROLE, REGION);
    const refreshAt = first.expiration!.getTime() - FIVE_MINUTES;
    clock.set(refreshAt - 1);
    expect(await c.assumed(ROLE, REGION)).toBe(first);
    expect(assumeCalls(sts, ROLE).length - before).toBe(1);
    clock.set(refreshAt);
    const second = await c.assumed(ROLE, REGION);
    expect(second.accessKeyId).not.toBe(first.accessKeyId);
    expect(assumeCalls(sts, ROLE).length - before).toBe(2);
    expect(await c.assumed(ROLE, REGION)).toBe(second);
  });

  it('refreshes at half the lifetime when the credentials live less than ten minutes', async () => {
    const clock = manualClock();
    const issuedAt = clock.now();
    const c = credentials({ now: clock.now, stsUrl: shortSts.url });
    const first = await c.assumed(ROLE, REGION);
    const expires = first.expiration!.getTime();
    // The lifetime counts from when the answer arrived (the clock did not move meanwhile).
    expect(expires - issuedAt).toBeGreaterThan(58_000);
    expect(expires - issuedAt).toBeLessThanOrEqual(60_000);
    const half = (expires + issuedAt) / 2;
    clock.set(Math.ceil(half) - 1);
    expect(await c.assumed(ROLE, REGION)).toBe(first);
    expect(assumeCalls(shortSts, ROLE)).toHaveLength(1);
    clock.set(Math.ceil(half));
    const second = await c.assumed(ROLE, REGION);
    expect(second.accessKeyId).not.toBe(first.accessKeyId);
    expect(assumeCalls(shortSts, ROLE)).toHaveLength(2);
  });

  it('shares one STS call between concurrent callers', async () => {
    const c = credentials();
    const before = assumeCalls(sts, OTHER_ROLE).length;
    const all = await Promise.all(Array.from({ length: 8 }, () => c.assumed(OTHER_ROLE, REGION)));
    expect(assumeCalls(sts, OTHER_ROLE).length - before).toBe(1);
    expect(new Set(all.map((a) => a.accessKeyId)).size).toBe(1);
    // The same through the providers the Lambda clients sign with.
    const clock = manualClock();
    const d = credentials({ now: clock.now });
    const provider = d.provider(ROLE, REGION);
    const beforeRole = assumeCalls(sts, ROLE).length;
    const got = await Promise.all([provider(), provider(), d.assumed(ROLE, REGION)]);
    expect(assumeCalls(sts, ROLE).length - beforeRole).toBe(1);
    expect(new Set(got.map((a) => a.accessKeyId)).size).toBe(1);
    // Past the refresh point, concurrent callers again share one new call.
    clock.set(got[0].expiration!.getTime() - FIVE_MINUTES);
    const renewed = await Promise.all([provider(), provider(), provider()]);
    expect(assumeCalls(sts, ROLE).length - beforeRole).toBe(2);
    expect(new Set(renewed.map((a) => a.accessKeyId)).size).toBe(1);
    expect(renewed[0].accessKeyId).not.toBe(got[0].accessKeyId);
  });

  it('refuses with AssumeRoleError carrying the STS code: AccessDenied', async () => {
    const c = credentials();
    for (const role of [FOREIGN_ROLE, UNKNOWN_ROLE]) {
      const err = await c.assumed(role, REGION).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AssumeRoleError);
      const e = err as AssumeRoleError;
      expect(e.roleArn).toBe(role);
      expect(e.awsCode).toBe('AccessDenied');
      expect(e.message).toBe(
        `could not assume the role '${role}' (STS AccessDenied): User: arn:aws:iam::111122223333:user/` +
          `${BASE.accessKeyId} is not authorized to perform: sts:AssumeRole on resource: ${role}`,
      );
      expect(e.cause).toBeDefined();
    }
    // A refusal is not cached: once the trust policy allows it, the next call succeeds.
    sts.putRole(UNKNOWN_ROLE, { externalId: CLUSTER });
    try {
      expect((await c.assumed(UNKNOWN_ROLE, REGION)).accessKeyId).toMatch(/^ASIA/);
    } finally {
      sts.deleteRole(UNKNOWN_ROLE);
    }
  });

  it('refuses with the STS code of bad base credentials, and names the network error when STS is unreachable', async () => {
    process.env['AWS_ENDPOINT_URL_STS'] = sts.url;
    const wrongSecret = new LambdaCredentials({
      clusterName: CLUSTER,
      logger: silent,
      base: () => Promise.resolve({ ...BASE, secretAccessKey: 'not-the-secret' }),
    });
    opened.push(wrongSecret);
    await expect(wrongSecret.assumed(ROLE, REGION)).rejects.toMatchObject({
      name: 'AssumeRoleError',
      roleArn: ROLE,
      awsCode: 'SignatureDoesNotMatch',
    });
    const unknownKey = new LambdaCredentials({
      clusterName: CLUSTER,
      logger: silent,
      base: () => Promise.resolve({ accessKeyId: 'AKIANOBODYKNOWSTHIS', secretAccessKey: 'x' }),
    });
    opened.push(unknownKey);
    await expect(unknownKey.assumed(ROLE, REGION)).rejects.toMatchObject({ awsCode: 'InvalidClientTokenId' });

    const nothing = await freePort();
    const unreachable = credentials({ stsUrl: loopbackUrl(nothing) });
    const err = await unreachable.assumed(ROLE, REGION).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AssumeRoleError);
    expect((err as AssumeRoleError).awsCode).toBe('ECONNREFUSED');
    expect((err as AssumeRoleError).message).toContain(`could not assume the role '${ROLE}' (STS ECONNREFUSED)`);
  });

  it('never puts a secret into an error message', async () => {
    const c = credentials();
    const ok = await c.assumed(ROLE, REGION);
    const err = (await c.assumed(FOREIGN_ROLE, REGION).then(
      () => undefined,
      (e: unknown) => e,
    )) as AssumeRoleError;
    const text = `${err.message} ${String(err.stack)}`;
    for (const secret of [BASE.secretAccessKey, ok.secretAccessKey, ok.sessionToken!]) {
      expect(text).not.toContain(secret);
    }
  });
});
