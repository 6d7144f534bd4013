import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCall, ingressCall, registerFunction, startLambdaLab, stopLambdaLab, type LambdaLab } from './support.ts';

/**
 * Lambda deployments end to end: a Restate SDK Lambda handler on serverless-offline's real Invoke API, registered by
 * its qualified ARN, invoked by Ratchet through @aws-sdk/client-lambda (request/response: each attempt one invoke; a
 * suspension ends it and the next completion invokes again with the journal).
 */

const SERVICES = `
import * as restate from '@restatedev/restate-sdk/lambda';
const greeter = restate.service({
  name: 'LambdaGreeter',
  handlers: {
    greet: async (ctx, name) => {
      const upper = await ctx.run('upper', () => String(name).toUpperCase());
      await ctx.sleep(300);
      return 'Hello ' + upper;
    },
    waitForApproval: async (ctx) => {
      const { id, promise } = ctx.awakeable();
      await ctx.objectSendClient({ name: 'LambdaCounter' }, 'approvals').add({ awakeable: id });
      return 'approved by ' + (await promise);
    },
  },
});
const counter = restate.object({
  name: 'LambdaCounter',
  handlers: {
    add: async (ctx, input) => {
      const value = ((await ctx.get('value')) ?? 0) + (input?.n ?? 0);
      ctx.set('value', value);
      if (input?.awakeable !== undefined) ctx.set('awakeable', input.awakeable);
      return value;
    },
    get: restate.handlers.object.shared(async (ctx) => ({
      value: (await ctx.get('value')) ?? 0,
      awakeable: (await ctx.get('awakeable')) ?? null,
    })),
  },
});
export const handler = restate.createEndpointHandler({ services: [greeter, counter] });
`;

describe('Lambda deployments: register by ARN and invoke', () => {
  const lab: Partial<LambdaLab> = {};
  let id: string;

  beforeAll(async () => {
    Object.assign(lab, await startLambdaLab({ functions: { services: SERVICES }, qualifiers: { services: 'live' } }));
    id = await registerFunction(lab.runtime!.adminUrl, { arn: lab.lambda!.arn('services') });
  }, 120_000);

  afterAll(() => stopLambdaLab(lab));

  it('registers the function and lists it as a Lambda deployment', async () => {
    const { runtime, lambda } = lab as LambdaLab;
    const list = await adminCall(runtime.adminUrl, 'GET', '/deployments');
    const deployments = list.json['deployments'] as Record<string, unknown>[];
    expect(deployments).toHaveLength(1);
    expect(deployments[0]).toMatchObject({ id, arn: lambda.arn('services') });
    expect(deployments[0]).not.toHaveProperty('uri');
    const detail = await adminCall(runtime.adminUrl, 'GET', `/deployments/${id}`);
    expect(detail.json).toMatchObject({ id, arn: lambda.arn('services') });
    expect(String(detail.json['sdk_version'])).toContain('restate-sdk-typescript/');
    const services = await adminCall(runtime.adminUrl, 'GET', '/services');
    expect((services.json['services'] as { name: string }[]).map((s) => s.name).sort()).toEqual([
      'LambdaCounter',
      'LambdaGreeter',
    ]);
    // Registering the same ARN again is answered with the same deployment.
    const again = await adminCall(runtime.adminUrl, 'POST', '/deployments', { arn: lambda.arn('services') });
    expect(again.status, again.text).toBe(200);
    expect(again.json['id']).toBe(id);
    // Discovery went to the function by its qualified ARN, with restate's event and the cluster name.
    const discovery = lab.proxy!.requests.find((r) => r.functionName === lambda.arn('services'));
    expect(discovery).toBeDefined();
  });

  it('runs a handler with ctx.run and a sleep: it suspends, and the timer invokes the function again', async () => {
    const { runtime, lambda, proxy } = lab as LambdaLab;
    const before = proxy.invocations().length;
    const res = await ingressCall(runtime.ingressUrl, 'LambdaGreeter/greet', 'lambda');
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toBe('Hello LAMBDA');
    // At least: the first invoke (runs `upper`, suspends for the ack or the sleep) and the one after the timer.
    const invokes = proxy.invocations().slice(before);
    expect(invokes.length).toBeGreaterThanOrEqual(2);
    expect(invokes.every((r) => r.functionName === lambda.arn('services'))).toBe(true);
  });

  it('keeps the state of a virtual object between invocations', async () => {
    const { runtime } = lab as LambdaLab;
    for (const n of [1, 2, 3]) {
      const res = await ingressCall(runtime.ingressUrl, 'LambdaCounter/c1/add', { n });
      expect(res.status, res.text).toBe(200);
    }
    const got = await ingressCall(runtime.ingressUrl, 'LambdaCounter/c1/get');
    expect(JSON.parse(got.text)).toMatchObject({ value: 6 });
  });

  it('resumes a handler waiting on an awakeable once it is resolved', async () => {
    const { runtime } = lab as LambdaLab;
    const send = await ingressCall(runtime.ingressUrl, 'LambdaGreeter/waitForApproval/send');
    expect(send.status, send.text).toBe(202);
    const invocationId = (JSON.parse(send.text) as { invocationId: string }).invocationId;
    let awakeable: string | null = null;
    const deadline = Date.now() + 30_000;
    while (awakeable === null && Date.now() < deadline) {
      const got = await ingressCall(runtime.ingressUrl, 'LambdaCounter/approvals/get');
      awakeable = (JSON.parse(got.text) as { awakeable: string | null }).awakeable;
      if (awakeable === null) await new Promise((r) => setTimeout(r, 100));
    }
    expect(awakeable).not.toBeNull();
    const resolve = await ingressCall(runtime.ingressUrl, `restate/awakeables/${awakeable}/resolve`, 'alice');
    expect(resolve.status, resolve.text).toBe(202);
    const output = await fetch(`${runtime.ingressUrl}/restate/invocation/${invocationId}/attach`);
    expect(output.status).toBe(200);
    expect(await output.json()).toBe('approved by alice');
  });
});
