import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  AssumeRoleCommand,
  GetCallerIdentityCommand,
  STSClient,
  type AssumeRoleCommandInput,
  type Credentials,
} from '@aws-sdk/client-sts';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  lambdaRequestTooLarge,
  lambdaThrottled,
  startRecordingProxy,
  type RecordingProxy,
} from '../../support/aws-recording-proxy.ts';
import { LOOPBACK, loopbackUrl } from '../../support/ports.ts';
import { startFakeSts, type FakeSts } from '../../support/sts.ts';

// The doubles are proven against the real AWS SDK: if it accepts their answers and they accept its signatures,
// the runtime's Lambda transport meets the same protocol it meets on AWS.

const REGION = 'eu-central-1';
const CALLER = { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' };
const CALLER_ARN = 'arn:aws:iam::123456789012:user/ratchet';
const ROLE = 'arn:aws:iam::210987654321:role/ratchet-invoker';
const OPEN_ROLE = 'arn:aws:iam::210987654321:role/open';
const EXTERNAL_ID = 'ratchet-cluster-1';
const FUNCTION_ARN = `arn:aws:lambda:${REGION}:210987654321:function:greeter`;

let sts: FakeSts;
let shortSts: FakeSts;
let proxy: RecordingProxy;
let lambda: Server;
let lambdaUrl: string;

beforeAll(async () => {
  const callers = [{ ...CALLER, arn: CALLER_ARN }];
  sts = await startFakeSts({
    callers,
    roles: {
      [ROLE]: { externalId: EXTERNAL_ID, allowedCallers: [CALLER.accessKeyId] },
      [OPEN_ROLE]: {},
    },
  });
  shortSts = await startFakeSts({ callers, roles: { [OPEN_ROLE]: {} }, credentialLifetimeSeconds: 2 });
  // The Invoke API's answer for a RequestResponse invocation: 200, the function's result as the body.
  lambda = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const qualifier = new URL(req.url ?? '/', 'http://x').searchParams.get('Qualifier') ?? '$LATEST';
      const body = JSON.stringify({ echo: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') as unknown });
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-amz-executed-version': qualifier === '$LATEST' ? '$LATEST' : '7',
        'x-amzn-requestid': 'fake-request-id',
      });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => lambda.listen({ host: LOOPBACK, port: 0 }, resolve));
  lambdaUrl = loopbackUrl((lambda.address() as AddressInfo).port);
  proxy = await startRecordingProxy({
    target: lambdaUrl,
    verify: (accessKeyId) => sts.issued(accessKeyId) ?? shortSts.issued(accessKeyId),
    enforce: true,
    region: REGION,
  });
});

afterAll(async () => {
  await Promise.all([
    sts?.stop(),
    shortSts?.stop(),
    proxy?.stop(),
    lambda &&
      new Promise<void>((resolve) => {
        lambda.close(() => resolve());
        lambda.closeAllConnections();
      }),
  ]);
});

function stsClient(
  endpoint: string,
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string },
): STSClient {
  return new STSClient({ endpoint, region: REGION, credentials, maxAttempts: 1 });
}

function lambdaClient(credentials: Credentials, secretOverride?: string): LambdaClient {
  return new LambdaClient({
    endpoint: proxy.url,
    region: REGION,
    maxAttempts: 1,
    credentials: {
      accessKeyId: credentials.AccessKeyId!,
      secretAccessKey: secretOverride ?? credentials.SecretAccessKey!,
      sessionToken: credentials.SessionToken!,
    },
  });
}

async function assume(
  input: Partial<AssumeRoleCommandInput>,
  client = stsClient(sts.url, CALLER),
): Promise<Credentials> {
  const out = await client.send(new AssumeRoleCommand(input as AssumeRoleCommandInput));
  return out.Credentials!;
}

describe('fake STS', () => {
  it('issues distinct session credentials expiring after DurationSeconds, and records the call', async () => {
    const before = Date.now();
    const client = stsClient(sts.url, CALLER);
    const out = await client.send(
      new AssumeRoleCommand({
        RoleArn: ROLE,
        RoleSessionName: 'ratchet-invoker',
        ExternalId: EXTERNAL_ID,
        DurationSeconds: 900,
      }),
    );
    const creds = out.Credentials!;
    expect(creds.AccessKeyId).toMatch(/^ASIA[A-Z2-7]{16}$/);
    expect(creds.SessionToken).toBeTruthy();
    expect(creds.Expiration).toBeInstanceOf(Date);
    expect(creds.Expiration!.getTime()).toBeGreaterThanOrEqual(before + 899_000);
    expect(creds.Expiration!.getTime()).toBeLessThanOrEqual(Date.now() + 900_000);
    expect(out.AssumedRoleUser?.Arn).toBe('arn:aws:sts::210987654321:assumed-role/ratchet-invoker/ratchet-invoker');
    expect(sts.issued(creds.AccessKeyId!)).toMatchObject({
      secretAccessKey: creds.SecretAccessKey,
      sessionToken: creds.SessionToken,
      expiration: creds.Expiration,
      roleArn: ROLE,
    });
    expect(sts.calls.at(-1)).toMatchObject({
      action: 'AssumeRole',
      roleArn: ROLE,
      roleSessionName: 'ratchet-invoker',
      externalId: EXTERNAL_ID,
      durationSeconds: 900,
      callerAccessKeyId: CALLER.accessKeyId,
      region: REGION,
      status: 200,
      outcome: 'issued',
      credentials: { accessKeyId: creds.AccessKeyId },
    });

    const again = await assume({ RoleArn: ROLE, RoleSessionName: 'ratchet-invoker', ExternalId: EXTERNAL_ID });
    expect(again.AccessKeyId).not.toBe(creds.AccessKeyId);
    expect(again.SessionToken).not.toBe(creds.SessionToken);
    // Without DurationSeconds, an hour.
    expect(again.Expiration!.getTime()).toBeGreaterThan(Date.now() + 3_590_000);

    // The session credentials sign requests to STS itself.
    const identity = await stsClient(sts.url, {
      accessKeyId: creds.AccessKeyId!,
      secretAccessKey: creds.SecretAccessKey!,
      sessionToken: creds.SessionToken!,
    }).send(new GetCallerIdentityCommand({}));
    expect(identity).toMatchObject({
      Arn: 'arn:aws:sts::210987654321:assumed-role/ratchet-invoker/ratchet-invoker',
      Account: '210987654321',
    });
  });

  it('answers a wrong secret with SignatureDoesNotMatch and an unknown key with InvalidClientTokenId (403)', async () => {
    const input = { RoleArn: ROLE, RoleSessionName: 'ratchet', ExternalId: EXTERNAL_ID };
    await expect(
      assume(input, stsClient(sts.url, { ...CALLER, secretAccessKey: 'not-the-secret' })),
    ).rejects.toMatchObject({
      name: 'SignatureDoesNotMatch',
      message: expect.stringContaining('The request signature we calculated does not match') as unknown,
      $metadata: { httpStatusCode: 403 },
    });
    await expect(
      assume(input, stsClient(sts.url, { ...CALLER, accessKeyId: 'AKIAUNKNOWNEXAMPLE00' })),
    ).rejects.toMatchObject({
      name: 'InvalidClientTokenId',
      message: 'The security token included in the request is invalid.',
      $metadata: { httpStatusCode: 403 },
    });
    expect(sts.calls.at(-1)).toMatchObject({
      callerAccessKeyId: 'AKIAUNKNOWNEXAMPLE00',
      outcome: 'InvalidClientTokenId',
    });
  });

  it('denies a wrong or missing ExternalId and an unknown role with AccessDenied (403)', async () => {
    const denied = {
      name: 'AccessDenied',
      message: `User: ${CALLER_ARN} is not authorized to perform: sts:AssumeRole on resource: ${ROLE}`,
      $metadata: { httpStatusCode: 403 },
    };
    await expect(
      assume({ RoleArn: ROLE, RoleSessionName: 'ratchet', ExternalId: 'other-cluster' }),
    ).rejects.toMatchObject(denied);
    await expect(assume({ RoleArn: ROLE, RoleSessionName: 'ratchet' })).rejects.toMatchObject(denied);
    const unknown = 'arn:aws:iam::210987654321:role/unknown';
    await expect(assume({ RoleArn: unknown, RoleSessionName: 'ratchet' })).rejects.toMatchObject({
      name: 'AccessDenied',
      message: expect.stringContaining(`on resource: ${unknown}`) as unknown,
    });
    expect(sts.calls.at(-2)).toMatchObject({ externalId: undefined, outcome: 'AccessDenied', status: 403 });
  });

  it('rejects a missing or malformed session name and a malformed ExternalId with ValidationError (400)', async () => {
    await expect(assume({ RoleArn: OPEN_ROLE })).rejects.toMatchObject({
      name: 'ValidationError',
      message:
        "1 validation error detected: Value null at 'roleSessionName' failed to satisfy constraint: Member must not be null",
      $metadata: { httpStatusCode: 400 },
    });
    await expect(assume({ RoleArn: OPEN_ROLE, RoleSessionName: 'has space' })).rejects.toMatchObject({
      name: 'ValidationError',
      message: expect.stringContaining('Member must satisfy regular expression pattern: [\\w+=,.@-]*') as unknown,
    });
    await expect(assume({ RoleArn: OPEN_ROLE, RoleSessionName: 'ok', ExternalId: 'x' })).rejects.toMatchObject({
      name: 'ValidationError',
      message: expect.stringContaining("at 'externalId' failed to satisfy constraint") as unknown,
    });
  });
});

describe('recording proxy in front of a Lambda Invoke API', () => {
  it('forwards an SDK Invoke signed with assumed credentials and records its key, token and valid signature', async () => {
    const creds = await assume({ RoleArn: ROLE, RoleSessionName: 'ratchet', ExternalId: EXTERNAL_ID });
    const client = lambdaClient(creds);
    const payload = JSON.stringify({ name: 'Ada' });
    const out = await client.send(
      new InvokeCommand({ FunctionName: FUNCTION_ARN, Qualifier: 'live', Payload: Buffer.from(payload) }),
    );
    expect(out.StatusCode).toBe(200);
    expect(out.ExecutedVersion).toBe('7');
    expect(JSON.parse(Buffer.from(out.Payload!).toString('utf8'))).toEqual({ echo: { name: 'Ada' } });
    expect(proxy.invocations().at(-1)).toEqual({
      at: expect.any(Date) as unknown,
      method: 'POST',
      path: `/2015-03-31/functions/${encodeURIComponent(FUNCTION_ARN)}/invocations`,
      functionName: FUNCTION_ARN,
      qualifier: 'live',
      accessKeyId: creds.AccessKeyId,
      sessionToken: creds.SessionToken,
      bodySize: Buffer.byteLength(payload),
      signature: 'valid',
      signatureValid: true,
      status: 200,
      answeredBy: 'target',
    });

    // A request signed with another secret under the same key is refused as Lambda refuses it.
    await expect(
      lambdaClient(creds, 'forged').send(new InvokeCommand({ FunctionName: 'greeter', Payload: Buffer.from('{}') })),
    ).rejects.toMatchObject({ name: 'InvalidSignatureException', $metadata: { httpStatusCode: 403 } });
    expect(proxy.requests.at(-1)).toMatchObject({
      functionName: 'greeter',
      qualifier: undefined,
      signature: 'mismatch',
      signatureValid: false,
      status: 403,
      answeredBy: 'proxy',
    });

    // The whole request is signed: a payload changed after signing (same length) is refused too.
    const tampering = lambdaClient(creds);
    tampering.middlewareStack.add(
      (next) => async (args) => {
        const request = (args as { request: { body: unknown } }).request;
        request.body = Buffer.from('{"name":"Eve"}');
        return next(args);
      },
      { step: 'deserialize', name: 'tamperAfterSigning' },
    );
    await expect(
      tampering.send(new InvokeCommand({ FunctionName: 'greeter', Payload: Buffer.from('{"name":"Ada"}') })),
    ).rejects.toMatchObject({ name: 'InvalidSignatureException' });
    expect(proxy.requests.at(-1)).toMatchObject({ signature: 'mismatch', status: 403 });
  });

  it('injects throttling (429) and an oversized request (413) as Lambda answers them', async () => {
    const client = lambdaClient(await assume({ RoleArn: OPEN_ROLE, RoleSessionName: 'ratchet' }));
    proxy.respondWith((request) => (request.functionName === 'greeter' ? lambdaThrottled() : undefined));
    try {
      await expect(client.send(new InvokeCommand({ FunctionName: 'greeter' }))).rejects.toMatchObject({
        name: 'TooManyRequestsException',
        message: 'Rate Exceeded.',
        Reason: 'ReservedFunctionConcurrentInvocationLimitExceeded',
        Type: 'User',
        $metadata: { httpStatusCode: 429 },
      });
      // Other functions still reach the target.
      await expect(client.send(new InvokeCommand({ FunctionName: 'other' }))).resolves.toMatchObject({
        StatusCode: 200,
      });
      proxy.respondWith(() => lambdaRequestTooLarge());
      await expect(client.send(new InvokeCommand({ FunctionName: 'greeter' }))).rejects.toMatchObject({
        name: 'RequestEntityTooLargeException',
        $metadata: { httpStatusCode: 413 },
      });
    } finally {
      proxy.respondWith(undefined);
    }
    expect(proxy.invocations().slice(-3)).toMatchObject([
      { functionName: 'greeter', status: 429, answeredBy: 'proxy', signatureValid: true },
      { functionName: 'other', status: 200, answeredBy: 'target' },
      { functionName: 'greeter', status: 413, answeredBy: 'proxy' },
    ]);
  });

  it('refuses session credentials once they expire, at STS (ExpiredToken) and at Lambda (ExpiredTokenException)', async () => {
    const creds = await assume({ RoleArn: OPEN_ROLE, RoleSessionName: 'short' }, stsClient(shortSts.url, CALLER));
    const issuedAt = Date.now();
    expect(creds.Expiration!.getTime()).toBeLessThanOrEqual(issuedAt + 2_000);
    const client = lambdaClient(creds);
    const invoke = () =>
      client.send(new InvokeCommand({ FunctionName: 'greeter' })).then(
        () => 'ok',
        (err: Error) => err.name,
      );
    await expect.poll(invoke, { timeout: 10_000, interval: 200 }).toBe('ExpiredTokenException');
    expect(Date.now()).toBeGreaterThanOrEqual(creds.Expiration!.getTime());
    expect(proxy.requests.at(-1)).toMatchObject({ signature: 'expired', status: 403 });

    const identity = stsClient(shortSts.url, {
      accessKeyId: creds.AccessKeyId!,
      secretAccessKey: creds.SecretAccessKey!,
      sessionToken: creds.SessionToken!,
    });
    await expect(identity.send(new GetCallerIdentityCommand({}))).rejects.toMatchObject({
      name: 'ExpiredToken',
      $metadata: { httpStatusCode: 403 },
    });
  });
});
