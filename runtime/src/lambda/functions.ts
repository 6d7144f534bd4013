import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { Logger } from 'pino';
import type { FunctionArn } from './arn.ts';
import { AssumeRoleError, LambdaCredentials, type AwsCredentialIdentityProvider } from './credentials.ts';
import {
  decodeResponse,
  encodeRequest,
  MAX_LAMBDA_PAYLOAD_BYTES,
  type LambdaHttpResponse,
  type LambdaRequest,
} from './event.ts';

/**
 * Synchronous Lambda invocations through `@aws-sdk/client-lambda`'s `InvokeCommand`, with the qualified ARN as
 * `FunctionName` (as restate sends it). One client per region and role, shared by discovery and every invocation
 * attempt; the SDK's own retries are off (an attempt is one invoke; Ratchet's retry policy decides what follows).
 * The endpoint is AWS's regional one unless the standard environment says otherwise (`AWS_ENDPOINT_URL_LAMBDA`,
 * `AWS_ENDPOINT_URL`), which points Ratchet at a local Lambda emulator.
 */

/** Why an invoke did not produce the SDK's answer; the transport and discovery turn it into their error codes. */
export type LambdaFailureKind =
  /** The request or the function's response is over Lambda's 6 MB payload limit. */
  | 'too-large'
  /** Lambda throttled the call (429 TooManyRequestsException, EC2/ENI throttling). */
  | 'throttled'
  /** The function ran and failed (`FunctionError`: an unhandled exception, a timeout, out of memory). */
  | 'function-error'
  /** The role could not be assumed. */
  | 'credentials'
  /** AWS refused the call: unknown function, no permission, bad request. */
  | 'refused'
  /** No answer from Lambda (connection, DNS, TLS, timeout) or a Lambda service error (5xx). */
  | 'unavailable'
  /** The function answered something that is not a Restate SDK response. */
  | 'malformed';

export class LambdaInvokeError extends Error {
  override readonly name = 'LambdaInvokeError';
  constructor(
    readonly kind: LambdaFailureKind,
    message: string,
    /** The AWS error code (`ResourceNotFoundException`, `AccessDenied`, …) when AWS answered with one. */
    readonly awsCode?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface LambdaFunctionsOptions {
  clusterName: string;
  logger: Logger;
  /** Base credentials (tests); the default provider chain otherwise. */
  credentials?: AwsCredentialIdentityProvider;
}

interface AwsError extends Error {
  $metadata?: { httpStatusCode?: number };
  $fault?: 'client' | 'server';
  code?: string;
  Reason?: string;
}

/**
 * Concurrent invokes per client. Every running attempt holds one connection for the whole invoke; the SDK's default
 * (50 sockets) would queue the rest silently. Lambda's default account concurrency is 1000.
 */
const MAX_CONCURRENT_INVOKES = 1000;

const THROTTLING = new Set([
  'TooManyRequestsException',
  'EC2ThrottledException',
  'ThrottlingException',
  'ENILimitReachedException',
  'SubnetIPAddressLimitReachedException',
]);
const TOO_LARGE = new Set(['RequestTooLargeException', 'SerializedRequestEntityTooLargeException']);

function classify(fn: FunctionArn, err: unknown): LambdaInvokeError {
  if (err instanceof LambdaInvokeError) return err;
  if (err instanceof AssumeRoleError)
    return new LambdaInvokeError('credentials', err.message, err.awsCode, { cause: err });
  const e = err as AwsError;
  const code = e.name !== 'Error' ? e.name : e.code;
  const status = e.$metadata?.httpStatusCode;
  const detail = `${code ?? 'Error'}: ${e.message}`;
  if (code === 'AbortError')
    return new LambdaInvokeError('unavailable', 'the invoke was aborted', code, { cause: err });
  if ((code !== undefined && TOO_LARGE.has(code)) || status === 413) {
    return new LambdaInvokeError(
      'too-large',
      `Lambda refused the request as too large (${detail}); synchronous invocations carry at most ` +
        `${MAX_LAMBDA_PAYLOAD_BYTES} bytes`,
      code,
      { cause: err },
    );
  }
  if ((code !== undefined && THROTTLING.has(code)) || status === 429) {
    const reason = e.Reason === undefined ? '' : ` (${e.Reason})`;
    return new LambdaInvokeError(
      'throttled',
      `Lambda throttled the invocation of '${fn.arn}'${reason}: ${detail}`,
      code,
      {
        cause: err,
      },
    );
  }
  if (status !== undefined && status < 500) {
    return new LambdaInvokeError('refused', `Lambda refused to invoke '${fn.arn}': ${detail}`, code, { cause: err });
  }
  if (code === 'CredentialsProviderError') {
    return new LambdaInvokeError(
      'credentials',
      `no AWS credentials to invoke '${fn.arn}': ${e.message}. Give Ratchet credentials through the standard AWS ` +
        'environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a web identity token for IRSA or EKS pod identity, ' +
        'container credentials)',
      code,
      { cause: err },
    );
  }
  return new LambdaInvokeError(
    'unavailable',
    status === undefined
      ? `could not reach Lambda to invoke '${fn.arn}': ${detail}`
      : `Lambda failed to invoke '${fn.arn}' (HTTP ${status}): ${detail}`,
    code,
    { cause: err },
  );
}

/** The function's own failure (`FunctionError`): Lambda's error document names its type and message. */
function functionError(fn: FunctionArn, kind: string, payload: Uint8Array | undefined): LambdaInvokeError {
  let errorType = '';
  let errorMessage = Buffer.from(payload ?? []).toString('utf8');
  try {
    const doc = JSON.parse(errorMessage) as { errorType?: unknown; errorMessage?: unknown };
    if (typeof doc.errorType === 'string') errorType = doc.errorType;
    if (typeof doc.errorMessage === 'string') errorMessage = doc.errorMessage;
  } catch {
    // Not Lambda's JSON error document: keep the raw text.
  }
  if (errorMessage.length > 2000) errorMessage = `${errorMessage.slice(0, 2000)}…`;
  if (errorType === 'Function.ResponseSizeTooLarge') {
    return new LambdaInvokeError(
      'too-large',
      `the response of '${fn.arn}' is over Lambda's limit of ${MAX_LAMBDA_PAYLOAD_BYTES} bytes: ${errorMessage}`,
      errorType,
    );
  }
  const what = errorType === '' ? errorMessage : `${errorType}: ${errorMessage}`;
  return new LambdaInvokeError('function-error', `the function '${fn.arn}' failed (${kind}): ${what}`, errorType);
}

export class LambdaFunctions {
  readonly credentials: LambdaCredentials;
  private readonly clients = new Map<string, LambdaClient>();

  constructor(options: LambdaFunctionsOptions) {
    this.credentials = new LambdaCredentials({
      clusterName: options.clusterName,
      logger: options.logger.child({ component: 'lambda' }),
      ...(options.credentials === undefined ? {} : { base: options.credentials }),
    });
  }

  /** Invokes the function synchronously with one request; resolves with the SDK's HTTP-like answer. */
  async invoke(
    fn: FunctionArn,
    roleArn: string | undefined,
    request: LambdaRequest,
    signal?: AbortSignal,
  ): Promise<LambdaHttpResponse> {
    const payload = encodeRequest(request);
    if (payload.length > MAX_LAMBDA_PAYLOAD_BYTES) {
      throw new LambdaInvokeError(
        'too-large',
        `the request to '${fn.arn}' is ${payload.length} bytes, over Lambda's limit of ${MAX_LAMBDA_PAYLOAD_BYTES} ` +
          'bytes for synchronous invocations (the journal is sent whole with every attempt, base64-encoded)',
      );
    }
    let out;
    try {
      out = await this.client(fn.region, roleArn).send(
        new InvokeCommand({ FunctionName: fn.arn, InvocationType: 'RequestResponse', Payload: payload }),
        signal === undefined ? {} : { abortSignal: signal },
      );
    } catch (err) {
      throw classify(fn, err);
    }
    if (out.FunctionError !== undefined) throw functionError(fn, out.FunctionError, out.Payload);
    try {
      return decodeResponse(out.Payload ?? new Uint8Array());
    } catch (err) {
      throw new LambdaInvokeError('malformed', (err as Error).message, undefined, { cause: err });
    }
  }

  private client(region: string, roleArn: string | undefined): LambdaClient {
    const key = `${region}\n${roleArn ?? ''}`;
    let client = this.clients.get(key);
    if (client === undefined) {
      client = new LambdaClient({
        region,
        credentials: this.credentials.provider(roleArn, region),
        maxAttempts: 1,
        requestHandler: {
          httpAgent: { keepAlive: true, maxSockets: MAX_CONCURRENT_INVOKES },
          httpsAgent: { keepAlive: true, maxSockets: MAX_CONCURRENT_INVOKES },
        },
      });
      this.clients.set(key, client);
    }
    return client;
  }

  close(): void {
    for (const c of this.clients.values()) c.destroy();
    this.clients.clear();
    this.credentials.close();
  }
}
