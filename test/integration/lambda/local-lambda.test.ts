import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalLambda, type LocalLambda } from '../../support/lambda.ts';

/**
 * The Lambda the Lambda tests run against: serverless-offline's Invoke API on loopback, reached with the AWS SDK's
 * LambdaClient (what the runtime's Lambda transport uses). What they rely on: a Restate SDK endpoint built with
 * `@restatedev/restate-sdk/lambda` answers restate's Lambda request shape (an API-Gateway-like event) with its
 * manifest in request/response mode, and a function that throws comes back as a FunctionError, as on AWS.
 */

const GREETER = `
import * as restate from '@restatedev/restate-sdk/lambda';
const greeter = restate.service({
  name: 'Greeter',
  handlers: { greet: async (_ctx, name) => 'Hello ' + name },
});
export const handler = restate.createEndpointHandler({ services: [greeter] });
`;

const BROKEN = `
export const handler = async () => { throw new Error('broken on purpose'); };
`;

describe('local Lambda (serverless-offline) with the AWS SDK', () => {
  let lambda: LocalLambda;
  let client: LambdaClient;

  beforeAll(async () => {
    lambda = await startLocalLambda({ functions: { greeter: GREETER, broken: BROKEN } });
    client = new LambdaClient({
      region: lambda.region,
      endpoint: lambda.url,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  }, 90_000);

  afterAll(async () => {
    client?.destroy();
    await lambda?.stop();
  });

  it('a Restate SDK Lambda endpoint answers discovery in request/response mode', async () => {
    const out = await client.send(
      new InvokeCommand({
        // The qualified ARN, as Ratchet and restate send it.
        FunctionName: lambda.arn('greeter'),
        Payload: Buffer.from(
          JSON.stringify({
            path: '/discover',
            httpMethod: 'GET',
            headers: { accept: 'application/vnd.restate.endpointmanifest.v3+json' },
            body: '',
            isBase64Encoded: true,
          }),
        ),
      }),
    );
    expect(out.StatusCode).toBe(200);
    expect(out.FunctionError).toBeUndefined();
    const response = JSON.parse(Buffer.from(out.Payload!).toString('utf8')) as {
      statusCode: number;
      headers: Record<string, string>;
      body: string;
      isBase64Encoded: boolean;
    };
    expect(response.statusCode).toBe(200);
    const manifest = JSON.parse(
      Buffer.from(response.body, response.isBase64Encoded ? 'base64' : 'utf8').toString('utf8'),
    ) as { protocolMode: string; services: { name: string }[] };
    expect(manifest.protocolMode).toBe('REQUEST_RESPONSE');
    expect(manifest.services.map((s) => s.name)).toEqual(['Greeter']);
  });

  it('a function that throws comes back as a FunctionError', async () => {
    const out = await client.send(
      new InvokeCommand({ FunctionName: lambda.arn('broken'), Payload: Buffer.from('{}') }),
    );
    expect(out.FunctionError).toBe('Unhandled');
    expect(Buffer.from(out.Payload!).toString('utf8')).toContain('broken on purpose');
  });
});
