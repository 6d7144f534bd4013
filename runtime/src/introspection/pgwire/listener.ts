import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import { AuthError } from '../../auth/errors.ts';
import { roleAllows } from '../../auth/roles.ts';
import type { Authenticator } from '../../auth/verifier.ts';
import { formatBindAddress, type BindAddress } from '../../config/bind-address.ts';
import type { IntrospectionConfig } from '../../config/config.ts';
import { BindError, ConfigError } from '../../errors/config-errors.ts';
import type { IntrospectionAccess } from '../access.ts';
import { backendTarget, type BackendTarget } from './backend.ts';
import { scramVerifier, tlsServerEndPoint } from './scram.ts';
import { Session, type SessionContext } from './session.ts';

export interface PgWireListenerOptions {
  /** `config.introspection`: bind, password, TLS files, statement timeout, session limit. */
  readonly config: IntrospectionConfig;
  /** The user name clients log in with. */
  readonly clusterName: string;
  /**
   * The read-only role every session runs as (`ensureIntrospectionAccess`). Undefined when it could not be set up:
   * the listener still answers, refusing every session with the reason, so that `psql` users see why.
   */
  readonly access: IntrospectionAccess | undefined;
  /**
   * Sets the role up again (`ensureIntrospectionAccess`), for when PostgreSQL refuses its password: every role may
   * change its own password, so an authenticated client could otherwise lock everyone out until a restart.
   */
  readonly refreshAccess?: () => Promise<IntrospectionAccess | undefined>;
  /**
   * Managed mode: the password is an access token with the role full or admin, asked for in cleartext; the
   * configured password is not used. Undefined = dev mode (SCRAM against the configured password, or none).
   */
  readonly auth?: Authenticator | undefined;
  readonly logger: Logger;
  /** Counts a session refused for a limit (metrics). */
  readonly onRefused?: (reason: 'max_sessions' | 'max_sessions_per_user') => void;
}

export interface PgWireListener {
  /** The bound address (the real port when the configured one was 0). */
  readonly address: BindAddress;
  /** Sessions open now, authenticated or not. */
  readonly sessions: number;
  /** Stops accepting, ends every session (FATAL 57P01 to its client) and waits until their connections closed. */
  stop(): Promise<void>;
}

const UNAVAILABLE =
  'SQL introspection is unavailable: the runtime could not create its read-only role (grant the database user CREATEROLE)';

function loadTls(tls: NonNullable<IntrospectionConfig['tls']>): {
  secureContext: SecureContext;
  channelBinding: Buffer | undefined;
} {
  const read = (path: string, key: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw ConfigError.invalidValue(key, `cannot read ${path}: ${(err as Error).message}`, { cause: err });
    }
  };
  const cert = read(tls.certFile, 'RATCHET_INTROSPECTION_TLS_CERT');
  const key = read(tls.keyFile, 'RATCHET_INTROSPECTION_TLS_KEY');
  try {
    return { secureContext: createSecureContext({ cert, key }), channelBinding: tlsServerEndPoint(cert) };
  } catch (err) {
    throw ConfigError.invalidValue(
      'RATCHET_INTROSPECTION_TLS_CERT',
      `the certificate and key are not a usable PEM pair: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** Why a SQL login with this token is refused, or undefined when the token opens SQL introspection. */
async function checkToken(auth: Authenticator, token: string): Promise<string | undefined> {
  try {
    const principal = await auth.verify(token);
    return roleAllows(principal.role, 'introspection')
      ? undefined
      : `the token's role '${principal.role}' does not allow SQL introspection`;
  } catch (err) {
    if (err instanceof AuthError) return err.message;
    throw err;
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/**
 * The PostgreSQL wire-protocol listener of SQL introspection (port 9071): authenticates clients itself and relays each
 * session to its own PostgreSQL connection logged in as the read-only role. See `README.md` beside this file.
 * Throws `ConfigError` (RT0002) for unusable TLS files and `BindError` (RT0004) when the address is taken.
 */
export async function startPgWireListener(options: PgWireListenerOptions): Promise<PgWireListener> {
  const { config, logger: root } = options;
  const logger = root.child({ component: 'introspection' });
  const tls = config.tls === undefined ? undefined : loadTls(config.tls);
  let backend: BackendTarget | undefined;
  if (options.access !== undefined) backend = backendTarget(options.access);
  // One refresh at a time, shared by the sessions that were refused meanwhile.
  let refreshing: Promise<BackendTarget | undefined> | undefined;
  const refresh = (): Promise<BackendTarget | undefined> => {
    const refreshAccess = options.refreshAccess;
    if (refreshAccess === undefined) return Promise.resolve(undefined);
    refreshing ??= refreshAccess()
      .then((access) => {
        if (access !== undefined) backend = backendTarget(access);
        return access === undefined ? undefined : backend;
      })
      .catch((err: unknown) => {
        logger.warn({ err }, 'could not set up the introspection role again');
        return undefined;
      })
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };
  const auth = options.auth;
  if (auth !== undefined) {
    if (config.tls === undefined) {
      logger.warn(
        { bind: formatBindAddress(config.bind) },
        'managed mode: SQL clients send their access token in cleartext and 9071 has no TLS; set ' +
          'RATCHET_INTROSPECTION_TLS_CERT and RATCHET_INTROSPECTION_TLS_KEY',
      );
    }
    if (config.password !== undefined) {
      logger.warn('managed mode: RATCHET_INTROSPECTION_PASSWORD is ignored; SQL clients log in with an access token');
    }
  } else if (config.password === undefined && !isLoopback(config.bind.host)) {
    logger.warn(
      { bind: formatBindAddress(config.bind) },
      'SQL introspection accepts sessions without a password on a non-loopback address; set RATCHET_INTROSPECTION_PASSWORD',
    );
  }

  const all = new Set<Session>();
  const admitted = new Set<Session>();
  const clientOf = new Map<Session, string>();
  const perClient = new Map<string, number>();
  const keys = new Map<string, Session>();
  const keyOf = new Map<Session, string>();
  const context: SessionContext = {
    clusterName: options.clusterName,
    verifier: auth !== undefined || config.password === undefined ? undefined : scramVerifier(config.password),
    checkToken: auth === undefined ? undefined : (token) => checkToken(auth, token),
    secureContext: tls?.secureContext,
    channelBinding: tls?.channelBinding,
    backend: () => backend,
    refreshBackend: refresh,
    unavailable: UNAVAILABLE,
    statementTimeoutMs: config.statementTimeoutMs,
    logger,
    admit(session) {
      if (admitted.size >= config.maxSessions) {
        options.onRefused?.('max_sessions');
        return false;
      }
      admitted.add(session);
      return true;
    },
    admitClient(session, client) {
      const open = perClient.get(client) ?? 0;
      if (open >= config.maxSessionsPerUser) {
        options.onRefused?.('max_sessions_per_user');
        return { admitted: false, limit: config.maxSessionsPerUser };
      }
      perClient.set(client, open + 1);
      clientOf.set(session, client);
      return { admitted: true };
    },
    registerKey(processId, secretKey, session) {
      const key = `${processId}:${secretKey}`;
      keys.set(key, session);
      keyOf.set(session, key);
    },
    cancel(processId, secretKey) {
      const session = keys.get(`${processId}:${secretKey}`);
      // PostgreSQL answers nothing either way, so a guessed key learns nothing.
      if (session === undefined) logger.debug({ processId }, 'cancel request for no session of this listener');
      else session.cancelStatement('cancel request from the client');
    },
    closed(session) {
      admitted.delete(session);
      const client = clientOf.get(session);
      if (client !== undefined) {
        clientOf.delete(session);
        const left = (perClient.get(client) ?? 1) - 1;
        if (left <= 0) perClient.delete(client);
        else perClient.set(client, left);
      }
      const key = keyOf.get(session);
      if (key !== undefined) {
        keys.delete(key);
        keyOf.delete(session);
      }
    },
  };

  const server: Server = createServer({ noDelay: true });
  server.on('connection', (socket: Socket) => {
    const session = new Session(socket, context);
    all.add(session);
    void session.done.then(() => all.delete(session));
    session.run().catch((err: unknown) => logger.error({ err }, 'SQL session failed'));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: config.bind.host, port: config.bind.port }, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch((err: unknown) => {
    server.close();
    throw new BindError(formatBindAddress(config.bind), { listener: 'introspection', cause: err });
  });
  server.on('error', (err) => logger.error({ err }, 'SQL introspection listener failed'));
  const bound = server.address();
  const address: BindAddress = {
    host: config.bind.host,
    port: typeof bound === 'object' && bound !== null ? bound.port : config.bind.port,
  };

  let stopping: Promise<void> | undefined;
  return {
    address,
    get sessions() {
      return all.size;
    },
    stop() {
      stopping ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const session of all) session.shutdown();
        await Promise.all([...all].map((s) => s.done));
        await closed;
      })();
      return stopping;
    },
  };
}
