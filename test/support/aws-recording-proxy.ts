import { randomUUID } from 'node:crypto';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { LOOPBACK, loopbackUrl } from './ports.ts';
import { parseAuthorization, readBody, verifySigV4, type ReceivedRequest, type SigV4Problem } from './sts.ts';

/**
 * An HTTP proxy on loopback in front of an AWS-shaped service (a local Lambda emulator, a fake): every request goes
 * to `target` unchanged (method, path, query, headers but `host`, body) and its answer comes back unchanged, and each
 * request is recorded with what a test asks about AWS calls: the function and qualifier of a Lambda Invoke, the
 * SigV4 access key id, the session token, the body size, and, with `verify`, whether the signature holds.
 *
 * A `respondWith` hook answers chosen requests itself, as AWS would (`lambdaThrottled()`, `lambdaRequestTooLarge()`),
 * so tests can provoke errors no emulator produces. With `enforce`, a request whose signature does not hold is
 * answered with the error Lambda gives (InvalidSignatureException, UnrecognizedClientException,
 * ExpiredTokenException, all 403) instead of being forwarded.
 */

/** A request as the proxy received it, handed to the `respondWith` hook. */
export interface ProxiedRequest {
  readonly method: string;
  /** Path and raw query string as received. */
  readonly url: string;
  /** The path without the query. */
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The decoded `{FunctionName}` of `/2015-03-31/functions/{FunctionName}/invocations` (a name or an ARN). */
  readonly functionName: string | undefined;
  /** The `Qualifier` query parameter of a Lambda Invoke. */
  readonly qualifier: string | undefined;
}

/** An answer the proxy gives itself instead of forwarding. */
export interface ProxyResponse {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>> | undefined;
  readonly body?: string | Buffer | undefined;
}

/** Answers a request itself, or returns undefined to forward it. */
export type Responder = (request: ProxiedRequest) => ProxyResponse | undefined | Promise<ProxyResponse | undefined>;

/** What the signature check found: `valid`, or why not; `unchecked` without `verify`. */
export type SignatureCheck = 'valid' | 'unchecked' | 'unknown-key' | 'invalid-token' | 'expired' | SigV4Problem;

/** The secret of a session (from `FakeSts.issued`, which fits as is), or just a secret access key. */
export type SigningSecret =
  | string
  | {
      readonly secretAccessKey: string;
      /** When set, the request's `x-amz-security-token` must equal it. */
      readonly sessionToken?: string | undefined;
      /** When set, requests after it are `expired`. */
      readonly expiration?: Date | undefined;
    };

export interface RecordedRequest {
  readonly at: Date;
  readonly method: string;
  /** The path as received (still encoded). */
  readonly path: string;
  readonly functionName: string | undefined;
  readonly qualifier: string | undefined;
  /** The access key id of the SigV4 `Authorization` header. */
  readonly accessKeyId: string | undefined;
  /** The `x-amz-security-token` header. */
  readonly sessionToken: string | undefined;
  readonly bodySize: number;
  readonly signature: SignatureCheck;
  /** Whether the signature held; undefined without `verify`. */
  readonly signatureValid: boolean | undefined;
  /** The HTTP status the client got. */
  readonly status: number;
  /** Who answered: the target, or the proxy (`respondWith`, `enforce`, or 502 when the target was unreachable). */
  readonly answeredBy: 'target' | 'proxy';
}

export interface RecordingProxyOptions {
  /** `http://host:port`, optionally with a base path the received paths are appended to. */
  readonly target: string;
  /** The signing secret of an access key id, or undefined for an unknown key: turns the signature check on. */
  readonly verify?: ((accessKeyId: string) => SigningSecret | undefined) | undefined;
  /** Answer requests whose signature does not hold with Lambda's 403 errors instead of forwarding them. */
  readonly enforce?: boolean | undefined;
  /** The signing name the credential scope must name; `lambda` by default. */
  readonly service?: string | undefined;
  /** The region the credential scope must name; any when unset. */
  readonly region?: string | undefined;
  /** The initial `respondWith` hook. */
  readonly respond?: Responder | undefined;
  /** The port to listen on; one the kernel picks when unset. */
  readonly port?: number | undefined;
}

export interface RecordingProxy {
  /** `http://127.0.0.1:<port>`: the `endpoint` of the client under test. */
  readonly url: string;
  /** Every request so far, in order of completion. */
  readonly requests: readonly RecordedRequest[];
  /** Lambda Invoke requests only. */
  invocations(): RecordedRequest[];
  /** Replaces the hook that answers requests itself (undefined: forward everything). */
  respondWith(responder: Responder | undefined): void;
  stop(): Promise<void>;
}

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

/** The answer of Lambda when a function's concurrency (or the account's) is exhausted. */
export function lambdaThrottled(
  reason = 'ReservedFunctionConcurrentInvocationLimitExceeded',
  message = 'Rate Exceeded.',
): ProxyResponse {
  return lambdaError(429, 'TooManyRequestsException', { Type: 'User', message, Reason: reason });
}

/** The answer of Lambda to a synchronous invocation payload over 6 MB. */
export function lambdaRequestTooLarge(): ProxyResponse {
  return lambdaError(413, 'RequestEntityTooLargeException', {
    Type: 'User',
    message: 'Request must be smaller than 6291456 bytes for the InvokeFunction operation',
  });
}

/** A Lambda (REST-JSON) error: `x-amzn-errortype` names the exception, the JSON body carries its fields. */
export function lambdaError(status: number, errorType: string, body: Record<string, unknown>): ProxyResponse {
  return {
    status,
    headers: {
      'content-type': 'application/json',
      'x-amzn-errortype': errorType,
      'x-amzn-requestid': randomUUID(),
    },
    body: JSON.stringify(body),
  };
}

export async function startRecordingProxy(options: RecordingProxyOptions): Promise<RecordingProxy> {
  const target = new URL(options.target);
  if (target.protocol !== 'http:') throw new Error(`recording proxy: target must be http, got ${options.target}`);
  const basePath = target.pathname.replace(/\/$/, '');
  const requests: RecordedRequest[] = [];
  let responder = options.respond;

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`recording proxy: ${String(err)}`);
      } else {
        res.destroy();
      }
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const received: ReceivedRequest = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      rawHeaders: req.rawHeaders,
      body,
    };
    const q = received.url.indexOf('?');
    const path = q < 0 ? received.url : received.url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : received.url.slice(q + 1));
    const invoke = INVOKE_PATH.exec(path);
    const proxied: ProxiedRequest = {
      method: received.method,
      url: received.url,
      path,
      query,
      headers: req.headers,
      body,
      functionName: invoke ? decodeURIComponent(invoke[1]!) : undefined,
      qualifier: invoke ? (query.get('Qualifier') ?? undefined) : undefined,
    };
    const parsed = parseAuthorization(received.rawHeaders);
    const auth = parsed.ok ? parsed.authorization : undefined;
    const check = checkSignature(received);
    const record = (status: number, answeredBy: 'target' | 'proxy'): void => {
      requests.push({
        at: new Date(),
        method: proxied.method,
        path,
        functionName: proxied.functionName,
        qualifier: proxied.qualifier,
        accessKeyId: auth?.accessKeyId,
        sessionToken: auth?.sessionToken,
        bodySize: body.length,
        signature: check.result,
        signatureValid: options.verify === undefined ? undefined : check.result === 'valid',
        status,
        answeredBy,
      });
    };

    const refused = options.enforce === true && check.result !== 'valid' && check.result !== 'unchecked';
    const own = refused ? rejection(check) : await responder?.(proxied);
    if (own !== undefined) {
      const payload = own.body ?? '';
      res.writeHead(own.status, { ...own.headers, 'content-length': Buffer.byteLength(payload) });
      res.end(payload);
      record(own.status, 'proxy');
      return;
    }

    const answer = await forward(received, req.headers);
    res.writeHead(answer.status, answer.statusMessage, answer.rawHeaders);
    res.end(answer.body);
    record(answer.status, 'target');
  }

  function checkSignature(request: ReceivedRequest): { result: SignatureCheck; message: string } {
    if (options.verify === undefined) return { result: 'unchecked', message: '' };
    const parsed = parseAuthorization(request.rawHeaders);
    if (!parsed.ok) return { result: parsed.problem, message: parsed.message };
    const auth = parsed.authorization;
    const known = options.verify(auth.accessKeyId);
    if (known === undefined) {
      return { result: 'unknown-key', message: 'The security token included in the request is invalid.' };
    }
    const secret = typeof known === 'string' ? { secretAccessKey: known } : known;
    if (secret.sessionToken !== undefined && secret.sessionToken !== auth.sessionToken) {
      return { result: 'invalid-token', message: 'The security token included in the request is invalid.' };
    }
    if (secret.expiration !== undefined && secret.expiration.getTime() <= Date.now()) {
      return { result: 'expired', message: 'The security token included in the request is expired' };
    }
    const verdict = verifySigV4(request, auth, secret.secretAccessKey, {
      service: options.service ?? 'lambda',
      region: options.region,
    });
    return verdict.ok ? { result: 'valid', message: '' } : { result: verdict.problem, message: verdict.message };
  }

  function forward(
    received: ReceivedRequest,
    headers: IncomingHttpHeaders,
  ): Promise<{ status: number; statusMessage: string; rawHeaders: string[]; body: Buffer }> {
    const { host: _host, ...rest } = headers;
    return new Promise((resolve, reject) => {
      const out = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: received.method,
          path: basePath + received.url,
          headers: rest,
        },
        (answer) => {
          readBody(answer).then(
            (body) =>
              resolve({
                status: answer.statusCode ?? 502,
                statusMessage: answer.statusMessage ?? '',
                rawHeaders: answer.rawHeaders,
                body,
              }),
            reject,
          );
        },
      );
      out.once('error', reject);
      out.end(received.body);
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port: options.port ?? 0 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: loopbackUrl(port),
    requests,
    invocations: () => requests.filter((r) => r.functionName !== undefined),
    respondWith: (next) => {
      responder = next;
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** Lambda's answer to a request whose signature does not hold. */
function rejection(check: { result: SignatureCheck; message: string }): ProxyResponse {
  switch (check.result) {
    case 'valid':
    case 'unchecked':
      throw new Error(`recording proxy: no rejection for a ${check.result} signature`);
    case 'unsigned':
      return lambdaError(403, 'MissingAuthenticationTokenException', { message: 'Missing Authentication Token' });
    case 'unknown-key':
    case 'invalid-token':
      return lambdaError(403, 'UnrecognizedClientException', { message: check.message });
    case 'expired':
      return lambdaError(403, 'ExpiredTokenException', { message: check.message });
    case 'malformed':
      return lambdaError(403, 'IncompleteSignatureException', { message: check.message });
    case 'scope':
    case 'skew':
    case 'mismatch':
      return lambdaError(403, 'InvalidSignatureException', { message: check.message });
  }
}
