import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { buildAdminApp } from './admin/app.ts';
import { ClusterCoordinator } from './cluster/coordinator.ts';
import { RequestRouter, type RouterOptions } from './cluster/forward.ts';
import { clusterHealth } from './cluster/health.ts';
import { Membership } from './cluster/membership.ts';
import { TokenVerifier } from './auth/verifier.ts';
import type { Config, TlsFilesConfig } from './config/config.ts';
import { formatBindAddress, type BindAddress } from './config/bind-address.ts';
import { RetentionCleaner } from './storage/pg/retention-cleaner.ts';
import { Engine } from './engine/engine.ts';
import { KafkaSubscriptions } from './kafka/subscriptions.ts';
import { PgConsumerStatusStore } from './storage/pg/tables/kafka-consumers.ts';
import { Invoker } from './invoker/invoker.ts';
import { PgStorage } from './storage/pg/storage.ts';
import { buildIngressApp } from './ingress/app.ts';
import { ensureIntrospectionAccess, type IntrospectionAccess } from './introspection/access.ts';
import { startPgWireListener } from './introspection/pgwire/listener.ts';
import { PgIntrospectionQueries } from './introspection/query.ts';
import { ensureIntrospectionViews } from './introspection/views.ts';
import { buildProbesApp } from './probes/app.ts';
import { listen } from './listeners/serve.ts';
import { SchemaRegistry } from './schema/registry.ts';
import { createSchemaOperations, type SchemaOperations } from './schema/operations.ts';
import { createRegistration, type RegisterDeployment } from './schema/register.ts';
import { Http1Client, Http2Client } from './service-client/transport.ts';
import { LambdaFunctions } from './lambda/functions.ts';
import { ListenerTls } from './listeners/tls.ts';
import { ingressLimitHook } from './ingress/limit-hook.ts';
import { IngressLimiter } from './rate-limit/limiter.ts';
import { PgIngressBudget } from './storage/pg/tables/ingress-budget.ts';
import { GroupCommitter } from './storage/pg/group-commit.ts';
import { PartitionLeases } from './storage/pg/leases.ts';
import { recordedPartitionCount } from './storage/pg/meta.ts';
import { PgSchemaStore } from './storage/pg/tables/schema.ts';
import { migrate } from './storage/pg/migrate.ts';
import { connectClient, createPool, type Pool } from './storage/pg/pool.ts';
import { levelPasses } from './telemetry/logger.ts';
import { createMetrics } from './telemetry/metrics.ts';
import { observers, type InvocationObserver } from './engine/observer.ts';
import { InvocationLog } from './observability/invocation-log.ts';
import { IngressTracer } from './observability/tracing/ingress-tracer.ts';
import { InvocationTracer } from './observability/tracing/invocation-tracer.ts';
import { createTracing } from './observability/tracing/tracing.ts';
import { buildObservabilityApp } from './observability/listener/app.ts';
import { lokiRoutes, lokiTailRoute } from './observability/listener/loki-routes.ts';
import { tempoRoutes } from './observability/listener/tempo-routes.ts';
import type { LogSource, SpanSource } from './observability/model.ts';
import type { LogCapture } from './observability/log-capture.ts';
import { ObservabilityWriter } from './observability/writer.ts';
import { PgObservabilityStore } from './storage/pg/observability/store.ts';
import { PgRuleBookStore } from './storage/pg/tables/limit-rules.ts';
import { RuleBookFollower } from './flow-control/rules-watch.ts';

export const RATCHET_VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export interface RuntimeHandle {
  ingress: BindAddress;
  admin: BindAddress;
  metrics: BindAddress;
  /** The PostgreSQL wire-protocol listener (SQL introspection). */
  sql: BindAddress;
  /** The log API listener (Loki-compatible), bound only with the observability store on. */
  observability: BindAddress | undefined;
  engine: Engine;
  cluster: ClusterCoordinator;
  cleaner: RetentionCleaner;
  /** This node's Kafka consumers (one per subscription). */
  kafka: KafkaSubscriptions;
  /** The read-only role SQL introspection runs as; undefined when the database user may not create roles. */
  introspection: IntrospectionAccess | undefined;
  /**
   * Graceful stop: not ready and every partition handed over at once, the listeners kept open for the shutdown delay
   * (requests are sent on to the new owners), in-flight requests drained, then everything closed.
   */
  stop(): Promise<void>;
}

/** What a node is given besides its configuration: where its database is, where it logs, whom to tell when it must end. */
export interface NodeOverrides {
  databaseUrl: string;
  logger: Logger;
  /** The runtime stopped itself and the process should end (another process registered with its node name). */
  onFatal?: (reason: string) => void;
  /** The logger's second destination (see createLogger): attached to the node's log store once it is up. */
  logCapture?: LogCapture;
}

/** The schema side of a node: the registry over the schema tables (loaded) and what changes them. */
export interface SchemaServices {
  registry: SchemaRegistry;
  register: RegisterDeployment;
  operations: SchemaOperations;
  /** The Lambda clients (and assumed-role credentials) of this process: discovery's, and the invoker's. */
  lambda: LambdaFunctions;
}

/**
 * Builds the schema side of a node on `pool`: the registry (loaded) and the registration and schema operations the
 * admin API runs. The one wiring of it: the node uses it, and so does the admin API's test harness.
 */
export async function createSchema(
  pool: Pool,
  config: Config,
  logger: Logger,
  options: { discoveryTimeoutMs?: number } = {},
): Promise<SchemaServices> {
  const registry = new SchemaRegistry(
    new PgSchemaStore(pool),
    config.serviceDefaults,
    config.defaultRetryPolicy,
    config.invoker,
    config.kafka,
  );
  await registry.load();
  const lambda = new LambdaFunctions({ clusterName: config.clusterName, logger });
  const discovery = { registry, clusterName: config.clusterName, logger, lambda, ...options };
  return {
    registry,
    register: createRegistration(discovery),
    operations: createSchemaOperations(discovery),
    lambda,
  };
}

/**
 * What observes a node's invocations: with the store on (RATCHET_OBSERVABILITY_STORE), its log lines and spans go to
 * the cluster's store in batches, off the invocation path; spans also go to an OTLP collector when the standard
 * variables name one. Without either, invocation lifecycle lines go to stdout at debug level only.
 */
function startObservability(
  config: Config,
  overrides: NodeOverrides,
  logger: Logger,
  databaseUrl: string,
  cleanups: (() => Promise<void>)[],
): {
  observer: InvocationObserver;
  ingressTracer: IngressTracer | undefined;
  logs: LogSource | undefined;
  spans: SpanSource | undefined;
  writer: ObservabilityWriter | undefined;
} {
  const log = logger.child({ component: 'observability' });
  let writer: ObservabilityWriter | undefined;
  let logs: LogSource | undefined;
  let spans: SpanSource | undefined;
  if (config.observability.store) {
    const store = new PgObservabilityStore(
      {
        databaseUrl,
        retentionMs: config.observability.retentionMs,
        maxBytes: config.observability.maxSizeBytes,
        queryTimeoutMs: config.observability.queryTimeoutMs,
        retentionIntervalMs: 10 * 60_000,
      },
      log,
    );
    cleanups.push(() => store.close());
    logs = store.logs;
    spans = store.spans;
    const w = new ObservabilityWriter(store, log);
    writer = w;
    // Closed after the listeners and the engine (cleanups run in reverse): their last lines are written too.
    cleanups.push(async () => {
      overrides.logCapture?.detach();
      await w.close();
    });
    overrides.logCapture?.attach(w, { node: config.nodeName, cluster: config.clusterName });
    store.startRetention();
  }
  const tracing = createTracing({
    clusterName: config.clusterName,
    nodeName: config.nodeName,
    version: RATCHET_VERSION,
    sink: writer,
    logger: log,
  });
  const capture = writer === undefined ? undefined : overrides.logCapture;
  const invocationLog = new InvocationLog(
    logger,
    capture === undefined
      ? undefined
      : {
          capture,
          stdout: (level) => levelPasses(level, config.log.level),
          store: (level) => levelPasses(level, config.observability.logLevel),
        },
  );
  if (tracing === undefined) return { observer: invocationLog, ingressTracer: undefined, logs, spans, writer };
  // Before the writer closes (cleanups run in reverse): the spans ended last still reach it.
  cleanups.push(() => tracing.shutdown());
  return {
    observer: observers(invocationLog, new InvocationTracer(tracing.tracer)),
    ingressTracer: new IngressTracer(tracing.tracer),
    logs,
    spans,
    writer,
  };
}

/**
 * The composition root: builds and starts one runtime node from its configuration — storage (migrated), schema
 * registry, invoker, engine, cluster coordinator and the listeners. Listeners open last, so nothing is accepted
 * before recovery has run; they close first on stop. `main.ts` and the test harnesses start nodes only through it.
 */
export async function createNode(config: Config, overrides: NodeOverrides): Promise<RuntimeHandle> {
  const { databaseUrl, logger } = overrides;
  const pool = createPool({
    url: databaseUrl,
    max: config.database.poolSize,
    applicationName: `ratchet ${config.nodeName}`,
  });
  const cleanups: (() => Promise<void>)[] = [() => pool.end()];
  let cluster: ClusterCoordinator | undefined;
  const cleanup = async (): Promise<void> => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    // Managed mode: a missing or invalid keys file stops startup (RT0002) before anything else is touched.
    let auth: TokenVerifier | undefined;
    if (config.auth.keysFile !== undefined) {
      const verifier = await TokenVerifier.start({
        keysFile: config.auth.keysFile,
        clusterName: config.clusterName,
        logger: logger.child({ component: 'auth' }),
      });
      auth = verifier;
      cleanups.push(() => {
        verifier.stop();
        return Promise.resolve();
      });
    }

    const client = await pool.connect();
    try {
      const m = await migrate(client);
      if (m.applied.length > 0) logger.info({ applied: m.applied }, 'storage migrated');
    } finally {
      client.release();
    }

    const observability = startObservability(config, overrides, logger, databaseUrl, cleanups);

    // Views first: the role's grants cover what exists when they are made.
    await ensureIntrospectionViews(pool, logger);
    const introspection = await ensureIntrospectionAccess(pool, databaseUrl, logger);
    const queries = new PgIntrospectionQueries(
      introspection,
      {
        statementTimeoutMs: config.introspection.statementTimeoutMs,
        rowLimit: config.introspection.rowLimit,
        poolSize: 4,
      },
      logger.child({ component: 'introspection' }),
    );
    cleanups.push(() => queries.close());

    const partitions = await recordedPartitionCount(pool, config.storage.partitions);
    if (partitions !== config.storage.partitions) {
      logger.warn(
        { configured: config.storage.partitions, recorded: partitions },
        'RATCHET_PARTITIONS differs from the partition count this cluster was created with; using the recorded count',
      );
    }
    const metrics = createMetrics();
    const observabilityWriter = observability.writer;
    if (observabilityWriter !== undefined) metrics.observability.stats = () => observabilityWriter.stats();
    const { registry, register, operations, lambda } = await createSchema(pool, config, logger);
    cleanups.push(() => Promise.resolve(lambda.close()));
    // Registrations made through another process sharing the database reach this one by LISTEN/NOTIFY.
    const watch = await registry.watch((err) => logger.warn({ err }, 'schema change notifications interrupted'));
    cleanups.push(() => Promise.resolve(watch.close()));
    const leases = new PartitionLeases(pool, {
      node: config.nodeName,
      partitions,
      ttlMs: config.cluster.leaseTimeoutMs,
    });
    const committer = new GroupCommitter(pool, leases, {
      maxBatch: config.storage.groupCommit.maxBatch,
      maxDelayMs: config.storage.groupCommit.maxDelayMs,
      concurrency: config.storage.groupCommit.concurrency,
      onCommit: (writes, seconds) => {
        metrics.commitBatchSize.observe(writes);
        metrics.commitDuration.observe(seconds);
      },
      // A failed write: the partitions' memory may be ahead of the database; they are recovered from it.
      onSuspect: (failed) => cluster?.suspect(failed),
    });
    const http2 = new Http2Client();
    const http1 = new Http1Client();
    cleanups.push(() => {
      http2.close();
      http1.close();
      return Promise.resolve();
    });
    const invoker = new Invoker({
      clusterName: config.clusterName,
      logger: logger.child({ component: 'invoker' }),
      inactivityTimeoutMs: config.invoker.inactivityTimeoutMs,
      abortTimeoutMs: config.invoker.abortTimeoutMs,
      messageSizeLimit: config.invoker.messageSizeLimitBytes,
      http2,
      http1,
      lambda,
    });
    // The limiter's rule book: stored for the cluster whatever the switch; enforced only with flow control enabled.
    const ruleStore = new PgRuleBookStore(pool);
    const ruleBook = new RuleBookFollower(ruleStore, logger.child({ component: 'flow-control' }));
    if (config.experimental.vqueues) {
      await ruleBook.start();
      cleanups.push(() => Promise.resolve(ruleBook.stop()));
    }
    const engine = new Engine(
      {
        node: config.nodeName,
        partitions,
        maxAwaitedFutureDepth: config.invoker.maxAwaitedFutureDepth,
        minProtocolVersion: config.invoker.minProtocolVersion,
        maxProtocolVersion: config.invoker.maxProtocolVersion,
        flowControl: config.experimental.vqueues,
      },
      {
        storage: new PgStorage(pool, committer, leases),
        registry,
        invoker,
        logger,
        metrics,
        onSuspect: (p) => cluster?.suspect(p),
        observer: observability.observer,
      },
    );
    cleanups.push(() => engine.stop());
    if (config.experimental.vqueues) {
      engine.setFlowRules(ruleBook.current());
      ruleBook.onChange((rules) => engine.setFlowRules(rules));
    }
    const cleaner = new RetentionCleaner(leases, logger, {
      intervalMs: config.storage.cleanupIntervalMs,
      batchSize: 500,
    });
    cleaner.start();
    cleanups.push(() => cleaner.stop());
    // The listeners' certificates join these options once they are loaded (below).
    const ingressBudget = new PgIngressBudget(pool);
    const routerOptions: RouterOptions = {
      partitionWaitMs: config.cluster.partitionWaitMs,
      forwardingSecret: await ingressBudget.forwardingSecret(),
    };
    const router = new RequestRouter(
      {
        node: config.nodeName,
        ownerOf: (p) => cluster?.ownerOf(p),
        refresh: () => cluster?.refresh() ?? Promise.resolve(),
        serves: (p) => engine.serves(p),
      },
      routerOptions,
      metrics,
      logger.child({ component: 'cluster' }),
    );
    cleanups.push(() => {
      router.close();
      return Promise.resolve();
    });

    // Every node consumes every subscription's topic (Kafka spreads the partitions over the nodes' consumers); the
    // records' invocations are queued for their partitions' owners. Started once this node serves its share.
    const kafka = new KafkaSubscriptions({
      registry,
      engine,
      logger,
      metrics,
      node: config.nodeName,
      statusStore: new PgConsumerStatusStore(pool),
      reportIntervalMs: 2_000,
      options: {
        maxInflightPerPartition: config.kafka.maxInflightPerPartition,
        backpressureCheckMs: 200,
        retryMinMs: 1_000,
        retryMaxMs: 30_000,
        lagRefreshMs: 5_000,
        crashPoint: config.kafka.crashPoint,
      },
    });
    cleanups.push(() => kafka.stop());

    // HTTPS where the configuration gives certificates (re-read when their files change).
    const listenerTls = (files: TlsFilesConfig | undefined, variable: string): ListenerTls | undefined => {
      if (files === undefined) return undefined;
      const tls = new ListenerTls(files, variable, logger.child({ component: 'tls' }));
      cleanups.push(() => Promise.resolve(tls.stop()));
      return tls;
    };
    const ingressTls = listenerTls(config.ingress.tls, 'RATCHET_INGRESS_TLS');
    const adminTls = listenerTls(config.admin.tls, 'RATCHET_ADMIN_TLS');
    const observabilityTls = listenerTls(config.observability.tls, 'RATCHET_OBSERVABILITY_TLS');
    routerOptions.tls = { ingress: ingressTls, admin: adminTls };

    const ingressAddress = formatBindAddress(config.ingress.bind);
    const ingressLimit = config.ingress.limit;
    const ingress = buildIngressApp({
      tls: ingressTls,
      limit:
        ingressLimit === undefined
          ? undefined
          : ingressLimitHook({
              limiter: new IngressLimiter(ingressLimit, ingressBudget, logger.child({ component: 'ingress' })),
              clusterName: config.clusterName,
              forwardingSecret: routerOptions.forwardingSecret,
              count: (result) => metrics.ingressLimit.inc({ result }),
            }),
      minProtocolVersion: config.invoker.minProtocolVersion,
      engine,
      registry,
      logger,
      requestSizeLimit: config.ingress.maxBodyBytes,
      auth,
      router,
      tracer: observability.ingressTracer,
    });
    const admin = buildAdminApp({
      tls: adminTls,
      registry,
      register,
      operations,
      version: RATCHET_VERSION,
      ingressEndpoint: `${ingressTls === undefined ? 'http' : 'https'}://${ingressAddress}/`,
      clusterName: config.clusterName,
      logger,
      engine,
      queries,
      auth,
      router,
      subscriptionStatus: (id) => kafka.status(id),
      observability:
        observability.logs === undefined || observability.spans === undefined
          ? undefined
          : {
              logs: observability.logs,
              spans: observability.spans,
              retentionMs: config.observability.retentionMs,
            },
      rules: {
        store: ruleStore,
        changed: () => {
          if (config.experimental.vqueues)
            ruleBook.check().catch((err: unknown) => logger.warn({ err }, 'could not reload the limiter rule book'));
        },
      },
      features: { vqueues: config.experimental.vqueues },
      clusterHealth: async () => {
        await cluster?.refresh();
        const view = cluster?.current() ?? { nodes: [], leases: [] };
        return clusterHealth(config.clusterName, view.nodes, view.leases);
      },
    });
    const probes = buildProbesApp(metrics.registry, () => cluster?.ready() ?? false);
    // From the start of a graceful stop, answers end their connection: clients that pool connections (and peers'
    // forwarding agents) open new ones, which the Service sends to the pods that stay.
    let draining = false;
    for (const app of [ingress, admin]) {
      app.addHook('onSend', async (req, reply) => {
        // HTTP/2 has no `connection` header (its sessions get a GOAWAY when the listener closes).
        if (draining && req.raw.httpVersionMajor < 2) reply.header('connection', 'close');
      });
      // A connection idle through the whole shutdown delay gets no answer to close it: the server ends idle
      // connections before the delay is over, so clients never find a pooled connection closed under them.
      if (config.cluster.shutdownDelayMs > 0) {
        app.server.keepAliveTimeout = Math.max(1000, Math.min(72_000, config.cluster.shutdownDelayMs - 500));
      }
    }
    const httpLimits = {
      config: config.http,
      count: (listener: string, reason: string) => metrics.httpRefused.inc({ listener, reason }),
    };
    const ingressBound = await listen(ingress, config.ingress.bind, 'ingress', cleanups, logger, httpLimits);
    const adminBound = await listen(admin, config.admin.bind, 'admin', cleanups, logger, httpLimits);
    const metricsBound = await listen(probes, config.metrics.bind, 'metrics', cleanups, logger, httpLimits);
    // The Loki- and Tempo-compatible API on 3100, over the cluster's store (only with the store on).
    const observabilityBound =
      observability.logs === undefined || observability.spans === undefined
        ? undefined
        : await listen(
            buildObservabilityApp({
              tls: observabilityTls,
              routes: [...lokiRoutes(observability.logs), ...tempoRoutes(observability.spans)],
              streams: [lokiTailRoute(observability.logs)],
              logger,
              auth,
              isReady: () => cluster?.ready() ?? false,
            }),
            config.observability.bind,
            'observability',
            cleanups,
            logger,
            httpLimits,
          );
    const sql = await startPgWireListener({
      config: config.introspection,
      clusterName: config.clusterName,
      access: introspection,
      refreshAccess: () => ensureIntrospectionAccess(pool, databaseUrl, logger),
      auth,
      logger,
      onRefused: (reason) => metrics.introspectionRefused.inc({ reason }),
    });
    cleanups.push(() => sql.stop());

    // Joins the cluster once the listeners are bound (their ports are what peers are told), and returns once this
    // node took and recovered its share: requests that came meanwhile waited for it.
    const advertised = (bind: BindAddress): string => {
      const host =
        config.cluster.advertisedAddress ??
        (bind.host === '0.0.0.0' || bind.host === '::' || bind.host === '' ? hostname() : bind.host);
      return formatBindAddress({ host, port: bind.port });
    };
    const membership = new Membership(pool, {
      node: config.nodeName,
      incarnation: randomUUID(),
      ingressAddress: advertised(ingressBound),
      adminAddress: advertised(adminBound),
      leaseTimeoutMs: config.cluster.leaseTimeoutMs,
      settleMs: config.cluster.heartbeatIntervalMs * 2,
    });
    const coordinator = new ClusterCoordinator(
      pool,
      () => connectClient(databaseUrl, `ratchet ${config.nodeName} cluster`),
      leases,
      membership,
      engine,
      {
        node: config.nodeName,
        partitions,
        leaseTimeoutMs: config.cluster.leaseTimeoutMs,
        heartbeatIntervalMs: config.cluster.heartbeatIntervalMs,
        partitionWaitMs: config.cluster.partitionWaitMs,
        maxReleasePerStep: Math.max(1, Math.ceil(partitions / 16)),
      },
      metrics,
      logger,
      () =>
        void handle
          .stop()
          .catch(() => undefined)
          .finally(() => overrides.onFatal?.('another process registered with this node name')),
    );
    cluster = coordinator;
    const started = coordinator;
    await started.start();
    kafka.start();
    logger.info(
      {
        ingress: formatBindAddress(ingressBound),
        admin: formatBindAddress(adminBound),
        metrics: formatBindAddress(metricsBound),
        introspection: formatBindAddress(sql.address),
        ...(observabilityBound === undefined ? {} : { observability: formatBindAddress(observabilityBound) }),
      },
      'Ratchet is ready',
    );
    let stopping: Promise<void> | undefined;
    const handle: RuntimeHandle = {
      ingress: ingressBound,
      admin: adminBound,
      metrics: metricsBound,
      sql: sql.address,
      observability: observabilityBound,
      engine,
      cluster: started,
      cleaner,
      kafka,
      introspection,
      stop: () =>
        (stopping ??= (async () => {
          draining = true;
          // Consumers leave their groups first: the partitions they read go to the nodes that stay.
          await kafka.stop();
          await started.stop();
          if (config.cluster.shutdownDelayMs > 0) {
            logger.info({ ms: config.cluster.shutdownDelayMs }, 'partitions handed over; waiting before closing');
            await new Promise((r) => setTimeout(r, config.cluster.shutdownDelayMs));
          }
          await cleanup();
        })()),
    };
    return handle;
  } catch (err) {
    await cluster?.stop().catch(() => undefined);
    await cleanup();
    throw err;
  }
}
