import http from 'node:http';
import { BadDiscoveryResponseError, DiscoveryFailedError } from '../service-client/errors.ts';
import { discoveryRequestHeaders, readDiscoveryResponse, type DiscoveryResponse } from '../service-client/discovery.ts';
import type { FunctionArn } from './arn.ts';
import { LambdaInvokeError, type LambdaFunctions } from './functions.ts';

/**
 * Discovery of a Lambda deployment: the function is invoked with restate's discovery event (`GET /discover`, the
 * manifest Accept list, the cluster name and the deployment's additional headers) and its answer is checked like an
 * HTTP endpoint's. AWS's refusals (unknown function, access denied, throttling, a role that cannot be assumed) are
 * META0003 with AWS's error in the message; an answer that is not the SDK's is META0013.
 */

export interface LambdaDiscoverOptions {
  readonly fn: FunctionArn;
  readonly assumeRoleArn: string | undefined;
  readonly additionalHeaders: Readonly<Record<string, string>>;
  readonly clusterName: string;
  readonly timeoutMs: number;
}

function hint(err: LambdaInvokeError, options: LambdaDiscoverOptions): string {
  switch (err.kind) {
    case 'credentials':
      return (
        ` Check that the role's trust policy lets this cluster's identity call sts:AssumeRole with the condition ` +
        `sts:ExternalId = '${options.clusterName}'.`
      );
    case 'refused':
      if (err.awsCode === 'ResourceNotFoundException') {
        return ' Check the function name, region, account and the version or alias at the end of the ARN.';
      }
      if (err.awsCode?.includes('AccessDenied') === true) {
        return options.assumeRoleArn === undefined
          ? ' Give the identity Ratchet runs with lambda:InvokeFunction on the function, or register with an assume_role_arn that has it.'
          : ` Give the role '${options.assumeRoleArn}' the permission lambda:InvokeFunction on the function.`;
      }
      return '';
    case 'function-error':
      return ' The function failed while answering discovery: read its CloudWatch logs.';
    case 'throttled':
      return " Lambda throttled the call: try again, or raise the function's concurrency.";
    case 'unavailable':
      return ' Check that Lambda is reachable from Ratchet (network, proxy, AWS_ENDPOINT_URL_LAMBDA).';
    case 'malformed':
    case 'too-large':
      return '';
  }
}

export async function discoverLambda(
  functions: LambdaFunctions,
  options: LambdaDiscoverOptions,
): Promise<DiscoveryResponse> {
  const arn = options.fn.arn;
  let answer;
  try {
    answer = await functions.invoke(
      options.fn,
      options.assumeRoleArn,
      { path: '/discover', method: 'GET', headers: discoveryRequestHeaders(options), body: Buffer.alloc(0) },
      AbortSignal.timeout(options.timeoutMs),
    );
  } catch (err) {
    if (!(err instanceof LambdaInvokeError)) throw err;
    if (err.kind === 'malformed') {
      throw new BadDiscoveryResponseError(`received a bad response from '${arn}': ${err.message}`, { cause: err });
    }
    const message =
      err.awsCode === 'AbortError' || err.awsCode === 'TimeoutError'
        ? `no discovery response within ${options.timeoutMs} ms`
        : err.message;
    throw new DiscoveryFailedError(`error when calling '${arn}': ${message}.${hint(err, options)}`, { cause: err });
  }
  return readDiscoveryResponse(
    arn,
    {
      status: answer.statusCode,
      statusText: http.STATUS_CODES[answer.statusCode] ?? '',
      headers: answer.headers,
      body: answer.body,
    },
    'Lambda',
  );
}
