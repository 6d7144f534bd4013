import { createHash } from 'node:crypto';
import { randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket, type SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import { INTROSPECTION_SCHEMA } from '../access.ts';
import {
  BackendRefused,
  BackendUnavailable,
  openBackend,
  sendCancel,
  type BackendConnection,
  type BackendTarget,
} from './backend.ts';
import { FrameScanner } from './frame-scanner.ts';
import { HandshakeReader, PeerClosed } from './handshake-reader.ts';
import {
  authenticationCleartextPassword,
  authenticationOk,
  authenticationSasl,
  authenticationSaslContinue,
  authenticationSaslFinal,
  backendKeyData,
  CANCEL_REQUEST_CODE,
  errorResponse,
  GSSENC_REQUEST_CODE,
  MAX_AUTH_MESSAGE,
  MSG,
  negotiateProtocolVersion,
  ProtocolViolation,
  Reader,
  SSL_REQUEST_CODE,
  terminate,
  TYPE,
  type ErrorFields,
} from './messages.ts';
import {
  mockVerifier,
  SCRAM_SHA_256,
  SCRAM_SHA_256_PLUS,
  ScramProtocolError,
  ScramServer,
  type ScramVerifier,
} from './scram.ts';

/** What every session of one listener shares. */
export interface SessionContext {
  readonly clusterName: string;
  /** The password's SCRAM keys; undefined = no password (dev mode): the user name alone is checked. */
  readonly verifier: ScramVerifier | undefined;
  /**
   * Managed mode: the password is an access token, asked for in cleartext (SCRAM cannot check a secret the server
   * does not hold) and checked by this function, which returns why it is refused, or undefined. Wins over `verifier`.
   */
  readonly checkToken: ((token: string) => Promise<string | undefined>) | undefined;
  /** Set when TLS is configured: SSLRequest is then answered 'S'. */
  readonly secureContext: SecureContext | undefined;
  /** `tls-server-end-point` data of the certificate; SCRAM-SHA-256-PLUS is offered over TLS when set. */
  readonly channelBinding: Buffer | undefined;
  /** Undefined when introspection is unavailable; sessions are then refused with `unavailable`. */
  backend(): BackendTarget | undefined;
  /**
   * Called when PostgreSQL refuses the role's password (a session may have changed it: PostgreSQL lets every role
   * change its own): sets the role up again and returns the new target, or undefined when that is not possible.
   */
  refreshBackend(): Promise<BackendTarget | undefined>;
  readonly unavailable: string;
  /** 0 = no timeout. */
  readonly statementTimeoutMs: number;
  readonly logger: Logger;
  /** Counts the session against the limit; false when the listener is full. */
  admit(session: Session): boolean;
  /**
   * After authentication: whether one more session of this client (a token in managed mode, else the user name) is
   * allowed; refused sessions are closed with 53300 and `limit` in the message.
   */
  admitClient(session: Session, client: string): { admitted: true } | { admitted: false; limit: number };
  /** The key handed to the client: a CancelRequest carrying it cancels this session's statement. */
  registerKey(processId: number, secretKey: number, session: Session): void;
  cancel(processId: number, secretKey: number): void;
  /** The session ended: frees its slot and key. */
  closed(session: Session): void;
}

/** Time from connecting to the first ReadyForQuery (PostgreSQL's authentication_timeout is 1 minute). */
const HANDSHAKE_TIMEOUT_MS = 60_000;
/** Connecting and logging into PostgreSQL. */
const BACKEND_TIMEOUT_MS = 10_000;
/**
 * A transaction left open holds back vacuum of the journal tables the runtime churns through: PostgreSQL ends a
 * session idle in a transaction for this long.
 */
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10 * 60_000;
/**
 * The listener's own watch over statements: PostgreSQL's statement_timeout fires first, but a client may `SET` it
 * away; past the timeout plus this margin the listener cancels the statement itself.
 */
const WATCHDOG_MARGIN_MS = 1_000;

/**
 * Startup parameters never passed on: identity and connection settings are the listener's, and these settings are
 * what keeps a session read-only and bounded. (`SET` can still change the user-settable ones inside the session; the
 * role's privileges and the watchdog do not depend on them.)
 */
const RESERVED_PARAMETERS = new Set([
  'user',
  'database',
  'options',
  'replication',
  'role',
  'session_authorization',
  'default_transaction_read_only',
  'transaction_read_only',
  'statement_timeout',
  'idle_in_transaction_session_timeout',
]);

/** A refusal to answer with an ErrorResponse (FATAL) before closing. */
class Refusal extends Error {
  override readonly name = 'Refusal';

  constructor(readonly fields: ErrorFields) {
    super(fields.message);
  }
}

function fatal(code: string, message: string, extra: { hint?: string; detail?: string } = {}): Refusal {
  return new Refusal({ severity: 'FATAL', code, message, ...extra });
}

function isOff(value: string): boolean {
  return ['false', 'off', 'no', '0'].includes(value.toLowerCase());
}

/** The StartupMessage parameters for the backend: the client's harmless ones plus the session's bounds. */
export function backendParameters(
  client: ReadonlyMap<string, string>,
  statementTimeoutMs: number,
): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of client) {
    if (!RESERVED_PARAMETERS.has(k.toLowerCase()) && !k.startsWith('_pq_.')) out.set(k, v);
  }
  // A client may ask for a shorter timeout (node-postgres' `statement_timeout` option), never a longer one.
  let timeout = statementTimeoutMs;
  const asked = client.get('statement_timeout');
  if (asked !== undefined && /^\d+$/.test(asked) && Number(asked) > 0) {
    timeout = timeout === 0 ? Number(asked) : Math.min(timeout, Number(asked));
  }
  // The role's own defaults say the same, but every role may change its own defaults; these win over them.
  const options = [
    // A backslash keeps the space inside the value, as `SHOW search_path` prints the role's default.
    `-c search_path=${INTROSPECTION_SCHEMA},\\ pg_catalog`,
    `-c default_transaction_read_only=on`,
    `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
  ];
  if (timeout > 0) options.push(`-c statement_timeout=${timeout}`);
  out.set('options', options.join(' '));
  return out;
}

let nextSessionId = 1;

/**
 * One client connection: protocol negotiation (SSLRequest, GSSENCRequest, CancelRequest), authentication of the
 * client (SCRAM-SHA-256 against the configured password, user = cluster name), login of its own backend connection
 * as the read-only role, then a byte relay both ways until either side closes.
 */
export class Session {
  readonly id = nextSessionId++;
  private client: Duplex;
  private backend: BackendConnection | undefined;
  /** Where `backend` is connected; cancel requests go there. */
  private target: BackendTarget | undefined;
  private log: Logger;
  private state: 'handshake' | 'relay' | 'closed' = 'handshake';
  private handshakeTimer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  /** ReadyForQuery messages the backend still owes (one per Query, Sync and FunctionCall). */
  private pendingReady = 0;
  /** Extended-protocol messages sent since the last Sync. */
  private unsynced = false;
  /** The client sent Terminate: its disconnect is a goodbye, not an abandoned statement. */
  private terminated = false;
  private readonly fromClient = new FrameScanner((type) => this.onClientMessage(type));
  private readonly fromBackend = new FrameScanner((type) => this.onBackendMessage(type));
  private clientClosed: Promise<void>;
  private backendClosed: Promise<void> = Promise.resolve();

  constructor(
    socket: Socket,
    private readonly ctx: SessionContext,
  ) {
    this.client = socket;
    this.log = ctx.logger.child({ session: this.id, remote: `${socket.remoteAddress}:${socket.remotePort}` });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    this.clientClosed = new Promise((resolve) => socket.once('close', () => resolve()));
    // Errors surface through the reader or the relay's handlers; this one only keeps an early reset from throwing.
    socket.on('error', (err) => this.log.debug({ err }, 'client connection error'));
  }

  /** Resolves once both connections are closed. */
  get done(): Promise<void> {
    return Promise.all([this.clientClosed, this.backendClosed]).then(() => undefined);
  }

  /** Handshake, then relay. Never rejects: every failure ends the session with an error to the client. */
  async run(): Promise<void> {
    this.handshakeTimer = setTimeout(() => {
      this.log.debug('handshake timed out');
      this.client.destroy();
    }, HANDSHAKE_TIMEOUT_MS);
    try {
      await this.handshake();
    } catch (err) {
      this.handshakeFailed(err);
    }
  }

  /** Ends the session on shutdown, telling the client why when the stream allows it. */
  shutdown(): void {
    if (this.state === 'closed') return;
    if (this.state === 'handshake' || this.fromBackend.atBoundary) {
      this.client.write(
        errorResponse({
          severity: 'FATAL',
          code: '57P01',
          message: 'terminating connection due to administrator command',
        }),
      );
    }
    this.close('shutdown');
  }

  /** Cancels the statement the backend runs (a client's CancelRequest, or the watchdog). */
  cancelStatement(why: string): void {
    const backend = this.backend;
    const target = this.target;
    if (backend === undefined || target === undefined) return;
    this.log.debug({ why }, 'cancelling the running statement');
    sendCancel(target, backend.processId, backend.secretKey, BACKEND_TIMEOUT_MS).catch((err: unknown) =>
      this.log.warn({ err }, 'could not send a cancel request to the database'),
    );
  }

  private async handshake(): Promise<void> {
    let reader = new HandshakeReader(this.client);
    let encrypted = false;
    let startup: { code: number; body: Buffer };
    for (;;) {
      startup = await reader.startup();
      if (startup.code === SSL_REQUEST_CODE || startup.code === GSSENC_REQUEST_CODE) {
        // Bytes already behind the request would be read as if they came through TLS (CVE-2021-23214).
        if (reader.buffered > 0) throw new ProtocolViolation('received unencrypted data after SSL request');
        if (startup.code === GSSENC_REQUEST_CODE || encrypted || this.ctx.secureContext === undefined) {
          this.client.write('N');
          continue;
        }
        reader.detach();
        this.client.write('S');
        const secure = await this.startTls(this.client as Socket, this.ctx.secureContext);
        this.client = secure;
        this.clientClosed = new Promise((resolve) => secure.once('close', () => resolve()));
        reader = new HandshakeReader(secure);
        encrypted = true;
        continue;
      }
      if (startup.code === CANCEL_REQUEST_CODE) {
        const r = new Reader(startup.body);
        this.ctx.cancel(r.int32(), r.int32());
        reader.detach();
        this.client.destroy();
        this.state = 'closed';
        return;
      }
      break;
    }

    const major = startup.code >>> 16;
    const minor = startup.code & 0xffff;
    if (major !== 3) {
      throw fatal('0A000', `unsupported frontend protocol ${major}.${minor}: server supports 3.0 to 3.0`);
    }
    const params = new Map<string, string>();
    const r = new Reader(startup.body);
    for (let key = r.cstring(); key !== ''; key = r.cstring()) params.set(key, r.cstring());
    const unsupported = [...params.keys()].filter((k) => k.startsWith('_pq_.'));
    if (minor > 0 || unsupported.length > 0) this.client.write(negotiateProtocolVersion(0, unsupported));

    const user = params.get('user');
    if (user === undefined || user === '') {
      throw fatal('28000', 'no PostgreSQL user name specified in startup packet');
    }
    this.log = this.log.child({ user, application: params.get('application_name') });
    const replication = params.get('replication');
    if (replication !== undefined && !isOff(replication)) {
      throw fatal('0A000', 'replication connections are not supported by SQL introspection');
    }
    if (!this.ctx.admit(this)) throw fatal('53300', 'sorry, too many clients already');

    const client = await this.authenticate(reader, user, encrypted ? this.ctx.channelBinding : undefined);
    const perClient = this.ctx.admitClient(this, client);
    if (!perClient.admitted) {
      throw fatal(
        '53300',
        `too many SQL sessions for this ${client.startsWith('token:') ? 'access token' : 'user'}: at most ` +
          `${perClient.limit} at once (RATCHET_INTROSPECTION_MAX_SESSIONS_PER_USER); close some first`,
      );
    }

    const backend = await this.openBackend(backendParameters(params, this.ctx.statementTimeoutMs));
    this.backend = backend;
    this.backendClosed = new Promise((resolve) => backend.socket.once('close', () => resolve()));
    if (this.state === 'closed' || this.client.destroyed || this.client.readableEnded) {
      // The client went away (or the listener stopped) while the backend logged in.
      backend.socket.destroy();
      throw new PeerClosed('the client left while its database session was opened');
    }
    this.startRelay(reader.detach(), backend);
  }

  private async openBackend(parameters: ReadonlyMap<string, string>): Promise<BackendConnection> {
    let target = this.ctx.backend();
    if (target === undefined) throw fatal('57P03', this.ctx.unavailable);
    try {
      this.target = target;
      return await openBackend(target, parameters, BACKEND_TIMEOUT_MS);
    } catch (err) {
      if (!(err instanceof BackendRefused) || err.fields.get('C') !== '28P01') throw err;
      this.log.warn('the database refused the introspection role its password; setting the role up again');
      target = await this.ctx.refreshBackend();
      if (target === undefined) throw err;
      this.target = target;
      return await openBackend(target, parameters, BACKEND_TIMEOUT_MS);
    }
  }

  /** Authenticates the client; resolves with who it is for the per-client session limit. */
  private async authenticate(
    reader: HandshakeReader,
    user: string,
    channelBinding: Buffer | undefined,
  ): Promise<string> {
    const known = user === this.ctx.clusterName;
    if (this.ctx.checkToken !== undefined) return this.authenticateToken(reader, user, known, this.ctx.checkToken);
    const verifier = this.ctx.verifier;
    if (verifier === undefined) {
      if (!known) {
        throw fatal('28000', `role "${user}" does not exist`, {
          hint: 'SQL introspection logs in with the cluster name as the user name',
        });
      }
      return `user:${user}`;
    }
    const mechanisms = channelBinding === undefined ? [SCRAM_SHA_256] : [SCRAM_SHA_256_PLUS, SCRAM_SHA_256];
    this.client.write(authenticationSasl(mechanisms));
    const initial = await reader.message(MAX_AUTH_MESSAGE);
    if (initial.type !== MSG.password) {
      throw new ProtocolViolation(`expected SASL response, got message type ${initial.type.charCodeAt(0)}`);
    }
    const r = new Reader(initial.body);
    const mechanism = r.cstring();
    if (!mechanisms.includes(mechanism)) {
      throw new ProtocolViolation('client selected an invalid SASL authentication mechanism');
    }
    const length = r.int32();
    const clientFirst = length < 0 ? '' : r.bytes(length).toString('utf8');
    // An unknown user goes through the whole exchange against keys no password matches, as PostgreSQL does, so
    // the answer never tells which part was wrong.
    const server = new ScramServer(known ? verifier : mockVerifier(), mechanism, channelBinding);
    this.client.write(authenticationSaslContinue(server.first(clientFirst)));
    const response = await reader.message(MAX_AUTH_MESSAGE);
    if (response.type !== MSG.password) {
      throw new ProtocolViolation(`expected SASL response, got message type ${response.type.charCodeAt(0)}`);
    }
    const serverFinal = server.final(response.body.toString('utf8'));
    if (serverFinal === undefined || !known) {
      this.log.info({ reason: known ? 'wrong password' : 'unknown user' }, 'SQL session refused');
      throw fatal('28P01', `password authentication failed for user "${user}"`);
    }
    this.client.write(authenticationSaslFinal(serverFinal));
    return `user:${user}`;
  }

  /** Managed mode: AuthenticationCleartextPassword, the token as the password (as hosted PostgreSQL does for JWTs). */
  private async authenticateToken(
    reader: HandshakeReader,
    user: string,
    known: boolean,
    checkToken: (token: string) => Promise<string | undefined>,
  ): Promise<string> {
    this.client.write(authenticationCleartextPassword());
    const message = await reader.message(MAX_AUTH_MESSAGE);
    if (message.type !== MSG.password) {
      throw new ProtocolViolation(`expected password response, got message type ${message.type.charCodeAt(0)}`);
    }
    const token = new Reader(message.body).cstring();
    // The token is checked for an unknown user too: the answer and its timing never tell which part was wrong.
    const refused = await checkToken(token);
    if (refused !== undefined || !known) {
      this.log.info({ reason: known ? refused : 'unknown user' }, 'SQL session refused');
      throw fatal('28P01', `password authentication failed for user "${user}"`);
    }
    // Each access token is a client of its own (never the token itself: a digest of it).
    return `token:${createHash('sha256').update(token).digest('hex').slice(0, 32)}`;
  }

  private startTls(socket: Socket, secureContext: SecureContext): Promise<TLSSocket> {
    return new Promise((resolve, reject) => {
      const secure = new TLSSocket(socket, { isServer: true, secureContext, ALPNProtocols: ['postgresql'] });
      const failed = (err: Error): void => {
        secure.destroy();
        reject(new PeerClosed(`TLS handshake failed: ${err.message}`, { cause: err }));
      };
      secure.once('error', failed);
      secure.once('secure', () => {
        secure.off('error', failed);
        secure.on('error', (err) => this.log.debug({ err }, 'client connection error'));
        resolve(secure);
      });
    });
  }

  private startRelay(clientRest: Buffer, backend: BackendConnection): void {
    clearTimeout(this.handshakeTimer);
    this.state = 'relay';
    // The client gets the backend's process id (it matches pg_stat_activity) but a secret of the listener's own:
    // cancelling goes through the listener, which knows the real one.
    const secretKey = randomInt(-(2 ** 31), 2 ** 31);
    this.ctx.registerKey(backend.processId, secretKey, this);
    const messages = [authenticationOk(), ...backend.startupMessages];
    messages.splice(messages.length - 1, 0, backendKeyData(backend.processId, secretKey));
    this.client.write(Buffer.concat(messages));
    this.log.debug({ backendPid: backend.processId }, 'SQL session started');

    const client = this.client;
    const server = backend.socket;
    client.on('data', (chunk: Buffer) => this.fromClient.push(chunk));
    server.on('data', (chunk: Buffer) => this.fromBackend.push(chunk));
    if (backend.leftover.length > 0) {
      this.fromBackend.push(backend.leftover);
      client.write(backend.leftover);
    }
    if (clientRest.length > 0) {
      this.fromClient.push(clientRest);
      server.write(clientRest);
    }
    client.pipe(server, { end: false });
    server.pipe(client, { end: false });
    client.once('end', () => this.close('client'));
    client.once('close', () => this.close('client'));
    server.on('error', (err) => {
      this.log.debug({ err }, 'database connection error');
      if (this.state === 'relay' && this.fromBackend.atBoundary) {
        client.write(
          errorResponse({ severity: 'FATAL', code: '08006', message: 'lost the connection to the database' }),
        );
      }
      this.close('backend');
    });
    server.once('end', () => this.close('backend'));
    server.once('close', () => this.close('backend'));
  }

  private busy(): boolean {
    return this.pendingReady > 0 || this.unsynced;
  }

  private onClientMessage(type: number): void {
    switch (type) {
      case TYPE.query:
      case TYPE.functionCall:
        this.pendingReady++;
        break;
      case TYPE.sync:
        this.pendingReady++;
        this.unsynced = false;
        break;
      case TYPE.parse:
      case TYPE.bind:
      case TYPE.describe:
      case TYPE.execute:
      case TYPE.close:
      case TYPE.flush:
        this.unsynced = true;
        break;
      case TYPE.terminate:
        this.terminated = true;
        break;
      default:
        // CopyData / CopyDone / CopyFail belong to the Query that started the copy.
        break;
    }
    if (this.busy() && this.watchdog === undefined) this.armWatchdog();
  }

  private onBackendMessage(type: number): void {
    if (type !== TYPE.readyForQuery) return;
    this.pendingReady = Math.max(0, this.pendingReady - 1);
    this.disarmWatchdog();
    // Pipelined statements: the next one starts now.
    if (this.busy()) this.armWatchdog();
  }

  private armWatchdog(): void {
    if (this.ctx.statementTimeoutMs === 0) return;
    this.watchdog = setTimeout(() => {
      this.watchdog = undefined;
      this.cancelStatement('statement timeout');
      if (this.busy()) this.armWatchdog();
    }, this.ctx.statementTimeoutMs + WATCHDOG_MARGIN_MS);
  }

  private disarmWatchdog(): void {
    clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  private close(side: 'client' | 'backend' | 'shutdown'): void {
    if (this.state === 'closed') return;
    const wasRelaying = this.state === 'relay';
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    this.disarmWatchdog();
    this.ctx.closed(this);
    const backend = this.backend;
    if (backend !== undefined && side !== 'backend') {
      // PostgreSQL only notices a vanished client when it next talks to it; a long statement would run on.
      if (wasRelaying && this.busy() && !this.terminated) this.cancelStatement('client disconnected');
      const server = backend.socket;
      server.unpipe(this.client);
      if (this.fromClient.atBoundary && !server.destroyed)
        endThenDestroy(server, this.terminated ? undefined : terminate());
      else server.destroy();
    }
    if (side === 'client') {
      this.client.destroy();
    } else {
      this.client.unpipe();
      endThenDestroy(this.client);
    }
    this.log.debug({ side }, 'SQL session ended');
  }

  private handshakeFailed(err: unknown): void {
    let reply: Buffer | undefined;
    if (err instanceof Refusal) {
      reply = errorResponse(err.fields);
      if (err.fields.code !== '28P01')
        this.log.debug({ code: err.fields.code, reason: err.message }, 'SQL session refused');
    } else if (err instanceof ProtocolViolation || err instanceof ScramProtocolError) {
      this.log.debug({ err }, 'protocol violation during the handshake');
      reply = errorResponse({ severity: 'FATAL', code: '08P01', message: err.message });
    } else if (err instanceof BackendRefused) {
      this.log.warn({ code: err.fields.get('C'), reason: err.message }, 'the database refused an SQL session');
      reply = err.raw;
    } else if (err instanceof BackendUnavailable) {
      this.log.warn({ err }, 'cannot open an SQL session on the database');
      reply = errorResponse({
        severity: 'FATAL',
        code: '08006',
        message: 'SQL introspection cannot reach its database',
        detail: err.message,
      });
    } else if (err instanceof PeerClosed) {
      this.log.debug({ reason: err.message }, 'client left during the handshake');
    } else {
      this.log.error({ err }, 'SQL session handshake failed');
      reply = errorResponse({ severity: 'FATAL', code: 'XX000', message: 'internal error in the SQL listener' });
    }
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    this.ctx.closed(this);
    this.backend?.socket.destroy();
    if (reply !== undefined && !this.client.destroyed) endThenDestroy(this.client, reply);
    else this.client.destroy();
  }
}

/** Writes the last bytes, half-closes, and destroys once they are flushed (a peer that never closes is not waited on). */
function endThenDestroy(socket: Duplex, last?: Buffer): void {
  if (socket.destroyed) return;
  socket.once('finish', () => socket.destroy());
  socket.once('error', () => socket.destroy());
  if (last === undefined) socket.end();
  else socket.end(last);
}
