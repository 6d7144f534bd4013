import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import {
  DISCOVERY_ACCEPT_HEADER,
  isSupportedManifestVersion,
  manifestContentType,
  parseManifestContentType,
  SUPPORTED_MANIFEST_VERSIONS,
  type ManifestVersion,
} from '../protocol/version.ts';
import { InvalidRequestFieldError } from '../errors/errors.ts';
import { BadDiscoveryResponseError, DiscoveryFailedError, Http2DiscoveryFailedError } from './errors.ts';

/**
 * Deployment discovery (`GET {uri}/discover`), the way restate-server does it: HTTP/2 cleartext with prior knowledge
 * unless the deployment is registered with `use_http_11`, the Accept header listing manifest v1..v4, the cluster
 * name, and the deployment's additional headers.
 */

export type HttpVersion = 'HTTP/2.0' | 'HTTP/1.1';
/** What discovery (and then every invocation) runs over: HTTP/2, HTTP/1.1, or a Lambda function's Invoke API. */
export type DiscoveryTransport = HttpVersion | 'Lambda';

export interface DiscoverOptions {
  /** The deployment URI; normalised here (a bare origin gets its trailing `/`). */
  readonly uri: string;
  readonly additionalHeaders: Readonly<Record<string, string>>;
  readonly useHttp11: boolean;
  readonly clusterName: string;
  /** Whole exchange: connect, response headers and body. */
  readonly timeoutMs: number;
}

export interface DiscoveryResponse {
  /** The decoded JSON body; validated by `schema/manifest.ts`. */
  readonly manifest: unknown;
  readonly contentType: string;
  readonly manifestVersion: ManifestVersion;
  readonly transport: DiscoveryTransport;
  /** The SDK's `x-restate-server` header, e.g. `restate-sdk-typescript/1.17.2`. */
  readonly sdkVersion: string | undefined;
}

/** A manifest with big JSON schemas is still far below this; anything larger is not a manifest. */
const MAX_MANIFEST_BYTES = 32 * 1024 * 1024;
const BODY_SNIPPET_CHARS = 1024;

/**
 * The URI as it is stored and compared: WHATWG-serialised, so `http://host:9080` becomes `http://host:9080/` and a
 * path prefix keeps its exact form. Only absolute http(s) URIs are accepted.
 */
export function normalizeDeploymentUri(uri: string): string {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw new InvalidRequestFieldError(
      'uri',
      `The provided uri ${uri} is not absolute, only absolute URIs can be used.`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidRequestFieldError(
      'uri',
      `The provided uri ${uri} uses the scheme '${url.protocol.slice(0, -1)}'; only http and https deployments are supported.`,
    );
  }
  return url.href;
}

/** `{uri}/discover`, keeping any path prefix: `http://h/a/b` → `http://h/a/b/discover`. */
export function discoveryUrl(uri: string): URL {
  const url = new URL(normalizeDeploymentUri(uri));
  url.pathname = url.pathname.endsWith('/') ? `${url.pathname}discover` : `${url.pathname}/discover`;
  url.search = '';
  url.hash = '';
  return url;
}

/** A discovery answer as received: status, headers and the whole body. */
export interface RawResponse {
  status: number;
  statusText: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

class DiscoveryTimeout extends Error {
  constructor(timeoutMs: number) {
    super(`no discovery response within ${timeoutMs} ms`);
    this.name = 'DiscoveryTimeout';
  }
}

class BodyTooLarge extends Error {
  constructor() {
    super(`the discovery response is larger than ${MAX_MANIFEST_BYTES} bytes`);
    this.name = 'BodyTooLarge';
  }
}

/** The headers of a discovery request: the deployment's own, then the Accept list and the cluster name. */
export function discoveryRequestHeaders(options: {
  additionalHeaders: Readonly<Record<string, string>>;
  clusterName: string;
}): Record<string, string> {
  return {
    ...options.additionalHeaders,
    accept: DISCOVERY_ACCEPT_HEADER,
    'x-restate-cluster-name': options.clusterName,
  };
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

export function causeMessage(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error && !err.message.includes(cause.message)
      ? `${err.message}: ${cause.message}`
      : err.message;
  }
  return String(err);
}

function collectBody(
  stream: NodeJS.ReadableStream,
  onDone: (body: Buffer) => void,
  onError: (err: Error) => void,
  abort: (err: Error) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  stream.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_MANIFEST_BYTES) {
      abort(new BodyTooLarge());
      return;
    }
    chunks.push(chunk);
  });
  stream.on('end', () => onDone(Buffer.concat(chunks)));
  stream.on('error', onError);
}

class H2Failure extends Error {
  constructor(
    readonly err: Error,
    /** The TCP (or TLS) connection was up: a failure after this point is a protocol problem, not reachability. */
    readonly connected: boolean,
  ) {
    super(err.message, { cause: err });
    this.name = 'H2Failure';
  }
}

function exchangeHttp2(url: URL, headers: Record<string, string>, timeoutMs: number): Promise<RawResponse> {
  return new Promise<RawResponse>((resolve, reject) => {
    let connected = false;
    let settled = false;
    const session = http2.connect(url.origin);
    const finish = (outcome: { ok: RawResponse } | { failure: H2Failure }): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // The session served exactly this one request; close it whatever happened.
      if ('ok' in outcome) {
        session.close();
        resolve(outcome.ok);
      } else {
        session.destroy();
        reject(outcome.failure);
      }
    };
    const timer = setTimeout(
      () => finish({ failure: new H2Failure(new DiscoveryTimeout(timeoutMs), false) }),
      timeoutMs,
    );
    session.on('connect', () => {
      connected = true;
    });
    session.on('error', (err: Error) => finish({ failure: new H2Failure(err, connected) }));
    session.on('close', () =>
      finish({ failure: new H2Failure(new Error('the connection closed before a response arrived'), connected) }),
    );
    const stream = session.request({ ':method': 'GET', ':path': url.pathname + url.search, ...headers });
    stream.on('error', (err: Error) => {
      // A stream cancelled because its session failed: the session's own error (e.g. ECONNREFUSED) follows and
      // says more.
      if ((err as NodeJS.ErrnoException).code === 'ERR_HTTP2_STREAM_CANCEL') return;
      finish({ failure: new H2Failure(err, connected) });
    });
    stream.on('response', (responseHeaders) => {
      const status = Number(responseHeaders[':status']);
      collectBody(
        stream,
        (body) =>
          finish({
            ok: {
              status,
              statusText: http.STATUS_CODES[status] ?? '',
              headers: responseHeaders,
              body,
            },
          }),
        (err) => finish({ failure: new H2Failure(err, connected) }),
        (err) => finish({ failure: new H2Failure(err, connected) }),
      );
    });
    stream.end();
  });
}

function exchangeHttp1(url: URL, headers: Record<string, string>, timeoutMs: number): Promise<RawResponse> {
  return new Promise<RawResponse>((resolve, reject) => {
    let settled = false;
    const client = url.protocol === 'https:' ? https : http;
    // agent: false = a fresh connection, closed after this one request.
    const req = client.request(url, { method: 'GET', headers, agent: false }, (res) => {
      collectBody(
        res,
        (body) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve({
            status: res.statusCode ?? 0,
            statusText: res.statusMessage ?? http.STATUS_CODES[res.statusCode ?? 0] ?? '',
            headers: res.headers,
            body,
          });
        },
        fail,
        (err) => {
          fail(err);
          req.destroy();
        },
      );
    });
    function fail(err: Error): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    }
    const timer = setTimeout(() => {
      fail(new DiscoveryTimeout(timeoutMs));
      req.destroy();
    }, timeoutMs);
    req.on('error', fail);
    req.end();
  });
}

/** Node's own HTTP/2 errors: seen when the peer answers the connection preface with something that is not HTTP/2. */
function isHttp2ProtocolFailure(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  return code.startsWith('ERR_HTTP2_') || err.message === 'the connection closed before a response arrived';
}

function transportError(uri: string, err: unknown, useHttp11: boolean): Error {
  const inner = err instanceof H2Failure ? err.err : err;
  if (inner instanceof BodyTooLarge) {
    return new BadDiscoveryResponseError(`received a bad response from the SDK: ${inner.message}`, { cause: inner });
  }
  const failure = err instanceof H2Failure ? err : undefined;
  if (!useHttp11 && failure?.connected === true && isHttp2ProtocolFailure(failure.err)) {
    return new Http2DiscoveryFailedError(
      `error when calling '${uri}': server possibly supports only HTTP1.1, consider discovery with ` +
        `"use_http_11": true (restate CLI: --use-http1.1). Cause: ${causeMessage(failure.err)}`,
      { cause: failure.err },
    );
  }
  const cause = failure?.err ?? err;
  const reason =
    cause instanceof DiscoveryTimeout
      ? `timed out: ${cause.message}`
      : `unable to reach the remote endpoint: ${causeMessage(cause)}`;
  return new DiscoveryFailedError(
    `error when calling '${uri}': ${reason}. Check that the deployment is running and reachable from Ratchet.`,
    { cause },
  );
}

function snippet(body: Buffer): string {
  const text = body.toString('utf8');
  return text.length > BODY_SNIPPET_CHARS ? `${text.slice(0, BODY_SNIPPET_CHARS)}… (${body.length} bytes)` : text;
}

/**
 * Runs discovery against an HTTP deployment. Failures are coded errors: unreachable, timed out or non-2xx →
 * META0003; an HTTP/2 protocol failure on an established connection (an HTTP/1.1-only server) → META0014; a body
 * that is not a manifest of a supported version → META0013.
 */
export async function discover(options: DiscoverOptions): Promise<DiscoveryResponse> {
  const uri = normalizeDeploymentUri(options.uri);
  const url = discoveryUrl(uri);
  const headers = discoveryRequestHeaders(options);
  const httpVersion: HttpVersion = options.useHttp11 ? 'HTTP/1.1' : 'HTTP/2.0';

  let response: RawResponse;
  try {
    response = options.useHttp11
      ? await exchangeHttp1(url, headers, options.timeoutMs)
      : await exchangeHttp2(url, headers, options.timeoutMs);
  } catch (err) {
    throw transportError(uri, err, options.useHttp11);
  }
  return readDiscoveryResponse(uri, response, httpVersion);
}

/**
 * Checks a discovery answer, whatever carried it (HTTP, or a Lambda function's HTTP-like response): a 2xx status, a
 * supported manifest content type, a JSON body. `address` (URI or ARN) names the endpoint in messages.
 */
export function readDiscoveryResponse(
  address: string,
  response: RawResponse,
  transport: DiscoveryTransport,
): DiscoveryResponse {
  if (response.status < 200 || response.status > 299) {
    const authHint =
      response.status === 401 || response.status === 403
        ? ' The endpoint requires authentication: pass the credentials it expects in additional_headers.'
        : '';
    throw new DiscoveryFailedError(
      `error when calling '${address}': got status code '${response.status} ${response.statusText}'. ` +
        `Body: ${snippet(response.body)}.${authHint}`,
    );
  }

  const contentType = headerValue(response.headers['content-type']) ?? '';
  const manifestVersion = parseManifestContentType(contentType);
  if (manifestVersion === undefined || !isSupportedManifestVersion(manifestVersion)) {
    const expected = SUPPORTED_MANIFEST_VERSIONS.map((v) => `'${manifestContentType(v)}'`).join(', ');
    const what =
      manifestVersion === undefined
        ? `bad content type header '${contentType}'`
        : `unsupported endpoint manifest version ${manifestVersion} (content type '${contentType}')`;
    throw new BadDiscoveryResponseError(
      `received a bad response from the SDK: ${what}. Expected one of ${expected}; upgrade the SDK.`,
    );
  }

  let manifest: unknown;
  try {
    manifest = JSON.parse(response.body.toString('utf8'));
  } catch (err) {
    throw new BadDiscoveryResponseError(
      `received a bad response from the SDK that cannot be decoded: ${causeMessage(err)}. ` +
        `Discovery response: ${snippet(response.body)}`,
      { cause: err },
    );
  }

  return {
    manifest,
    contentType,
    manifestVersion,
    transport,
    sdkVersion: headerValue(response.headers['x-restate-server']),
  };
}
