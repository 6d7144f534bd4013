import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lambdaRequestTooLarge, lambdaThrottled, type Responder } from '../../support/aws-recording-proxy.ts';
import { waitFor } from '../../support/wait.ts';
import { adminCall, ingressCall, registerFunction, startLambdaLab, stopLambdaLab, type LambdaLab } from './support.ts';

/**
 * What a user sees when a Lambda deployment goes wrong. At registration: an unknown function (META0003 with AWS's
 * ResourceNotFoundException), a function that announces BIDI_STREAM (META0015), one whose answer is not the SDK's
 * (META0013), an unqualified ARN (400, restate's text), the same ARN with another manifest (409 META0004). While
 * invoking: a journal over Lambda's 6 MB (RT0019, never sent), Lambda's own 413 (RT0019), throttling (RT0023) and a
 * function that throws outside the SDK (RT0006 with its message), each recorded as the invocation's last failure and
 * retried under the retry policy until the cause goes away.
 */

/** Two ctx.run results of 2.6 MB: each answer fits Lambda's 6 MB, the journal holding both (base64) does not. */
const SDK = `
import * as restate from '@restatedev/restate-sdk/lambda';
const errors = restate.service({
  name: 'LambdaErrors',
  handlers: {
    echo: async (_ctx, input) => 'echo ' + input,
    big: async (ctx) => {
      const a = await ctx.run('a', () => 'a'.repeat(2_600_000));
      const b = await ctx.run('b', () => 'b'.repeat(2_600_000));
      return a.length + b.length;
    },
  },
});
export const handler = restate.createEndpointHandler({ services: [errors] });
`;

/** The SDK's own manifest, with the protocol mode changed to BIDI_STREAM. */
const BIDI = `
import * as restate from '@restatedev/restate-sdk/lambda';
const svc = restate.service({ name: 'BidiOnLambda', handlers: { hi: async () => 'hi' } });
const sdk = restate.createEndpointHandler({ services: [svc] });
export const handler = async (event, context) => {
  const answer = await sdk(event, context);
  const manifest = JSON.parse(Buffer.from(answer.body, answer.isBase64Encoded ? 'base64' : 'utf8').toString('utf8'));
  return {
    statusCode: 200,
    headers: { 'content-type': answer.headers['content-type'] },
    isBase64Encoded: false,
    body: JSON.stringify({ ...manifest, protocolMode: 'BIDI_STREAM' }),
  };
};
`;

/** Valid JSON, but not the SDK's response shape. */
const NOT_SDK = `export const handler = async () => ({ hello: 'world' });`;

/** serverless-offline wraps a returned string in quotes unescaped: this one's payload is not JSON. */
const NOT_JSON = `export const handler = async () => 'she said "hi"';`;

/** Exposes one more service once the flag file exists: the same ARN with another manifest. */
const versioned = (flag: string): string => `
import { existsSync } from 'node:fs';
import * as restate from '@restatedev/restate-sdk/lambda';
const v1 = restate.service({ name: 'Versioned', handlers: { hi: async () => 'v1' } });
const extra = restate.service({ name: 'VersionedExtra', handlers: { hi: async () => 'extra' } });
const one = restate.createEndpointHandler({ services: [v1] });
const two = restate.createEndpointHandler({ services: [v1, extra] });
export const handler = (event, context) => (existsSync(${JSON.stringify(flag)}) ? two : one)(event, context);
`;

/** An SDK endpoint whose exported handler throws (outside the SDK) on invocations while the flag file exists. */
const flaky = (flag: string): string => `
import { existsSync } from 'node:fs';
import * as restate from '@restatedev/restate-sdk/lambda';
const svc = restate.service({ name: 'Flaky', handlers: { run: async (_ctx, input) => 'survived ' + input } });
const sdk = restate.createEndpointHandler({ services: [svc] });
export const handler = async (event, context) => {
  if (String(event.path).startsWith('/invoke/') && existsSync(${JSON.stringify(flag)})) {
    throw new Error('flaky on purpose: the disk is full');
  }
  return sdk(event, context);
};
`;

interface InvocationRow {
  status: string;
  retry_count: number | null;
  last_failure: string | null;
  last_failure_error_code: string | null;
}

describe('Lambda deployments: registration refusals and invocation failures', () => {
  const lab: Partial<LambdaLab> = {};
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ratchet-lambda-errors-'));
    Object.assign(
      lab,
      await startLambdaLab({
        functions: {
          sdk: SDK,
          bidi: BIDI,
          notsdk: NOT_SDK,
          notjson: NOT_JSON,
          versioned: versioned(join(dir, 'versioned-flag')),
          flaky: flaky(join(dir, 'flaky-flag')),
        },
        env: {
          RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
          RATCHET_RETRY_MAX_INTERVAL: '200ms',
          RATCHET_RETRY_MAX_ATTEMPTS: '1000',
        },
      }),
    );
    const { runtime, lambda } = lab as LambdaLab;
    await registerFunction(runtime.adminUrl, { arn: lambda.arn('sdk') });
    await registerFunction(runtime.adminUrl, { arn: lambda.arn('flaky') });
  }, 120_000);

  afterAll(async () => {
    await stopLambdaLab(lab);
    await rm(dir, { recursive: true, force: true });
  });

  const invocation = async (id: string): Promise<InvocationRow> => {
    const res = await fetch(`${lab.runtime!.adminUrl}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({
        query: `SELECT status, retry_count, last_failure, last_failure_error_code FROM sys_invocation WHERE id = '${id}'`,
      }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const rows = (JSON.parse(text) as { rows: InvocationRow[] }).rows;
    expect(rows).toHaveLength(1);
    return rows[0]!;
  };

  /** Waits until the invocation's last failure has `code` (after at least two attempts); returns its row. */
  const failingWith = (id: string, code: string): Promise<InvocationRow> =>
    waitFor(async () => {
      const row = await invocation(id);
      expect(row.last_failure_error_code, JSON.stringify(row)).toBe(code);
      expect(Number(row.retry_count)).toBeGreaterThanOrEqual(2);
      return row;
    });

  const send = async (path: string, body: unknown): Promise<string> => {
    const res = await ingressCall(lab.runtime!.ingressUrl, `${path}/send`, body);
    expect(res.status, res.text).toBe(202);
    return (JSON.parse(res.text) as { invocationId: string }).invocationId;
  };

  const attach = async (id: string): Promise<{ status: number; body: unknown }> => {
    const res = await fetch(`${lab.runtime!.ingressUrl}/restate/invocation/${id}/attach`);
    return { status: res.status, body: await res.json() };
  };

  /** Answers the function's invokes with `answer` while `run` runs. */
  const injecting = async <T>(fn: string, answer: Responder, run: () => Promise<T>): Promise<T> => {
    const arn = lab.lambda!.arn(fn);
    lab.proxy!.respondWith((req) => (req.functionName === arn ? answer(req) : undefined));
    try {
      return await run();
    } finally {
      lab.proxy!.respondWith(undefined);
    }
  };

  describe('registration', () => {
    it('an unknown function is META0003 with AWS ResourceNotFoundException and the ARN', async () => {
      const { runtime, lambda } = lab as LambdaLab;
      const arn = lambda.arn('nowhere');
      const res = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn });
      expect(res.status, res.text).toBe(500);
      expect(res.json['restate_code']).toBe('META0003');
      const message = String(res.json['message']);
      expect(message).toContain('ResourceNotFoundException');
      expect(message).toContain(arn);
      expect(message).toContain('Check the function name, region, account and the version or alias');
      const deployments = await adminCall(runtime.adminUrl, 'GET', '/deployments');
      expect((deployments.json['deployments'] as { arn?: string }[]).map((d) => d.arn)).not.toContain(arn);
    });

    it('a function announcing BIDI_STREAM is META0015, telling to use the Lambda entry point', async () => {
      const { runtime, lambda } = lab as LambdaLab;
      const res = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn: lambda.arn('bidi') });
      expect(res.status, res.text).toBe(500);
      expect(res.json['restate_code']).toBe('META0015');
      expect(String(res.json['message'])).toContain('BIDI_STREAM');
      expect(String(res.json['message'])).toContain("import * as restate from '@restatedev/restate-sdk/lambda'");
      const services = await adminCall(runtime.adminUrl, 'GET', '/services');
      expect((services.json['services'] as { name: string }[]).map((s) => s.name)).not.toContain('BidiOnLambda');
    });

    it('a function whose answer is not the SDK response is META0013', async () => {
      const { runtime, lambda } = lab as LambdaLab;
      const shape = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn: lambda.arn('notsdk') });
      expect(shape.json['restate_code'], shape.text).toBe('META0013');
      expect(String(shape.json['message'])).toContain(lambda.arn('notsdk'));
      expect(String(shape.json['message'])).toContain('no numeric statusCode');
      const text = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn: lambda.arn('notjson') });
      expect(text.json['restate_code'], text.text).toBe('META0013');
      expect(String(text.json['message'])).toContain('is not JSON');
      expect([shape.status, text.status]).toEqual([500, 500]);
    });

    it('an unqualified ARN is 400 with restate-server text', async () => {
      const { runtime, lambda } = lab as LambdaLab;
      const unqualified = lambda.arn('sdk').replace(/:\$LATEST$/, '');
      const res = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn: unqualified });
      expect(res.status, res.text).toBe(400);
      expect(res.json['message']).toBe(
        "The request field 'arn' is invalid. Reason: A qualified ARN needs a version or alias suffix. If you want " +
          "to use the unpublished version, provide $LATEST and make sure your shell doesn't treat it as a variable",
      );
      // Nothing was invoked for it.
      expect(lab.proxy!.invocations().some((r) => r.functionName === unqualified)).toBe(false);
    });

    it('the same ARN answering another manifest is 409 META0004 pointing at PATCH, until forced', async () => {
      const { runtime, lambda } = lab as LambdaLab;
      const arn = lambda.arn('versioned');
      const id = await registerFunction(runtime.adminUrl, { arn });
      await writeFile(join(dir, 'versioned-flag'), '');
      const again = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn });
      expect(again.status, again.text).toBe(409);
      expect(again.json['restate_code']).toBe('META0004');
      expect(String(again.json['message'])).toContain(arn);
      expect(String(again.json['message'])).toContain('PATCH /deployments/{id}');
      const forced = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn, force: true });
      expect(forced.status, forced.text).toBe(200);
      expect(forced.json['id']).toBe(id);
      const res = await ingressCall(runtime.ingressUrl, 'VersionedExtra/hi');
      expect(res.status, res.text).toBe(200);
      expect(JSON.parse(res.text)).toBe('extra');
    });
  });

  describe('invocation', () => {
    it('a journal over 6 MB is RT0019 with Lambda limit, and is never sent', async () => {
      const { runtime, lambda, proxy } = lab as LambdaLab;
      const id = await send('LambdaErrors/big', null);
      const row = await failingWith(id, 'RT0019');
      expect(row.status).not.toBe('completed');
      expect(row.last_failure).toContain(`over Lambda's limit of 6291456 bytes`);
      expect(row.last_failure).toContain(lambda.arn('sdk'));
      expect(row.last_failure).toContain('keep the journal small');
      // Checked before invoking: nothing over the limit reached Lambda.
      const sizes = proxy.invocations().map((r) => r.bodySize);
      expect(Math.max(...sizes)).toBeGreaterThan(3_000_000);
      expect(sizes.every((s) => s <= 6 * 1024 * 1024)).toBe(true);
      // It would fail forever: kill it.
      const kill = await adminCall(runtime.adminUrl, 'PATCH', `/invocations/${id}/kill`);
      expect(kill.status, kill.text).toBeLessThan(300);
      await waitFor(async () => expect((await invocation(id)).status).toBe('completed'));
    });

    it("Lambda's 413 RequestEntityTooLargeException is RT0019, and the invocation completes once it stops", async () => {
      const id = await injecting('sdk', lambdaRequestTooLarge, async () => {
        const id = await send('LambdaErrors/echo', 'large');
        const row = await failingWith(id, 'RT0019');
        expect(row.last_failure).toContain('RequestEntityTooLargeException');
        expect(row.last_failure).toContain('Request must be smaller than 6291456 bytes');
        return id;
      });
      expect(await attach(id)).toEqual({ status: 200, body: 'echo large' });
    });

    it('throttling is RT0023 and retried, and the invocation completes once Lambda accepts it again', async () => {
      const { proxy, lambda } = lab as LambdaLab;
      const before = proxy.invocations().length;
      const id = await injecting(
        'sdk',
        () => lambdaThrottled(),
        async () => {
          const id = await send('LambdaErrors/echo', 'throttled');
          const row = await failingWith(id, 'RT0023');
          expect(row.last_failure).toContain(`Lambda throttled the invocation of '${lambda.arn('sdk')}'`);
          expect(row.last_failure).toContain('ReservedFunctionConcurrentInvocationLimitExceeded');
          return id;
        },
      );
      expect(await attach(id)).toEqual({ status: 200, body: 'echo throttled' });
      const answered = proxy.invocations().slice(before);
      expect(answered.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(2);
      expect(answered.at(-1)).toMatchObject({ status: 200, answeredBy: 'target' });
    });

    it('a function that throws is RT0006 with its error, and the retry after it recovers returns the result', async () => {
      const { lambda } = lab as LambdaLab;
      const flag = join(dir, 'flaky-flag');
      await writeFile(flag, '');
      const id = await send('Flaky/run', 'twice');
      const row = await failingWith(id, 'RT0006');
      expect(row.last_failure).toContain(`the function '${lambda.arn('flaky')}' failed (Unhandled)`);
      expect(row.last_failure).toContain('flaky on purpose: the disk is full');
      await unlink(flag);
      expect(await attach(id)).toEqual({ status: 200, body: 'survived twice' });
    });
  });
});
