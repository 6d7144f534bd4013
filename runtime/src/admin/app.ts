import type { Server as TlsServer } from 'node:tls';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyServerOptions,
} from 'fastify';
import { InvalidRequestFieldError } from '../errors/errors.ts';
import { tlsServerOptions } from '../listeners/serve.ts';
import type { ListenerTls } from '../listeners/tls.ts';
import type { Logger } from 'pino';
import { AuthError } from '../auth/errors.ts';
import { authorize, type Authenticator } from '../auth/verifier.ts';
import type { RequestRouter } from '../cluster/forward.ts';
import type { Engine } from '../engine/engine.ts';
import { PartitionNotServedError } from '../engine/management-errors.ts';
import { isDatabaseUnavailable } from '../storage/pg/unavailable.ts';
import { RatchetError } from '../errors/errors.ts';
import type { IntrospectionQueries } from '../introspection/query.ts';
import { createSchemaOperations, type SchemaOperations } from '../schema/operations.ts';
import type { RegisterDeployment } from '../schema/register.ts';
import type { SchemaRegistry } from '../schema/registry.ts';
import { RequestExtractionError, UnsupportedAdminApiVersionError } from './errors.ts';
import type { ClusterHealthResponse } from './model/cluster-health.ts';
import type { SubscriptionStatusResponse } from './model/subscriptions.ts';
import type { ErrorDescriptionResponse } from './model/errors.ts';
import { buildAdminOpenApi, type RouteInfo } from './openapi/document.ts';
import { sendJson } from './reply.ts';
import { consoleRoutes, isConsoleAsset } from './console.ts';
import type { AdminApiVersion } from './request.ts';
import type { AdminRouteContext, AdminRoutes } from './routes/context.ts';
import { clusterRoutes } from './routes/cluster.ts';
import { deploymentRoutes } from './routes/deployments.ts';
import { invocationActivityRoutes, type ActivitySources } from './routes/invocation-activity.ts';
import { invocationRoutes } from './routes/invocations.ts';
import { kafkaClusterRoutes } from './routes/kafka-clusters.ts';
import { limitRoutes, type RuleBookAccess } from './routes/limits.ts';
import { vqueueRoutes } from './routes/vqueues.ts';
import { metaRoutes } from './routes/meta.ts';
import { openApiRoutes } from './routes/openapi.ts';
import { queryRoutes } from './routes/query.ts';
import { serviceRoutes } from './routes/services.ts';
import { subscriptionRoutes, subscriptionStatusRoutes } from './routes/subscriptions.ts';

/**
 * The admin API (restate-server 1.7.12 compatible). Every route is served at the root and under `/v2`, `/v3` and
 * `/v4`, the version being handed to the handlers; `/v1/...` is refused like restate does. Handlers only route and
 * convert: the logic lives in `schema/`, errors are mapped to HTTP in the one error handler below.
 */

export interface AdminDeps {
  /** HTTPS with this certificate; plain HTTP when absent. */
  tls?: ListenerTls | undefined;
  registry: SchemaRegistry;
  register: RegisterDeployment;
  /** Deployment updates and deletion, service settings, Kafka clusters, subscriptions; built from `registry` if absent. */
  operations?: SchemaOperations;
  /** Ratchet's version, shown by `GET /version`. */
  version: string;
  /** Advertised ingress URL, e.g. `http://127.0.0.1:8080/`. */
  ingressEndpoint: string;
  clusterName: string;
  logger: Logger;
  /** Invocation management; without it the `/invocations` routes are not served (schema-only admin tests). */
  engine?: Engine;
  /** SQL introspection (`POST /query`); without it the route is not served. */
  queries?: IntrospectionQueries;
  /** Largest request body accepted; default 10 MiB. */
  bodyLimit?: number;
  /** Managed mode: every request needs an access token with the role full or admin. Undefined = dev mode. */
  auth?: Authenticator | undefined;
  /** Sends requests for partitions other nodes own to them; without it such requests are answered 503. */
  router?: RequestRouter | undefined;
  /** `GET /subscriptions/{id}/status` (the Kafka consumers); without it the route is not served. */
  subscriptionStatus?: ((id: string) => Promise<SubscriptionStatusResponse | undefined>) | undefined;
  /** `GET /cluster-health` and the nodes behind it; without it the route is not served. */
  clusterHealth?: (() => Promise<ClusterHealthResponse>) | undefined;
  /**
   * The observability store, for `GET /invocations/{id}/logs|trace` (served with the invocation routes; they answer
   * 404 with the reason when the store is off).
   */
  observability?: ActivitySources | undefined;
  /** The limiter's rule book (`/limits/rules`); without it the routes are not served. */
  rules?: RuleBookAccess | undefined;
  /** restate's experimental feature flags, as `GET /version` lists them. */
  features?: Readonly<Record<string, boolean>> | undefined;
}

const STATIC_ROUTES: readonly AdminRoutes[] = [
  metaRoutes,
  openApiRoutes,
  deploymentRoutes,
  serviceRoutes,
  kafkaClusterRoutes,
  subscriptionRoutes,
];
const VERSION_PREFIXES: readonly { prefix: string; version: AdminApiVersion }[] = [
  { prefix: '', version: undefined },
  { prefix: '/v2', version: 2 },
  { prefix: '/v3', version: 3 },
  { prefix: '/v4', version: 4 },
];

interface KnownRoute {
  pattern: RegExp;
  methods: Set<string>;
}

function routePattern(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) => {
      if (segment.startsWith(':')) return '[^/]+';
      if (segment === '*') return '.*';
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return new RegExp(`^${source}$`);
}

/** The order restate lists methods in `allow`. */
const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

function methodRank(method: string): number {
  const rank = METHOD_ORDER.indexOf(method);
  return rank === -1 ? METHOD_ORDER.length : rank;
}

function errorBody(message: string, code: string | undefined): ErrorDescriptionResponse {
  // restate clients read `restate_code`; the specification names it `service_code`. Both are sent.
  return { message, restate_code: code ?? null, service_code: code ?? null };
}

export function buildAdminApp(deps: AdminDeps): FastifyInstance {
  // Typed as fastify's logger so the app is a plain FastifyInstance, whatever logger implementation is passed.
  const logger: FastifyBaseLogger = deps.logger.child({ component: 'admin' });
  const app = Fastify({
    loggerInstance: logger,
    // Probes and the CLI poll the admin API: one log line per request would drown everything else.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.bodyLimit ?? 10 * 1024 * 1024,
    ...tlsServerOptions(deps.tls),
  } as FastifyServerOptions) as unknown as FastifyInstance;
  deps.tls?.attach(app.server as unknown as TlsServer);

  const auth = deps.auth;
  if (auth !== undefined) {
    // Before the body is read, and before any route (or 404/405) answers anything.
    app.addHook('onRequest', async (req) => {
      // The console's static files hold no data: the login page must load without a token.
      if (isConsoleAsset(req.method, (req.raw.url ?? '/').split('?')[0] ?? '/')) return;
      authorize(await auth.authenticate(req.headers.authorization), 'admin');
    });
  }
  // Names and ids end up in PostgreSQL text, which cannot hold U+0000: no path or query with one names anything.
  app.addHook('onRequest', (req, _reply, done) => {
    if (req.url.includes('%00')) {
      done(new InvalidRequestFieldError('path', 'it contains U+0000 (%00), which no name or id can hold'));
      return;
    }
    done();
  });

  // Bodies are read raw; each route decides what it accepts, with restate's error phrases (see request.ts).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // Every route, to answer 405 (with `allow`) rather than 404 when only the method is wrong.
  const known = new Map<string, KnownRoute>();
  // The unprefixed routes, in registration order, for the OpenAPI document.
  const described: RouteInfo[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // The OpenAPI document describes the API: not its versioned copies, not the console's files.
    if (!/^\/v\d+(\/|$)/.test(route.url) && !route.url.startsWith('/ui'))
      for (const m of methods) described.push({ method: m, url: route.url });
    const entry = known.get(route.url) ?? { pattern: routePattern(route.url), methods: new Set<string>() };
    for (const m of methods) entry.methods.add(m.toUpperCase());
    if (entry.methods.has('GET')) entry.methods.add('HEAD');
    known.set(route.url, entry);
  });

  const refuseV1 = (): never => {
    throw new UnsupportedAdminApiVersionError(1);
  };
  app.all('/v1', refuseV1);
  app.all('/v1/*', refuseV1);

  const operations =
    deps.operations ??
    createSchemaOperations({ registry: deps.registry, clusterName: deps.clusterName, logger: deps.logger });
  let openApi: unknown;
  // Built on first use: by then every route is registered.
  const openApiDocument = (): unknown => (openApi ??= buildAdminOpenApi(described, deps.version));

  for (const { prefix, version } of VERSION_PREFIXES) {
    const ctx: AdminRouteContext = {
      registry: deps.registry,
      register: deps.register,
      operations,
      version: deps.version,
      ingressEndpoint: deps.ingressEndpoint,
      clusterName: deps.clusterName,
      apiVersion: version,
      openApi: openApiDocument,
      features: deps.features ?? {},
    };
    void app.register(
      (scope, _options, done) => {
        for (const routes of STATIC_ROUTES) routes(scope, ctx);
        if (deps.engine !== undefined) invocationRoutes(deps.engine)(scope, ctx);
        if (deps.engine !== undefined) vqueueRoutes(deps.engine)(scope, ctx);
        if (deps.engine !== undefined) invocationActivityRoutes(deps.observability)(scope, ctx);
        if (deps.queries !== undefined) queryRoutes(deps.queries)(scope, ctx);
        if (deps.clusterHealth !== undefined) clusterRoutes(deps.clusterHealth)(scope, ctx);
        if (deps.subscriptionStatus !== undefined) subscriptionStatusRoutes(deps.subscriptionStatus)(scope, ctx);
        if (deps.rules !== undefined) limitRoutes(deps.rules)(scope, ctx);
        done();
      },
      { prefix },
    );
  }

  // The web console, at the root only (not under /v2…/v4).
  consoleRoutes(app);

  app.setNotFoundHandler((req, reply) => {
    const path = (req.raw.url ?? '/').split('?')[0] ?? '/';
    const allowed = new Set<string>();
    for (const route of known.values()) {
      if (route.pattern.test(path)) for (const m of route.methods) allowed.add(m);
    }
    if (allowed.size > 0) {
      const sorted = [...allowed].sort((a, b) => methodRank(a) - methodRank(b));
      return reply.code(405).header('allow', sorted.join(',')).send();
    }
    return reply.code(404).send();
  });

  app.setErrorHandler((err: FastifyError | Error, req, reply) => {
    if (err instanceof PartitionNotServedError && deps.router !== undefined) {
      // Refused before anything was written: the partition's owner serves it (or the next one, once there is one).
      return deps.router.serve('admin', req, reply, err.partition).catch((e: Error) => {
        req.log.warn({ err: e }, 'admin request could not reach the partition owner');
        return sendJson(reply, errorBody(e.message, undefined), 503);
      });
    }
    if (err instanceof RequestExtractionError) {
      return reply.code(err.status).type('text/plain; charset=utf-8').send(err.message);
    }
    if (err instanceof RatchetError) {
      if (err instanceof AuthError) reply.header('www-authenticate', err.challenge);
      if (err.status >= 500) {
        req.log.warn({ err, 'error.code': err.code }, `admin request failed: ${err.codedMessage}`);
      } else {
        req.log.debug({ 'error.code': err.code }, err.codedMessage);
      }
      return sendJson(reply, errorBody(err.codedMessage, err.code), err.status);
    }
    const statusCode = (err as FastifyError).statusCode;
    if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
      // Fastify's own refusals (body too large, malformed URL): plain text, like restate's extractors.
      return reply.code(statusCode).type('text/plain; charset=utf-8').send(err.message);
    }
    if (isDatabaseUnavailable(err)) {
      req.log.warn({ err }, 'admin request failed: PostgreSQL is unavailable');
      return sendJson(
        reply,
        errorBody(`PostgreSQL is unavailable (${err.message}); retry the request`, undefined),
        503,
      );
    }
    req.log.error({ err }, 'admin request failed unexpectedly');
    return sendJson(reply, errorBody(`internal error: ${err.message}`, undefined), 500);
  });

  return app;
}
