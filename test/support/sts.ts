import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LOOPBACK, loopbackUrl } from './ports.ts';

/**
 * A test double of AWS STS on loopback, faithful where a client can tell: the query protocol (form-encoded POST,
 * `Action=AssumeRole&Version=2011-06-15&…`), the XML answers and `ErrorResponse`s of the real service with their HTTP
 * statuses, full SigV4 verification of every request (the signature is recomputed from the received request), and a
 * trust policy per role (required `ExternalId`, allowed callers). Issued session credentials (`ASIA…`) can sign
 * later requests (to this double, e.g. `GetCallerIdentity` or role chaining, or to `startRecordingProxy`'s check
 * through `issued()`), and expire after `credentialLifetimeSeconds`.
 *
 * Point the AWS SDK at it with `new STSClient({ endpoint: sts.url, region, credentials })`.
 */

// ---------------------------------------------------------------------------------------------------------------
// SigV4 verification (shared with aws-recording-proxy.ts)
// ---------------------------------------------------------------------------------------------------------------

/** A request as it arrived on the wire. */
export interface ReceivedRequest {
  readonly method: string;
  /** The request target: path and raw query string (`IncomingMessage.url`). */
  readonly url: string;
  /** `IncomingMessage.rawHeaders`: names and values alternating, duplicates kept. */
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
}

/** The parts of a SigV4 `Authorization` header. */
export interface SigV4Authorization {
  readonly accessKeyId: string;
  /** `YYYYMMDD` of the credential scope. */
  readonly scopeDate: string;
  readonly region: string;
  readonly service: string;
  readonly signedHeaders: readonly string[];
  readonly signature: string;
  /** The `x-amz-date` header (`YYYYMMDDTHHMMSSZ`), if any. */
  readonly amzDate: string | undefined;
  /** The `x-amz-security-token` header, if any. */
  readonly sessionToken: string | undefined;
}

export type SigV4Problem = 'unsigned' | 'malformed' | 'scope' | 'skew' | 'mismatch';

export type SigV4Verdict = { readonly ok: true } | { readonly ok: false; problem: SigV4Problem; message: string };

export type SigV4Parse =
  | { readonly ok: true; authorization: SigV4Authorization }
  | { readonly ok: false; problem: 'unsigned' | 'malformed'; message: string };

const ALGORITHM = 'AWS4-HMAC-SHA256';
/** How far `x-amz-date` may be from the server's clock, as AWS allows. */
const MAX_SKEW_MS = 15 * 60 * 1000;
const EMPTY_SHA256 = createHash('sha256').digest('hex');

/** The header values of a request, by lower-case name, duplicates joined with ',' as SigV4 canonicalises them. */
export function headerMap(rawHeaders: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    const value = rawHeaders[i + 1]!;
    const prior = out.get(name);
    out.set(name, prior === undefined ? value : `${prior},${value}`);
  }
  return out;
}

/** Reads the `Authorization` header; `unsigned` when there is none, `malformed` when it is not SigV4. */
export function parseAuthorization(rawHeaders: readonly string[]): SigV4Parse {
  const headers = headerMap(rawHeaders);
  const header = headers.get('authorization');
  if (header === undefined)
    return { ok: false, problem: 'unsigned', message: 'Request is missing Authentication Token' };
  const malformed = (message: string): SigV4Parse => ({ ok: false, problem: 'malformed', message });
  if (!header.startsWith(`${ALGORITHM} `)) {
    return malformed(`Unsupported authorization algorithm: ${header.split(' ')[0] ?? ''}`);
  }
  const fields = new Map<string, string>();
  for (const part of header.slice(ALGORITHM.length + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (credential === undefined || signedHeaders === undefined || signature === undefined) {
    const missing = ['Credential', 'SignedHeaders', 'Signature'].filter((f) => !fields.has(f));
    return malformed(
      `Authorization header requires ${missing.map((m) => `'${m}'`).join(', ')} parameter(s). Authorization=${header}`,
    );
  }
  const scope = credential.split('/');
  if (scope.length !== 5 || scope[4] !== 'aws4_request') {
    return malformed(
      `Credential should be scoped to a valid region, service and terminated with 'aws4_request'. Credential=${credential}`,
    );
  }
  const [accessKeyId, scopeDate, region, service] = scope as [string, string, string, string, string];
  if (!/^[0-9a-f]{64}$/.test(signature)) return malformed(`Signature is malformed: ${signature}`);
  return {
    ok: true,
    authorization: {
      accessKeyId,
      scopeDate,
      region,
      service,
      signedHeaders: signedHeaders.split(';'),
      signature,
      amzDate: headers.get('x-amz-date'),
      sessionToken: headers.get('x-amz-security-token'),
    },
  };
}

export interface SigV4Expectation {
  /** The signing name the credential scope must name (`sts`, `lambda`). */
  readonly service: string;
  /** The region the credential scope must name; any region when unset. */
  readonly region?: string | undefined;
  readonly now?: Date | undefined;
}

/**
 * Recomputes the SigV4 signature of a received request with `secretAccessKey` (the canonical request from the
 * signed headers as received, the path encoded once more as every service but S3 does, the sorted re-encoded query,
 * the payload hash from `x-amz-content-sha256` or the body) and compares it with the one in `Authorization`. The
 * scope, the date and the clock skew are checked first, with the messages AWS gives.
 */
export function verifySigV4(
  request: ReceivedRequest,
  auth: SigV4Authorization,
  secretAccessKey: string,
  expect: SigV4Expectation,
): SigV4Verdict {
  const fail = (problem: SigV4Problem, message: string): SigV4Verdict => ({ ok: false, problem, message });
  if (auth.service !== expect.service) {
    return fail('scope', `Credential should be scoped to correct service: '${expect.service}'. `);
  }
  if (expect.region !== undefined && auth.region !== expect.region) {
    return fail('scope', `Credential should be scoped to a valid region. `);
  }
  if (!auth.signedHeaders.includes('host')) {
    return fail('malformed', "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");
  }
  const amzDate = auth.amzDate;
  if (amzDate === undefined || !/^\d{8}T\d{6}Z$/.test(amzDate)) {
    return fail('malformed', "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.");
  }
  if (auth.scopeDate !== amzDate.slice(0, 8)) {
    return fail(
      'scope',
      `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${auth.scopeDate}' != '${amzDate.slice(0, 8)}', from '${amzDate}'.`,
    );
  }
  const now = expect.now ?? new Date();
  const signedAt = parseAmzDate(amzDate);
  if (signedAt.getTime() < now.getTime() - MAX_SKEW_MS) {
    return fail(
      'skew',
      `Signature expired: ${amzDate} is now earlier than ${amzDateOf(new Date(now.getTime() - MAX_SKEW_MS))} (${amzDateOf(now)} - 15 min.)`,
    );
  }
  if (signedAt.getTime() > now.getTime() + MAX_SKEW_MS) {
    return fail(
      'skew',
      `Signature not yet current: ${amzDate} is still later than ${amzDateOf(new Date(now.getTime() + MAX_SKEW_MS))} (${amzDateOf(now)} + 15 min.)`,
    );
  }
  const expected = signature(request, auth, secretAccessKey);
  const matches = timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(auth.signature, 'hex'));
  return matches
    ? { ok: true }
    : fail(
        'mismatch',
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
      );
}

function signature(request: ReceivedRequest, auth: SigV4Authorization, secretAccessKey: string): string {
  const headers = headerMap(request.rawHeaders);
  const canonicalHeaders = [...auth.signedHeaders]
    .sort()
    .map((name) => `${name}:${canonicalHeaderValue(headers.get(name) ?? '')}\n`)
    .join('');
  const q = request.url.indexOf('?');
  const path = q < 0 ? request.url : request.url.slice(0, q);
  const query = q < 0 ? '' : request.url.slice(q + 1);
  // The hash of the body as received, never the client's claim: a claimed `x-amz-content-sha256` that differs from
  // the body spoils the signature, as it does at AWS (only `UNSIGNED-PAYLOAD` opts out of signing the body).
  const bodyHash = request.body.length === 0 ? EMPTY_SHA256 : createHash('sha256').update(request.body).digest('hex');
  const claimed = headers.get('x-amz-content-sha256');
  const payloadHash = claimed === 'UNSIGNED-PAYLOAD' ? claimed : bodyHash;
  const canonicalRequest = [
    request.method,
    canonicalPath(path),
    canonicalQuery(query),
    canonicalHeaders,
    [...auth.signedHeaders].sort().join(';'),
    payloadHash,
  ].join('\n');
  const scope = `${auth.scopeDate}/${auth.region}/${auth.service}/aws4_request`;
  const stringToSign = [
    ALGORITHM,
    auth.amzDate ?? '',
    scope,
    createHash('sha256').update(canonicalRequest).digest('hex'),
  ].join('\n');
  let key: Buffer = hmac(`AWS4${secretAccessKey}`, auth.scopeDate);
  for (const part of [auth.region, auth.service, 'aws4_request']) key = hmac(key, part);
  return createHmac('sha256', key).update(stringToSign).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

function canonicalHeaderValue(value: string): string {
  return value
    .replace(/[\r\n]/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .trim();
}

/** RFC 3986 encoding: everything but `A-Z a-z 0-9 - _ . ~`. */
function uriEscape(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The wire path normalised (`.`, `..`, empty segments) with each segment encoded again. */
function canonicalPath(path: string): string {
  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const trailing = segments.length > 0 && path.endsWith('/') ? '/' : '';
  return `/${segments.map(uriEscape).join('/')}${trailing}`;
}

function canonicalQuery(query: string): string {
  const pairs: [string, string][] = [];
  for (const part of query.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const key = safeDecode(eq < 0 ? part : part.slice(0, eq));
    if (key.toLowerCase() === 'x-amz-signature') continue;
    pairs.push([uriEscape(key), uriEscape(eq < 0 ? '' : safeDecode(part.slice(eq + 1)))]);
  }
  return pairs
    .sort(([ka, va], [kb, vb]) => (ka < kb ? -1 : ka > kb ? 1 : va < vb ? -1 : va > vb ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    // A malformed escape is signed as it came; the signature then decides.
    return value;
  }
}

function parseAmzDate(amzDate: string): Date {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate)!;
  return new Date(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`);
}

function amzDateOf(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
}

/** Reads a request body whole. */
export function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.once('end', () => resolve(Buffer.concat(chunks)));
    request.once('error', reject);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// The STS double
// ---------------------------------------------------------------------------------------------------------------

/** A long-term IAM identity allowed to call STS (an IAM user's access key). */
export interface StsCaller {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** The caller's ARN in messages and `GetCallerIdentity`; `arn:aws:iam::111122223333:user/<accessKeyId>` by default. */
  readonly arn?: string | undefined;
}

/** The trust policy of a role. */
export interface StsRole {
  /** The `sts:ExternalId` the trust policy requires; any (or none) when unset. */
  readonly externalId?: string | undefined;
  /** Access key ids or caller ARNs the trust policy names; every known caller when unset. */
  readonly allowedCallers?: readonly string[] | undefined;
  /** The role's maximum session duration; 3600 (the IAM default) when unset. */
  readonly maxSessionDurationSeconds?: number | undefined;
}

export interface FakeStsOptions {
  readonly callers: readonly StsCaller[];
  /** Role ARN → trust policy. A role not here is AccessDenied, as a role whose trust policy excludes the caller. */
  readonly roles: Readonly<Record<string, StsRole>>;
  /** Lifetime of issued credentials, overriding `DurationSeconds` (so tests can make them expire in seconds). */
  readonly credentialLifetimeSeconds?: number | undefined;
  /** The region credential scopes must name (a regional STS endpoint); any region when unset. */
  readonly region?: string | undefined;
  /** The port to listen on; one the kernel picks when unset. */
  readonly port?: number | undefined;
}

/** Temporary credentials issued by `AssumeRole`. */
export interface IssuedCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
  /** As in the response: whole seconds. */
  readonly expiration: Date;
  readonly roleArn: string;
  readonly roleSessionName: string;
  /** `arn:aws:sts::<account>:assumed-role/<role name>/<session name>`. */
  readonly assumedRoleArn: string;
  /** `AROA…:<session name>`. */
  readonly assumedRoleId: string;
}

export type StsErrorCode =
  | 'AccessDenied'
  | 'ExpiredToken'
  | 'IncompleteSignature'
  | 'InternalFailure'
  | 'InvalidAction'
  | 'InvalidClientTokenId'
  | 'MissingAuthenticationToken'
  | 'SignatureDoesNotMatch'
  | 'ValidationError';

/** One request to the double, whatever its outcome. */
export interface StsCall {
  readonly at: Date;
  readonly requestId: string;
  /** `AssumeRole`, `GetCallerIdentity`, or whatever the request named. */
  readonly action: string | undefined;
  readonly roleArn: string | undefined;
  readonly roleSessionName: string | undefined;
  readonly externalId: string | undefined;
  readonly durationSeconds: number | undefined;
  /** From the `Authorization` header (whether or not the signature held). */
  readonly callerAccessKeyId: string | undefined;
  /** The region of the credential scope. */
  readonly region: string | undefined;
  /** Set when AssumeRole issued credentials. */
  readonly credentials: IssuedCredentials | undefined;
  readonly status: number;
  /** `issued` (AssumeRole), `ok` (another action), or the error code answered. */
  readonly outcome: 'issued' | 'ok' | StsErrorCode;
  /** The error message answered, if any. */
  readonly message: string | undefined;
}

export interface FakeSts {
  /** `http://127.0.0.1:<port>`: the `endpoint` of `STSClient` (or `AWS_ENDPOINT_URL_STS`). */
  readonly url: string;
  /** Every request so far, in order of arrival. */
  readonly calls: readonly StsCall[];
  /** Credentials issued under this access key id (expired ones included), or undefined. */
  issued(accessKeyId: string): IssuedCredentials | undefined;
  /** Adds or replaces a role's trust policy. */
  putRole(roleArn: string, role: StsRole): void;
  /** Removes a role: AssumeRole on it is AccessDenied from now on. */
  deleteRole(roleArn: string): void;
  stop(): Promise<void>;
}

const NAMESPACE = 'https://sts.amazonaws.com/doc/2011-06-15/';
const VERSION = '2011-06-15';
const DEFAULT_ACCOUNT = '111122223333';
const ROLE_SESSION_NAME = /^[\w+=,.@-]*$/;
const EXTERNAL_ID = /^[\w+=,.@:/-]*$/;

class StsError extends Error {
  constructor(
    readonly status: number,
    readonly code: StsErrorCode,
    message: string,
  ) {
    super(message);
  }
  get type(): 'Sender' | 'Receiver' {
    return this.status >= 500 ? 'Receiver' : 'Sender';
  }
}

interface Identity {
  readonly accessKeyId: string;
  readonly arn: string;
  readonly userId: string;
}

export async function startFakeSts(options: FakeStsOptions): Promise<FakeSts> {
  const callers = new Map(options.callers.map((c) => [c.accessKeyId, c]));
  const roles = new Map(Object.entries(options.roles));
  const issued = new Map<string, IssuedCredentials>();
  const calls: StsCall[] = [];

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      // The double itself failed: answer as STS does for an internal error, so the test sees a 500.
      if (!res.headersSent) sendError(res, randomUUID(), new StsError(500, 'InternalFailure', String(err)));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const body = await readBody(req);
    const received: ReceivedRequest = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      rawHeaders: req.rawHeaders,
      body,
    };
    const q = received.url.indexOf('?');
    const params = new URLSearchParams(
      received.method === 'POST' ? body.toString('utf8') : q < 0 ? '' : received.url.slice(q + 1),
    );
    const param = (name: string): string | undefined => params.get(name) ?? undefined;
    const duration = param('DurationSeconds');
    const base = {
      at: new Date(),
      requestId,
      action: param('Action'),
      roleArn: param('RoleArn'),
      roleSessionName: param('RoleSessionName'),
      externalId: param('ExternalId'),
      durationSeconds: duration === undefined ? undefined : Number(duration),
    };
    const parsed = parseAuthorization(received.rawHeaders);
    const auth = parsed.ok ? parsed.authorization : undefined;
    const record = { ...base, callerAccessKeyId: auth?.accessKeyId, region: auth?.region };
    try {
      const caller = authenticate(received, parsed);
      if (base.action === 'AssumeRole' && params.get('Version') === VERSION) {
        const credentials = assumeRole(caller, params);
        calls.push({ ...record, credentials, status: 200, outcome: 'issued', message: undefined });
        sendXml(res, 200, requestId, assumeRoleResponse(credentials, requestId));
      } else if (base.action === 'GetCallerIdentity' && params.get('Version') === VERSION) {
        calls.push({ ...record, credentials: undefined, status: 200, outcome: 'ok', message: undefined });
        sendXml(res, 200, requestId, callerIdentityResponse(caller, requestId));
      } else {
        throw new StsError(
          400,
          'InvalidAction',
          `Could not find operation ${base.action ?? ''} for version ${params.get('Version') ?? 'NO_VERSION_SPECIFIED'}`,
        );
      }
    } catch (err) {
      if (!(err instanceof StsError)) throw err;
      calls.push({ ...record, credentials: undefined, status: err.status, outcome: err.code, message: err.message });
      sendError(res, requestId, err);
    }
  }

  /** Who signed the request, once the key, the session token and the signature all hold. */
  function authenticate(request: ReceivedRequest, parsed: SigV4Parse): Identity {
    if (!parsed.ok) {
      if (parsed.problem === 'unsigned') throw new StsError(403, 'MissingAuthenticationToken', parsed.message);
      throw new StsError(400, 'IncompleteSignature', parsed.message);
    }
    const auth = parsed.authorization;
    const invalidToken = (): StsError =>
      new StsError(403, 'InvalidClientTokenId', 'The security token included in the request is invalid.');
    let identity: Identity;
    let secret: string;
    const caller = callers.get(auth.accessKeyId);
    const session = issued.get(auth.accessKeyId);
    if (caller !== undefined) {
      // A long-term key signs without a session token; with one, STS rejects the token.
      if (auth.sessionToken !== undefined) throw invalidToken();
      const arn = caller.arn ?? `arn:aws:iam::${DEFAULT_ACCOUNT}:user/${caller.accessKeyId}`;
      identity = { accessKeyId: caller.accessKeyId, arn, userId: uniqueId('AIDA', arn) };
      secret = caller.secretAccessKey;
    } else if (session !== undefined) {
      if (auth.sessionToken !== session.sessionToken) throw invalidToken();
      if (session.expiration.getTime() <= Date.now()) {
        throw new StsError(403, 'ExpiredToken', 'The security token included in the request is expired');
      }
      identity = { accessKeyId: session.accessKeyId, arn: session.assumedRoleArn, userId: session.assumedRoleId };
      secret = session.secretAccessKey;
    } else {
      throw invalidToken();
    }
    const verdict = verifySigV4(request, auth, secret, { service: 'sts', region: options.region });
    if (!verdict.ok) {
      if (verdict.problem === 'malformed') throw new StsError(400, 'IncompleteSignature', verdict.message);
      throw new StsError(403, 'SignatureDoesNotMatch', verdict.message);
    }
    return identity;
  }

  function assumeRole(caller: Identity, params: URLSearchParams): IssuedCredentials {
    const roleArn = params.get('RoleArn');
    const sessionName = params.get('RoleSessionName');
    const externalId = params.get('ExternalId');
    const durationParam = params.get('DurationSeconds');
    const problems: string[] = [];
    const constrain = (member: string, value: string | null, rules: [boolean, string][]): void => {
      if (value === null) {
        problems.push(`Value null at '${member}' failed to satisfy constraint: Member must not be null`);
        return;
      }
      for (const [holds, rule] of rules) {
        if (!holds) problems.push(`Value '${value}' at '${member}' failed to satisfy constraint: Member must ${rule}`);
      }
    };
    constrain('roleArn', roleArn, [
      [(roleArn ?? '').length >= 20, 'have length greater than or equal to 20'],
      [(roleArn ?? '').length <= 2048, 'have length less than or equal to 2048'],
    ]);
    constrain('roleSessionName', sessionName, [
      [ROLE_SESSION_NAME.test(sessionName ?? ''), 'satisfy regular expression pattern: [\\w+=,.@-]*'],
      [(sessionName ?? '').length >= 2, 'have length greater than or equal to 2'],
      [(sessionName ?? '').length <= 64, 'have length less than or equal to 64'],
    ]);
    if (externalId !== null) {
      constrain('externalId', externalId, [
        [EXTERNAL_ID.test(externalId), 'satisfy regular expression pattern: [\\w+=,.@:\\/-]*'],
        [externalId.length >= 2, 'have length greater than or equal to 2'],
        [externalId.length <= 1224, 'have length less than or equal to 1224'],
      ]);
    }
    let durationSeconds: number | undefined;
    if (durationParam !== null) {
      durationSeconds = Number(durationParam);
      if (!Number.isInteger(durationSeconds)) {
        problems.push(
          `Value '${durationParam}' at 'durationSeconds' failed to satisfy constraint: Member must be an integer`,
        );
      } else {
        constrain('durationSeconds', durationParam, [
          [durationSeconds >= 900, 'have value greater than or equal to 900'],
          [durationSeconds <= 43200, 'have value less than or equal to 43200'],
        ]);
      }
    }
    if (problems.length > 0) {
      const n = problems.length;
      throw new StsError(
        400,
        'ValidationError',
        `${n} validation error${n === 1 ? '' : 's'} detected: ${problems.join('; ')}`,
      );
    }
    const arn = roleArn!;
    const name = sessionName!;
    const role = roles.get(arn);
    const allowed =
      role !== undefined &&
      (role.allowedCallers === undefined ||
        role.allowedCallers.includes(caller.accessKeyId) ||
        role.allowedCallers.includes(caller.arn)) &&
      (role.externalId === undefined || role.externalId === externalId);
    if (!allowed) {
      throw new StsError(
        403,
        'AccessDenied',
        `User: ${caller.arn} is not authorized to perform: sts:AssumeRole on resource: ${arn}`,
      );
    }
    if (durationSeconds !== undefined && durationSeconds > (role.maxSessionDurationSeconds ?? 3600)) {
      throw new StsError(
        400,
        'ValidationError',
        'The requested DurationSeconds exceeds the MaxSessionDuration set for this role.',
      );
    }
    const lifetime = options.credentialLifetimeSeconds ?? durationSeconds ?? 3600;
    // STS answers whole seconds; the credentials expire at exactly what the response says.
    const expiration = new Date(Math.floor((Date.now() + lifetime * 1000) / 1000) * 1000);
    const account = arn.split(':')[4] ?? DEFAULT_ACCOUNT;
    const roleName = arn.slice(arn.lastIndexOf('/') + 1);
    const credentials: IssuedCredentials = {
      accessKeyId: keyId('ASIA'),
      secretAccessKey: randomBytes(30).toString('base64'),
      sessionToken: randomBytes(96).toString('base64'),
      expiration,
      roleArn: arn,
      roleSessionName: name,
      assumedRoleArn: `arn:aws:sts::${account}:assumed-role/${roleName}/${name}`,
      assumedRoleId: `${uniqueId('AROA', arn)}:${name}`,
    };
    issued.set(credentials.accessKeyId, credentials);
    return credentials;
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
    calls,
    issued: (accessKeyId) => issued.get(accessKeyId),
    putRole: (roleArn, role) => void roles.set(roleArn, role),
    deleteRole: (roleArn) => void roles.delete(roleArn),
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // SDK clients keep their connections alive; close them so `close` completes.
        server.closeAllConnections();
      }),
  };
}

/** An access key id: the prefix (`AKIA` long-term, `ASIA` temporary) and 16 upper-case letters and digits. */
function keyId(prefix: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return prefix + [...randomBytes(16)].map((b) => alphabet[b % alphabet.length]).join('');
}

/** A stable IAM unique id (`AIDA…`, `AROA…`) for an ARN. */
function uniqueId(prefix: string, arn: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return prefix + [...createHash('sha256').update(arn).digest().subarray(0, 17)].map((b) => alphabet[b % 32]).join('');
}

function xml(value: string): string {
  return value.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

function iso(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function assumeRoleResponse(c: IssuedCredentials, requestId: string): string {
  return `<AssumeRoleResponse xmlns="${NAMESPACE}">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>${c.accessKeyId}</AccessKeyId>
      <SecretAccessKey>${xml(c.secretAccessKey)}</SecretAccessKey>
      <SessionToken>${xml(c.sessionToken)}</SessionToken>
      <Expiration>${iso(c.expiration)}</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <AssumedRoleId>${xml(c.assumedRoleId)}</AssumedRoleId>
      <Arn>${xml(c.assumedRoleArn)}</Arn>
    </AssumedRoleUser>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>${requestId}</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>
`;
}

function callerIdentityResponse(identity: Identity, requestId: string): string {
  return `<GetCallerIdentityResponse xmlns="${NAMESPACE}">
  <GetCallerIdentityResult>
    <Arn>${xml(identity.arn)}</Arn>
    <UserId>${xml(identity.userId)}</UserId>
    <Account>${identity.arn.split(':')[4] ?? DEFAULT_ACCOUNT}</Account>
  </GetCallerIdentityResult>
  <ResponseMetadata>
    <RequestId>${requestId}</RequestId>
  </ResponseMetadata>
</GetCallerIdentityResponse>
`;
}

function sendError(res: ServerResponse, requestId: string, err: StsError): void {
  sendXml(
    res,
    err.status,
    requestId,
    `<ErrorResponse xmlns="${NAMESPACE}">
  <Error>
    <Type>${err.type}</Type>
    <Code>${err.code}</Code>
    <Message>${xml(err.message)}</Message>
  </Error>
  <RequestId>${requestId}</RequestId>
</ErrorResponse>
`,
  );
}

function sendXml(res: ServerResponse, status: number, requestId: string, body: string): void {
  res.writeHead(status, {
    'x-amzn-RequestId': requestId,
    'Content-Type': 'text/xml',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}
