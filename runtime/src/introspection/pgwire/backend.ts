import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { IntrospectionAccess } from '../access.ts';
import { HandshakeReader } from './handshake-reader.ts';
import {
  AUTH_CLEARTEXT,
  AUTH_MD5,
  AUTH_OK,
  AUTH_SASL,
  AUTH_SASL_CONTINUE,
  AUTH_SASL_FINAL,
  cancelRequest,
  MSG,
  parseErrorFields,
  passwordMessage,
  Reader,
  saslInitialResponse,
  saslResponse,
  sslRequest,
  startupMessage,
  Writer,
} from './messages.ts';
import { SCRAM_SHA_256, ScramClient } from './scram.ts';

/*
 * The listener's side towards PostgreSQL: one connection per SQL session, logged in as the read-only introspection
 * role, up to its first ReadyForQuery. From there on the session relays bytes.
 */

/** How a backend connection negotiates TLS, after libpq's `sslmode`. */
type BackendTls =
  { readonly mode: 'disable' } | { readonly mode: 'prefer' | 'require'; readonly options: ConnectionOptions };

/** Where and as whom the listener connects; derived from the role's connection string. */
export interface BackendTarget {
  /** Host name, IP address, or (starting with '/') the directory of a Unix socket. */
  readonly host: string;
  readonly port: number;
  readonly database: string;
  readonly user: string;
  readonly password: string;
  readonly tls: BackendTls;
}

/** The backend could not be reached or logged into, for a reason of ours (network, TLS, authentication method). */
export class BackendUnavailable extends Error {
  override readonly name = 'BackendUnavailable';
}

/** PostgreSQL refused the session with an ErrorResponse; `raw` is that message, to relay to the client as is. */
export class BackendRefused extends Error {
  override readonly name = 'BackendRefused';

  constructor(
    readonly raw: Buffer,
    readonly fields: ReadonlyMap<string, string>,
  ) {
    super(fields.get('M') ?? 'the database refused the connection');
  }
}

/** A logged-in backend connection, stopped right after its first ReadyForQuery. */
export interface BackendConnection {
  readonly socket: Duplex;
  readonly processId: number;
  readonly secretKey: number;
  /** ParameterStatus, NoticeResponse and the final ReadyForQuery, raw and in order (BackendKeyData left out). */
  readonly startupMessages: readonly Buffer[];
  /** Bytes read past the ReadyForQuery (none, unless the server volunteers something). */
  readonly leftover: Buffer;
}

/** Backend messages before the first ReadyForQuery are small; a larger one means this is not PostgreSQL. */
const MAX_BACKEND_STARTUP_MESSAGE = 1024 * 1024;

function readFile(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new BackendUnavailable(`cannot read the ${what} ${path} named in the database URL`, { cause: err });
  }
}

/** Reads the role's connection string the way libpq would (host, port, dbname, sslmode and the ssl files). */
export function backendTarget(access: IntrospectionAccess): BackendTarget {
  const url = new URL(access.url);
  const params = url.searchParams;
  let host = params.get('host') ?? decodeURIComponent(url.hostname);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host === '') host = 'localhost';
  const port = Number(params.get('port') ?? (url.port === '' ? '5432' : url.port));
  const sslmode =
    params.get('sslmode') ?? (['true', '1'].includes(params.get('ssl') ?? '') ? 'verify-full' : 'disable');
  const options: ConnectionOptions = {};
  const rootCert = params.get('sslrootcert');
  if (rootCert !== null && rootCert !== 'system') options.ca = readFile(rootCert, 'sslrootcert');
  const cert = params.get('sslcert');
  if (cert !== null) options.cert = readFile(cert, 'sslcert');
  const key = params.get('sslkey');
  if (key !== null) options.key = readFile(key, 'sslkey');
  if (!host.startsWith('/') && isIP(host) === 0) options.servername = host;
  let tls: BackendTls;
  switch (sslmode) {
    case 'disable':
    case 'allow':
      tls = { mode: 'disable' };
      break;
    case 'prefer':
      tls = { mode: 'prefer', options: { ...options, rejectUnauthorized: false } };
      break;
    case 'require':
    case 'no-verify':
      tls = { mode: 'require', options: { ...options, rejectUnauthorized: false } };
      break;
    case 'verify-ca':
      // Node verifies the host name unless told otherwise; verify-ca checks the chain only.
      tls = {
        mode: 'require',
        options: { ...options, rejectUnauthorized: true, checkServerIdentity: () => undefined },
      };
      break;
    default:
      tls = { mode: 'require', options: { ...options, rejectUnauthorized: true } };
  }
  return { host, port, database: access.database, user: access.role, password: access.password, tls };
}

function waitFor(socket: Duplex, event: string, timeoutMs: number, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new BackendUnavailable(`timed out ${what}`)), timeoutMs);
    const done = (): void => {
      clearTimeout(timer);
      socket.off('error', fail);
      socket.off('close', closed);
      socket.off(event, done);
    };
    const fail = (err: Error): void => {
      done();
      socket.destroy();
      reject(
        err instanceof BackendUnavailable ? err : new BackendUnavailable(`${what}: ${err.message}`, { cause: err }),
      );
    };
    const closed = (): void => fail(new BackendUnavailable(`the database closed the connection while ${what}`));
    socket.once('error', fail);
    socket.once('close', closed);
    socket.once(event, () => {
      done();
      resolve();
    });
  });
}

/** A TCP or Unix socket to the database, upgraded to TLS as `target.tls` asks. */
async function connectTransport(target: BackendTarget, timeoutMs: number): Promise<Duplex> {
  const socket: Socket = target.host.startsWith('/')
    ? netConnect({ path: join(target.host, `.s.PGSQL.${target.port}`) })
    : netConnect({ host: target.host, port: target.port });
  await waitFor(socket, 'connect', timeoutMs, `connecting to ${target.host}:${target.port}`);
  socket.setNoDelay(true);
  if (target.tls.mode === 'disable') return socket;

  socket.write(sslRequest());
  const reader = new HandshakeReader(socket);
  let answer: number;
  try {
    answer = await reader.peekByte();
  } catch (err) {
    socket.destroy();
    throw new BackendUnavailable('the database closed the connection during SSL negotiation', { cause: err });
  }
  const extra = reader.detach();
  if (extra.length !== 1) {
    socket.destroy();
    throw new BackendUnavailable('the database sent unexpected data during SSL negotiation');
  }
  if (answer === 'N'.charCodeAt(0)) {
    if (target.tls.mode === 'require') {
      socket.destroy();
      throw new BackendUnavailable('the database does not accept TLS, but the database URL requires it (sslmode)');
    }
    return socket;
  }
  if (answer !== 'S'.charCodeAt(0)) {
    socket.destroy();
    throw new BackendUnavailable('the database answered the SSL request with something else than S or N');
  }
  const secure = tlsConnect({ ...target.tls.options, socket });
  await waitFor(secure, 'secureConnect', timeoutMs, 'negotiating TLS with the database');
  return secure;
}

function md5Hex(data: Buffer | string): string {
  return createHash('md5').update(data).digest('hex');
}

/** Rebuilds a message's bytes (type + length + body) to relay it. */
function raw(type: string, body: Buffer): Buffer {
  return new Writer().bytes(body).message(type);
}

/**
 * Connects and logs in; `parameters` go in the StartupMessage (user and database are the target's). Rejects with
 * `BackendRefused` when PostgreSQL answers with an error, `BackendUnavailable` otherwise.
 */
export async function openBackend(
  target: BackendTarget,
  parameters: ReadonlyMap<string, string>,
  timeoutMs: number,
): Promise<BackendConnection> {
  const socket = await connectTransport(target, timeoutMs);
  const timer = setTimeout(() => socket.destroy(new Error('timed out logging into the database')), timeoutMs);
  try {
    const startup = new Map<string, string>([
      ['user', target.user],
      ['database', target.database],
    ]);
    for (const [k, v] of parameters) if (k !== 'user' && k !== 'database') startup.set(k, v);
    socket.write(startupMessage(startup));
    const reader = new HandshakeReader(socket);
    let scram: ScramClient | undefined;
    let authenticated = false;
    let processId = 0;
    let secretKey = 0;
    const startupMessages: Buffer[] = [];
    for (;;) {
      const message = await reader.message(MAX_BACKEND_STARTUP_MESSAGE).catch((err: unknown) => {
        throw new BackendUnavailable('the database closed the connection during login', { cause: err });
      });
      switch (message.type) {
        case MSG.authentication: {
          const r = new Reader(message.body);
          const method = r.int32();
          if (method === AUTH_OK) {
            authenticated = true;
          } else if (method === AUTH_CLEARTEXT) {
            socket.write(passwordMessage(target.password));
          } else if (method === AUTH_MD5) {
            const salt = r.bytes(4);
            const inner = md5Hex(target.password + target.user);
            socket.write(passwordMessage(`md5${md5Hex(Buffer.concat([Buffer.from(inner), salt]))}`));
          } else if (method === AUTH_SASL) {
            const mechanisms: string[] = [];
            for (let m = r.cstring(); m !== ''; m = r.cstring()) mechanisms.push(m);
            if (!mechanisms.includes(SCRAM_SHA_256)) {
              throw new BackendUnavailable(`the database offers no SASL mechanism we know: ${mechanisms.join(', ')}`);
            }
            scram = new ScramClient(target.password);
            socket.write(saslInitialResponse(SCRAM_SHA_256, scram.first()));
          } else if (method === AUTH_SASL_CONTINUE && scram !== undefined) {
            socket.write(saslResponse(scram.final(r.rest().toString('utf8'))));
          } else if (method === AUTH_SASL_FINAL && scram !== undefined) {
            scram.verify(r.rest().toString('utf8'));
          } else {
            throw new BackendUnavailable(
              `the database asks for an authentication method we do not support (${method})`,
            );
          }
          break;
        }
        case MSG.errorResponse:
          throw new BackendRefused(raw(message.type, message.body), parseErrorFields(message.body));
        case MSG.backendKeyData: {
          const r = new Reader(message.body);
          processId = r.int32();
          secretKey = r.int32();
          break;
        }
        case MSG.parameterStatus:
        case MSG.noticeResponse:
          startupMessages.push(raw(message.type, message.body));
          break;
        case MSG.negotiateProtocolVersion:
          // Only sent when the server is older than the version asked for; 3.0 is the oldest.
          break;
        case MSG.readyForQuery:
          if (!authenticated) throw new BackendUnavailable('the database was ready before authenticating us');
          startupMessages.push(raw(message.type, message.body));
          return { socket, processId, secretKey, startupMessages, leftover: reader.detach() };
        default:
          throw new BackendUnavailable(`unexpected message '${message.type}' from the database during login`);
      }
    }
  } catch (err) {
    socket.destroy();
    if (err instanceof BackendRefused || err instanceof BackendUnavailable) throw err;
    throw new BackendUnavailable(`logging into the database failed: ${(err as Error).message}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Asks PostgreSQL to cancel what the backend `processId` runs (a CancelRequest on a new connection). Best effort:
 * PostgreSQL never answers one, and a failure only means the statement runs until its timeout.
 */
export async function sendCancel(
  target: BackendTarget,
  processId: number,
  secretKey: number,
  timeoutMs: number,
): Promise<void> {
  const socket = await connectTransport(target, timeoutMs);
  await new Promise<void>((resolve) => {
    socket.on('error', () => resolve());
    socket.on('close', () => resolve());
    socket.end(cancelRequest(processId, secretKey));
  });
}
